//! Signal-related and per-thread-identity exports: per-fiber masks, thread-directed
//! signals, handler installation, `sched_getcpu`, the calling thread's CPU affinity,
//! thread ids (`gettid`, `tgkill`; a fiber's is its donor's, see
//! `fiberize_rt::thread::tid`).

use libc::{c_int, sigset_t};

use crate::gate::{fiber, set_errno};

mod real {
    use super::*;
    pub use fiberize_rt::base::real::pthread_sigmask;
    fiberize_rt::real_fns! {
        fn sigprocmask(how: c_int, set: *const sigset_t, old: *mut sigset_t) -> c_int;
        fn sched_getcpu() -> c_int;
        fn pthread_kill(t: libc::pthread_t, sig: c_int) -> c_int;
        fn pthread_sigqueue(t: libc::pthread_t, sig: c_int, value: libc::sigval) -> c_int;
        fn sched_setaffinity(pid: libc::pid_t, n: libc::size_t, set: *const libc::cpu_set_t) -> c_int;
        fn sched_getaffinity(pid: libc::pid_t, n: libc::size_t, set: *mut libc::cpu_set_t) -> c_int;
        fn pthread_setaffinity_np(t: libc::pthread_t, n: libc::size_t, set: *const libc::cpu_set_t) -> c_int;
        fn pthread_getaffinity_np(t: libc::pthread_t, n: libc::size_t, set: *mut libc::cpu_set_t) -> c_int;
        fn raise(sig: c_int) -> c_int;
        fn tgkill(tgid: libc::pid_t, tid: libc::pid_t, sig: c_int) -> c_int;
        fn setpriority(which: c_int, who: libc::id_t, prio: c_int) -> c_int;
        fn getpriority(which: c_int, who: libc::id_t) -> c_int;
        fn sigwait(set: *const sigset_t, sig: *mut c_int) -> c_int;
        fn sigwaitinfo(set: *const sigset_t, info: *mut libc::siginfo_t) -> c_int;
        fn sigtimedwait(set: *const sigset_t, info: *mut libc::siginfo_t, t: *const libc::timespec) -> c_int;
        fn sigpending(set: *mut sigset_t) -> c_int;
        fn bsd_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t;
        fn sysv_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t;
    }
}

/// # Safety
/// As glibc's `pthread_sigmask`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_sigmask(how: c_int, set: *const sigset_t, old: *mut sigset_t) -> c_int {
    match fiber() {
        // SAFETY: `set` and `old` are null or point to sigset_t (pthread_sigmask's contract, this fn's # Safety), which is
        // what `fiber_sigmask` reads and writes.
        Some(f) => unsafe { fiberize_rt::signal::mask::fiber_sigmask(f, how, set, old) },
        // SAFETY: a plain thread: glibc's pthread_sigmask gets the program's `set`/`old`, null or valid as it requires.
        None => unsafe { real::pthread_sigmask(how, set, old) },
    }
}

/// # Safety
/// As glibc's `sigprocmask` (in a multithreaded process: the calling thread's mask).
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sigprocmask(how: c_int, set: *const sigset_t, old: *mut sigset_t) -> c_int {
    match fiber() {
        // SAFETY: `set` and `old` are null or point to sigset_t (sigprocmask's contract), as `fiber_sigmask` requires.
        Some(f) => match unsafe { fiberize_rt::signal::mask::fiber_sigmask(f, how, set, old) } {
            0 => 0,
            e => {
                set_errno(e);
                -1
            }
        },
        // SAFETY: a plain thread: glibc's sigprocmask gets the program's `set`/`old`, null or valid as it requires.
        None => unsafe { real::sigprocmask(how, set, old) },
    }
}

/// The CPU of the worker that runs the caller (glibc's version reads the rseq area of
/// the TCB, which for a fiber is its sleeping donor's).
///
/// # Safety
/// No preconditions.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sched_getcpu() -> c_int {
    if crate::gate::enabled() {
        return fiberize_rt::base::sys::getcpu();
    }
    // SAFETY: no arguments.
    unsafe { real::sched_getcpu() }
}

/// `pthread_kill`: a signal for a fiber is delivered to the fiber wherever it runs
/// (see `fiberize_rt::signal::delivery`), not to its sleeping donor.
///
/// # Safety
/// As glibc's `pthread_kill`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_kill(t: libc::pthread_t, sig: c_int) -> c_int {
    if crate::gate::enabled() {
        if let Some(f) = fiberize_rt::runtime::fibers::registry::find_by_pthread(t as usize) {
            return fiberize_rt::signal::delivery::kill_fiber(&f, sig);
        }
    }
    // SAFETY: `t` is a thread the program created and has not joined (pthread_kill's contract); glibc's pthread_kill
    // needs that.
    unsafe { real::pthread_kill(t, sig) }
}

/// `pthread_sigqueue`: a signal for a fiber is queued to the fiber with its siginfo
/// (`SI_QUEUE`, `si_value`), as `pthread_kill` delivers to it
/// (`fiberize_rt::thread::tid::sigqueue_fiber`), not to its sleeping donor.
///
/// # Safety
/// As glibc's `pthread_sigqueue`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_sigqueue(t: libc::pthread_t, sig: c_int, value: libc::sigval) -> c_int {
    if crate::gate::enabled() {
        if let Some(f) = fiberize_rt::runtime::fibers::registry::find_by_pthread(t as usize) {
            return fiberize_rt::thread::tid::sigqueue_fiber(&f, sig, value);
        }
    }
    // SAFETY: `t` is a thread the program created and has not joined (pthread_sigqueue's contract).
    unsafe { real::pthread_sigqueue(t, sig, value) }
}

/// `timer_create` with `SIGEV_THREAD_ID` naming a fiber's tid: the expiries reach the
/// fiber, with the timer's siginfo (`fiberize_rt::thread::timers`); any other timer is
/// glibc's.
///
/// # Safety
/// As glibc's `timer_create`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn timer_create(clock: libc::clockid_t, sev: *mut libc::sigevent, timer: *mut libc::timer_t) -> c_int {
    if crate::gate::enabled() {
        // SAFETY: `sev` is null or a readable sigevent and `timer` writable (timer_create's contract), what `create`
        // requires.
        match unsafe { fiberize_rt::thread::timers::create(clock, sev, timer) } {
            Some(Ok(())) => return 0,
            Some(Err(e)) => {
                set_errno(e);
                return -1;
            }
            None => {}
        }
    }
    // SAFETY: the program's arguments, as glibc's timer_create requires them.
    unsafe { fiberize_rt::base::real::timer_create(clock, sev, timer) }
}

/// `timer_delete`: also forgets a timer relayed to a fiber.
///
/// # Safety
/// As glibc's `timer_delete`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn timer_delete(timer: libc::timer_t) -> c_int {
    if crate::gate::enabled() {
        fiberize_rt::thread::timers::delete(timer);
    }
    // SAFETY: a timer of the program (timer_delete's contract).
    unsafe { fiberize_rt::base::real::timer_delete(timer) }
}

/// `raise`: from a fiber, the signal goes to the kernel thread running it (glibc's
/// `raise` would target the donor's thread id, stored in the TCB).
///
/// # Safety
/// As glibc's `raise`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn raise(sig: c_int) -> c_int {
    if let Some(f) = fiber() {
        return match fiberize_rt::signal::delivery::raise_in_fiber(f, sig) {
            0 => 0,
            e => {
                set_errno(e);
                -1
            }
        };
    }
    // SAFETY: raise has no pointer arguments; glibc's raise takes any signal number (EINVAL for a bad one).
    unsafe { real::raise(sig) }
}

/// `gettid`: a fiber's is its donor's (glibc's TCB says the same), not the worker's
/// that other fibers share.
///
/// # Safety
/// No preconditions.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn gettid() -> libc::pid_t {
    fiberize_rt::thread::tid::gettid()
}

/// `tgkill` to a fiber's tid reaches the fiber as `pthread_kill` does; any other
/// target goes to glibc (the kernel).
///
/// # Safety
/// As glibc's `tgkill`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn tgkill(tgid: libc::pid_t, tid: libc::pid_t, sig: c_int) -> c_int {
    if crate::gate::enabled() {
        match fiberize_rt::thread::tid::signal_thread(Some(tgid), tid, sig) {
            Some(0) => return 0,
            Some(e) => {
                set_errno(e);
                return -1;
            }
            None => {}
        }
    }
    // SAFETY: tgkill takes no pointers.
    unsafe { real::tgkill(tgid, tid, sig) }
}

/// `sched_setaffinity(0, …)` from a fiber means "this thread": that is the fiber's
/// donor (whose `pthread_t` the fiber carries), not the worker it happens to run on,
/// which other fibers share. The program reads the same mask back; workers stay free.
///
/// # Safety
/// As glibc's `sched_setaffinity`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sched_setaffinity(pid: libc::pid_t, n: libc::size_t, set: *const libc::cpu_set_t) -> c_int {
    if pid == 0 && fiber().is_some() {
        // SAFETY: pthread_self() is the fiber's donor, a live thread; `set` points to `n` bytes of cpu_set_t
        // (sched_setaffinity's contract), what pthread_setaffinity_np reads.
        return match unsafe { real::pthread_setaffinity_np(libc::pthread_self(), n, set) } {
            0 => 0,
            e => {
                set_errno(e);
                -1
            }
        };
    }
    // SAFETY: `set` points to `n` readable bytes (sched_setaffinity's contract), which glibc's sched_setaffinity
    // reads.
    unsafe { real::sched_setaffinity(pid, n, set) }
}

/// See [`sched_setaffinity`].
///
/// # Safety
/// As glibc's `sched_getaffinity`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sched_getaffinity(pid: libc::pid_t, n: libc::size_t, set: *mut libc::cpu_set_t) -> c_int {
    if pid == 0 && fiber().is_some() {
        // SAFETY: as above.
        return match unsafe { real::pthread_getaffinity_np(libc::pthread_self(), n, set) } {
            0 => 0,
            e => {
                set_errno(e);
                -1
            }
        };
    }
    // SAFETY: `set` points to `n` writable bytes (sched_getaffinity's contract), which glibc's sched_getaffinity
    // fills.
    unsafe { real::sched_getaffinity(pid, n, set) }
}

/// `setpriority(PRIO_PROCESS, 0 or gettid(), …)` from a fiber sets the nice value of
/// the calling thread, i.e. its donor, not the worker that other fibers share (Linux
/// applies PRIO_PROCESS to one thread). Other targets are passed on unchanged.
///
/// # Safety
/// As glibc's `setpriority`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn setpriority(which: c_int, who: libc::id_t, prio: c_int) -> c_int {
    // SAFETY: setpriority takes no pointers; `priority_target` only changes which tid it names.
    unsafe { real::setpriority(which, fiberize_rt::thread::pthread::priority_target(which, who), prio) }
}

/// See [`setpriority`].
///
/// # Safety
/// As glibc's `getpriority`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn getpriority(which: c_int, who: libc::id_t) -> c_int {
    // SAFETY: getpriority takes no pointers; `priority_target` only changes which tid it names.
    unsafe { real::getpriority(which, fiberize_rt::thread::pthread::priority_target(which, who)) }
}

// ---- Waiting for signals: a fiber waits on its donor in slices, taking signals held
// ---- for it and acting on cancellation (`fiberize_rt::signal::donor_waits::fiber_sigtimedwait`).

/// # Safety
/// As glibc's `sigwait`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sigwait(set: *const sigset_t, sig: *mut c_int) -> c_int {
    match fiber() {
        // SAFETY: the caller passes a valid set (glibc reads it unchecked too); no info.
        Some(f) => match unsafe { fiberize_rt::signal::donor_waits::fiber_sigtimedwait(f, &*set, core::ptr::null_mut(), None) } {
            s if s > 0 => {
                // SAFETY: the caller's out-parameter.
                unsafe { *sig = s };
                0
            }
            e => -e,
        },
        // SAFETY: a plain thread: `set` is a sigset_t and `sig` a writable int, as sigwait requires of the program.
        None => unsafe { real::sigwait(set, sig) },
    }
}

/// # Safety
/// As glibc's `sigwaitinfo`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sigwaitinfo(set: *const sigset_t, info: *mut libc::siginfo_t) -> c_int {
    match fiber() {
        // SAFETY: a valid set as in `sigwait`; `info` null or writable (caller's contract).
        Some(f) => signal_or_errno(unsafe { fiberize_rt::signal::donor_waits::fiber_sigtimedwait(f, &*set, info, None) }),
        // SAFETY: a plain thread: `set` is a sigset_t and `info` null or writable (sigwaitinfo's contract), passed as they
        // came.
        None => unsafe { real::sigwaitinfo(set, info) },
    }
}

/// # Safety
/// As glibc's `sigtimedwait`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sigtimedwait(set: *const sigset_t, info: *mut libc::siginfo_t, t: *const libc::timespec) -> c_int {
    let Some(f) = fiber() else {
        // SAFETY: a plain thread: `set`, `info` and `t` are as sigtimedwait requires (its contract with the program).
        return unsafe { real::sigtimedwait(set, info, t) };
    };
    // SAFETY: `t` is null or valid (caller's contract).
    let timeout = match unsafe { t.as_ref() } {
        None => None,
        Some(ts) if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) => return signal_or_errno(-libc::EINVAL),
        Some(ts) => Some(fiberize_rt::base::sys::timespec_to_ns(ts)),
    };
    // SAFETY: as in `sigwaitinfo`.
    signal_or_errno(unsafe { fiberize_rt::signal::donor_waits::fiber_sigtimedwait(f, &*set, info, timeout) })
}

/// A signal number, or -1 with errno from a negative error number.
fn signal_or_errno(r: c_int) -> c_int {
    if r > 0 {
        r
    } else {
        set_errno(-r);
        -1
    }
}

// ---- Handler installation: the kernel gets fiberize's trampoline, the program keeps
// ---- seeing its own handler (see `fiberize_rt::signal::handlers`).

/// # Safety
/// As glibc's `sigaction`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    if crate::gate::enabled() {
        // SAFETY: `act` and `old` are null or point to struct sigaction (sigaction's contract), what `program_sigaction`
        // reads and writes.
        return unsafe { fiberize_rt::signal::handlers::program_sigaction(sig, act, old) };
    }
    // SAFETY: the runtime's own or an unknown signal: glibc's sigaction gets the program's `act`/`old`, null or valid.
    unsafe { fiberize_rt::base::real::sigaction(sig, act, old) }
}

/// `siginterrupt`: glibc's sets `SA_RESTART` through its internal `__sigaction`, which
/// the library never sees, so a fiber's restart rule kept the old flag (found by
/// CPython's `test_siginterrupt_off`; docs/RESULTS.md#signal-fixes). Here it is a read and a write of the
/// program's action through [`sigaction`], as POSIX describes it.
///
/// # Safety
/// As glibc's `siginterrupt` (no pointers).
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn siginterrupt(sig: c_int, interrupt: c_int) -> c_int {
    // SAFETY: all-zero is a valid `struct sigaction` to be filled in.
    let mut act: libc::sigaction = unsafe { core::mem::zeroed() };
    // SAFETY: `act` is a valid out-parameter; a bad `sig` fails with EINVAL, as glibc's does.
    if unsafe { sigaction(sig, core::ptr::null(), &mut act) } < 0 {
        return -1;
    }
    if interrupt != 0 {
        act.sa_flags &= !libc::SA_RESTART;
    } else {
        act.sa_flags |= libc::SA_RESTART;
    }
    // SAFETY: `act` is the program's own action, read just above, with one flag changed.
    unsafe { sigaction(sig, &act, core::ptr::null_mut()) }
}

/// `signal` with glibc's (BSD) semantics: `SA_RESTART`, the signal blocked in its handler.
///
/// # Safety
/// As glibc's `signal`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: `signal` is glibc's alias of `bsd_signal`: same arguments (a signal number, a handler value), no
    // pointers read.
    unsafe { bsd_signal(sig, handler) }
}

/// # Safety
/// As glibc's `bsd_signal`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn bsd_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    if crate::gate::enabled() {
        // SAFETY: `handler` is SIG_DFL, SIG_IGN or a handler function of the program (bsd_signal's contract), as
        // `program_signal` installs it.
        return unsafe { fiberize_rt::signal::handlers::program_signal(sig, handler, libc::SA_RESTART, true) };
    }
    // SAFETY: a signal the runtime does not wrap: glibc's bsd_signal gets the program's number and handler.
    unsafe { real::bsd_signal(sig, handler) }
}

/// `sysv_signal`: one-shot, not blocked in its handler, no restart.
///
/// # Safety
/// As glibc's `sysv_signal`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sysv_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    if crate::gate::enabled() {
        // SAFETY: `handler` is SIG_DFL, SIG_IGN or a function of the program (sysv_signal's contract), which
        // `program_signal` installs.
        return unsafe {
            fiberize_rt::signal::handlers::program_signal(sig, handler, libc::SA_RESETHAND | libc::SA_NODEFER, false)
        };
    }
    // SAFETY: a signal the runtime does not wrap: glibc's sysv_signal gets the program's number and handler.
    unsafe { real::sysv_signal(sig, handler) }
}

/// # Safety
/// As glibc's `__sysv_signal`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __sysv_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: `__sysv_signal` is glibc's alias of `sysv_signal`, with the same contract.
    unsafe { sysv_signal(sig, handler) }
}

/// `sigpending`: for a fiber, the signals held for it (sent to it while blocked) as
/// well as what the kernel holds for the process and the worker it runs on.
///
/// # Safety
/// As glibc's `sigpending`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sigpending(set: *mut sigset_t) -> c_int {
    // SAFETY: `set` points to a writable sigset_t (sigpending's contract), which glibc's sigpending fills.
    let r = unsafe { real::sigpending(set) };
    if r == 0 {
        if let Some(f) = fiber() {
            // SAFETY: `set` is valid (the real call just filled it).
            unsafe { fiberize_rt::signal::delivery::add_held_signals(f, &mut *set) };
        }
    }
    r
}
