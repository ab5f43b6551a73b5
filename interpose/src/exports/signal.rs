//! Signal-related exports: per-fiber masks and `sched_getcpu`.

use libc::{c_int, sigset_t};

use crate::gate::{fiber, set_errno};

mod real {
    use super::*;
    fiberize_rt::real_fns! {
        fn pthread_sigmask(how: c_int, set: *const sigset_t, old: *mut sigset_t) -> c_int;
        fn sigprocmask(how: c_int, set: *const sigset_t, old: *mut sigset_t) -> c_int;
        fn sched_getcpu() -> c_int;
        fn pthread_kill(t: libc::pthread_t, sig: c_int) -> c_int;
        fn raise(sig: c_int) -> c_int;
    }
}

/// # Safety
/// As glibc's `pthread_sigmask`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_sigmask(how: c_int, set: *const sigset_t, old: *mut sigset_t) -> c_int {
    match fiber() {
        Some(f) => fiberize_rt::signal::fiber_sigmask(f, how, set, old),
        // SAFETY: forwarded contract.
        None => unsafe { real::pthread_sigmask(how, set, old) },
    }
}

/// # Safety
/// As glibc's `sigprocmask` (in a multithreaded process: the calling thread's mask).
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sigprocmask(how: c_int, set: *const sigset_t, old: *mut sigset_t) -> c_int {
    match fiber() {
        Some(f) => match fiberize_rt::signal::fiber_sigmask(f, how, set, old) {
            0 => 0,
            e => {
                set_errno(e);
                -1
            }
        },
        // SAFETY: forwarded contract.
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
        return fiberize_rt::sys::getcpu();
    }
    // SAFETY: no arguments.
    unsafe { real::sched_getcpu() }
}

/// `pthread_kill`: a signal for a fiber is delivered to the fiber wherever it runs
/// (see `fiberize_rt::signal`), not to its sleeping donor.
///
/// # Safety
/// As glibc's `pthread_kill`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_kill(t: libc::pthread_t, sig: c_int) -> c_int {
    if crate::gate::enabled() {
        if let Some(f) = fiberize_rt::dump::find_by_pthread(t as usize) {
            return fiberize_rt::signal::kill_fiber(&f, sig);
        }
    }
    // SAFETY: forwarded contract.
    unsafe { real::pthread_kill(t, sig) }
}

/// `raise`: from a fiber, the signal goes to the kernel thread running it (glibc's
/// `raise` would target the donor's thread id, stored in the TCB).
///
/// # Safety
/// As glibc's `raise`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn raise(sig: c_int) -> c_int {
    if let Some(f) = fiber() {
        return match fiberize_rt::signal::raise_in_fiber(f, sig) {
            0 => 0,
            e => {
                set_errno(e);
                -1
            }
        };
    }
    // SAFETY: forwarded contract.
    unsafe { real::raise(sig) }
}
