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
//! The roles (ACTIVE, BLOCKED, SPARE) and their transitions: [`super::worker_role`].
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

use super::task_files::{self, TaskFile};
use super::*;

// ---------------------------------------------------------------------------------
// Monitor
// ---------------------------------------------------------------------------------

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
        rt.ticks.tick();
        doze.tick_ended(rt);
    }
}

/// The monitor's sleep between ticks, and its dozes ("Dozing" and "Dozing again" in
/// the module docs).
#[derive(Default)]
struct Doze {
    /// Ticks in a row that ended with the pool quiet.
    quiet_ticks: u32,
    /// The last doze lasted a doze window or longer: the pool idles, and a wake-up that
    /// ended it was a short errand.
    idling: bool,
}

impl Doze {
    /// Sleeps until the next tick, or dozes while the pool is quiet; returns the ticks
    /// the sleep stood for (the ticks a doze skipped are added to the tick count).
    fn sleep(&mut self, rt: &Runtime) -> u64 {
        let now = sys::now_ns();
        let mut deadline = now + MONITOR_TICK_NS;
        let mut dozed = false;
        let mut seen = rt.monitor_doze.word_value();
        let quiet_ticks_needed = if self.idling { REDOZE_AFTER_QUIET_TICKS } else { DOZE_AFTER_QUIET_TICKS };
        if self.quiet_ticks >= quiet_ticks_needed {
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
        // The ticks this sleep stood for: one, or those a doze skipped (the clock is read
        // again only after a doze).
        let ticks = if dozed {
            let slept_ns = sys::now_ns().saturating_sub(now);
            self.idling = slept_ns >= DOZE_AFTER_QUIET_TICKS as u64 * MONITOR_TICK_NS;
            (slept_ns / MONITOR_TICK_NS).max(1)
        } else {
            1
        };
        if ticks > 1 {
            rt.ticks.skipped(ticks - 1);
        }
        ticks
    }

    /// After the policies ran: whether the pool stayed quiet through this tick.
    fn tick_ended(&mut self, rt: &Runtime) {
        self.quiet_ticks = if pool_is_quiet(rt) { self.quiet_ticks.saturating_add(1) } else { 0 };
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

/// Quiet ticks in a row before the monitor dozes ("Dozing" in the module docs).
/// Origin: one policy window (16 ms), so that a pool that sleeps between bursts of
/// requests keeps its ticks, and one idle for longer stops them.
const DOZE_AFTER_QUIET_TICKS: u32 = POLICY_WINDOW_TICKS;
/// Quiet ticks in a row before the monitor dozes again after a doze that lasted
/// [`DOZE_AFTER_QUIET_TICKS`] ticks or longer ("Dozing again" in the module docs).
/// Origin: an idle MariaDB's background threads wake a few times a second, each errand
/// taking a fiber tens of µs, and the monitor's 16 more ticks before each doze were most
/// of its wake-ups (docs/RESULTS.md#monitor-doze). Two ticks let the woken worker's
/// fiber finish and the worker sleep again.
const REDOZE_AFTER_QUIET_TICKS: u32 = 2;
/// Longest doze. Origin: 20 wake-ups a second instead of 1 000, and a bound on what a
/// doze delays (the exit after `pthread_exit` in `main`, a lost wake-up) that nobody
/// waits on noticeably.
const MAX_DOZE_NS: u64 = 50_000_000;

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

/// Monitor ticks per decision of the turn policy (16 ms: a few hundred
/// runs at the rates measured on the 2-vCPU VM).
pub(super) const POLICY_WINDOW_TICKS: u32 = 16;

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

/// Declares `w` blocked, unless its thread sleeps on one of the
/// runtime's own lock words: their holders never park while holding them, so the wait
/// ends as soon as the holder gets a CPU, and a spare would only compete for it
/// (`crate::base::rawlock::is_internal_wait`). Waits inside glibc (a `FILE` lock, a
/// malloc arena) still count: their holder may be a fiber parked on this very worker,
/// which only a spare can run.
pub(super) fn mark_blocked_unless_internal_wait(rt: &Runtime, w: &WorkerShared) {
    let call = BlockedCall::of(w);
    if call.as_ref().is_some_and(|c| c.nr == libc::SYS_futex && crate::base::rawlock::is_internal_wait(c.args[0] as usize)) {
        bump(&STATS.internal_lock_waits);
        return;
    }
    mark_blocked_in(rt, w, call);
}

/// Declares `w` blocked and brings a spare in if the pool is short.
pub(crate) fn mark_blocked(rt: &Runtime, w: &WorkerShared) {
    mark_blocked_in(rt, w, BlockedCall::of(w));
}

/// [`mark_blocked`], with the call the worker's thread was found in (read once by the
/// caller from `/proc/self/task/TID/syscall`).
fn mark_blocked_in(rt: &Runtime, w: &WorkerShared, call: Option<BlockedCall>) {
    if !w.role.mark_blocked() {
        return;
    }
    // Its set goes to the worker that replaces it (`poller::claim_set`).
    poller::release_set(w.readiness_set());
    bump(&STATS.workers_blocked);
    if crate::base::sites::on() {
        if let Some(call) = &call {
            note_blocking_call(w, call);
        }
    }
    let id = w.running.load(Ordering::Relaxed);
    if id != 0 {
        if let Some(f) = crate::runtime::fibers::registry::find_by_id(id) {
            f.demotion.note_foreign_block();
            if call.is_some_and(|c| c.is_completion_wait()) {
                mark_for_demotion(&f, &STATS.demotions_completion_wait);
            }
        }
    }
    if rt.active.fetch_sub(1, Ordering::AcqRel) > rt.target() {
        return;
    }
    bring_in_worker(rt);
}

/// Makes one more worker ACTIVE: a retired spare woken, else a new thread in the next
/// free slot. False when every slot is taken or the thread could not be made (the
/// group's `pids.max`, `RLIMIT_NPROC`: counted, `worker_starts_failed`); the pool then
/// runs short until a blocked worker returns, or goes on with the workers it has
/// after a raised quota. A native program makes no thread for either, so a failure
/// must not end it. Monitor only (it alone starts threads and wakes spares).
pub(super) fn bring_in_worker(rt: &Runtime) -> bool {
    // Prefer waking a retired spare.
    for s in rt.workers() {
        if s.role.activate_spare() {
            rt.active.fetch_add(1, Ordering::AcqRel);
            s.role.wake();
            return true;
        }
    }
    let idx = rt.started.load(Ordering::Acquire);
    if idx >= rt.workers.len() {
        return false;
    }
    rt.active.fetch_add(1, Ordering::AcqRel);
    rt.started.store(idx + 1, Ordering::Release);
    if try_spawn_runtime_thread(worker::worker_main, &rt.workers[idx] as *const WorkerShared as *mut libc::c_void).is_err() {
        return no_worker_started(rt, idx);
    }
    bump(&STATS.workers_spawned);
    true
}

/// Undoes [`bring_in_worker`]'s claim on slot `idx`, whose thread could not be made:
/// the slot is free again for a later try (nothing reached it: no thread ran on it,
/// and nothing is handed to a worker that has not run), and the pool counts one ACTIVE
/// worker less. False, for the caller to return.
#[cold]
fn no_worker_started(rt: &Runtime, idx: usize) -> bool {
    rt.started.store(idx, Ordering::Release);
    rt.active.fetch_sub(1, Ordering::AcqRel);
    bump(&STATS.worker_starts_failed);
    false
}

/// A fiber found blocking its worker in a wait that lasts as long as the program
/// wants (a completion queue, a long one-off call) goes to its donor at its next
/// intercepted blocking call, instead of after `DEMOTE_AFTER_BLOCKS` episodes, each
/// of which costs a spare worker and a few stuck milliseconds (docs/DESIGN.md §2.11).
pub(super) fn mark_for_demotion(f: &Fiber, why: &crate::base::stats::Counter) {
    if f.demotion.mark_due() {
        bump(why);
    }
}

/// The system call a blocked worker's thread sleeps in, from
/// `/proc/self/task/TID/syscall` ("nr a1 a2 a3 a4 a5 a6 sp pc" while in a system call;
/// "running" or "-1 sp pc" when not).
pub(crate) struct BlockedCall {
    pub(crate) nr: i64,
    pub(crate) args: [u64; 6],
    pub(crate) sp: usize,
    pub(crate) pc: usize,
}

impl BlockedCall {
    /// The call worker `w`'s thread is in (its kept `syscall` file).
    pub(crate) fn of(w: &WorkerShared) -> Option<BlockedCall> {
        let mut buf = [0u8; 256];
        let n = read_worker_file(w, TaskFile::Syscall, &mut buf)?;
        BlockedCall::parse(&buf[..n])
    }

    /// The call kernel thread `tid` is in (its `syscall` file opened by path: for the
    /// dump, which names any thread).
    pub(crate) fn of_thread(tid: u32) -> Option<BlockedCall> {
        let mut buf = [0u8; 256];
        let n = task_files::read_task_file(tid, TaskFile::Syscall, &mut buf)?;
        BlockedCall::parse(&buf[..n])
    }

    fn parse(text: &[u8]) -> Option<BlockedCall> {
        let mut fields = [0u64; 9];
        let mut count = 0;
        for f in text.split(|c| c.is_ascii_whitespace()).filter(|f| !f.is_empty()) {
            let s = core::str::from_utf8(f).ok()?;
            let v = match s.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok()?,
                None => s.parse().ok()?,
            };
            *fields.get_mut(count)? = v;
            count += 1;
        }
        (count == 9).then(|| BlockedCall {
            nr: fields[0] as i64,
            args: [fields[1], fields[2], fields[3], fields[4], fields[5], fields[6]],
            sp: fields[7] as usize,
            pc: fields[8] as usize,
        })
    }

    /// A wait for completions that the program makes again and again from one
    /// thread: `io_uring_enter` with `IORING_ENTER_GETEVENTS` and `min_complete > 0`
    /// (liburing's `io_uring_wait_cqe`, inline, so the `syscall` export never sees
    /// it: InnoDB's `tpool::create_linux_aio`), `io_getevents` with
    /// `min_nr > 0` (libaio), or `rt_sigtimedwait` (a signal thread's `sigwaitinfo`
    /// loop through raw system calls).
    fn is_completion_wait(&self) -> bool {
        const IORING_ENTER_GETEVENTS: u64 = 1;
        match self.nr {
            libc::SYS_io_uring_enter => self.args[3] & IORING_ENTER_GETEVENTS != 0 && self.args[2] as u32 > 0,
            libc::SYS_io_getevents => self.args[1] as i64 > 0,
            libc::SYS_rt_sigtimedwait => true,
            _ => false,
        }
    }
}

/// For the report: the call `w` is blocked in, by the program's call site: `pc` (the
/// instruction after the `syscall`) itself when the program made the system call
/// inline, else the first return address into the program's code above `sp`. The
/// time is added when the worker comes back (`worker::rejoin_or_retire`).
fn note_blocking_call(w: &WorkerShared, call: &BlockedCall) {
    let (nr, sp, pc) = (call.nr as u64, call.sp, call.pc);
    use crate::base::sites::{in_main_executable, is_program_code, program_returns};
    let (site, outer) = match (is_program_code(pc), in_main_executable(pc)) {
        (true, true) => (pc, 0),
        // Inline system call in a shared object (liburing): its caller in the program.
        (true, false) => match program_returns(sp, 4096) {
            (first, _) if in_main_executable(first) => (pc, first),
            (_, outer) => (pc, outer),
        },
        (false, _) => program_returns(sp, 4096),
    };
    let key = if site != 0 { site } else { pc };
    if let Some(e) = crate::base::sites::entry(crate::base::sites::Kind::BlockedWorker, key, || site) {
        e.pc.store(pc, Ordering::Relaxed);
        e.detail.store(nr, Ordering::Relaxed);
        e.outer_site.store(outer, Ordering::Relaxed);
        e.add(0);
        w.times.blocked_since.store(crate::base::sites::now(), Ordering::Relaxed);
        w.times.blocked_entry.store(e as *const _ as *mut _, Ordering::Relaxed);
    }
}

/// How long a worker may stay BLOCKED in one call (no switch) before its fiber is
/// marked for demotion. Origin: a DNS lookup or an `flock` on a busy file ends well within a
/// second; a call that lasts longer is a thread's waiting loop (a completion queue the
/// monitor does not recognise), which costs a spare worker for as long as it runs.
pub(super) const LONG_BLOCK_NS: u64 = 1_000_000_000;

/// A worker counts as blocked only if its thread ran less than 1/BLOCKED_CPU_SHARE of
/// the time between two looks (a tick or more apart). Origin: a fiber that computes
/// with brief kernel waits (arena locks, page faults) runs most of the time; one in a
/// blocking call runs ~0. A single look started spare workers for a C++ program whose
/// fibers block in nothing we do not intercept (docs/RESULTS.md#monitor-blocked-rule).
pub(super) const BLOCKED_CPU_SHARE: u64 = 4;

/// Reads `file` of worker `w`'s thread (kept open, `task_files::TaskFiles`) into `buf`;
/// the length read.
fn read_worker_file(w: &WorkerShared, file: TaskFile, buf: &mut [u8]) -> Option<usize> {
    w.task_files.read(w.tid.load(Ordering::Relaxed), file, buf)
}

/// CPU time (ns) worker `w`'s thread has run, from its schedstat (None without one).
pub(super) fn worker_cpu_ns(w: &WorkerShared) -> Option<u64> {
    let mut buf = [0u8; 128];
    let n = read_worker_file(w, TaskFile::Schedstat, &mut buf)?;
    let mut fields = buf[..n]
        .split(|c| c.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
        .map(|f| f.iter().try_fold(0u64, |v, &c| c.is_ascii_digit().then(|| v.wrapping_mul(10).wrapping_add((c - b'0') as u64))));
    fields.next()?
}

/// Whether worker `w`'s thread is sleeping in the kernel (state S or D).
pub(crate) fn worker_sleeps_in_kernel(w: &WorkerShared) -> bool {
    let mut buf = [0u8; 512];
    let n = read_worker_file(w, TaskFile::Stat, &mut buf);
    matches!(n.and_then(|n| state_letter(&buf[..n])), Some(b'S' | b'D'))
}

/// The state letter of a `stat` text: "tid (comm) S ...", the state after the last ')'.
fn state_letter(stat: &[u8]) -> Option<u8> {
    match stat.iter().rposition(|&c| c == b')') {
        Some(i) if i + 2 < stat.len() => Some(stat[i + 2]),
        _ => None,
    }
}

/// Kernel thread `tid`'s state letter (R, S, D, ...), from its `stat` (opened by path:
/// for the dump, which names any thread).
pub(crate) fn thread_state(tid: u32) -> Option<u8> {
    let mut buf = [0u8; 512];
    let n = task_files::read_task_file(tid, TaskFile::Stat, &mut buf)?;
    state_letter(&buf[..n])
}
