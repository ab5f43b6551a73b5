//! A fiber's wait for a descriptor's readiness through the descriptor's waiter slot
//! (`io::waiter_slot`, the hand-shake), and the wake-up of that slot and of the
//! parking lot's waiters on the same key.
//!
//! The slot holds a strong reference to the waiting fiber, made when it enters and
//! dropped by whoever takes it out: the waker after its unpark, or the waiter itself
//! when it withdraws. The sleep is the parking lot's loop (`sync::wait_loop`), so a
//! slot wait ends exactly as a parked `WaitKind::Io` wait does (deadline, signal
//! handler, cancellation, `pthread_kill`, the dump's wait note, the park's stats).

use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use crate::io::waiter_slot::WaiterSlot;
use crate::runtime::fibers::fiber::{Fiber, FiberRef, WaitKind};
use crate::runtime::scheduler;
use crate::sync::parking::{self, Deadline, ParkResult, TOKEN_NORMAL};
use crate::sync::wait_loop::{self, Queued};

impl WaiterSlot {
    /// An empty slot (here, since the model-checked file must build with loom's
    /// atomics, which cannot be made in a `const fn`).
    pub const fn new() -> WaiterSlot {
        WaiterSlot { word: AtomicUsize::new(0), lot: AtomicU32::new(0) }
    }
}

impl Default for WaiterSlot {
    fn default() -> Self {
        Self::new()
    }
}

/// Waits on `seq` (its address is the wait's key) until it moves past `expected` or
/// the wait ends otherwise: through `slot` when it is free, else in the parking lot.
/// Inlined: one frame less to reload after the switch (`scheduler::park_current`).
#[inline(always)]
pub fn wait(slot: &WaiterSlot, me: &'static Fiber, seq: &AtomicU32, expected: u32, deadline: Deadline) -> ParkResult {
    let key = seq as *const AtomicU32 as usize;
    let validate = || seq.load(Ordering::Acquire) == expected;
    // A fiber due for demotion becomes a plain thread in the lot's park.
    if !me.demotion.is_due() {
        if let Some(r) = in_slot(slot, me, key, validate, deadline) {
            return r;
        }
    }
    slot.enter_lot();
    let r = parking::park(key, u32::MAX, WaitKind::Io, validate, || {}, |_| {}, deadline);
    slot.leave_lot();
    r
}

/// Wakes whoever waits on `slot` and, if any did, the lot's waiters on `key`. The
/// caller moved the sequence the waiters validate against first.
#[inline]
pub fn wake(slot: &WaiterSlot, key: usize) {
    let found = slot.take_after_publishing();
    if found.taken != 0 {
        // SAFETY: a non-zero word is a reference `in_slot` made with `Arc::into_raw`;
        // the swap gave it to us.
        let f = unsafe { FiberRef::from_raw(found.taken as *const Fiber) };
        scheduler::unpark(&f);
    }
    if found.lot {
        parking::unpark_some_quick(key, u32::MAX, usize::MAX);
    }
}

/// The wait through the slot; None when another waiter holds it.
/// Inlined, as `wait` is: one frame less to reload after the switch.
#[inline(always)]
fn in_slot(
    slot: &WaiterSlot,
    me: &'static Fiber,
    key: usize,
    validate: impl FnOnce() -> bool,
    deadline: Deadline,
) -> Option<ParkResult> {
    // SAFETY: `me` is the running fiber, kept alive by its donor's reference.
    let mine = FiberRef::into_raw(unsafe { scheduler::arc_from_ref(me) }) as usize;
    let queued = InSlot { slot, mine };
    match slot.occupy_then_validate(mine, validate) {
        None => {
            queued.drop_own_reference();
            None
        }
        Some(true) => Some(wait_loop::sleep_queued(Some(me), WaitKind::Io, key, deadline, &queued)),
        // The sequence moved: leave (a waker that took us meanwhile wakes us once for
        // nothing; the next park looks again).
        Some(false) => Some(if queued.withdraw() { ParkResult::Invalid } else { ParkResult::Unparked(TOKEN_NORMAL) }),
    }
}

/// The fiber in a slot, for the wait loop.
struct InSlot<'a> {
    slot: &'a WaiterSlot,
    /// The reference the slot holds (`Arc::into_raw` of the fiber).
    mine: usize,
}

impl InSlot<'_> {
    fn drop_own_reference(&self) {
        // SAFETY: `mine` came from `Arc::into_raw` in `in_slot`, and nobody else owns it
        // (it never entered the slot, or we took it back out).
        drop(unsafe { FiberRef::from_raw(self.mine as *const Fiber) });
    }
}

impl Queued for InSlot<'_> {
    fn taken(&self) -> Option<usize> {
        self.slot.taken(self.mine).then_some(TOKEN_NORMAL)
    }

    fn withdraw(&self) -> bool {
        let left = self.slot.withdraw(self.mine);
        if left {
            self.drop_own_reference();
        }
        left
    }

    fn sleep_thread(&self, _deadline: Deadline) -> bool {
        crate::fatal(&["a plain thread waited in a descriptor's waiter slot"]);
    }
}
