//! The monitor's tick count: a clock of 1 ms resolution that costs one Relaxed load.
//!
//! Only the monitor writes it: one tick per monitor period, and at the end of a doze
//! the ticks the doze skipped (`monitor`, "Dozing"), so that it keeps measuring time
//! while the pool sleeps. `sync::parking` stamps mutex waiters with it, and the convoy
//! rule ([`parked_long`]) reads their age from it.

use core::sync::atomic::{AtomicU64, Ordering};

/// The count itself; a field of the `Runtime`.
#[derive(Default)]
pub(super) struct TickCount(AtomicU64);

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
    super::try_runtime().map_or(0, |rt| rt.ticks.get())
}

/// A mutex waiter parked this many monitor ticks (≥ 1 ms) sits in a convoy, not in a
/// hand-off between running fibers (µs: prodcons, the hammer), and its unlocker yields
/// to it (`wake::unpark_lock_waiter`). Origin: MariaDB's convoys in the mix wait far
/// longer, and a yield for every waiter costs the short hand-offs
/// (docs/RESULTS.md#convoy-yield).
const CONVOY_TICKS: u64 = 2;

/// Whether a wait that began at monitor tick `since` has lasted `CONVOY_TICKS`.
pub fn parked_long(since: u64) -> bool {
    convoy_age(monitor_ticks(), since)
}

/// Whether `now - since` ticks make a convoy (a stamp from the future, as after a
/// fork, counts as none).
fn convoy_age(now: u64, since: u64) -> bool {
    now.saturating_sub(since) >= CONVOY_TICKS
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
