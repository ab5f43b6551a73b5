//! The metrics file: the runtime's counters and gauges in Prometheus' text exposition
//! format (`FIBERIZE_METRICS=PATH[,INTERVAL]`), for node_exporter's textfile collector.
//!
//! # What it holds
//!
//! Every counter of the stats line (`crate::base::stats`) as `fiberize_<name>_total`,
//! the gauges of the stats line (`fiberize_workers`, `fiberize_live_fibers`), the worker
//! threads by state, the queue waits (`crate::runtime::fibers::queue_delay`) as a histogram and
//! per source while they are measured (`FIBERIZE_STATS` or `FIBERIZE_REPORT`: the
//! measurement reads the clock on the workers' paths, this file alone does not turn it
//! on), and, while the report is collected (`FIBERIZE_REPORT`), its top blocking
//! sites and contended locks as labelled counters (at most [`TOP_SITES`] per kind, so
//! the number of series stays bounded however many locks the program has; entries that
//! share a name are summed, since one series per label set is the format's rule) and
//! the workers' sampled time. A new counter is one line in [`METRICS`]; the test
//! `metrics_file_matches_the_stats_line` fails while a stats-line counter has none.
//!
//! # Who writes it, and when
//!
//! A runtime thread of its own, `fiberize-metric` (`scheduler::spawn_runtime_thread`:
//! the real `pthread_create`, every signal blocked; never a fiber), started with the pool, wakes
//! every interval and writes the file; the exit handler writes it once more, last.
//! The workers never wait for it: it reads relaxed counters, the fiber registry's
//! length (one short hold of the registry lock, as `pthread_create` takes it) and the
//! report's table, and does its formatting and I/O on its own thread.
//!
//! Each write goes to `PATH.tmp.PID` in the same directory, then `rename`s over PATH,
//! so a reader sees a whole old file or a whole new one, never a half-written one.
//! [`WRITE_LOCK`] orders the thread's writes and the exit's: once the exit wrote its
//! file ([`FINAL_WRITTEN`]), the thread writes nothing more.
//!
//! # One writer per file; fork and exec
//!
//! A service's environment reaches every program it runs: Debian's `mariadb.service`
//! runs `mariadb-upgrade` and `mariadb-check` after the server started, with the same
//! `LD_PRELOAD` and `FIBERIZE_METRICS`. Their exit would replace the server's file
//! with their own counters. So a process writes the file only while it holds an
//! exclusive `flock` on `PATH.lock` (taken without waiting when the writer starts,
//! held until the process ends, `O_CLOEXEC`: an `exec`ed program does not inherit
//! it); a second process with the same PATH says so in one stderr line and writes
//! nothing.
//!
//! Only the forking thread exists in a forked child, so the child has no writer
//! thread (and a writer caught mid-write by the fork left nothing the child uses: the
//! child never writes metrics, like the stats line, whose exit handler skips
//! children); the atfork child hook closes the child's copy of the lock's descriptor
//! ([`let_go_in_forked_child`]).

use core::fmt::Write as _;
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::collections::{BTreeMap, HashMap};

use crate::base::config::{self, Metrics};
use crate::base::rawlock::RawMutex;
use crate::base::sites::{self, Kind as SiteKind};
use crate::base::stats::STATS;
use crate::base::sys;
use crate::runtime::fibers::{queue_delay, registry};
use crate::runtime::scheduler;

/// What a metric is to Prometheus.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Type {
    /// Only ever grows (named `fiberize_<name>_total`).
    Counter,
    /// Goes up and down (named `fiberize_<name>`).
    Gauge,
}
use Type::{Counter, Gauge};

/// One plain metric: its name (as in the stats line), type, help text and value.
type Metric = (&'static str, Type, &'static str, fn() -> u64);

/// A counter of the stats line, in one line.
macro_rules! stat {
    ($name:ident, $help:literal) => {
        (stringify!($name), Counter, $help, || STATS.$name.get())
    };
}

/// Every plain metric; one line per counter (the order is the file's).
const METRICS: &[Metric] = &[
    ("workers", Gauge, "Worker threads the pool keeps running fibers (FIBERIZE_WORKERS or the usable CPUs).", || {
        config::config().workers as u64
    }),
    ("live_fibers", Gauge, "Fibers alive now (program threads that run as fibers).", || registry::live_fibers() as u64),
    stat!(fibers_created, "Program threads started as fibers."),
    stat!(fibers_finished, "Fibers that ended."),
    stat!(fibers_native_fallback, "Program threads left plain threads (real-time policy, too small a stack)."),
    stat!(switches, "Switches from a worker to a fiber."),
    stat!(yields, "sched_yield calls of fibers."),
    stat!(parks, "Fibers that parked (waited for a lock, a condition, I/O, a timer)."),
    stat!(unparks, "Parked fibers made runnable again."),
    stat!(steals, "Fibers a worker took from another worker's queue."),
    stat!(fibers_released, "Fibers moved to the global queue from a worker that made no switch for a tick."),
    stat!(lifo_capped, "Wake-ups sent behind the local queue instead of running next (wake chains)."),
    stat!(mutex_handoffs, "Contended mutex unlocks that handed the lock straight to a waiter (eventual fairness)."),
    stat!(mutex_wakes_lost, "Woken mutex waiters that found the mutex taken again and slept again."),
    stat!(lock_spins, "Spin phases of woken mutex waiters that found the mutex taken again."),
    stat!(
        lock_spins_skipped,
        "Woken mutex waiters that found the mutex taken and parked again without spinning: their worker had other fibers queued."
    ),
    stat!(donor_handoffs, "Calls a fiber ran on its donor thread (blocking calls, demotion)."),
    stat!(timers_fired, "Fiber timers that expired."),
    stat!(worker_sleeps, "Times an idle worker went to sleep."),
    stat!(worker_wakeups, "Times a sleeping worker was woken for work."),
    stat!(direct_waits, "Waits of a fiber alone on its worker directly in the kernel."),
    stat!(
        direct_waits_declined_peer_elsewhere,
        "Direct waits not taken: the socket's last segment came in on another CPU than the worker's."
    ),
    stat!(peer_cpu_lookups, "Times a direct wait asked the kernel on which CPU a socket's peer last sent (getsockopt)."),
    stat!(direct_waits_unspun, "Direct waits that blocked at once, without a spin: the socket's peer runs on the worker's CPU."),
    stat!(poll_probes_saved, "Waits in poll for input answered from the readiness edge that woke them, without a second poll."),
    stat!(idle_spins_skipped, "Idle episodes that slept without spinning: the last fiber declined a wait for a peer on another CPU, so the kernel may place the worker beside it."),
    stat!(monitor_dozes, "Times the monitor thread slept past its tick because every worker slept and nothing was queued."),
    stat!(monitor_wakeups, "Times the monitor thread woke: every tick, and the end of every doze."),
    stat!(monitor_redozes, "Dozes the monitor began soon after an errand woke an idling pool (2 quiet ticks instead of 16)."),
    stat!(monitor_stretched_ticks, "Monitor sleeps of 2 or 4 ticks instead of one: the pool was quiet at the end of the previous tick."),
    stat!(thread_waits, "Waits of plain threads on the runtime's locks and conditions."),
    stat!(futex_waits, "futex waits of fibers."),
    stat!(futex_wakes, "futex wakes through the runtime."),
    stat!(futex_shared_to_kernel, "Non-private futex operations passed to the kernel: their word lies in memory shared with other processes."),
    stat!(futex_maps_reads, "Reads of /proc/self/maps for the table of shared memory ranges."),
    stat!(futex_split, "Non-private two-word futex operations (WAKE_OP, REQUEUE) with one word in private and one in shared memory, split between the runtime and the kernel."),
    stat!(workers_blocked, "Times the monitor caught a worker blocked in the kernel."),
    stat!(workers_spawned, "Spare workers started for blocked ones."),
    stat!(workers_retired, "Spare workers retired."),
    stat!(
        worker_starts_failed,
        "Worker threads the pool could not start (pthread_create failed: pids.max, RLIMIT_NPROC); it went on with the workers it had."
    ),
    stat!(fibers_demoted, "Fibers made plain threads for good (they blocked their worker again and again)."),
    stat!(demotions_completion_wait, "Demotions for waiting on an I/O completion."),
    stat!(demotions_long_block, "Demotions for blocking a worker long."),
    stat!(signals_deferred, "Signals deferred until the runtime left a shielded stretch."),
    stat!(signals_to_fibers, "Signals sent to the process handed to a thread (a fiber) that does not block them."),
    stat!(preemptions, "Fibers preempted at the end of their time slice (FIBERIZE_PREEMPT_MS)."),
    stat!(turns_ended, "Fibers sent to the back of the queue at the end of their turn (scheduler::policy::TURN_US)."),
    stat!(turn_windows_short, "Windows of 16 monitor ticks in which the turn was the short one."),
    stat!(turn_windows_long, "Windows of 16 monitor ticks in which the turn was the long one."),
    stat!(quota_changes, "Changes of the cgroup CPU quota that changed the workers the pool wants."),
    stat!(
        turns_ended_short,
        "Of those, turns ended at the short budget (scheduler::policy::SHORT_TURN_US: the program's threads rarely woke each other)."
    ),
    stat!(preempt_refused, "Preemptions refused (the fiber was not in program code)."),
    stat!(preempt_fallbacks, "Workers given up on preempting and replaced by a spare."),
    stat!(stack_releases, "Sleeps before which a fiber gave its dead stack pages back."),
    stat!(stack_releases_skipped, "Long sleeps that left the stack alone: nothing was written below the kept margin since the last release."),
    stat!(migrations, "Runs of a fiber on another worker than its previous run."),
    stat!(cross_worker_wakes, "Fibers made runnable by code on another worker than the one they last ran on."),
    stat!(eventfd_writes, "Writes to an eventfd to wake a sleeping worker or end a direct wait."),
    stat!(own_fds_moved, "The runtime's descriptors moved because the program dup2ed onto their numbers."),
    stat!(closefrom_walks, "closefrom calls made by walking /proc/self/fd, where close_range failed."),
    stat!(lock_wakes_yielded, "Mutex unlocks that woke a waiter others queued behind, and futex wakes of one waiter (a program's own lock), that gave the wakee the worker."),
    stat!(epoll_waits, "epoll_wait calls on the runtime's readiness sets."),
    stat!(epoll_events, "Events those epoll_wait calls returned (wake-up eventfds included)."),
    stat!(fd_moves, "Descriptors moved to the readiness set of the worker their only waiter runs on (readiness sets per worker, from 4 workers)."),
    stat!(internal_lock_waits, "Waits on runtime-internal locks the monitor did not take for a blocked worker."),
];

/// Labelled series per kind of report entry. Origin: the report shows the top 10; a
/// dashboard needs no more, and 5 kinds x 10 keeps the file under ~100 site series.
const TOP_SITES: usize = 10;

/// Orders the writer thread's writes and the exit's last one.
static WRITE_LOCK: RawMutex = RawMutex::new();
/// The exit wrote the file (under [`WRITE_LOCK`]); the writer thread stops.
static FINAL_WRITTEN: AtomicBool = AtomicBool::new(false);
static WRITER_STARTED: AtomicBool = AtomicBool::new(false);
/// This process holds `PATH.lock`: it is the file's writer.
static OWNS_FILE: AtomicBool = AtomicBool::new(false);
/// The descriptor that holds `PATH.lock` (-1: none).
static LOCK_FD: AtomicI32 = AtomicI32::new(-1);
/// The writer thread sleeps on this word between writes (never changed: a timed wait).
static TICK: AtomicU32 = AtomicU32::new(0);

/// Starts the writer thread if `FIBERIZE_METRICS` is set (once; the pool's start).
pub fn start_if_wanted() {
    let Some(m) = config::config().metrics else { return };
    if WRITER_STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    if !lock_file(m) {
        let mut line = b"fiberize: FIBERIZE_METRICS=".to_vec();
        line.extend_from_slice(m.path);
        line.extend_from_slice(b": another process writes that file (it holds its .lock): no metrics from this one\n");
        sys::write_stderr(&line);
        return;
    }
    OWNS_FILE.store(true, Ordering::Release);
    scheduler::spawn_runtime_thread(writer_main, core::ptr::null_mut());
}

/// Takes `PATH.lock` for good (the descriptor stays open until the process ends);
/// false when another process holds it. A lock file that cannot be made (a folder
/// nobody may write) does not stop the writer: its writes fail the same way.
fn lock_file(m: Metrics) -> bool {
    let mut lock = m.path.to_vec();
    lock.extend_from_slice(b".lock\0");
    // Kept until the process ends: out of the way of the program's numbers.
    let Some(fd) = crate::base::own_fds::open_nul_out_of_the_way(&lock, libc::O_WRONLY | libc::O_CREAT) else {
        return true;
    };
    // On our own descriptor, which we keep open on purpose.
    let r = sys::flock(fd, libc::LOCK_EX | libc::LOCK_NB);
    if r == -(libc::EWOULDBLOCK as isize) {
        crate::base::own_fds::close(fd);
        return false;
    }
    LOCK_FD.store(fd, Ordering::Relaxed);
    crate::base::own_fds::hold(&LOCK_FD);
    true
}

/// In a forked child (the atfork child hook): the child never writes the file, and
/// its copy of the lock's descriptor would keep the lock held after the parent ended
/// (a daemon's parent exits, its child lives on). Closing our copy leaves the parent's
/// lock as it is.
pub fn let_go_in_forked_child() {
    OWNS_FILE.store(false, Ordering::Relaxed);
    let fd = LOCK_FD.swap(-1, Ordering::Relaxed);
    if fd >= 0 {
        crate::base::own_fds::close(fd); // the child's copy
    }
}

/// The exit's write: the file's last version (the exit handler, parent process only).
pub fn write_at_exit() {
    let Some(m) = config::config().metrics else { return };
    if !OWNS_FILE.load(Ordering::Acquire) {
        return;
    }
    WRITE_LOCK.lock();
    write_file(m, &render(&mut SiteNames::default()));
    FINAL_WRITTEN.store(true, Ordering::Relaxed);
    WRITE_LOCK.unlock();
}

/// The writer thread's name (`top -H`, `/proc/PID/task/*/comm`; 15 bytes at most).
const THREAD_NAME: &core::ffi::CStr = c"fiberize-metric";

extern "C" fn writer_main(_: *mut libc::c_void) -> *mut libc::c_void {
    let Some(m) = config::config().metrics else { return core::ptr::null_mut() };
    sys::set_thread_name(THREAD_NAME);
    let mut names = SiteNames::default();
    loop {
        let deadline = sys::now_ns() + m.interval_ms * 1_000_000;
        while sys::now_ns() < deadline {
            sys::futex_wait(&TICK, 0, Some(deadline));
        }
        let text = render(&mut names);
        WRITE_LOCK.lock();
        let done = FINAL_WRITTEN.load(Ordering::Relaxed);
        if !done {
            write_file(m, &text);
        }
        WRITE_LOCK.unlock();
        if done {
            return core::ptr::null_mut();
        }
    }
}

/// Writes `text` to `PATH.tmp.PID` and renames it over PATH (raw system calls: `open`
/// and `rename` may be our exports). A failure leaves the old file. The descriptor is
/// transient (opt-in metrics, a write a second): marked and closed with the program's
/// closes kept out, but a program `open` meanwhile gets the number above.
fn write_file(m: Metrics, text: &str) {
    let mut tmp = m.path.to_vec();
    // SAFETY: getpid has no preconditions.
    let _ = write!(Bytes(&mut tmp), ".tmp.{}", unsafe { libc::getpid() });
    let Some(fd) = crate::base::own_fds::open_nul(&nul_terminated(&tmp), libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC) else {
        return;
    };
    crate::observe::report::write_all(fd, text.as_bytes());
    let (tmp_nul, path_nul) = (nul_terminated(&tmp), nul_terminated(m.path));
    crate::base::own_fds::close(fd);
    if sys::renameat(&tmp_nul, &path_nul) < 0 {
        sys::unlinkat(&tmp_nul);
    }
}

fn nul_terminated(path: &[u8]) -> Vec<u8> {
    let mut v = path.to_vec();
    v.push(0);
    v
}

/// `write!` into a byte vector.
struct Bytes<'a>(&'a mut Vec<u8>);
impl core::fmt::Write for Bytes<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// HELP and TYPE lines of one metric family.
fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A label value with `\`, `"` and newlines escaped, as the format wants.
fn escaped(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn seconds(ns: u64) -> String {
    format!("{}", ns as f64 / 1e9)
}

/// The whole file.
fn render(names: &mut SiteNames) -> String {
    let mut out = String::with_capacity(8 * 1024);
    let _ = writeln!(out, "# fiberize {} metrics (FIBERIZE_METRICS), pid {}", env!("CARGO_PKG_VERSION"), std::process::id());
    for &(name, kind, help, value) in METRICS {
        let full = match kind {
            Counter => format!("fiberize_{name}_total"),
            Gauge => format!("fiberize_{name}"),
        };
        header(&mut out, &full, if kind == Counter { "counter" } else { "gauge" }, help);
        let _ = writeln!(out, "{full} {}", value());
    }
    render_worker_states(&mut out);
    render_queue_waits(&mut out);
    if sites::on() {
        render_worker_time(&mut out);
        render_sites(&mut out, names);
    }
    out
}

fn render_worker_states(out: &mut String) {
    let mut by_state: BTreeMap<&str, u64> = ["active", "direct-wait", "blocked", "spare"].iter().map(|&s| (s, 0)).collect();
    if let Some(rt) = scheduler::try_runtime() {
        for w in rt.workers() {
            *by_state.entry(w.state_name()).or_default() += 1;
        }
    }
    header(out, "fiberize_worker_threads", "gauge", "Worker threads (spares included) by state.");
    for (state, n) in by_state {
        let _ = writeln!(out, "fiberize_worker_threads{{state=\"{state}\"}} {n}");
    }
}

fn render_queue_waits(out: &mut String) {
    if !queue_delay::on() {
        return;
    }
    let (per_source, buckets) = queue_delay::snapshot();
    let name = "fiberize_queue_wait_seconds";
    header(out, name, "histogram", "How long runnable fibers waited in the run queues before a worker ran them.");
    let mut cumulative = 0;
    for (i, n) in buckets.iter().enumerate() {
        cumulative += n;
        let le = queue_delay::BUCKET_LIMITS_NS.get(i).map_or("+Inf".to_string(), |&ns| seconds(ns));
        let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
    }
    let _ = writeln!(out, "{name}_sum {}", seconds(per_source.iter().map(|s| s.total_ns).sum()));
    let _ = writeln!(out, "{name}_count {cumulative}");
    header(out, "fiberize_queue_waits_total", "counter", "Queue waits by the path that made the fiber runnable.");
    for s in &per_source {
        let _ = writeln!(out, "fiberize_queue_waits_total{{source=\"{}\"}} {}", s.name, s.count);
    }
    header(out, "fiberize_queue_wait_max_seconds", "gauge", "Longest queue wait so far, by source.");
    for s in &per_source {
        let _ = writeln!(out, "fiberize_queue_wait_max_seconds{{source=\"{}\"}} {}", s.name, seconds(s.max_ns));
    }
}

fn render_worker_time(out: &mut String) {
    let Some(rt) = scheduler::try_runtime() else { return };
    let mut samples = [0u64; 3];
    for w in rt.workers() {
        let t = &w.times;
        for (sum, s) in samples.iter_mut().zip([&t.running_samples, &t.idle_samples, &t.runtime_samples]) {
            *sum += s.load(Ordering::Relaxed);
        }
    }
    let name = "fiberize_worker_time_samples_total";
    header(out, name, "counter", "Workers seen by the monitor's 1 ms samples, by what they did (FIBERIZE_REPORT).");
    for (what, n) in ["running", "idle", "runtime"].iter().zip(samples) {
        let _ = writeln!(out, "{name}{{state=\"{what}\"}} {n}");
    }
}

/// Names of code addresses, kept across writes (a name is looked up once per site).
#[derive(Default)]
struct SiteNames {
    symbols: crate::observe::symbols::Names,
    cache: HashMap<usize, String>,
}

impl SiteNames {
    fn name_of(&mut self, addr: usize) -> String {
        if let Some(n) = self.cache.get(&addr) {
            return n.clone();
        }
        let n = self.symbols.name_of(addr);
        self.cache.insert(addr, n.clone());
        n
    }
}

/// The report's entries by kind, top [`TOP_SITES`] per kind by total time.
fn render_sites(out: &mut String, names: &mut SiteNames) {
    const KINDS: [(SiteKind, &str); 5] = [
        (SiteKind::BlockedWorker, "blocked_worker"),
        (SiteKind::SlowFileIo, "slow_file_io"),
        (SiteKind::Mutex, "mutex"),
        (SiteKind::RwLock, "rwlock"),
        (SiteKind::Cond, "condvar"),
    ];
    // (kind label, site name) -> (count, total ns): entries with one name are one series.
    let mut merged: BTreeMap<(&str, String), (u64, u64)> = BTreeMap::new();
    for e in sites::entries() {
        let Some(&(_, label)) = KINDS.iter().find(|(k, _)| e.kind() == *k as usize) else { continue };
        let site = names.name_of(e.site.load(Ordering::Relaxed));
        let slot = merged.entry((label, site)).or_default();
        slot.0 += e.count.load(Ordering::Relaxed);
        slot.1 += e.total_ns.load(Ordering::Relaxed);
    }
    let mut rows: Vec<_> = merged.into_iter().collect();
    rows.sort_by_key(|((label, _), (count, total))| (*label, core::cmp::Reverse((*total, *count))));
    let mut kept: Vec<_> = Vec::new();
    for (_, label) in KINDS {
        kept.extend(rows.iter().filter(|((l, _), _)| *l == label).take(TOP_SITES));
    }
    let waits = "fiberize_site_waits_total";
    header(out, waits, "counter", "Waits at the report's top call sites (FIBERIZE_REPORT), by kind.");
    for ((label, site), (count, _)) in &kept {
        let _ = writeln!(out, "{waits}{{kind=\"{label}\",site=\"{}\"}} {count}", escaped(site));
    }
    let time = "fiberize_site_wait_seconds_total";
    header(out, time, "counter", "Time waited at the report's top call sites (FIBERIZE_REPORT), by kind.");
    for ((label, site), (_, total)) in &kept {
        let _ = writeln!(out, "{time}{{kind=\"{label}\",site=\"{}\"}} {}", escaped(site), seconds(*total));
    }
    header(out, "fiberize_site_records_dropped_total", "counter", "Report records lost to a full table.");
    let _ = writeln!(out, "fiberize_site_records_dropped_total {}", sites::DROPPED.load(Ordering::Relaxed));
}
