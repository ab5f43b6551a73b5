//! Competing for the CPUs as the program's threads would (issue 27's mix).
//!
//! # Why
//!
//! The kernel shares a CPU between *threads*. A thread-per-connection server with
//! 2 300 threads, most of them runnable under load, gets most of a machine it shares
//! with a load generator (or any other busy process); the same server preloaded
//! competes as its few worker threads and gets a few threads' share. Measured on
//! 2 vCPUs, point_select @2048 + read_write @256 over sysbench on the same machine:
//! the preloaded server took ~1.2 CPUs against ~1.5 natively, its run queues held
//! fibers for 0.2–0.8 s on average, and read_write, whose transactions need 20 round
//! trips through those queues, got 0.16x native tps. With `FIBERIZE_WORKERS=32` it
//! got 1.07x, with 128 1.16x (p95 0.85x native), point_select unchanged or better.
//!
//! # What
//!
//! Once per window of `monitor::POLICY_WINDOW_TICKS` ticks the policy reads, for every
//! ACTIVE worker, how long its kernel thread ran and how long it waited, runnable, for
//! a CPU (`/proc/self/task/TID/schedstat`). With `C` usable CPUs, our workers runnable
//! `A` threads' worth on average and `s` the fraction of that time they ran, a
//! saturated machine gives each runnable thread `C / (A + O)` of a CPU, so the other
//! runnable threads number about
//!
//! ```text
//!     O = C / s - A            (0 when s > 0.9: the workers get the CPU when they want it)
//! ```
//!
//! The workers' waits for each other are part of `A`, so adding workers does not
//! inflate `O` (no feedback loop). While fibers wait in the run queues, the pool then
//! wants `workers + 2·O` ACTIVE workers (smoothed over windows, at most
//! `FIBERIZE_MAX_WORKERS`, at most one per queued fiber): with `O` others the pool
//! then gets about `(C + 2·O) / (C + 3·O)` of the machine, 2/3 or more, closer to what
//! the native server's many runnable threads would take. When nobody competes (or
//! nothing waits) the target falls back to the configured workers, and the surplus
//! retire as spares when they next run dry (`worker::retire_if_surplus`).
//!
//! The measure is the kernel's own, per thread, so it is right in a container too:
//! only threads that compete for *our* CPUs make our workers wait. A CPU quota
//! (cgroup) throttles the whole group instead; that shows as neither run nor wait and
//! adds no workers.
//!
//! **Off by default** (`FIBERIZE_MAX_WORKERS` defaults to the configured workers): with
//! 128 workers on 2 CPUs one mix run stalled read_write for 36 s, next to hundreds of
//! workers caught "blocked" (asleep on a kernel lock whose holder waited for a CPU) and
//! 131 fibers demoted; at 32, read_write still stalls for ~30 s in some rounds (an
//! InnoDB latch chain), and point_select over TCP at 16–64 connections gets p95 1.9–2.3x
//! native against 1.3–1.4x without the policy; see docs/DESIGN.md §2.11.
//!
//! Counters: `share_windows_competing`, `share_workers_added`.

use super::*;

/// A share above this is "the workers get the CPU when they want it": no competitor.
/// Origin: a 2-vCPU VM with nothing else running shows 0.95–1.0 for busy workers.
const UNCONTENDED_SHARE: f64 = 0.9;

/// How many more workers the pool wants per competing runnable thread.
const WORKERS_PER_COMPETITOR: f64 = 2.0;

pub(super) struct Policy {
    window_start_ns: u64,
    /// Per worker slot: (run, wait) ns at the window's start, 0s if not sampled.
    last: Vec<(u64, u64)>,
    /// Competing runnable threads, smoothed (EWMA, 1/4 per window).
    others: f64,
    base: usize,
    max: usize,
    /// `FIBERIZE_MAX_WORKERS` above the workers: the policy adds workers at all.
    on: bool,
}

impl Policy {
    pub(super) fn new(rt: &Runtime) -> Policy {
        let cfg = crate::base::config::config();
        Policy {
            window_start_ns: 0,
            last: vec![(0, 0); rt.workers.len()],
            others: 0.0,
            base: cfg.workers,
            max: cfg.max_workers,
            on: cfg.max_workers > cfg.workers,
        }
    }

    /// The workers wanted while nobody competes, changed with the cgroup's CPU quota
    /// ([`super::quota`]). A policy that was off stays off.
    pub(super) fn set_base(&mut self, base: usize) {
        self.base = base;
        if !self.on {
            self.max = base;
        }
    }

    /// At the end of each window of `monitor::POLICY_WINDOW_TICKS` ticks; `queued`: the
    /// fibers waiting in the run queues, on average over it.
    pub(super) fn window_end(&mut self, rt: &Runtime, queued: u64) {
        if self.max <= self.base {
            return;
        }
        let now = sys::now_ns();
        let elapsed = now.saturating_sub(self.window_start_ns) as f64;
        self.window_start_ns = now;
        let (mut ran, mut waited) = (0u64, 0u64);
        for w in rt.workers() {
            let tid = w.tid.load(Ordering::Relaxed);
            let sample = if w.role.peek() == Role::Active && tid != 0 { monitor::thread_sched_ns(tid) } else { None };
            let before = core::mem::replace(&mut self.last[w.index], sample.unwrap_or((0, 0)));
            if let (Some((run, wait)), true) = (sample, before != (0, 0)) {
                ran += run.saturating_sub(before.0);
                waited += wait.saturating_sub(before.1);
            }
        }
        let busy = (ran + waited) as f64;
        let others_now = if elapsed <= 0.0 || busy < elapsed / 4.0 {
            0.0 // the pool was mostly idle: nothing to compete for
        } else {
            let share = ran as f64 / busy;
            if share > UNCONTENDED_SHARE {
                0.0
            } else {
                (rt.cpus() as f64 / share.max(0.01) - busy / elapsed).max(0.0)
            }
        };
        self.others = 0.75 * self.others + 0.25 * others_now;
        let wanted = if queued >= 1 {
            let extra = (WORKERS_PER_COMPETITOR * self.others).round().min(queued as f64);
            (self.base + extra as usize).min(self.max)
        } else {
            self.base
        };
        rt.target.store(wanted, Ordering::Relaxed);
        if wanted > self.base {
            bump(&STATS.share_windows_competing);
        }
        while rt.active.load(Ordering::Acquire) < wanted {
            if !monitor::bring_in_worker(rt) {
                break;
            }
            bump(&STATS.share_workers_added);
        }
    }
}
