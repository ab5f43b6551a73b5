//! The park protocol: whether a fiber that decided to sleep is asleep, and what an
//! unpark must do about it.
//!
//! A fiber parks in two steps that two different parties take: the fiber itself
//! decides to sleep and switches out (`scheduler::park_current`, `Switch::Park`), then
//! the worker that ran it, back on its own stack, marks it asleep
//! ([`ParkState::park_after_switch`]). An unpark can come at any moment in between,
//! from any thread. The state word closes that window:
//!
//! | state      | meaning                                                          |
//! |------------|------------------------------------------------------------------|
//! | `Running`  | running, queued, or on its way to suspend                         |
//! | `Parked`   | suspended by a park and in no run queue: an unpark must queue it  |
//! | `Notified` | an unpark came while `Running`: the next park returns at once     |
//!
//! ```text
//!   fiber: park_current ─ take_notification? ─yes─> return (the wake-up was early)
//!                              │ no
//!                              v
//!                        switch out (Switch::Park)
//!                              │
//!   worker:             park_after_switch: Running→Parked ─ok─> asleep (an unpark queues it)
//!                              │ failed: Notified
//!                              v
//!                        store Running, queue it again
//!
//!   unpark:  Parked  → Running, then schedule it     (UnparkAction::Schedule)
//!            Running → Notified                      (UnparkAction::Notified: a fiber in a
//!                                                     direct wait must be kicked out of it)
//!            Notified: nothing (one wake-up is enough)
//! ```
//!
//! The worker moves `Running`→`Parked` only *after* the switch back, so an unparker
//! that sees `Parked` knows nobody runs on the fiber's stack any more: it may queue the
//! fiber, and another worker may resume it at once. Exactly one party queues a fiber
//! per park: the unparker (`Parked`→`Running`) or the worker (failed
//! `Running`→`Parked`), never both (model: `park_unpark_never_loses_a_wakeup` in
//! `libfiberize/tests/loom_protocols.rs`, which runs this file).
//!
//! Only [`crate::base::loom`] is imported: the model checks compile this very file.

use crate::base::loom::{fence, AtomicU32, Ordering};

/// The states of the table above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Park {
    Running = 0,
    Parked = 1,
    Notified = 2,
}

/// What [`ParkState::unpark`] asks its caller to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnparkAction {
    /// The fiber was asleep and is now `Running`: queue it (the caller owns that duty).
    Schedule,
    /// The fiber was running: its next park returns at once. A fiber in a direct
    /// wait is "running" on a worker blocked in the kernel: the caller must end that
    /// wait (`scheduler::direct_wait`'s Dekker pair, see [`ParkState::is_notified`]).
    Notified,
    /// A wake-up is already pending.
    Nothing,
}

/// A fiber's park state word (`Fiber::park_state`).
pub struct ParkState(AtomicU32);

impl ParkState {
    pub fn new() -> ParkState {
        ParkState(AtomicU32::new(Park::Running as u32))
    }

    fn decode(v: u32) -> Park {
        match v {
            0 => Park::Running,
            1 => Park::Parked,
            _ => Park::Notified,
        }
    }

    /// The state now (for the dump; no ordering).
    pub fn get(&self) -> Park {
        Self::decode(self.0.load(Ordering::Relaxed))
    }

    /// The fiber, about to park: consumes a wake-up that arrived while it ran
    /// (`Notified`→`Running`); true means "do not sleep". Acquire: what the unparker
    /// published before its unpark is visible to the fiber when it returns.
    #[inline]
    pub fn take_notification(&self) -> bool {
        self.0.compare_exchange(Park::Notified as u32, Park::Running as u32, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// The worker, after the fiber switched out with `Switch::Park`: `Running`→`Parked`,
    /// true if the fiber is now asleep. False: an unpark came while it was switching
    /// out (`Notified`); the state is `Running` again and the worker must queue it.
    /// Release (in the AcqRel): the fiber's last writes before its switch are visible
    /// to the unparker that sees `Parked` and resumes it elsewhere.
    #[inline]
    pub fn park_after_switch(&self) -> bool {
        if self.0.compare_exchange(Park::Running as u32, Park::Parked as u32, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            return true;
        }
        self.0.store(Park::Running as u32, Ordering::Release);
        false
    }

    /// An unpark: see [`UnparkAction`]. After `Running`→`Notified` it issues a SeqCst
    /// fence before returning, so the caller's next read (the fiber's direct-wait fd)
    /// comes after the CAS in the single total order. That fence pairs with the one
    /// in [`is_notified_after_publishing`](Self::is_notified_after_publishing): a
    /// Dekker pair. Without either fence both sides could read the other's old value:
    /// the waiter sleeps in ppoll with the notification unseen while the unparker sees
    /// no fd to write (the model finds that interleaving when a fence is removed).
    #[inline]
    pub fn unpark(&self) -> UnparkAction {
        let mut s = self.0.load(Ordering::Acquire);
        loop {
            let (to, action) = match Self::decode(s) {
                Park::Parked => (Park::Running, UnparkAction::Schedule),
                Park::Running => (Park::Notified, UnparkAction::Notified),
                Park::Notified => return UnparkAction::Nothing,
            };
            match self.0.compare_exchange(s, to as u32, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    if action == UnparkAction::Notified {
                        fence(Ordering::SeqCst);
                    }
                    return action;
                }
                Err(x) => s = x,
            }
        }
    }

    /// A direct waiter's check, after it published its wake fd: a SeqCst fence (the
    /// other side of [`unpark`](Self::unpark)'s pair), then true if a wake-up is
    /// pending.
    #[inline]
    pub fn is_notified_after_publishing(&self) -> bool {
        fence(Ordering::SeqCst);
        self.0.load(Ordering::Relaxed) == Park::Notified as u32
    }
}

impl Default for ParkState {
    fn default() -> Self {
        Self::new()
    }
}
