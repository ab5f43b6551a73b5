//! `pthread_mutex_*` exports (and glibc's `__pthread_mutex_*` aliases, which old
//! binaries and libstdc++'s gthreads may reference).

use libc::{c_int, clockid_t, pthread_mutex_t, pthread_mutexattr_t, timespec};

use fiberize_rt::sync::mutex::api;

/// glibc's own functions, declared once where the runtime needs them too.
use fiberize_rt::sync::mutex::api::real;

use crate::gate::enabled;

/// # Safety
/// As glibc's `pthread_mutex_init`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_mutex_init(m: *mut pthread_mutex_t, a: *const pthread_mutexattr_t) -> c_int {
    // SAFETY (all calls below): forwarded contract.
    unsafe {
        if enabled() {
            api::init(m, a)
        } else {
            real::pthread_mutex_init(m, a)
        }
    }
}

/// # Safety
/// As glibc's `pthread_mutex_lock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_mutex_lock(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        if enabled() {
            api::lock(m)
        } else {
            real::pthread_mutex_lock(m)
        }
    }
}

/// # Safety
/// As glibc's `pthread_mutex_trylock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_mutex_trylock(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        if enabled() {
            api::trylock(m)
        } else {
            real::pthread_mutex_trylock(m)
        }
    }
}

/// # Safety
/// As glibc's `pthread_mutex_timedlock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_mutex_timedlock(m: *mut pthread_mutex_t, t: *const timespec) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        if enabled() {
            api::clocklock(m, libc::CLOCK_REALTIME, t, true)
        } else {
            real::pthread_mutex_timedlock(m, t)
        }
    }
}

/// # Safety
/// As glibc's `pthread_mutex_clocklock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_mutex_clocklock(m: *mut pthread_mutex_t, c: clockid_t, t: *const timespec) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        if enabled() {
            api::clocklock(m, c, t, false)
        } else {
            real::pthread_mutex_clocklock(m, c, t)
        }
    }
}

/// # Safety
/// As glibc's `pthread_mutex_unlock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_mutex_unlock(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        if enabled() {
            api::unlock(m)
        } else {
            real::pthread_mutex_unlock(m)
        }
    }
}

/// # Safety
/// As glibc's `pthread_mutex_destroy`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_mutex_destroy(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        if enabled() {
            api::destroy(m)
        } else {
            real::pthread_mutex_destroy(m)
        }
    }
}

/// glibc alias of `pthread_mutex_init`.
///
/// # Safety
/// As `pthread_mutex_init`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __pthread_mutex_init(m: *mut pthread_mutex_t, a: *const pthread_mutexattr_t) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { pthread_mutex_init(m, a) }
}

/// glibc alias of `pthread_mutex_lock`.
///
/// # Safety
/// As `pthread_mutex_lock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __pthread_mutex_lock(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { pthread_mutex_lock(m) }
}

/// glibc alias of `pthread_mutex_trylock`.
///
/// # Safety
/// As `pthread_mutex_trylock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __pthread_mutex_trylock(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { pthread_mutex_trylock(m) }
}

/// glibc alias of `pthread_mutex_unlock`.
///
/// # Safety
/// As `pthread_mutex_unlock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __pthread_mutex_unlock(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { pthread_mutex_unlock(m) }
}

/// glibc alias of `pthread_mutex_destroy`.
///
/// # Safety
/// As `pthread_mutex_destroy`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __pthread_mutex_destroy(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { pthread_mutex_destroy(m) }
}
