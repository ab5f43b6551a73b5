//! A worker's role in the pool, and the only transitions between roles.
//!
//! ```text
//!            monitor: mark_blocked            worker: come_back (pool short)
//!   ACTIVE ---------------------------> BLOCKED ---------------------------> ACTIVE
//!     ^                                    |
//!     |  monitor: activate_spare           |  worker: come_back (pool full),
//!     +----------------------------- SPARE <+          then retire
//! ```
//!
//! | role    | counts toward `Runtime::target` | who leaves it, how                        |
//! |---------|---------------------------------|-------------------------------------------|
//! | ACTIVE  | yes: runs, spins or sleeps      | the monitor, when the worker's thread is  |
//! |         |                                 | stuck in a call the runtime does not know |
//! | BLOCKED | no: replaced by a spare         | the worker itself, when that call returns |
//! | SPARE   | no: parked on its `spare_word`  | the monitor, when the pool runs short     |
//!
//! Every transition is a compare-and-swap from the one role it may start from, so the
//! monitor and the worker, which both move a worker between roles, never undo each
//! other's move: a worker that came back from its blocked call in the same instant the
//! monitor looked at it is either still BLOCKED (the monitor's CAS from ACTIVE fails) or
//! already ACTIVE again (the worker's CAS from BLOCKED fails: the monitor never marked
//! it). The one plain store is `retire`, made by the worker itself while BLOCKED→ACTIVE
//! has just succeeded and nothing else may move an ACTIVE worker but the monitor's
//! `mark_blocked`, which only runs for a worker that runs a fiber (this one runs none).
//!
//! Orderings: AcqRel on the CASes and Release on `retire` publish what the mover did
//! before (the retiring worker's queues moved to the injector; the monitor's count of
//! active workers); readers that act on the role (stealing a BLOCKED worker's lifo
//! slot, the worker loop after a run) load it with Acquire. The dump and the report
//! read it Relaxed: a stale role there costs nothing.

use core::sync::atomic::{AtomicU32, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Role {
    Active = 1,
    Blocked = 2,
    Spare = 3,
}

impl Role {
    fn from_word(v: u32) -> Role {
        match v {
            1 => Role::Active,
            2 => Role::Blocked,
            _ => Role::Spare,
        }
    }
}

/// The role word of one worker (see the module docs).
pub struct WorkerRole(AtomicU32);

impl WorkerRole {
    /// A worker starts ACTIVE: the pool starts it, or the monitor starts it as a spare
    /// that is needed at once.
    pub const fn active() -> WorkerRole {
        WorkerRole(AtomicU32::new(Role::Active as u32))
    }

    /// The role now, for decisions that depend on what the mover published.
    #[inline]
    pub fn get(&self) -> Role {
        Role::from_word(self.0.load(Ordering::Acquire))
    }

    /// The role now, as a hint (the dump, the report, a look before a steal that is
    /// re-checked by the steal itself).
    #[inline]
    pub fn peek(&self) -> Role {
        Role::from_word(self.0.load(Ordering::Relaxed))
    }

    /// Monitor: ACTIVE → BLOCKED. False if the worker was not ACTIVE.
    pub fn mark_blocked(&self) -> bool {
        self.cas(Role::Active, Role::Blocked)
    }

    /// Worker, after a run in which the monitor marked it: BLOCKED → ACTIVE. False if
    /// it was not BLOCKED.
    pub fn come_back(&self) -> bool {
        self.cas(Role::Blocked, Role::Active)
    }

    /// Worker, right after `come_back`, when the pool has its target without it:
    /// ACTIVE → SPARE. Only the worker itself calls this (module docs).
    pub fn retire(&self) {
        self.0.store(Role::Spare as u32, Ordering::Release);
    }

    /// Monitor: SPARE → ACTIVE. False if the worker was not a SPARE.
    pub fn activate_spare(&self) -> bool {
        self.cas(Role::Spare, Role::Active)
    }

    fn cas(&self, from: Role, to: Role) -> bool {
        self.0.compare_exchange(from as u32, to as u32, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_transition_starts_from_its_one_role() {
        let r = WorkerRole::active();
        assert_eq!(r.get(), Role::Active);
        assert!(!r.come_back(), "an ACTIVE worker cannot come back");
        assert!(!r.activate_spare(), "an ACTIVE worker is no spare");
        assert!(r.mark_blocked());
        assert!(!r.mark_blocked(), "marked once");
        assert_eq!(r.peek(), Role::Blocked);
        assert!(r.come_back());
        r.retire();
        assert_eq!(r.get(), Role::Spare);
        assert!(!r.mark_blocked(), "a spare runs nothing to block in");
        assert!(r.activate_spare());
        assert_eq!(r.get(), Role::Active);
    }
}
