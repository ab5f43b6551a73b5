//! The report: where the program still waits (`FIBERIZE_REPORT=PATH`, `-` for stderr).
//!
//! Written at exit and whenever the dump signal (`FIBERIZE_DUMP_SIGNAL`) arrives, by
//! the thread that handles it, appended to the file. Its raw material is collected
//! while the program runs, and only while the report is on (`crate::base::sites`):
//!
//! * **calls that blocked a worker**: the monitor caught the worker asleep in a call
//!   the library does not intercept (an inline system call, an io_uring wait, a
//!   glibc-internal lock); it reads the system call and the user stack pointer from
//!   `/proc/self/task/TID/syscall` and names the program's call site (the first return
//!   address into the program's code above that stack pointer). Also regular-file
//!   reads and writes a fiber ran on its worker that took over a millisecond. Count,
//!   total and longest time (from the moment the monitor caught it); times are on the
//!   monitor's 1 ms clock (`sites::now`);
//! * **contended locks**: every wait of a fiber or thread on a mutex, rwlock or
//!   condition variable, per lock, named by the program's call site of the lock's
//!   first contended wait (a frame-pointer walk out of the library). Waits, total and
//!   longest wait;
//! * **fibers demoted** to plain threads (they blocked their worker again and again),
//!   by start routine, and the threads that never became fibers;
//! * **spare workers** started for blocked ones, and each worker's time, sampled by
//!   the monitor every tick: running fibers, idle (spinning or asleep), and the rest,
//!   in the runtime (finding work, switching, timers, retired as a spare).
//!
//! Names come from `dladdr` or the object's `.symtab` (`crate::observe::symbols`); an
//! address without a symbol is shown as an offset into its object, for
//! `addr2line -e OBJECT -f OFFSET`.

use core::fmt::Write as _;
use core::sync::atomic::Ordering::Relaxed;

use crate::base::config::{self, Output};
use crate::base::sites::{self, Entry, Kind};
use crate::base::stats::STATS;
use crate::base::sys;
use crate::runtime::scheduler;

/// Lines per list. Origin: the top few are what a reader acts on.
const TOP: usize = 10;

/// Starts collecting if `FIBERIZE_REPORT` is set (the pool's start calls this).
pub fn start_if_wanted() {
    if config::config().report.is_some() {
        sites::start();
    }
}

/// Writes the report where `FIBERIZE_REPORT` says, if it is set.
pub fn write_if_wanted(why: &str) {
    if let Some(out) = config::config().report {
        emit(out, &render(why));
    }
}

/// Writes `text` to `out` (a file is opened for appending and closed again).
pub fn emit(out: Output, text: &str) {
    match out {
        Output::Stderr => write_all(2, text.as_bytes()),
        Output::File(path) => {
            // Transient (an opt-in report): see `metrics::write_file`.
            if let Some(fd) = crate::base::own_fds::open_append(path) {
                write_all(fd, text.as_bytes());
                crate::base::own_fds::close(fd);
            }
        }
    }
}

fn syscall_name(nr: u64) -> String {
    let name = match nr as i64 {
        libc::SYS_read => "read",
        libc::SYS_write => "write",
        libc::SYS_pread64 => "pread64",
        libc::SYS_pwrite64 => "pwrite64",
        #[cfg(target_arch = "x86_64")]
        libc::SYS_poll => "poll",
        libc::SYS_ppoll => "ppoll",
        #[cfg(target_arch = "x86_64")]
        libc::SYS_select => "select",
        libc::SYS_pselect6 => "pselect6",
        libc::SYS_nanosleep => "nanosleep",
        libc::SYS_clock_nanosleep => "clock_nanosleep",
        libc::SYS_futex => "futex",
        #[cfg(target_arch = "x86_64")]
        libc::SYS_epoll_wait => "epoll_wait",
        libc::SYS_epoll_pwait => "epoll_pwait",
        libc::SYS_io_uring_enter => "io_uring_enter",
        libc::SYS_io_getevents => "io_getevents",
        libc::SYS_wait4 => "wait4",
        libc::SYS_accept => "accept",
        libc::SYS_accept4 => "accept4",
        libc::SYS_recvfrom => "recvfrom",
        libc::SYS_recvmsg => "recvmsg",
        libc::SYS_fsync => "fsync",
        libc::SYS_fdatasync => "fdatasync",
        libc::SYS_flock => "flock",
        libc::SYS_rt_sigtimedwait => "rt_sigtimedwait",
        _ => return format!("syscall {nr}"),
    };
    name.to_string()
}

fn ms(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e6)
}

fn percent(part: u64, whole: u64) -> String {
    format!("{:.1}%", if whole == 0 { 0.0 } else { part as f64 * 100.0 / whole as f64 })
}

/// One line of a list: count, total, longest, then the text.
fn line(out: &mut String, e: &Entry, text: &str) {
    let _ = writeln!(
        out,
        "  {:>8} {:>11} {:>11}  {text}",
        e.count.load(Relaxed),
        ms(e.total_ns.load(Relaxed)),
        ms(e.max_ns.load(Relaxed))
    );
}

fn top(kinds: &[Kind]) -> Vec<&'static Entry> {
    let mut v: Vec<&'static Entry> = sites::entries().filter(|e| kinds.iter().any(|&k| e.kind() == k as usize)).collect();
    v.sort_by_key(|e| core::cmp::Reverse((e.total_ns.load(Relaxed), e.count.load(Relaxed))));
    v
}

/// The report's text.
pub fn render(why: &str) -> String {
    let mut out = String::new();
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let _ = writeln!(out, "fiberize: ==== report (pid {pid}, {why}) ====");
    let mut names = crate::observe::symbols::Names::default();
    if !sites::on() {
        let _ = writeln!(out, "fiberize: no threads were created: nothing ran as a fiber");
        let _ = writeln!(out, "fiberize: ==== end of report ====");
        return out;
    }
    render_workers(&mut out);

    let _ = writeln!(out, "calls that blocked a worker (total and longest: from when the monitor caught it), slow file I/O:");
    let _ = writeln!(out, "  {:>8} {:>11} {:>11}  call -> program call site", "count", "total ms", "longest ms");
    let blocked = top(&[Kind::BlockedWorker, Kind::SlowFileIo]);
    for e in blocked.iter().take(TOP) {
        let text = if e.kind() == Kind::BlockedWorker as usize {
            let outer = match e.outer_site.load(Relaxed) {
                0 => String::new(),
                o => format!(" <- {}", names.name_of(o)),
            };
            format!(
                "{} in {} <- {}{outer}",
                syscall_name(e.detail.load(Relaxed)),
                names.name_of(e.pc.load(Relaxed) + 1),
                names.name_of(e.site.load(Relaxed))
            )
        } else {
            format!("slow file read/write (over 1 ms on the worker) <- {}", names.name_of(e.site.load(Relaxed)))
        };
        line(&mut out, e, &text);
    }
    if blocked.is_empty() {
        let _ = writeln!(out, "  (none)");
    }

    for (title, kinds) in [
        (
            "most contended locks (by total wait; named by the call site of the first contended wait):",
            &[Kind::Mutex, Kind::RwLock][..],
        ),
        ("condition variables waited on longest (includes threads idle until work comes):", &[Kind::Cond][..]),
    ] {
        let _ = writeln!(out, "{title}");
        let _ = writeln!(out, "  {:>8} {:>11} {:>11}  object <- program call site", "waits", "total ms", "longest ms");
        let list = top(kinds);
        for e in list.iter().take(TOP) {
            let what = match e.kind() {
                k if k == Kind::Mutex as usize => "mutex",
                k if k == Kind::RwLock as usize => "rwlock",
                _ => "condvar",
            };
            line(&mut out, e, &format!("{what} {:#x} <- {}", e.key(), names.name_of(e.site.load(Relaxed))));
        }
        if list.is_empty() {
            let _ = writeln!(out, "  (none)");
        }
    }

    let _ = writeln!(out, "fibers demoted to plain threads (blocked their worker again and again), by start routine:");
    let demoted = top(&[Kind::Demoted]);
    for e in &demoted {
        let _ = writeln!(out, "  {:>8}  {}", e.count.load(Relaxed), names.name_of(e.key() + 1));
    }
    if demoted.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    let _ = writeln!(
        out,
        "threads that never became fibers (real-time policy, too small a stack): {}",
        STATS.fibers_native_fallback.get()
    );
    let dropped = sites::DROPPED.load(Relaxed);
    if dropped > 0 {
        let _ = writeln!(out, "({dropped} records lost: the report's table was full)");
    }
    let _ = writeln!(out, "fiberize: ==== end of report ====");
    out
}

fn render_workers(out: &mut String) {
    let Some(rt) = scheduler::try_runtime() else { return };
    let now = sys::now_ns();
    let (mut running, mut idle, mut runtime) = (0, 0, 0);
    let mut per_worker = String::new();
    for w in rt.workers() {
        let born = w.times.born_ns.load(Relaxed);
        if born == 0 {
            continue;
        }
        let t = &w.times;
        let (r, i, x) = (t.running_samples.load(Relaxed), t.idle_samples.load(Relaxed), t.runtime_samples.load(Relaxed));
        running += r;
        idle += i;
        runtime += x;
        let all = r + i + x;
        let _ = writeln!(
            per_worker,
            "  worker {:>3} ({}, set {}): running {:>6} idle {:>6} runtime {:>6} of {:.1} s",
            w.index,
            w.state_name(),
            w.readiness_set(),
            percent(r, all),
            percent(i, all),
            percent(x, all),
            now.saturating_sub(born) as f64 / 1e9
        );
    }
    let _ = writeln!(
        out,
        "workers: {} target, {} spare workers started for blocked ones ({} times a worker was caught blocked)",
        rt.target(),
        STATS.workers_spawned.get(),
        STATS.workers_blocked.get()
    );
    let all = running + idle + runtime;
    let _ = writeln!(
        out,
        "worker time (sampled every 1 ms): running fibers {}, idle {}, in the runtime {}",
        percent(running, all),
        percent(idle, all),
        percent(runtime, all)
    );
    out.push_str(&per_worker);
    let _ = writeln!(out, "{}", locality_line());
}

/// Where fibers ran and who woke them: runs on another worker than the
/// previous one, wake-ups queued on another worker than the wakee's last, steals,
/// eventfd writes (worker wake-ups, ends of direct waits), `epoll_wait` calls on the
/// readiness set and the events per call. The report and the fiber dump print it.
pub fn locality_line() -> String {
    let runs = STATS.switches.get();
    let waits = STATS.epoll_waits.get();
    format!(
        "locality: {} runs, {} migrations ({}), {} cross-worker wake-ups, {} steals, {} eventfd writes, {} epoll_wait calls ({:.2} events per call), {} internal lock waits not taken for blocked",
        runs,
        STATS.migrations.get(),
        percent(STATS.migrations.get(), runs),
        STATS.cross_worker_wakes.get(),
        STATS.steals.get(),
        STATS.eventfd_writes.get(),
        waits,
        if waits == 0 { 0.0 } else { STATS.epoll_events.get() as f64 / waits as f64 },
        STATS.internal_lock_waits.get(),
    )
}

/// How long one blocked write of dump text waits for the descriptor to take more
/// before it tries again, and how many such waits a dump tolerates before it gives
/// the rest up. Origin: a terminal or a log file never makes a writer wait; a pipe
/// whose reader is a minute behind is as good as gone, and the dump thread must come
/// back for the next request.
const WRITE_RETRY_MS: i32 = 100;
const WRITE_MAX_RETRIES: u32 = 600;

/// Writes all of `bytes` to `fd` with raw system calls: retries after `EINTR`, waits
/// (bounded) while a non-blocking descriptor answers `EAGAIN`, gives up on errors.
pub fn write_all(fd: i32, bytes: &[u8]) {
    let mut done = 0;
    let mut retries = 0;
    while done < bytes.len() {
        let r = sys::write(fd, &bytes[done..]);
        if r == -(libc::EINTR as isize) {
            continue;
        }
        if r == -(libc::EAGAIN as isize) && retries < WRITE_MAX_RETRIES {
            retries += 1;
            let mut p = [libc::pollfd { fd, events: libc::POLLOUT, revents: 0 }];
            sys::poll(&mut p, WRITE_RETRY_MS);
            continue;
        }
        if r <= 0 {
            return;
        }
        done += r as usize;
    }
}
