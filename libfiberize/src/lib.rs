//! # fiberize runtime
//!
//! Runs the threads of an unmodified program as fibers on a pool of one worker OS
//! thread per CPU. This crate holds all the logic; the `interpose` crate turns it into
//! `libfiberize.so` with thin `extern "C"` exports.
//!
//! Map of the crate:
//!
//! | module        | what it owns                                                   |
//! |---------------|----------------------------------------------------------------|
//! | [`fiber`]     | the fiber object, "which fiber am I", donor stacks, park states |
//! | [`thread`]    | pthread_create/join/exit: donors and their zombie phase        |
//! | [`scheduler`] | workers, run queues, stealing, idle sleep, the monitor         |
//! | [`timer`]     | deadlines of sleeping and timed-waiting fibers                 |
//! | [`parking`]   | address-keyed waiter queues for fibers and threads             |
//! | [`mutex`], [`cond`], [`futex`], [`sleep`] | the blocking primitives        |
//! | [`real`]      | the table of real libc functions (`dlsym(RTLD_NEXT)`)          |
//! | [`sys`]       | raw system calls, FS base, futex, clocks (no exports, no TLS)  |
//! | [`rawlock`]   | the runtime's own futex lock                                   |
//! | [`config`], [`stats`], [`dump`], [`lifecycle`] | environment, counters, fiber dump, fork/exit hooks |
//! | [`watchdog`]  | the stall watchdog (`FIBERIZE_WATCHDOG`)                        |
//! | [`io`]        | readiness I/O: fd table, epoll reactor, blocking wrappers      |
//! | [`tz`]        | the mktime/tzset throttle                                      |
//! | [`signal`], [`handlers`] | per-fiber masks and kills; program handlers vs. the runtime's critical sections |
//!
//! Two invariants run through everything:
//! 1. The runtime never calls its own exports (docs/DESIGN.md §2.1): real functions come from
//!    [`real`], raw system calls from [`sys`], locks from [`rawlock`].
//! 2. Two OS threads never use one TLS block at once: a donor is TLS-free from the
//!    moment it hands its fiber to the pool until the fiber is gone.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod barrier;
pub mod cancel;
pub mod cond;
pub mod config;
pub mod dump;
pub mod fiber;
pub mod futex;
pub mod handlers;
pub mod io;
pub mod layout;
pub mod lifecycle;
pub mod mutex;
pub mod once;
pub mod parking;
pub mod preempt;
pub mod rawlock;
pub mod real;
pub mod rwlock;
pub mod scheduler;
pub mod sem;
pub mod signal;
pub mod sleep;
pub mod spin;
pub mod stats;
pub mod sys;
pub mod thread;
pub mod time;
pub mod timer;
pub mod tz;
pub mod watchdog;

/// Aborts the process with `fiberize: fatal: <parts>` on stderr. For runtime bugs and
/// broken installations only; a program's bad argument gets an error code instead.
/// TLS-free, so it is usable on a donor's hand-off path.
#[cold]
pub fn fatal(parts: &[&str]) -> ! {
    sys::write_stderr(b"fiberize: fatal: ");
    for p in parts {
        sys::write_stderr(p.as_bytes());
    }
    sys::write_stderr(b"\n");
    // SAFETY: abort has no preconditions.
    unsafe { libc::abort() }
}
