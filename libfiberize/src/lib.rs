//! # fiberize runtime
//!
//! Runs the threads of an unmodified program as fibers on a pool of one worker OS
//! thread per CPU. This crate holds all the logic; the `interpose` crate turns it into
//! `libfiberize.so` with thin `extern "C"` exports.
//!
//! # Layers
//!
//! The folders are the layers; each imports only the ones above it in this table
//! (checked by `scripts/layers.py`, run by the test suite):
//!
//! | layer | folder        | what it owns                                                   |
//! |-------|---------------|----------------------------------------------------------------|
//! | 0     | [`base`]      | raw system calls, real libc symbols, config, stats, time, glibc layouts, the runtime lock, the signal shield |
//! | 1     | [`runtime`]   | fibers and donors, workers and queues, timers, idle epoll, preemption, the fiber registry, hooks |
//! | 2     | [`observe`]   | the fiber dump and the stall watchdog                          |
//! | 3     | [`signal`]    | per-fiber masks and kills, program handlers, cancellation      |
//! | 4     | [`sync`]      | the parking lot and every blocking primitive on it             |
//! | 5     | [`io`]        | readiness I/O: fd table, fd registration, blocking wrappers    |
//! | 6     | [`thread`]    | pthread create/join/exit, fork/vfork, process exit             |
//! | –     | [`tz`]        | the mktime/tzset throttle (on [`base`] only)                   |
//!
//! The core never calls up: what a layer above does at a switch, at a fiber's end or
//! when the pool starts, it registers in [`runtime::fibers::hooks`] (installed by [`thread`]
//! when it starts the pool).
//!
//! Two invariants run through everything:
//! 1. The runtime never calls its own exports (docs/DESIGN.md §2.1): real functions come from
//!    [`base::real`], raw system calls from [`base::sys`], locks from [`base::rawlock`].
//! 2. Two OS threads never use one TLS block at once: a donor is TLS-free from the
//!    moment it hands its fiber to the pool until the fiber is gone.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod base;
pub mod io;
pub mod observe;
pub mod runtime;
pub mod signal;
pub mod sync;
pub mod thread;
pub mod tz;

/// Aborts the process with `fiberize: fatal: <parts>` on stderr. For runtime bugs and
/// broken installations only; a program's bad argument gets an error code instead.
/// TLS-free, so it is usable on a donor's hand-off path.
#[cold]
pub fn fatal(parts: &[&str]) -> ! {
    base::sys::write_stderr(b"fiberize: fatal: ");
    for p in parts {
        base::sys::write_stderr(p.as_bytes());
    }
    base::sys::write_stderr(b"\n");
    // SAFETY: abort has no preconditions.
    unsafe { libc::abort() }
}
