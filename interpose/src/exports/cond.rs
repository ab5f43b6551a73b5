//! `pthread_cond_*` exports. Unversioned definitions here replace both glibc versions
//! (GLIBC_2.2.5 and GLIBC_2.3.2) for the program; the real ones are looked up as
//! GLIBC_2.3.2 (see `fiberize_rt::sync::cond`).

use libc::{c_int, clockid_t, pthread_cond_t, pthread_condattr_t, pthread_mutex_t, timespec};

use fiberize_rt::sync::cond;

/// glibc's own functions, declared once where the runtime needs them too.
use fiberize_rt::sync::cond::real;

use crate::gate::enabled;

/// # Safety
/// As glibc's `pthread_cond_init`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_cond_init(c: *mut pthread_cond_t, a: *const pthread_condattr_t) -> c_int {
    // SAFETY: `c` is storage for a pthread_cond_t and `a` null or an initialised attribute object (pthread_cond_init's
    // contract), which `cond::init` and glibc's init require.
    unsafe {
        if enabled() {
            cond::init(c, a)
        } else {
            real::pthread_cond_init(c, a)
        }
    }
}

/// # Safety
/// As glibc's `pthread_cond_wait`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_cond_wait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: `c` is an initialised condition variable and `m` a mutex the caller holds (pthread_cond_wait's
    // contract); `cond::wait` with a null deadline and glibc's wait need exactly that.
    unsafe {
        if enabled() {
            cond::wait(c, m, core::ptr::null(), None)
        } else {
            real::pthread_cond_wait(c, m)
        }
    }
}

/// # Safety
/// As glibc's `pthread_cond_timedwait`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_cond_timedwait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t, t: *const timespec) -> c_int {
    if !enabled() {
        // SAFETY: with the preload off glibc gets the program's own arguments: `c`, `m` held, `t` as
        // pthread_cond_timedwait requires.
        return unsafe { real::pthread_cond_timedwait(c, m, t) };
    }
    if t.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: `c` initialised, `m` held by the caller, `t` a non-null timespec pointer (checked above):
    // pthread_cond_timedwait's contract, which is `cond::wait`'s.
    unsafe { cond::wait(c, m, t, None) }
}

/// # Safety
/// As glibc's `pthread_cond_clockwait`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_cond_clockwait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    k: clockid_t,
    t: *const timespec,
) -> c_int {
    if !enabled() {
        // SAFETY: with the preload off glibc gets the program's own arguments, valid as pthread_cond_clockwait requires.
        return unsafe { real::pthread_cond_clockwait(c, m, k, t) };
    }
    if t.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: `c` initialised, `m` held, `t` a non-null timespec pointer (checked above), as pthread_cond_clockwait
    // promises and `cond::wait` requires.
    unsafe { cond::wait(c, m, t, Some(k)) }
}

/// # Safety
/// As glibc's `pthread_cond_signal`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_cond_signal(c: *mut pthread_cond_t) -> c_int {
    // SAFETY: `c` is an initialised pthread_cond_t (pthread_cond_signal's contract), which `cond::signal` and glibc
    // require.
    unsafe {
        if enabled() {
            cond::signal(c)
        } else {
            real::pthread_cond_signal(c)
        }
    }
}

/// # Safety
/// As glibc's `pthread_cond_broadcast`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_cond_broadcast(c: *mut pthread_cond_t) -> c_int {
    // SAFETY: `c` is an initialised pthread_cond_t (pthread_cond_broadcast's contract), which `cond::broadcast` and
    // glibc require.
    unsafe {
        if enabled() {
            cond::broadcast(c)
        } else {
            real::pthread_cond_broadcast(c)
        }
    }
}

/// # Safety
/// As glibc's `pthread_cond_destroy`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_cond_destroy(c: *mut pthread_cond_t) -> c_int {
    // SAFETY: `c` is an initialised condition variable without waiters (pthread_cond_destroy's contract), as
    // `cond::destroy` and glibc's destroy require.
    unsafe {
        if enabled() {
            cond::destroy(c)
        } else {
            real::pthread_cond_destroy(c)
        }
    }
}
