//! What the turn rule ([`super::turn`]) keeps: each worker's current turn and the
//! pool's turn length now. The types sit here, below the `Runtime` and `WorkerShared`
//! that hold them; the rule that reads and writes them is `turn.rs`.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::policy::TURN_US;

/// The pool's turn now, in ns. Written by the monitor (`turn::Policy`),
/// read at every stream read that returns data: Relaxed, a stale value for a tick is
/// harmless. `short`: the turn is the short one.
pub(super) struct Budget {
    pub(super) ns: AtomicU64,
    pub(super) short: AtomicBool,
}

impl Budget {
    /// The long turn until the monitor's first decision.
    pub(super) fn new() -> Budget {
        Budget { ns: AtomicU64::new(TURN_US * 1000), short: AtomicBool::new(false) }
    }
}

/// A worker's current turn: the `progress` value of the run it began in, and when; and
/// the fibers that fibers running on it woke (the policy's measure).
#[derive(Default)]
pub(super) struct Turn {
    pub(super) run: AtomicU64,
    pub(super) started_ns: AtomicU64,
    pub(super) fiber_wakes: AtomicU64,
}

impl Turn {
    /// A fiber running on this worker made another runnable (`wake::schedule`). Only the
    /// worker's own OS thread writes: a load and a store, no read-modify-write.
    #[inline]
    pub(super) fn note_fiber_wake(&self) {
        self.fiber_wakes.store(self.fiber_wakes.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }
}
