//! Timers for sleeping and timed-waiting fibers.
//!
//! One global min-heap of `(deadline, fiber, park generation)`, ordered by CLOCK_MONOTONIC
//! deadline, behind a [`RawLock`]. `NEXT` caches the earliest deadline so that the
//! per-iteration check of every worker is one atomic load and a vDSO clock read.
//! Entries are never removed early: when a fiber is woken by other means its entry
//! stays until it expires and is then dropped, because its `gen` no longer matches the
//! fiber's `park_gen` (a cancelled timer costs a heap slot, not a spurious wake-up).
//! Idle workers sleep until `NEXT` (see `scheduler::idle`).
//!
//! Stale entries are dropped in bulk when the heap has doubled since the last sweep
//! (never below [`SWEEP_MIN`]): a server whose connections wait for requests with a
//! long timeout (MariaDB: `wait_timeout`, 8 hours) arms one timer per wait and is
//! woken by the request long before it fires. Without the sweep the heap grew by the
//! request rate (190 000 entries after a minute of sysbench), each entry pinning its
//! fiber's memory for 8 hours. A sweep is linear in the heap, once per as many adds.

use core::cmp::Ordering as CmpOrdering;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::collections::BinaryHeap;

use crate::fiber::FiberRef;
use crate::rawlock::RawLock;
use crate::stats::{bump, STATS};
use crate::{scheduler, sys};

struct Entry {
    deadline: u64,
    gen: u64,
    fiber: FiberRef,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.deadline == o.deadline
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    // Reversed: BinaryHeap is a max-heap, we want the earliest deadline on top.
    fn cmp(&self, o: &Self) -> CmpOrdering {
        o.deadline.cmp(&self.deadline)
    }
}

static HEAP: RawLock<BinaryHeap<Entry>> = RawLock::new(BinaryHeap::new());
static NEXT: AtomicU64 = AtomicU64::new(u64::MAX);

/// The earliest pending deadline (u64::MAX if none).
#[inline]
pub fn next_deadline() -> u64 {
    NEXT.load(Ordering::Acquire)
}

/// Heap size below which no sweep happens. Origin: a few thousand entries cost a
/// few tens of KiB; sweeping smaller heaps would only add work to short programs.
const SWEEP_MIN: usize = 4096;
/// Heap size at which the next `add` sweeps stale entries (read and written under
/// the heap lock).
static SWEEP_AT: AtomicUsize = AtomicUsize::new(SWEEP_MIN);

/// Arms a timer that unparks `fiber` at `deadline` if it is still in park number `gen`.
pub fn add(deadline: u64, fiber: FiberRef, gen: u64) {
    let mut heap = HEAP.lock();
    heap.push(Entry { deadline, gen, fiber });
    if heap.len() >= SWEEP_AT.load(Ordering::Relaxed) {
        // An entry whose fiber has started a newer timed park can never fire usefully.
        heap.retain(|e| e.fiber.park_gen.load(Ordering::Relaxed) == e.gen);
        SWEEP_AT.store((heap.len() * 2).max(SWEEP_MIN), Ordering::Relaxed);
        NEXT.store(heap.peek().map_or(u64::MAX, |e| e.deadline), Ordering::Release);
    } else if deadline < NEXT.load(Ordering::Relaxed) {
        NEXT.store(deadline, Ordering::Release);
    }
}

/// Fires every expired timer. Called by workers between fibers.
pub fn fire_due() {
    let next = NEXT.load(Ordering::Acquire);
    if next == u64::MAX {
        return;
    }
    let now = sys::now_ns();
    if next > now {
        return;
    }
    let mut due: Vec<Entry> = Vec::new();
    {
        let mut heap = HEAP.lock();
        while let Some(top) = heap.peek() {
            if top.deadline > now {
                break;
            }
            if let Some(e) = heap.pop() {
                due.push(e);
            }
        }
        NEXT.store(heap.peek().map_or(u64::MAX, |e| e.deadline), Ordering::Release);
    }
    for e in due {
        if e.fiber.park_gen.load(Ordering::Relaxed) == e.gen {
            bump(&STATS.timers_fired);
            scheduler::unpark(&e.fiber);
        }
    }
}

/// Number of armed timers (for the dump).
pub fn pending() -> usize {
    HEAP.lock().len()
}
