//! Signals sent to the process, handed to a fiber.
//!
//! `kill(getpid(), sig)`, `sigqueue`, another process's `kill`, a POSIX timer or the
//! kernel (`SIGCHLD`) send a signal to the *process*: the kernel gives it to one
//! thread that does not block it (the main thread first, then any), and if that thread
//! sleeps in an interruptible call the call returns `EINTR` (or restarts under
//! `SA_RESTART`). Under the preload the kernel's threads are the plain ones (main,
//! demoted fibers), the workers, the donors and the monitor (both of which block every
//! signal); a fiber is a candidate only while a worker runs it (the worker's mask is
//! then the fiber's). So a fiber parked in `read`, `accept`, `nanosleep` or `sem_wait`,
//! the only thread that leaves the signal unblocked, never gets it from the kernel:
//! - where the workers' own mask (the program's when the pool started) lets it
//!   through, the kernel picks a worker in scheduler context, and the program's
//!   handler ran there, for no thread of the program;
//! - where it blocks it too, the signal stays pending for the process while the fiber
//!   sleeps on.
//!
//! Both now end the same way as `pthread_kill` (`delivery::kill_fiber`): the signal is
//! held for one fiber that does not block it, which is unparked (kicked if running,
//! its donor wait interrupted); the fiber runs the handler on its way out of its wait,
//! and the wait ends as the kernel ends it. The fiber chosen: a running one first (the
//! kernel would have picked its worker), else the first in the registry; never a
//! plain thread (one that accepted the signal would have got it from the kernel).
//!
//! ```text
//!   kill(pid, sig)
//!     ├─ a worker running a fiber that accepts it ──> handler on that fiber (kernel)
//!     ├─ a worker in scheduler context accepts it ──> trampoline (deferred by the
//!     │     shield to the worker's safe point) ──> route_from_worker: held for a fiber
//!     └─ nobody accepts it: pending for the process ──> monitor, once a tick:
//!           route_pending: sigpending ∩ program handlers, a fiber accepts it?
//!             yes: rt_sigtimedwait takes it, held for that fiber; no: stays pending
//! ```
//!
//! The worker's route (`delivery::route_from_worker`, beside `kill_fiber`: the
//! trampoline calls it, and this file stays outside the circle of the signal files
//! that call each other) runs in its trampoline at the worker's safe point (the shield
//! defers every program signal that lands in scheduler context to it, and an idle
//! wait returns `EINTR` to reach it): no runtime lock is held and no queue operation is
//! in progress on that kernel thread, so taking the registry's lock and unparking are
//! safe there, as they are for any fiber's handler. The monitor's route is plain code
//! on the monitor: one `rt_sigpending` a tick, and only while the program has a handler
//! installed (signals without one take their default action or are ignored, and
//! `sigwait` takes them on its donor). A monitor that dozes (a quiet pool) looks at
//! most 50 ms late.
//!
//! A handed-on signal stays the process's until the fiber takes it: a fiber that
//! blocks it, ends or leaves for its donor first gives it back with `kill`, for the
//! kernel to give another thread (`delivery::hand_process_signal`, which also has the
//! race with the fiber's new mask).
//!
//! Not covered: a signal nobody accepts that reaches a worker in scheduler context
//! (its mask lets it through because the program blocked it only after the pool
//! started) runs its handler there, as before, instead of staying pending for the
//! process: re-sending it would hand it to the next worker, and so on. A signal the
//! monitor hands on loses its siginfo (the fiber's handler sees `SI_TKILL` from its own
//! process), and real-time signals queued several times reach the fiber once per look.

use crate::base::sys;

/// The monitor's look (module docs): takes each signal pending for the process that
/// has a program handler and that a fiber accepts, and holds it for that fiber. A
/// signal no fiber accepts stays pending, where `sigpending` shows it and where the
/// kernel delivers it to the first thread (or fiber on its worker) that unblocks it.
pub fn route_pending() {
    // Each tick: one load, and a `sigpending` only once the program has a handler; the
    // table itself is read only for a signal found pending.
    let maybe_handled = crate::signal::handlers::maybe_handled_signals();
    if maybe_handled == 0 {
        return;
    }
    // The monitor blocks every signal: its pending set is the process's (and its own,
    // which nobody signals).
    let mut pending = sys::sigpending() & maybe_handled;
    if pending == 0 {
        return;
    }
    pending &= crate::signal::handlers::handled_signals();
    let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    for bit in 0..64 {
        let one = 1u64 << bit;
        if pending & one == 0 {
            continue;
        }
        let sig = bit + 1;
        let Some(target) = crate::signal::delivery::accepting_fiber(sig) else { continue };
        // SAFETY: no siginfo is asked for; a zero timeout only takes what is pending.
        if unsafe { sys::rt_sigtimedwait(one, core::ptr::null_mut(), Some(&zero)) } != sig as isize {
            continue; // a thread that unblocked it took it meanwhile
        }
        crate::signal::delivery::hand_process_signal(&target, sig);
    }
}
