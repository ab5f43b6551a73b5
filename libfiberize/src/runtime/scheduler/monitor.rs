//! The monitor thread.
//!
//! # Blocked workers and spares (docs/DESIGN.md §2.11)
//!
//! A fiber may block its worker in a call we do not intercept. The monitor watches
//! every active worker's `progress` counter (bumped at each fiber switch); a worker
//! that is running a fiber and made no progress for `STUCK_TICKS` ticks, and whose
//! kernel thread sleeps (`/proc/self/task/TID/stat` state S or D, so a CPU-bound
//! fiber is not mistaken for a blocked one) and also used less than a quarter of the
//! CPU since the previous look (`schedstat`, so that a short kernel wait inside glibc
//! or a page fault is not mistaken either: `BLOCKED_CPU_SHARE`), is marked BLOCKED and a spare worker is
//! activated (or started) so that the number of active workers stays at the target.
//! The spare steals the blocked worker's queued fibers like any idle worker. When the
//! blocked call returns and the fiber switches out, the old worker sees BLOCKED and
//! either becomes active again (if the pool is short) or retires: it moves what its
//! queues hold to the injector and sleeps as a spare.
//!
//! The watch: [`super::stuck`]; reading a worker's kernel thread, marking it BLOCKED
//! and bringing a spare in: [`super::blocked`]; the roles (ACTIVE, BLOCKED, SPARE) and
//! their transitions: [`super::worker_role`]; the numbers: [`super::policy`].
//!
//! # Dozing: no tick while the whole pool sleeps
//!
//! Every tick wakes the monitor's thread: 1 000 wake-ups a second. While fibers run
//! they are what preemption, blocked workers and the tick count need; in an idle
//! server they are all the process does (docs/RESULTS.md#monitor-doze). So once the
//! pool has been quiet for [`DOZE_AFTER_QUIET_TICKS`]
//! ticks in a row (every ACTIVE worker asleep, nothing queued, no worker BLOCKED:
//! [`pool_is_quiet`]) the monitor sleeps until the earliest timer of any worker, or
//! at most [`MAX_DOZE_NS`], or until a worker wakes up:
//!
//! ```text
//!   monitor (MonitorDoze::announce)           worker leaving a sleep
//!   dozing = 1, fence                         sleep_word.wake: sleeping -= 1
//!   seen = word                               fence (MonitorDoze::worker_woke)
//!   pool_is_quiet? (reads sleeping) ── no ─> tick as usual
//!        │ yes                                dozing? ── yes ─> dozing = 0,
//!        v                                                      word += 1,
//!   futex_wait(word, seen, until)                               futex_wake
//!   dozing = 0
//! ```
//!
//! The two SeqCst sequences form a Dekker pair: either the monitor's check sees the
//! worker awake (and does not doze), or the worker sees `dozing` and changes the word,
//! so the futex wait returns at once or is woken (`sleep_state::MonitorDoze`, checked
//! by a loom model). Nothing else needs the tick while every worker sleeps: no fiber runs on a worker, a sleeping worker fires its own
//! timers (it sleeps until its earliest), and the timers of the others bound the doze.
//! Work that arrives wakes a worker (readiness, a producer's notify), which wakes the
//! monitor. What a doze delays: the exit when `main` ended with `pthread_exit` while
//! the last thread finished on a donor, and the monitor's net for a lost wake-up, both
//! by at most [`MAX_DOZE_NS`]. The ticks a doze skipped still count where a count of
//! ticks measures time (the tick count of `clock.rs`, the report's worker samples).
//!
//! # Dozing again
//!
//! A pool that idles for long is still woken now and then: a background thread's
//! timer (InnoDB's, a few times a second in an idle MariaDB), a housekeeping
//! request. Each wakes a worker, which wakes the monitor; the fiber runs for tens of
//! µs and the worker sleeps again. Requiring [`DOZE_AFTER_QUIET_TICKS`] quiet ticks
//! again after each made the monitor tick 16 times per such errand. So after a doze
//! that lasted a doze window or longer (the pool had idled at least as long as the
//! rule asks), [`REDOZE_AFTER_QUIET_TICKS`] quiet ticks are enough; a doze that ends
//! sooner (a pool between bursts of requests, where dozing only adds a futex wake per
//! burst) brings back the full count. Stats `monitor_wakeups`, `monitor_redozes`.
//!
//! # Stretching the tick while the pool is quiet
//!
//! A mostly idle pool serving short bursts (a client with a thousand thinking
//! terminals: a statement's reply every millisecond or so, each run for tens of µs) is
//! quiet at most tick ends but seldom for a doze window in a row, so the monitor ticked
//! a thousand times a second for nothing. Each tick that ends with the pool quiet
//! doubles the next one, up to [`MAX_TICK_STRETCH`] (1, 2, 4 ms); a tick that ends with
//! a worker awake or work queued brings back the 1 ms tick. No worker wakes the monitor
//! out of a stretched tick (that would put a futex wake on every worker's wake-up, the
//! cost a doze avoids by its window), so what the monitor watches is seen later by at
//! most the stretch, and only at the start of a burst after a quiet tick: a worker
//! blocked in a call we do not intercept, a fiber that overran its slice (the stretch
//! stays under the 5-tick slice), a stranded queue, a lost wake-up. A stretched tick
//! stands for its ticks in the tick count, as a doze's skipped ticks do, and counts
//! toward the doze window by its ticks. Stat `monitor_stretched_ticks`.

use super::clock::{Policy, Tick, TICKS};
use super::policy::{
    DOZE_AFTER_QUIET_TICKS, MAX_DOZE_NS, MAX_TICK_STRETCH, MONITOR_TICK_NS, POLICY_WINDOW_TICKS, REDOZE_AFTER_QUIET_TICKS,
};
use super::*;

// ---------------------------------------------------------------------------------
// Monitor
// ---------------------------------------------------------------------------------

/// The monitor's thread: sleeps a tick (or dozes), then runs each policy. The policies:
/// stuck and blocked workers (`stuck::StuckWatch`), preemption
/// (`crate::runtime::preemption::preempt::Watch`), the turn's length (`TurnWindows`) and the cgroup
/// quota (`quota::QuotaFollow`); the tick count (`clock`) and the dozing ("Dozing"
/// above) are the loop's own.
/// `quota`: the [`quota::QuotaFollow`] the pool's starter made (and opened the group's
/// files for), boxed.
pub(super) extern "C" fn monitor_main(quota: *mut libc::c_void) -> *mut libc::c_void {
    let rt = runtime_unchecked();
    let mut doze = Doze::default();
    let mut stuck = stuck::StuckWatch::new(rt.workers.len());
    let mut preempt = crate::runtime::preemption::preempt::Watch::new(rt.workers.len());
    let mut turns = TurnWindows::default();
    // SAFETY: `start_pool` passes a `Box<QuotaFollow>` leaked for this thread alone.
    let mut quota = *unsafe { Box::from_raw(quota.cast::<quota::QuotaFollow>()) };
    loop {
        let ticks = doze.sleep(rt);
        let tick = Tick { ticks, idle_workers: rt.idle.sleeping() + rt.idle.spinning() > 0 };
        (crate::runtime::fibers::hooks::get().exit_if_main_left_and_all_done)();
        (crate::runtime::fibers::hooks::get().route_process_signals)();
        if crate::base::sites::on() {
            sample_for_report(rt, ticks);
        }
        if rt.idle.sleeping() > 0 && rt.idle.spinning() == 0 && rt.has_work(None) {
            rt.wake_one_sleeper();
        }
        let policies: [&mut dyn Policy; 4] = [&mut stuck, &mut preempt, &mut turns, &mut quota];
        for policy in policies {
            policy.tick(rt, &tick);
        }
        TICKS.tick();
        doze.tick_ended(rt, ticks);
    }
}

/// The monitor's sleep between ticks, and its dozes ("Dozing" and "Dozing again" in
/// the module docs).
#[derive(Default)]
struct Doze {
    /// Ticks in a row that ended with the pool quiet (a stretched tick counts its ticks).
    quiet_ticks: u32,
    /// The next ordinary sleep lasts `1 << stretch` ticks ("Stretching the tick while
    /// the pool is quiet").
    stretch: u32,
    /// The last doze lasted a doze window or longer: the pool idles, and a wake-up that
    /// ended it was a short errand.
    idling: bool,
}

impl Doze {
    /// Sleeps until the next tick, or dozes while the pool is quiet; returns the ticks
    /// the sleep stood for (the ticks a doze skipped are added to the tick count).
    fn sleep(&mut self, rt: &Runtime) -> u64 {
        let now = sys::now_ns();
        let period_ticks = 1u64 << self.stretch;
        let mut deadline = now + period_ticks * MONITOR_TICK_NS;
        let mut dozed = false;
        let mut seen = rt.monitor_doze.word_value();
        let quiet_ticks_needed = if self.idling { REDOZE_AFTER_QUIET_TICKS } else { DOZE_AFTER_QUIET_TICKS };
        let announced = self.quiet_ticks >= quiet_ticks_needed;
        if announced {
            seen = rt.monitor_doze.announce();
            if pool_is_quiet(rt) {
                let earliest_timer = rt.workers().iter().map(|w| w.timers.next_deadline()).min().unwrap_or(u64::MAX);
                deadline = (now + MAX_DOZE_NS).min(earliest_timer).max(deadline);
                dozed = true;
                bump(&STATS.monitor_dozes);
                if self.quiet_ticks < DOZE_AFTER_QUIET_TICKS {
                    bump(&STATS.monitor_redozes);
                }
            }
        }
        // The fiber dump is printed by its own thread (crate::observe::dump), never here: the
        // monitor must keep ticking while thousands of lines are written.
        sys::futex_wait(rt.monitor_doze.futex_word(), seen, Some(deadline));
        rt.monitor_doze.end();
        bump(&STATS.monitor_wakeups);
        // The ticks this sleep stood for. Announced (a doze, or a tick slept while
        // announced), a worker may have ended it early: the clock says. Otherwise
        // nothing ends it before its deadline (no worker wakes an unannounced monitor,
        // and runtime threads block every signal): its period, without a clock read.
        let ticks = if announced {
            let slept_ns = sys::now_ns().saturating_sub(now);
            if dozed {
                self.idling = slept_ns >= DOZE_AFTER_QUIET_TICKS as u64 * MONITOR_TICK_NS;
            }
            (slept_ns / MONITOR_TICK_NS).max(1)
        } else {
            if period_ticks > 1 {
                bump(&STATS.monitor_stretched_ticks);
            }
            period_ticks
        };
        if ticks > 1 {
            TICKS.skipped(ticks - 1);
        }
        ticks
    }

    /// After the policies ran, for a tick that stood for `ticks`: whether the pool is
    /// quiet now, which counts toward a doze and stretches the next tick, or not, which
    /// brings back the 1 ms tick.
    fn tick_ended(&mut self, rt: &Runtime, ticks: u64) {
        if pool_is_quiet(rt) {
            self.quiet_ticks = self.quiet_ticks.saturating_add(ticks.min(u32::MAX as u64) as u32);
            self.stretch = (self.stretch + 1).min(MAX_TICK_STRETCH);
        } else {
            self.quiet_ticks = 0;
            self.stretch = 0;
        }
    }
}

impl Policy for crate::runtime::preemption::preempt::Watch {
    fn tick(&mut self, rt: &Runtime, _: &Tick) {
        crate::runtime::preemption::preempt::Watch::tick(self, rt);
    }
}

impl Policy for quota::QuotaFollow {
    fn tick(&mut self, rt: &Runtime, tick: &Tick) {
        quota::QuotaFollow::tick(self, rt, tick.ticks);
    }
}

/// The turn policy (`turn::Policy`) with the window of run-queue lengths it decides on.
#[derive(Default)]
struct TurnWindows {
    window: PolicyWindow,
    policy: turn::Policy,
}

impl Policy for TurnWindows {
    fn tick(&mut self, rt: &Runtime, _: &Tick) {
        if let Some(mean_waiting) = self.window.tick(rt.runnable_fibers()) {
            self.policy.window_end(rt, mean_waiting);
        }
    }
}

/// Every ACTIVE worker announced its sleep (in epoll_wait, on its futex, or in a direct
/// wait), nothing is queued anywhere, and no worker is BLOCKED (the blocked-worker
/// watch and a long block's demotion count ticks).
fn pool_is_quiet(rt: &Runtime) -> bool {
    let active = rt.active.load(Ordering::SeqCst);
    active > 0
        && rt.idle.sleeping() >= active
        && !rt.has_work(None)
        && rt.workers().iter().all(|w| w.role.peek() != Role::Blocked)
}

impl Runtime {
    /// A worker that has just left a sleep (after `SleepWord::wake`): wakes the monitor
    /// if it dozes ("Dozing" in the module docs; the protocol is
    /// `sleep_state::MonitorDoze`). One SeqCst load when it does not.
    #[inline]
    pub(super) fn wake_monitor_if_dozing(&self) {
        if self.monitor_doze.worker_woke() {
            sys::futex_wake(self.monitor_doze.futex_word(), 1);
        }
    }
}

/// The run queues' length over a window of [`POLICY_WINDOW_TICKS`] ticks, which the
/// turn policy decides on.
#[derive(Default)]
struct PolicyWindow {
    ticks: u32,
    waiting_sum: u64,
}

impl PolicyWindow {
    /// Adds one tick's snapshot of queued fibers; at the window's end, the mean number
    /// of fibers waiting over it (rounded down).
    fn tick(&mut self, runnable: u64) -> Option<u64> {
        self.ticks += 1;
        self.waiting_sum += runnable;
        if self.ticks < POLICY_WINDOW_TICKS {
            return None;
        }
        let mean = self.waiting_sum / u64::from(POLICY_WINDOW_TICKS);
        *self = PolicyWindow::default();
        Some(mean)
    }
}

/// The report's clock and its samples of where each worker's time goes
/// (`crate::base::sites`): one look per worker per tick instead of clock reads on the
/// workers' paths; `ticks` samples for a doze (the pool slept all along).
fn sample_for_report(rt: &Runtime, ticks: u64) {
    crate::base::sites::set_now(sys::now_ns());
    for w in rt.workers() {
        if w.times.born_ns.load(Ordering::Relaxed) == 0 {
            continue;
        }
        let bucket = if w.running.load(Ordering::Relaxed) != 0 {
            &w.times.running_samples
        } else if w.times.idle.load(Ordering::Relaxed) || w.role.peek() == Role::Spare {
            // A spare parked on `spare_word` waits like an idle worker; counted as
            // "in the runtime" it made a long-lived server's report say half the
            // pool's time went to the runtime.
            &w.times.idle_samples
        } else {
            &w.times.runtime_samples
        };
        bucket.fetch_add(ticks, Ordering::Relaxed);
    }
}
