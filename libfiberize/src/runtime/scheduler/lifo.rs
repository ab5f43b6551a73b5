//! A worker's lifo slot: the one fiber a fiber woke last, run next by that worker; and
//! [`SideQueue`], the owner's FIFO that holds its urgent queue (a convoy's wakee).
//!
//! The slot owns a strong reference to the fiber in it, kept as the raw pointer of
//! `Arc::into_raw` so that putting and taking are one atomic swap each (no lock, no
//! allocation). This type is the only place that turns those pointers back into
//! `Arc`s: every non-null value in the slot was stored by [`LifoSlot::replace`] from an
//! `Arc` it consumed, and a swap hands that pointer to exactly one caller.
//! `AcqRel` on the swaps: the fiber's state written before it was queued is visible to
//! whoever takes it (Release by the putter, Acquire by the taker).

use core::cell::UnsafeCell;
use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};

use std::sync::Arc;

use crossbeam_deque::{Stealer, Worker as Deque};

use crate::runtime::fibers::fiber::{Fiber, FiberRef};

/// A value alone on its cache line(s): a field that its owner writes on every switch
/// must not share a line with fields that idle workers read while they look for work
/// (`has_work` walks every worker), or each look costs the busy owner a miss. Origin:
/// 128 bytes covers the adjacent-line prefetcher of x86_64 server parts.
#[repr(align(128))]
pub struct Padded<T>(pub T);

impl<T> core::ops::Deref for Padded<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}

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

/// A FIFO that only its owning worker pushes to and pops from; others steal through
/// `stealer` (`WorkerShared`'s `urgent` queue: `wake::unpark_lock_waiter`).
pub(super) struct SideQueue {
    deque: UnsafeCell<Deque<FiberRef>>,
    pub(super) stealer: Stealer<FiberRef>,
}

impl SideQueue {
    pub(super) fn new() -> SideQueue {
        let deque = Deque::new_fifo();
        let stealer = deque.stealer();
        SideQueue { deque: UnsafeCell::new(deque), stealer }
    }

    /// # Safety
    /// As `WorkerShared::owner_local`: only the owning worker's OS thread, shielded or
    /// in scheduler context.
    #[inline]
    unsafe fn owner(&self) -> &Deque<FiberRef> {
        // SAFETY: the caller is the only thread that touches the deque (contract above).
        unsafe { &*self.deque.get() }
    }

    /// Queues `f` at the back.
    ///
    /// # Safety
    /// As [`Self::owner`].
    #[inline]
    pub(super) unsafe fn push(&self, f: FiberRef) {
        // SAFETY: forwarded from this fn's contract.
        unsafe { self.owner() }.push(f);
    }

    /// The owner's next fiber, in order.
    ///
    /// # Safety
    /// As [`Self::owner`].
    #[inline]
    pub(super) unsafe fn pop(&self) -> Option<FiberRef> {
        // SAFETY: forwarded from this fn's contract.
        unsafe { self.owner() }.pop()
    }
}

#[cfg(test)]
mod tests {
    use super::{Arc, Fiber, FiberRef, LifoSlot, Ordering};

    fn fiber() -> FiberRef {
        Arc::new(Fiber::new(0))
    }

    #[test]
    fn replace_hands_back_the_displaced_fiber_and_take_empties() {
        let slot = LifoSlot::new();
        assert!(!slot.is_occupied(Ordering::Relaxed));
        assert!(slot.take().is_none());
        let (a, b) = (fiber(), fiber());
        assert!(slot.replace(Arc::clone(&a)).is_none());
        assert!(slot.is_occupied(Ordering::Relaxed));
        let displaced = slot.replace(Arc::clone(&b)).expect("a was in the slot");
        assert!(Arc::ptr_eq(&displaced, &a));
        let taken = slot.take().expect("b is in the slot");
        assert!(Arc::ptr_eq(&taken, &b));
        assert!(!slot.is_occupied(Ordering::Relaxed));
    }

    /// The slot holds exactly one strong reference while a fiber is in it, gives it
    /// back on take, and drops it with the slot.
    #[test]
    fn the_slot_owns_one_reference_and_drops_it() {
        let a = fiber();
        let slot = LifoSlot::new();
        slot.replace(Arc::clone(&a));
        assert_eq!(Arc::strong_count(&a), 2);
        drop(slot.take());
        assert_eq!(Arc::strong_count(&a), 1);
        let slot = LifoSlot::new();
        slot.replace(Arc::clone(&a));
        drop(slot);
        assert_eq!(Arc::strong_count(&a), 1);
    }

    /// Two threads swapping fibers through one slot: every fiber comes out exactly once.
    #[test]
    fn concurrent_replace_and_take_lose_and_duplicate_nothing() {
        let slot = Arc::new(LifoSlot::new());
        let fibers: Vec<FiberRef> = (0..200).map(|_| fiber()).collect();
        let putter = {
            let slot = Arc::clone(&slot);
            let mine: Vec<FiberRef> = fibers.iter().map(Arc::clone).collect();
            std::thread::spawn(move || mine.into_iter().filter_map(|f| slot.replace(f)).collect::<Vec<_>>())
        };
        let mut taken = Vec::new();
        while !putter.is_finished() {
            taken.extend(slot.take());
        }
        taken.extend(putter.join().unwrap());
        taken.extend(slot.take());
        assert_eq!(taken.len(), fibers.len());
        for f in &fibers {
            assert_eq!(taken.iter().filter(|t| Arc::ptr_eq(t, f)).count(), 1);
        }
    }
}
