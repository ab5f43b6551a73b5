//! A worker's lifo slot: the one fiber a fiber woke last, run next by that worker.
//!
//! The slot owns a strong reference to the fiber in it, kept as the raw pointer of
//! `Arc::into_raw` so that putting and taking are one atomic swap each (no lock, no
//! allocation). This type is the only place that turns those pointers back into
//! `Arc`s: every non-null value in the slot was stored by [`LifoSlot::replace`] from an
//! `Arc` it consumed, and a swap hands that pointer to exactly one caller.
//! `AcqRel` on the swaps: the fiber's state written before it was queued is visible to
//! whoever takes it (Release by the putter, Acquire by the taker).

use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};

use std::sync::Arc;

use super::Padded;
use crate::runtime::fiber::{Fiber, FiberRef};

/// At most one runnable fiber, alone on its cache line (its owner swaps it at every
/// wake-up; idle workers only look at it).
pub struct LifoSlot(Padded<AtomicPtr<Fiber>>);

impl LifoSlot {
    pub const fn new() -> LifoSlot {
        LifoSlot(Padded(AtomicPtr::new(ptr::null_mut())))
    }

    /// Puts `f` in the slot and returns the fiber it displaced, if any.
    #[inline]
    pub fn replace(&self, f: FiberRef) -> Option<FiberRef> {
        let old = self.0.swap(Arc::into_raw(f) as *mut Fiber, Ordering::AcqRel);
        // SAFETY: a non-null slot value came from `Arc::into_raw` in `replace`, and the
        // swap made us its only holder (module docs).
        (!old.is_null()).then(|| unsafe { Arc::from_raw(old) })
    }

    /// Empties the slot, returning its fiber.
    #[inline]
    pub fn take(&self) -> Option<FiberRef> {
        let old = self.0.swap(ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: as in `replace`.
        (!old.is_null()).then(|| unsafe { Arc::from_raw(old) })
    }

    /// Whether a fiber sits in the slot (a hint unless the caller orders it: `order`
    /// is the load's ordering, SeqCst where it is one side of a Dekker pair).
    #[inline]
    pub fn is_occupied(&self, order: Ordering) -> bool {
        !self.0.load(order).is_null()
    }
}

impl Drop for LifoSlot {
    fn drop(&mut self) {
        drop(self.take());
    }
}
