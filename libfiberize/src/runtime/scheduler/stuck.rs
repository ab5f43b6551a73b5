//! Stuck and blocked workers: the monitor's watch over each worker's progress.
//!
//! Every tick, for each worker: one that made no switch since the previous tick has its
//! queued fibers and readiness handed to the injector when an idle worker can take
//! them, or once it is stranded ([`stranded`]: [`STRANDED_TICKS`] without a switch
//! unless the kernel kept its thread off the CPU, [`DESCHEDULED_STRANDED_TICKS`] in
//! any case; `release_queued`), and its due timers fired; one running a fiber without
//! a switch for `STUCK_TICKS` whose kernel thread sleeps and used almost no CPU is
//! declared BLOCKED and replaced by a spare
//! (`blocked::mark_blocked_unless_internal_wait`; docs/DESIGN.md §2.11); a fiber that
//! keeps its worker BLOCKED for `LONG_BLOCK_NS` is marked for demotion to its donor.

use super::blocked::{mark_blocked_unless_internal_wait, mark_for_demotion, worker_cpu_ns, worker_sleeps_in_kernel};
use super::clock::{Policy, Tick};
use super::policy::{
    BLOCKED_CPU_SHARE, DESCHEDULED_CPU_SHARE, DESCHEDULED_STRANDED_TICKS, LONG_BLOCK_NS, MAX_RECHECK_TICKS, MONITOR_TICK_NS,
    STRANDED_TICKS, STUCK_TICKS,
};
use super::*;

/// Per-worker state of the watch, indexed by worker.
pub(super) struct StuckWatch {
    last_progress: Vec<u64>,
    stuck_ticks: Vec<u32>,
    /// Ticks without progress before the next look at the kernel state: STUCK_TICKS,
    /// doubled (up to MAX_RECHECK_TICKS) each time the thread was found running, so that
    /// a fiber that computes (or a worker the kernel preempted) costs the monitor a
    /// /proc read every few ms instead of every tick.
    check_after: Vec<u32>,
    /// (CPU time, clock) of the worker's kernel thread at the first look in this
    /// no-progress stretch; see `BLOCKED_CPU_SHARE`.
    cpu_baseline: Vec<Option<(u64, u64)>>,
    /// When the monitor first saw a worker BLOCKED with no switch since (0: not
    /// blocked, u64::MAX: its fiber is marked already); see `LONG_BLOCK_NS`.
    blocked_since: Vec<u64>,
    /// Ticks in a row in which the worker made no switch (see `release_queued`).
    no_progress_ticks: Vec<u32>,
    /// (CPU time, clock) of the worker's kernel thread at the first tick of its stretch
    /// without a switch, if it ran a fiber then; see [`descheduled`].
    stretch_start: Vec<Option<(u64, u64)>>,
    /// Whether the worker is stranded in its present stretch without a switch.
    stranded: Vec<bool>,
}

impl StuckWatch {
    pub(super) fn new(workers: usize) -> StuckWatch {
        StuckWatch {
            last_progress: vec![0; workers],
            stuck_ticks: vec![0; workers],
            check_after: vec![STUCK_TICKS; workers],
            cpu_baseline: vec![None; workers],
            blocked_since: vec![0; workers],
            no_progress_ticks: vec![0; workers],
            stretch_start: vec![None; workers],
            stranded: vec![false; workers],
        }
    }
}

impl Policy for StuckWatch {
    fn tick(&mut self, rt: &Runtime, tick: &Tick) {
        for w in rt.workers() {
            let i = w.index;
            let p = w.progress.load(Ordering::Relaxed);
            if p == self.last_progress[i] {
                self.note_no_progress(w);
                // The owner is stuck in one fiber, blocked, retired or asleep: what
                // waits in its queues or timer heap must not wait for it.
                if tick.idle_workers || !self.serves_own(w) {
                    release_queued(rt, w);
                }
                w.timers.fire_due(unpark);
            } else {
                self.no_progress_ticks[i] = 0;
                self.stranded[i] = false;
            }
            let role = w.role.get();
            if role == Role::Blocked && p == self.last_progress[i] {
                let now = sys::now_ns();
                if self.blocked_since[i] == 0 {
                    self.blocked_since[i] = now;
                } else if now.saturating_sub(self.blocked_since[i]) >= LONG_BLOCK_NS {
                    self.blocked_since[i] = u64::MAX;
                    if let Some(f) = crate::runtime::fibers::registry::find_by_id(w.running.load(Ordering::Relaxed)) {
                        mark_for_demotion(&f, &STATS.demotions_long_block);
                    }
                }
            } else {
                self.blocked_since[i] = 0;
            }
            if role != Role::Active
                || w.running.load(Ordering::Relaxed) == 0
                || w.direct.load(Ordering::Relaxed)
                || p != self.last_progress[i]
            {
                self.last_progress[i] = p;
                self.stuck_ticks[i] = 0;
                self.check_after[i] = STUCK_TICKS;
                self.cpu_baseline[i] = None;
                continue;
            }
            self.stuck_ticks[i] += 1;
            if self.stuck_ticks[i] >= self.check_after[i] {
                self.stuck_ticks[i] = 0;
                if !worker_sleeps_in_kernel(w) {
                    self.check_after[i] = (self.check_after[i] * 2).min(MAX_RECHECK_TICKS);
                    self.cpu_baseline[i] = None;
                    continue;
                }
                // Asleep in the kernel right now. A short futex wait inside glibc (a
                // malloc arena lock), a page fault or a preemption look the same at one
                // instant; a blocked call also used (almost) no CPU since the last look.
                let now = sys::now_ns();
                match (self.cpu_baseline[i], worker_cpu_ns(w)) {
                    (Some((cpu0, t0)), Some(cpu)) if cpu.saturating_sub(cpu0) * BLOCKED_CPU_SHARE < now - t0 => {
                        self.check_after[i] = STUCK_TICKS;
                        self.cpu_baseline[i] = None;
                        mark_blocked_unless_internal_wait(rt, w);
                    }
                    (_, Some(cpu)) => {
                        // First look (or it ran meanwhile): look again next tick.
                        self.cpu_baseline[i] = Some((cpu, now));
                        self.check_after[i] = 1;
                    }
                    (_, None) => {
                        // No schedstat in this kernel: the state alone decides.
                        self.check_after[i] = STUCK_TICKS;
                        mark_blocked_unless_internal_wait(rt, w);
                    }
                }
            }
        }
        // Readiness that waits in a set whose worker does not serve it now.
        poller::poll_stale_sets_where(MONITOR_TICK_NS, |set| {
            tick.idle_workers || !rt.workers().iter().any(|w| w.readiness_set() == set && self.serves_own(w))
        });
    }
}

impl StuckWatch {
    /// Worker `w` made no switch since the previous tick: counts the stretch, and
    /// decides whether it is stranded now ([`stranded`]). Reads its thread's CPU clock
    /// at the stretch's first tick, and again at each tick from [`STRANDED_TICKS`] on
    /// until it is stranded (with its state when it ran less than half the time).
    fn note_no_progress(&mut self, w: &WorkerShared) {
        let i = w.index;
        let ticks = self.no_progress_ticks[i].saturating_add(1);
        self.no_progress_ticks[i] = ticks;
        let tid = w.tid.load(Ordering::Relaxed);
        if ticks == 1 {
            let runs_fiber = w.running.load(Ordering::Relaxed) != 0;
            self.stretch_start[i] = if runs_fiber { sys::thread_cpu_ns(tid).map(|cpu| (cpu, sys::now_ns())) } else { None };
        } else if !self.stranded[i] && ticks >= STRANDED_TICKS {
            let ran = self.stretch_start[i].and_then(|(cpu0, t0)| {
                sys::thread_cpu_ns(tid).map(|cpu| (cpu.saturating_sub(cpu0), sys::now_ns().saturating_sub(t0)))
            });
            self.stranded[i] = stranded(ticks, descheduled(ran, || worker_sleeps_in_kernel(w)));
        }
    }

    /// Whether `w` still serves its own queues and readiness set: ACTIVE, and not
    /// stranded.
    fn serves_own(&self, w: &WorkerShared) -> bool {
        w.role.peek() == Role::Active && !self.stranded[w.index]
    }
}

/// Whether a worker that made no switch for `ticks` ticks is stranded: its queued
/// fibers and readiness go to the injector even with no idle worker to take them.
/// After [`STRANDED_TICKS`] unless the kernel `descheduled` its thread, after
/// [`DESCHEDULED_STRANDED_TICKS`] in any case. A thread the kernel descheduled runs its
/// queue as soon as it is back, in its order (a coordinating fiber in its queue, the
/// injector's 1-in-61 for the rest); one that ran through the stretch runs a fiber that
/// does not switch, and one asleep in the kernel waits for a call to return.
fn stranded(ticks: u32, descheduled: bool) -> bool {
    ticks >= DESCHEDULED_STRANDED_TICKS || (ticks >= STRANDED_TICKS && !descheduled)
}

/// Whether a worker's thread spent its stretch without a switch waiting for a CPU:
/// `ran` is (CPU time it ran, time elapsed) since the stretch's first tick, if known,
/// and less than half; and it is not asleep in the kernel now (`sleeps`, asked only
/// then). A thread that waits on a kernel run queue is runnable (state R) with its CPU
/// clock standing still; its schedstat wait (`run_delay`) grows only once it runs
/// again, so it cannot tell.
fn descheduled(ran: Option<(u64, u64)>, sleeps: impl FnOnce() -> bool) -> bool {
    matches!(ran, Some((cpu, elapsed)) if cpu * DESCHEDULED_CPU_SHARE < elapsed) && !sleeps()
}

/// The owner of `w` has been running one fiber for a whole tick, and an idle worker
/// can take its work (or it is stranded, [`stranded`]): hand what waits in its
/// lifo slot and local queues to the injector. Other workers steal from a deque only
/// when they run dry, so without this a fiber queued behind a fiber that never
/// switches (a spin-wait on a flag) would starve while the rest of the pool is busy.
fn release_queued(rt: &Runtime, w: &WorkerShared) {
    let moved = w.move_queued_to(&rt.injector);
    if moved != 0 {
        add(&STATS.fibers_released, moved as u64);
        rt.notify();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_stranded_unless_descheduled_until_the_late_limit() {
        // (ticks without a switch, descheduled, stranded)
        let table: &[(u32, bool, bool)] = &[
            (1, false, false),
            (STRANDED_TICKS - 1, false, false),
            (STRANDED_TICKS, false, true),
            (STRANDED_TICKS, true, false),
            (DESCHEDULED_STRANDED_TICKS - 1, true, false),
            (DESCHEDULED_STRANDED_TICKS, true, true),
        ];
        for &(ticks, descheduled, want) in table {
            assert_eq!(stranded(ticks, descheduled), want, "ticks {ticks}, descheduled {descheduled}");
        }
    }

    #[test]
    fn descheduled_means_off_the_cpu_half_the_time_and_not_asleep() {
        const MS: u64 = 1_000_000;
        // (ran: (CPU time, elapsed), asleep in the kernel, descheduled)
        type Ran = Option<(u64, u64)>;
        let table: &[(Ran, bool, bool)] = &[
            // A fiber that does not switch: ran through the stretch.
            (Some((4 * MS, 4 * MS)), false, false),
            (Some((2 * MS, 4 * MS)), false, false),
            // Runnable, waiting for a CPU.
            (Some((MS, 4 * MS)), false, true),
            (Some((0, 4 * MS)), false, true),
            // Asleep in a call (the blocked check's case).
            (Some((0, 4 * MS)), true, false),
            // Unknown: idle at the stretch's first tick, or no such clock.
            (None, false, false),
        ];
        for &(ran, sleeps, want) in table {
            assert_eq!(descheduled(ran, || sleeps), want, "ran {ran:?}, asleep {sleeps}");
        }
    }

    #[test]
    fn a_thread_cpu_clock_reads_the_calling_thread_and_not_a_missing_one() {
        let me = sys::gettid() as u32;
        let before = sys::thread_cpu_ns(me).expect("own clock");
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        assert!(sys::thread_cpu_ns(me).expect("own clock") > before);
        let gone = std::thread::spawn(|| sys::gettid() as u32).join().unwrap();
        // The kernel clears the tid a join waits on before it reaps the thread, so its
        // clock can still be read for a moment after the join returns (seen under
        // qemu-user): wait for the reaping, boundedly.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while sys::thread_cpu_ns(gone).is_some() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(sys::thread_cpu_ns(gone), None);
    }
}
