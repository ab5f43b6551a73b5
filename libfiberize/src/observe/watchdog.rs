//! The stall watchdog: `FIBERIZE_WATCHDOG=SECONDS` prints the fiber dump (to stderr, or
//! appended to `FIBERIZE_WATCHDOG_FILE`) when the runtime stands still:
//!
//! * **no switch while fibers wait to run**: no worker switched to a fiber for
//!   SECONDS (the sum of the workers' `progress` counters did not move) while some
//!   fiber was runnable the whole time (queued, not running: its life is `runnable`);
//! * **a long wait on a runtime-internal lock**: somebody has been asleep in a
//!   contended [`RawMutex`](crate::base::rawlock::RawMutex) for SECONDS (those critical
//!   sections are a few dozen instructions; a long wait means a holder that was
//!   descheduled for good, a lock taken in a signal handler, or a lost unlock).
//!
//! The dump is printed once per stall, with a first line saying which condition
//! fired; the watchdog re-arms when the condition has cleared. It runs on its own
//! runtime thread (every signal blocked, nothing else to do), which looks every
//! `SECONDS / 8` (at least every 10 ms, at most every 250 ms), holds no runtime lock
//! while it decides, and prints through [`crate::observe::dump::write_dump`] (no lock held while
//! writing). Off by default: it costs one thread and a registry scan per look.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::base::rawlock;
use crate::base::sys;
use crate::runtime::fibers::fiber::Life;
use crate::runtime::scheduler;

/// The limit in ns (0: the watchdog is off).
static LIMIT_NS: AtomicU64 = AtomicU64::new(0);

/// Starts the watchdog thread if `FIBERIZE_WATCHDOG` asks for it (once, with the pool).
pub fn start() {
    let limit = crate::base::config::config().watchdog_ns;
    if limit == 0 {
        return;
    }
    if LIMIT_NS.swap(limit, Ordering::AcqRel) != 0 {
        return;
    }
    rawlock::track_contended_waits();
    scheduler::spawn_runtime_thread(watchdog_main, core::ptr::null_mut());
}

/// Opens `FIBERIZE_WATCHDOG_FILE` for appending (raw system calls: `open` may be one
/// of our exports), or stderr. Transient (an opt-in report): see `metrics::write_file`.
fn output_fd() -> (i32, bool) {
    let Some(path) = crate::base::config::config().watchdog_file else {
        return (2, false);
    };
    match crate::base::own_fds::open_append(path) {
        Some(fd) => (fd, true),
        None => (2, false),
    }
}

fn report(reason: &str) {
    let (fd, close) = output_fd();
    crate::observe::dump::write_dump(fd, Some(reason));
    if close {
        crate::base::own_fds::close(fd);
    }
}

/// Fibers queued to run (life `runnable`), from the registry.
fn runnable_fibers() -> usize {
    crate::runtime::fibers::registry::count_in_life(Life::Runnable)
}

fn total_switches(rt: &scheduler::Runtime) -> u64 {
    rt.workers().iter().map(|w| w.progress.load(Ordering::Relaxed)).fold(0, u64::wrapping_add)
}

extern "C" fn watchdog_main(_: *mut libc::c_void) -> *mut libc::c_void {
    let limit = LIMIT_NS.load(Ordering::Acquire);
    let period = (limit / 8).clamp(10_000_000, 250_000_000);
    let rt = scheduler::runtime();
    let mut last_switches = total_switches(rt);
    // Since when no switch happened while fibers were runnable (None: not stalled).
    let mut stalled_since: Option<u64> = None;
    let mut stall_reported = false;
    let mut lock_reported = false;
    loop {
        let word = core::sync::atomic::AtomicU32::new(0);
        sys::futex_wait(&word, 0, Some(sys::now_ns() + period));
        let now = sys::now_ns();

        let switches = total_switches(rt);
        let moved = switches != last_switches;
        last_switches = switches;
        let runnable = if moved { 0 } else { runnable_fibers() };
        if moved || runnable == 0 {
            stalled_since = None;
            stall_reported = false;
        } else {
            let since = *stalled_since.get_or_insert(now);
            if !stall_reported && now - since >= limit {
                stall_reported = true;
                report(&format!(
                    "watchdog: no fiber switch for {} ms while {} fibers are runnable",
                    (now - since) / 1_000_000,
                    runnable
                ));
            }
        }

        match rawlock::oldest_contended_wait() {
            Some(start) if now.saturating_sub(start) >= limit => {
                if !lock_reported {
                    lock_reported = true;
                    report(&format!(
                        "watchdog: a thread has waited {} ms for a runtime-internal lock",
                        (now - start) / 1_000_000
                    ));
                }
            }
            Some(_) => {}
            None => lock_reported = false,
        }
    }
}
