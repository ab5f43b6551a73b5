//! Unnamed-semaphore exports (`sem_init`, `sem_destroy`, `sem_wait`, `sem_trywait`,
//! `sem_timedwait`, `sem_clockwait`, `sem_post`, `sem_getvalue`). Named semaphores
//! (`sem_open`, `sem_close`, `sem_unlink`) are not interposed; the semaphores they
//! return are process-shared, and the functions below hand those to glibc (see
//! `fiberize_rt::sync::sem` for the rule). They return 0, or -1 with errno, like glibc.

use core::ptr;

use libc::{c_int, c_uint, clockid_t, sem_t, timespec};

use crate::gate::{enabled, set_errno};
use fiberize_rt::sync::sem::api::{self, Outcome};

/// glibc's own functions, declared once where the runtime needs them too.
use fiberize_rt::sync::sem::api::real;

/// glibc's return convention.
#[inline]
fn ret(o: Outcome) -> c_int {
    match o {
        Outcome::Ours(Ok(())) => 0,
        Outcome::Ours(Err(e)) => {
            set_errno(e);
            -1
        }
        Outcome::Real(r) => r,
    }
}

/// # Safety
/// As glibc's `sem_init`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sem_init(s: *mut sem_t, pshared: c_int, v: c_uint) -> c_int {
    // SAFETY: `s` is storage for a sem_t (sem_init's contract, this fn's # Safety), which
    // `api::init` and glibc's sem_init initialise.
    unsafe {
        if enabled() {
            ret(api::init(s, pshared, v))
        } else {
            real::sem_init(s, pshared, v)
        }
    }
}

/// # Safety
/// As glibc's `sem_destroy`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sem_destroy(s: *mut sem_t) -> c_int {
    // SAFETY: `s` is a semaphore the program initialised and no thread waits on (sem_destroy's
    // contract), as `api::destroy` requires.
    unsafe {
        if enabled() {
            ret(api::destroy(s))
        } else {
            real::sem_destroy(s)
        }
    }
}

/// # Safety
/// As glibc's `sem_wait`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sem_wait(s: *mut sem_t) -> c_int {
    // SAFETY: `s` is an initialised sem_t (sem_wait's contract), which `api::wait` without a
    // deadline and glibc's sem_wait require.
    unsafe {
        if enabled() {
            ret(api::wait(s, None, ptr::null(), false))
        } else {
            real::sem_wait(s)
        }
    }
}

/// # Safety
/// As glibc's `sem_trywait`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sem_trywait(s: *mut sem_t) -> c_int {
    // SAFETY: `s` is an initialised sem_t (sem_trywait's contract), as `api::trywait` and
    // glibc's sem_trywait require.
    unsafe {
        if enabled() {
            ret(api::trywait(s))
        } else {
            real::sem_trywait(s)
        }
    }
}

/// # Safety
/// As glibc's `sem_timedwait`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sem_timedwait(s: *mut sem_t, t: *const timespec) -> c_int {
    // SAFETY: `s` is an initialised sem_t and `t` a timespec pointer (sem_timedwait's contract),
    // which is `api::wait`'s contract.
    unsafe {
        if enabled() {
            ret(api::wait(s, None, t, true))
        } else {
            real::sem_timedwait(s, t)
        }
    }
}

/// # Safety
/// As glibc's `sem_clockwait`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sem_clockwait(s: *mut sem_t, c: clockid_t, t: *const timespec) -> c_int {
    // SAFETY: `s` is an initialised sem_t and `t` a timespec pointer (sem_clockwait's contract),
    // which is `api::wait`'s contract.
    unsafe {
        if enabled() {
            ret(api::wait(s, Some(c), t, true))
        } else {
            real::sem_clockwait(s, c, t)
        }
    }
}

/// # Safety
/// As glibc's `sem_post`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sem_post(s: *mut sem_t) -> c_int {
    // SAFETY: `s` is an initialised sem_t (sem_post's contract), which `api::post` and glibc's
    // sem_post require.
    unsafe {
        if enabled() {
            ret(api::post(s))
        } else {
            real::sem_post(s)
        }
    }
}

/// # Safety
/// As glibc's `sem_getvalue`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sem_getvalue(s: *mut sem_t, v: *mut c_int) -> c_int {
    // SAFETY: `s` is an initialised sem_t and `v` a writable int (sem_getvalue's contract), as
    // `api::getvalue` requires.
    unsafe {
        if enabled() {
            ret(api::getvalue(s, v))
        } else {
            real::sem_getvalue(s, v)
        }
    }
}
