//! Timers for sleeping and timed-waiting fibers.
//!
//! One min-heap of `(deadline, fiber, park generation)` **per worker**
//! ([`TimerHeap`], a field of `scheduler::WorkerShared`), ordered by CLOCK_MONOTONIC
//! deadline, behind a [`RawLock`]. A fiber arms its timer on the worker that runs it
//! when it parks; that worker fires it between fibers (`fire_due`) and sleeps at most
//! until its own earliest deadline (`next`, cached so that the per-iteration check is
//! one atomic load and a vDSO clock read). A worker that runs one fiber for a whole
//! monitor tick, or is blocked or retired, has its due timers fired by the monitor
//! (`scheduler::monitor_main`), so a timer is late by at most about a tick.
//!
//! Why per worker: with one global heap, thousands of sleeping threads put every
//! arm-and-fire operation through one lock and one `NEXT` line shared by every worker
//! (docs/RESULTS.md#timer-heaps). Now each heap's lock is
//! taken by its owner and, rarely, by the monitor.
//!
//! Entries are never removed early: when a fiber is woken by other means its entry
//! stays until it expires and is then dropped, because its `gen` no longer matches the
//! fiber's `park_gen` (a cancelled timer costs a heap slot, not a spurious wake-up).
//!
//! Stale entries are dropped in bulk when a heap has doubled since its last sweep
//! (never below [`SWEEP_MIN`]): a server whose connections wait for requests with a
//! long timeout (MariaDB: `wait_timeout`, 8 hours) arms one timer per wait and is
//! woken by the request long before it fires. Without the sweep the heap grew by the
//! request rate, each entry pinning its fiber's memory for 8 hours. A sweep is linear in
//! the heap, once per as many adds.

use core::cmp::Ordering as CmpOrdering;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::collections::BinaryHeap;

use crate::base::batch::Batch;
use crate::base::rawlock::RawLock;
use crate::base::stats::{bump, STATS};
use crate::base::sys;
use crate::runtime::fibers::fiber::FiberRef;

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

/// Heap size below which no sweep happens. Origin: a few thousand entries cost a
/// few tens of KiB; sweeping smaller heaps would only add work to short programs.
const SWEEP_MIN: usize = 4096;

/// One worker's timers.
pub struct TimerHeap {
    heap: RawLock<BinaryHeap<Entry>>,
    /// The earliest deadline in `heap` (u64::MAX if none).
    next: AtomicU64,
    /// Heap size at which the next `add` sweeps stale entries (read and written under
    /// the heap lock).
    sweep_at: AtomicUsize,
}

impl TimerHeap {
    pub const fn new() -> Self {
        TimerHeap { heap: RawLock::new(BinaryHeap::new()), next: AtomicU64::new(u64::MAX), sweep_at: AtomicUsize::new(SWEEP_MIN) }
    }

    /// The earliest pending deadline (u64::MAX if none).
    #[inline]
    pub fn next_deadline(&self) -> u64 {
        self.next.load(Ordering::Acquire)
    }

    /// Arms a timer that unparks `fiber` at `deadline` if it is still in park number `gen`.
    pub fn add(&self, deadline: u64, fiber: FiberRef, gen: u64) {
        let mut heap = self.heap.lock();
        heap.push(Entry { deadline, gen, fiber });
        if heap.len() >= self.sweep_at.load(Ordering::Relaxed) {
            // An entry whose fiber has started a newer timed park can never fire usefully.
            heap.retain(|e| e.fiber.park_gen() == e.gen);
            self.sweep_at.store((heap.len() * 2).max(SWEEP_MIN), Ordering::Relaxed);
            self.next.store(heap.peek().map_or(u64::MAX, |e| e.deadline), Ordering::Release);
        } else if deadline < self.next.load(Ordering::Relaxed) {
            self.next.store(deadline, Ordering::Release);
        }
    }

    /// Fires every expired timer (the owning worker between fibers, or the monitor):
    /// wakes each one's fiber with `unpark` (the scheduler's, which passes it here).
    pub fn fire_due(&self, unpark: fn(&FiberRef)) {
        let next = self.next.load(Ordering::Acquire);
        if next == u64::MAX {
            return;
        }
        let now = sys::now_ns();
        if next > now {
            return;
        }
        // Pop under the lock, unpark after it: unpark may queue and notify.
        let mut due: Batch<Entry, 32> = Batch::new();
        loop {
            let more = {
                let mut heap = self.heap.lock();
                while due.has_room() {
                    match heap.peek() {
                        Some(top) if top.deadline <= now => due.push(heap.pop().expect("peeked")),
                        _ => break,
                    }
                }
                self.next.store(heap.peek().map_or(u64::MAX, |e| e.deadline), Ordering::Release);
                !due.has_room()
            };
            for e in due.drain() {
                if e.fiber.park_gen() == e.gen {
                    bump(&STATS.timers_fired);
                    unpark(&e.fiber);
                }
            }
            if !more {
                return;
            }
        }
    }

    /// In a forked child: the parent's fibers' timers do not apply (no fiber exists
    /// there), and the lock may have been held by a parent thread at the fork.
    ///
    /// # Safety
    /// Only from the atfork child hook (one thread, nothing else running).
    pub unsafe fn reset_in_forked_child(&self) {
        // SAFETY: we are the atfork child hook (this fn's # Safety): one thread, nothing else
        // running, which is the heap lock's reset contract.
        unsafe { self.heap.reset_in_forked_child(BinaryHeap::new()) };
        self.next.store(u64::MAX, Ordering::Release);
        self.sweep_at.store(SWEEP_MIN, Ordering::Relaxed);
    }

    /// Number of armed timers (for the dump).
    pub fn pending(&self) -> usize {
        self.heap.lock().len()
    }
}

impl Default for TimerHeap {
    fn default() -> Self {
        Self::new()
    }
}
