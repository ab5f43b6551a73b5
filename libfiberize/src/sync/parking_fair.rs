//! The parking lot's fairness interval: when a contended unlock should hand its lock
//! over (parking_lot's `FairTimeout`).
//!
//! [`crate::sync::parking::unpark_one_fair`] (the mutex's contended unlock), when the
//! waiter it dequeues had queued at the front (it was woken before and lost the lock),
//! asks its bucket's [`FairTimer`] whether this unpark should be fair
//! (`UnparkInfo::be_fair`). It is at the first such unpark after the timer's deadline,
//! and the deadline then moves a random 0–1 ms ahead. The mutex then hands its lock to the wakee instead of
//! letting it compete ("Eventual fairness" in [`crate::sync::lock_word`]): at most one
//! hand-off per bucket every ~0.5 ms on average, so the convoy a hand-off costs (the
//! lock owned by a fiber that is not running yet) stays rare however hot the lock.
//! The randomness keeps the hand-offs of locks that share a rhythm from lining up; a
//! xorshift per bucket is all it needs.

use core::cell::Cell;

/// The longest fairness interval (intervals are uniform below it: 0.5 ms on average).
/// Origin: parking_lot's `FairTimeout` (a random 0–1 ms per bucket); Go's mutex turns
/// to hand-offs once a waiter has waited 1 ms.
const FAIR_INTERVAL_MAX_NS: u32 = 1_000_000;

/// A bucket's fairness deadline and its random state. Not synchronized: the owner
/// touches it only under its bucket lock.
pub struct FairTimer {
    /// The next fair unpark is the first at or after this time (CLOCK_MONOTONIC ns; 0:
    /// the first one is fair).
    deadline: Cell<u64>,
    /// Xorshift state (0 until the first fair unpark seeds it).
    seed: Cell<u32>,
}

impl FairTimer {
    pub const fn new() -> FairTimer {
        FairTimer { deadline: Cell::new(0), seed: Cell::new(0) }
    }

    /// Whether an unpark at `now` (on `key`, which seeds the randomness) is due to be
    /// fair; if so, the deadline moves a random 0..FAIR_INTERVAL_MAX_NS past `now`.
    pub fn be_fair(&self, now: u64, key: usize) -> bool {
        if now < self.deadline.get() {
            return false;
        }
        let mut x = self.seed.get();
        if x == 0 {
            x = (key as u32 ^ (key >> 32) as u32) | 1;
        }
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.seed.set(x);
        self.deadline.set(now + u64::from(x % FAIR_INTERVAL_MAX_NS));
        true
    }
}

impl Default for FairTimer {
    fn default() -> Self {
        FairTimer::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fair_once_per_interval_with_random_intervals() {
        let t = FairTimer::new();
        assert!(t.be_fair(1_000, 0x1234_5678), "the first unpark is fair");
        let mut gaps = Vec::new();
        let mut now = 1_000;
        let mut last_fair = now;
        while gaps.len() < 200 {
            now += 10_000; // an unpark every 10 µs
            if t.be_fair(now, 0x1234_5678) {
                gaps.push(now - last_fair);
                last_fair = now;
            }
        }
        assert!(gaps.iter().all(|&g| g <= u64::from(FAIR_INTERVAL_MAX_NS) + 10_000), "{gaps:?}");
        let mean = gaps.iter().sum::<u64>() / gaps.len() as u64;
        assert!((300_000..=700_000).contains(&mean), "mean interval {mean} ns, expected ~0.5 ms");
        assert!(gaps.iter().any(|&g| g != gaps[0]), "intervals are not randomised");
    }
}
