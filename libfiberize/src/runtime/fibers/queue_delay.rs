//! How long a runnable fiber waits in the run queues before a worker runs it, by the
//! path that made it runnable. Origin: a `read_write` connection starved next to
//! thousands of `point_select` ones; this is how the wait was measured
//! (docs/RESULTS.md#turn-length).
//!
//! Each fiber carries one word, `Fiber::queued`: the CLOCK_MONOTONIC time it was
//! queued, shifted left by [`SOURCE_BITS`], with the [`Source`] in the low bits. It is
//! written where the fiber is queued and read where a worker takes it
//! (`scheduler::run_fiber`); the queue's own Release/Acquire orders the two, so the
//! word is Relaxed. Only while [`on`] (`FIBERIZE_STATS` or `FIBERIZE_REPORT`): otherwise
//! queueing and running cost one Relaxed load and a branch each, no clock read. The
//! clock reads cost a switch-heavy program (docs/RESULTS.md#metrics-cost); so the metrics
//! file, which costs the workers nothing, does not turn the measurement on by itself.
//!
//! Per source: count, total and longest wait; over all sources, a histogram by decade
//! (< 10 µs, < 100 µs, < 1 ms, < 10 ms, < 100 ms, < 1 s, longer). Printed in the stats
//! line (`queue_<source>=count/mean_us/max_us/migrated`, the last: runs on another worker than the previous one, `queue_hist=...`), in the dump and in
//! the metrics file (`FIBERIZE_METRICS`).
//! Sharded as `base::stats` is (by the recording stack, [`crate::base::stats::shard_index`]):
//! each run records here while statistics are on, and shared counters made every
//! worker's run a write to the same few cache lines, which the benchmarks (run with
//! `FIBERIZE_STATS`) then measured as the library's cost.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use crate::base::stats::{shard_index, SHARDS};
use crate::base::sys;

/// Low bits of `Fiber::queued` that hold the source.
pub const SOURCE_BITS: u32 = 3;

/// The path that queued a fiber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Source {
    /// Woken by a fiber (a lock or condvar hand-off, a message): the waker's lifo slot.
    FiberWake = 0,
    /// Woken in a worker's scheduler context (readiness a worker harvested, a timer it
    /// fired): that worker's local deque.
    WorkerWake = 1,
    /// Woken by a plain thread or the monitor (readiness or timers the monitor took):
    /// the injector.
    ForeignWake = 2,
    /// `sched_yield` (or a notification that came while it parked): the local deque.
    Yield = 3,
    /// New, or back from its donor (a blocking call it ran there): the hand-off list.
    Donor = 4,
    /// Preempted after a time slice: the injector.
    Preempt = 5,
    /// Its turn was spent (`scheduler::turn`): the injector.
    EndTurn = 6,
}

const SOURCES: usize = 7;
const NAMES: [&str; SOURCES] = ["fiber_wake", "worker_wake", "foreign_wake", "yield", "donor", "preempt", "end_turn"];
const BUCKETS: usize = 7;

static ON: AtomicBool = AtomicBool::new(false);

struct PerSource {
    count: AtomicU64,
    /// Of those, runs on another worker than the fiber's previous run (to tell which
    /// queue path moves connections between cores).
    migrated: AtomicU64,
    total_ns: AtomicU64,
    max_ns: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: PerSource = PerSource { count: ZERO, migrated: ZERO, total_ns: ZERO, max_ns: ZERO };

/// One shard's waits, on lines of its own.
#[repr(align(128))]
struct Shard {
    by_source: [PerSource; SOURCES],
    histogram: [AtomicU64; BUCKETS],
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_SHARD: Shard = Shard { by_source: [EMPTY; SOURCES], histogram: [ZERO; BUCKETS] };
static TABLE: [Shard; SHARDS] = [EMPTY_SHARD; SHARDS];

/// A source's totals over every shard: (count, migrated, total_ns, max_ns).
fn source_totals(source: usize) -> (u64, u64, u64, u64) {
    TABLE.iter().map(|sh| &sh.by_source[source]).fold((0, 0, 0, 0), |(c, m, t, x), s| {
        (c + s.count.load(Relaxed), m + s.migrated.load(Relaxed), t + s.total_ns.load(Relaxed), x.max(s.max_ns.load(Relaxed)))
    })
}

/// A histogram bucket's count over every shard.
fn bucket_total(bucket: usize) -> u64 {
    TABLE.iter().map(|sh| sh.histogram[bucket].load(Relaxed)).sum()
}

/// Starts measuring (the pool's start, when statistics or the report are wanted).
pub fn enable() {
    ON.store(true, Relaxed);
}

/// Whether queue waits are measured.
#[inline]
pub fn on() -> bool {
    ON.load(Relaxed)
}

/// The value of `Fiber::queued` for a fiber queued now from `source` (0 when off).
/// TLS-free (a donor calls it with its fiber's TLS).
#[inline]
pub fn stamp(source: Source) -> u64 {
    if !on() {
        return 0;
    }
    sys::now_ns() << SOURCE_BITS | source as u64
}

/// Records the wait of a fiber that a worker is about to run, from its `stamp`.
#[inline]
pub fn record(stamp: u64, migrated: bool) {
    if stamp == 0 {
        return;
    }
    record_slow(stamp, migrated);
}

#[cold]
fn record_slow(stamp: u64, migrated: bool) {
    let waited = sys::now_ns().saturating_sub(stamp >> SOURCE_BITS);
    let shard = &TABLE[shard_index()];
    let s = &shard.by_source[((stamp & ((1 << SOURCE_BITS) - 1)) as usize).min(SOURCES - 1)];
    s.count.fetch_add(1, Relaxed);
    if migrated {
        s.migrated.fetch_add(1, Relaxed);
    }
    s.total_ns.fetch_add(waited, Relaxed);
    s.max_ns.fetch_max(waited, Relaxed);
    shard.histogram[bucket(waited)].fetch_add(1, Relaxed);
}

/// The histogram bucket of a wait: one per decade from 10 µs to 1 s.
fn bucket(waited_ns: u64) -> usize {
    let mut limit = 10_000;
    let mut b = 0;
    while b < BUCKETS - 1 && waited_ns >= limit {
        limit *= 10;
        b += 1;
    }
    b
}

/// One source's waits so far: its name (as in the stats line), count, total and
/// longest wait in ns.
pub struct SourceWaits {
    pub name: &'static str,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

/// The upper bounds of the histogram's buckets in ns, the last (longer waits) unbounded.
pub const BUCKET_LIMITS_NS: [u64; BUCKETS - 1] = [10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000];

/// The waits so far, per source, and the histogram's bucket counts (not cumulative), for
/// the metrics file (`crate::observe::metrics`).
pub fn snapshot() -> ([SourceWaits; SOURCES], [u64; BUCKETS]) {
    let per_source = core::array::from_fn(|i| {
        let (count, _, total_ns, max_ns) = source_totals(i);
        SourceWaits { name: NAMES[i], count, total_ns, max_ns }
    });
    (per_source, core::array::from_fn(bucket_total))
}

/// ` queue_<source>=count/mean_us/max_us/migrated ... queue_hist=<10us,<100us,...` (empty when off).
pub fn render() -> String {
    if !on() {
        return String::new();
    }
    let mut s = String::new();
    for (i, name) in NAMES.iter().enumerate() {
        let (n, migrated, total_ns, max_ns) = source_totals(i);
        let mean_us = total_ns.checked_div(n).unwrap_or(0) / 1000;
        s.push_str(&format!(" queue_{name}={n}/{mean_us}/{}/{migrated}", max_ns / 1000));
    }
    let h: Vec<String> = (0..BUCKETS).map(|b| bucket_total(b).to_string()).collect();
    s.push_str(&format!(" queue_hist={}", h.join(",")));

    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_decades_from_ten_microseconds() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(9_999), 0);
        assert_eq!(bucket(10_000), 1);
        assert_eq!(bucket(999_999), 2);
        assert_eq!(bucket(1_000_000), 3);
        assert_eq!(bucket(150_000_000), 5);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        for (i, &limit) in BUCKET_LIMITS_NS.iter().enumerate() {
            assert_eq!(bucket(limit - 1), i);
            assert_eq!(bucket(limit), i + 1);
        }
    }

    #[test]
    fn a_stamp_keeps_its_source() {
        enable();
        let st = stamp(Source::Preempt);
        assert_eq!(st & ((1 << SOURCE_BITS) - 1), Source::Preempt as u64);
        record(st, true);
        let (count, migrated, _, _) = source_totals(Source::Preempt as usize);
        assert!(count >= 1 && migrated >= 1);
        assert!(render().contains("queue_preempt="));
    }
}
