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
//! | SPARE   | no: asleep on the role word     | the monitor, when the pool runs short     |
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
//! # A spare's sleep
//!
//! A spare sleeps on the role word itself (`sleep_while_spare`: a futex wait for the
//! value SPARE), and the monitor wakes it after `activate_spare` (`wake`). The wait
//! returns at once if the role is no longer SPARE, so a wake-up that comes before the
//! sleep is never lost, and none is ever left over. A separate wake-up word, set by
//! the monitor after `activate_spare`, could be: a spare woken early (by a signal)
//! saw ACTIVE, ran, retired again and cleared the word, and the monitor's late store
//! then left it SPARE with the word set, so that its futex wait returned at once for
//! as long as it stayed a spare.
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

    /// Spare worker: sleeps while its role is SPARE (returns at once otherwise, and
    /// on any wake-up or signal: the caller loops on [`WorkerRole::get`]).
    pub fn sleep_while_spare(&self) {
        crate::base::sys::futex_wait(&self.0, Role::Spare as u32, None);
    }

    /// Monitor, after a successful [`WorkerRole::activate_spare`]: wakes the worker.
    pub fn wake(&self) {
        crate::base::sys::futex_wake(&self.0, 1);
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

    /// A spare sleeps until it is activated, however the monitor's wake-up and the
    /// spare's own early wake-ups (signals; here: stray futex wakes) interleave with
    /// its retiring: every pass of its wait loop is accounted for by a wake-up. The
    /// old separate wake-up word could be left set by a late monitor, and the spare
    /// then spun without sleeping (millions of passes).
    #[test]
    fn a_spare_sleeps_until_activated() {
        use std::sync::atomic::{AtomicBool, AtomicU64};
        use std::sync::Arc;
        let role = Arc::new(WorkerRole::active());
        let stop = Arc::new(AtomicBool::new(false));
        let passes = Arc::new(AtomicU64::new(0));
        let wakes = Arc::new(AtomicU64::new(0));
        const ROUNDS: u64 = 2_000;
        let spare = {
            let (role, passes) = (role.clone(), passes.clone());
            std::thread::spawn(move || {
                for _ in 0..ROUNDS {
                    role.retire();
                    while role.get() == Role::Spare {
                        role.sleep_while_spare();
                        passes.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        };
        let monitor = {
            let (role, stop, wakes) = (role.clone(), stop.clone(), wakes.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if role.activate_spare() {
                        std::thread::yield_now(); // a late wake-up, as a preempted monitor's
                        role.wake();
                        wakes.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        };
        let stray = {
            let (role, stop, wakes) = (role.clone(), stop.clone(), wakes.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    role.wake();
                    wakes.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
            })
        };
        spare.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        monitor.join().unwrap();
        stray.join().unwrap();
        let (passes, wakes) = (passes.load(Ordering::Relaxed), wakes.load(Ordering::Relaxed));
        assert!(passes <= wakes + ROUNDS, "{passes} passes of the spare's wait loop for {wakes} wake-ups: it spun");
    }
}
