//! A fiber's CPU account for the run order by CPU time (issue 27; the order and its
//! rules are in `runtime::scheduler::fair`). Here only the two words and their
//! accessors, below the fiber so that `runtime::fiber` depends on nothing above it.
//!
//! Both words are written by whoever holds the fiber at the time (its runner after a
//! run, or the code queueing it), and read by the worker that dequeues it: the run
//! queues' own Release/Acquire order them, so every access is Relaxed.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

#[derive(Default)]
pub struct CpuAccount {
    /// Virtual runtime in ns: CPU time charged, clamped after waits (`scheduler::fair`).
    vruntime: AtomicU64,
    /// The pool's tick count when the fiber entered a later queue (the kickup rule).
    later_since: AtomicU64,
    /// Descriptor waits left before the fiber stops counting as coordinating: set by a
    /// wait on another thread's progress (a condition variable, a futex), lowered by
    /// each descriptor wait (`scheduler::fair`'s coordinating fibers).
    coordination_credit: AtomicU32,
}

impl CpuAccount {
    #[inline]
    pub fn vruntime(&self) -> u64 {
        self.vruntime.load(Relaxed)
    }

    /// Adds `ns` of CPU time.
    #[inline]
    pub fn charge(&self, ns: u64) {
        self.vruntime.fetch_add(ns, Relaxed);
    }

    /// Brings the vruntime into `floor..=ceiling` (a wake-up's bounded head start and
    /// bounded debt).
    #[inline]
    pub fn clamp_to(&self, floor: u64, ceiling: u64) {
        let v = self.vruntime.load(Relaxed);
        let clamped = v.clamp(floor, ceiling.max(floor));
        if clamped != v {
            self.vruntime.store(clamped, Relaxed);
        }
    }

    #[inline]
    pub fn later_since(&self) -> u64 {
        self.later_since.load(Relaxed)
    }

    #[inline]
    pub fn set_later_since(&self, tick: u64) {
        self.later_since.store(tick, Relaxed);
    }

    /// The fiber waits for another thread's progress: it coordinates for the next
    /// `credit` descriptor waits.
    #[inline]
    pub fn note_coordinating_wait(&self, credit: u32) {
        if self.coordination_credit.load(Relaxed) != credit {
            self.coordination_credit.store(credit, Relaxed);
        }
    }

    /// The fiber waits for a descriptor: one less of its credit.
    #[inline]
    pub fn note_descriptor_wait(&self) {
        let credit = self.coordination_credit.load(Relaxed);
        if credit != 0 {
            self.coordination_credit.store(credit - 1, Relaxed);
        }
    }

    /// Whether a wait on another thread's progress is among the fiber's recent waits.
    #[inline]
    pub fn is_coordinating(&self) -> bool {
        self.coordination_credit.load(Relaxed) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::CpuAccount;

    /// A wake-up lifts a vruntime below the floor, forgives one above the ceiling and
    /// leaves one between them alone; a ceiling under the floor (V near 0) means the floor.
    #[test]
    fn clamp_lifts_forgives_and_keeps() {
        let a = CpuAccount::default();
        a.clamp_to(5_000, 9_000);
        assert_eq!(a.vruntime(), 5_000);
        a.charge(10_000);
        a.clamp_to(5_000, 9_000);
        assert_eq!(a.vruntime(), 9_000);
        a.clamp_to(8_000, 12_000);
        assert_eq!(a.vruntime(), 9_000);
        a.clamp_to(10_000, 3_000);
        assert_eq!(a.vruntime(), 10_000);
    }
}
