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
    // SAFETY: the program passes `m`, storage for a pthread_mutex_t, and `a`, null or an attribute object it
    // initialised, as pthread_mutex_init requires (this fn's # Safety); `api::init` and glibc's init need exactly
    // that.
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
    // SAFETY: `m` is a pthread_mutex_t the program initialised (pthread_mutex_lock's contract, this fn's # Safety),
    // which is what `api::lock` and glibc's lock require.
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
    // SAFETY: `m` is an initialised pthread_mutex_t (pthread_mutex_trylock's contract), as `api::trylock` and glibc's
    // trylock require.
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
    // SAFETY: `m` is an initialised pthread_mutex_t and `t` a timespec pointer, as pthread_mutex_timedlock requires of
    // the program; `api::clocklock` (CLOCK_REALTIME) and glibc's timedlock need the same.
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
    // SAFETY: `m` is an initialised pthread_mutex_t, `c` a clock id and `t` a timespec pointer
    // (pthread_mutex_clocklock's contract), which is `api::clocklock`'s and glibc's contract.
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
    // SAFETY: `m` is an initialised pthread_mutex_t (pthread_mutex_unlock's contract); `api::unlock` and glibc's
    // unlock ask no more (ownership errors are reported, not undefined).
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
    // SAFETY: `m` is an initialised pthread_mutex_t that the program no longer uses elsewhere (pthread_mutex_destroy's
    // contract), as `api::destroy` and glibc's destroy require.
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
    // SAFETY: same arguments, same contract: the alias forwards to `pthread_mutex_init`, whose # Safety is this fn's.
    unsafe { pthread_mutex_init(m, a) }
}

/// glibc alias of `pthread_mutex_lock`.
///
/// # Safety
/// As `pthread_mutex_lock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __pthread_mutex_lock(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: the alias's contract is `pthread_mutex_lock`'s: `m` is an initialised mutex.
    unsafe { pthread_mutex_lock(m) }
}

/// glibc alias of `pthread_mutex_trylock`.
///
/// # Safety
/// As `pthread_mutex_trylock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __pthread_mutex_trylock(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: the alias's contract is `pthread_mutex_trylock`'s: `m` is an initialised mutex.
    unsafe { pthread_mutex_trylock(m) }
}

/// glibc alias of `pthread_mutex_unlock`.
///
/// # Safety
/// As `pthread_mutex_unlock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __pthread_mutex_unlock(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: the alias's contract is `pthread_mutex_unlock`'s: `m` is an initialised mutex.
    unsafe { pthread_mutex_unlock(m) }
}

/// glibc alias of `pthread_mutex_destroy`.
///
/// # Safety
/// As `pthread_mutex_destroy`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __pthread_mutex_destroy(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: the alias's contract is `pthread_mutex_destroy`'s: `m` is an initialised, unused mutex.
    unsafe { pthread_mutex_destroy(m) }
}
