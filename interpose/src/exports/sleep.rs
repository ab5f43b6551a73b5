//! Sleep and yield exports. Only fibers are affected; plain threads get glibc's calls.

use libc::{c_int, c_uint, clockid_t, timespec, useconds_t};

use crate::gate::{fiber, set_errno};
use fiberize_rt::runtime::scheduler;
use fiberize_rt::sync::sleep;

mod real {
    use super::*;
    pub use fiberize_rt::base::real::sched_yield;
    fiberize_rt::real_fns! {
        fn nanosleep(req: *const timespec, rem: *mut timespec) -> c_int;
        fn clock_nanosleep(c: clockid_t, flags: c_int, req: *const timespec, rem: *mut timespec) -> c_int;
        fn usleep(us: useconds_t) -> c_int;
        fn sleep(s: c_uint) -> c_uint;
    }
}

/// # Safety
/// As glibc's `sched_yield`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sched_yield() -> c_int {
    if fiber().is_some() {
        scheduler::yield_now();
        return 0;
    }
    // SAFETY: no arguments.
    unsafe { real::sched_yield() }
}

/// Deprecated glibc alias of `sched_yield` (sysbench, older programs).
///
/// # Safety
/// As glibc's `pthread_yield`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_yield() -> c_int {
    // SAFETY: no arguments.
    unsafe { sched_yield() }
}

/// # Safety
/// As glibc's `nanosleep`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn nanosleep(req: *const timespec, rem: *mut timespec) -> c_int {
    let Some(f) = fiber() else {
        // SAFETY: a plain thread: glibc's nanosleep gets `req` (a timespec) and `rem` (null or
        // writable) as its contract has them.
        return unsafe { real::nanosleep(req, rem) };
    };
    // SAFETY: `req` points to a timespec and `rem` is null or writable (nanosleep's contract),
    // which `sleep::nanosleep` reads and writes.
    match unsafe { sleep::nanosleep(f, req, rem) } {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// # Safety
/// As glibc's `clock_nanosleep`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn clock_nanosleep(c: clockid_t, flags: c_int, req: *const timespec, rem: *mut timespec) -> c_int {
    if let Some(f) = fiber() {
        // SAFETY: `req` points to a timespec and `rem` is null or writable (clock_nanosleep's
        // contract), as `sleep::clock_nanosleep` requires.
        if let Some(r) = unsafe { sleep::clock_nanosleep(f, c, flags, req, rem) } {
            return r;
        }
    }
    // SAFETY: a plain thread or a clock we leave to the kernel: glibc gets the program's
    // `req`/`rem`, valid per its contract.
    unsafe { real::clock_nanosleep(c, flags, req, rem) }
}

/// # Safety
/// As glibc's `usleep`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn usleep(us: useconds_t) -> c_int {
    let Some(f) = fiber() else {
        // SAFETY: no pointer arguments.
        return unsafe { real::usleep(us) };
    };
    let ts = timespec { tv_sec: (us / 1_000_000) as libc::time_t, tv_nsec: ((us % 1_000_000) * 1000) as libc::c_long };
    // SAFETY: a valid local timespec, no remainder wanted.
    match unsafe { sleep::nanosleep(f, &ts, core::ptr::null_mut()) } {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// # Safety
/// As glibc's `sleep`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sleep(s: c_uint) -> c_uint {
    let Some(f) = fiber() else {
        // SAFETY: no pointer arguments.
        return unsafe { real::sleep(s) };
    };
    let ts = timespec { tv_sec: s as libc::time_t, tv_nsec: 0 };
    let mut rem = timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid local timespecs.
    match unsafe { sleep::nanosleep(f, &ts, &mut rem) } {
        Ok(()) => 0,
        // Unslept seconds, rounded up as glibc does.
        Err(_) => (rem.tv_sec + (rem.tv_nsec > 0) as libc::time_t) as c_uint,
    }
}
