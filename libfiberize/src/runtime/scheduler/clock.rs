//! The monitor's tick count: a clock of 1 ms resolution that costs one Relaxed load.
//!
//! Only the monitor writes it: one tick per monitor period, and at the end of a doze
//! the ticks the doze skipped (`monitor`, "Dozing"), so that it keeps measuring time
//! while the pool sleeps. `sync::parking` stamps mutex waiters with it, and the convoy
//! rule ([`parked_long`]) reads their age from it.
//!
//! Also what one wake-up of the monitor tells each of its policies ([`Tick`],
//! [`Policy`]): the monitor's loop runs them, the files that hold them implement them.

use core::sync::atomic::{AtomicU64, Ordering};

use super::policy::CONVOY_TICKS;
use super::Runtime;

/// The count itself: one per process, as the pool is.
#[derive(Default)]
pub(super) struct TickCount(AtomicU64);

/// The monitor's tick count.
pub(super) static TICKS: TickCount = TickCount(AtomicU64::new(0));

impl TickCount {
    /// One more tick (the monitor only: a load and a store, no read-modify-write).
    pub(super) fn tick(&self) {
        self.0.store(self.0.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// Ticks a doze of the monitor skipped: they still date lock waits.
    pub(super) fn skipped(&self, ticks: u64) {
        self.0.fetch_add(ticks, Ordering::Relaxed);
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The monitor's tick count (0 before the pool runs).
pub fn monitor_ticks() -> u64 {
    TICKS.get()
}

/// Whether a wait that began at monitor tick `since` has lasted `CONVOY_TICKS`: a mutex
/// waiter parked that long sits in a convoy, not in a hand-off between running fibers,
/// and its unlocker yields to it (`wake::unpark_lock_waiter`).
pub fn parked_long(since: u64) -> bool {
    convoy_age(monitor_ticks(), since)
}

/// Whether `now - since` ticks make a convoy (a stamp from the future, as after a
/// fork, counts as none).
fn convoy_age(now: u64, since: u64) -> bool {
    now.saturating_sub(since) >= CONVOY_TICKS
}

/// What one wake-up of the monitor stands for, as each policy sees it.
pub(super) struct Tick {
    /// Monitor periods: 1, or the ticks a doze skipped and the one that ended it.
    pub(super) ticks: u64,
    /// Some worker sleeps or spins: it takes what the monitor hands the injector at
    /// once. With none, the injector is served every `GLOBAL_CHECK_INTERVAL`-th dequeue
    /// only, so a busy worker's work is handed over only once it is stranded.
    pub(super) idle_workers: bool,
}

/// One of the monitor's policies: an object with its own state, called once per
/// wake-up of the monitor, in the order `monitor_main` lists them.
pub(super) trait Policy {
    fn tick(&mut self, rt: &Runtime, tick: &Tick);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_a_convoy_from_two_ticks_on() {
        for (now, since, convoy) in [(0, 0, false), (5, 4, false), (5, 3, true), (100, 0, true), (3, 9, false)] {
            assert_eq!(convoy_age(now, since), convoy, "now {now}, since {since}");
        }
    }

    #[test]
    fn ticks_and_skipped_ticks_add_up() {
        let t = TickCount::default();
        t.tick();
        t.skipped(40);
        t.tick();
        assert_eq!(t.get(), 42);
    }
}
