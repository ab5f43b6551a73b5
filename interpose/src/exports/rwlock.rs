//! `pthread_rwlock_*` exports (and glibc's `__pthread_rwlock_*` aliases, which old
//! binaries may reference). Attribute functions are not interposed: `init` reads the
//! kind and pshared flag through glibc's real getters.

use core::ptr;

use libc::{c_int, clockid_t, pthread_rwlock_t, pthread_rwlockattr_t, timespec};

use fiberize_rt::sync::rwlock::api;

/// The real libc functions, declared once where the runtime needs them too.
use fiberize_rt::sync::rwlock::api as real;

use crate::gate::enabled;

/// # Safety
/// As glibc's `pthread_rwlock_init`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_init(rw: *mut pthread_rwlock_t, a: *const pthread_rwlockattr_t) -> c_int {
    // SAFETY: `rw` is storage for a pthread_rwlock_t and `a` null or an initialised attribute object
    // (pthread_rwlock_init's contract, this fn's # Safety), which `api::init` and glibc's init require.
    unsafe {
        if enabled() {
            api::init(rw, a)
        } else {
            real::pthread_rwlock_init(rw, a)
        }
    }
}

/// # Safety
/// As glibc's `pthread_rwlock_destroy`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_destroy(rw: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: `rw` is an initialised rwlock nobody holds or waits on (pthread_rwlock_destroy's contract), as
    // `api::destroy` and glibc's destroy require.
    unsafe {
        if enabled() {
            api::destroy(rw)
        } else {
            real::pthread_rwlock_destroy(rw)
        }
    }
}

/// # Safety
/// As glibc's `pthread_rwlock_rdlock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_rdlock(rw: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: `rw` is an initialised pthread_rwlock_t (pthread_rwlock_rdlock's contract); `api::rdlock` with no
    // deadline needs just that, as glibc's rdlock does.
    unsafe {
        if enabled() {
            api::rdlock(rw, None, ptr::null(), false)
        } else {
            real::pthread_rwlock_rdlock(rw)
        }
    }
}

/// # Safety
/// As glibc's `pthread_rwlock_tryrdlock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_tryrdlock(rw: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: `rw` is an initialised pthread_rwlock_t (pthread_rwlock_tryrdlock's contract), which `api::tryrdlock`
    // and glibc require.
    unsafe {
        if enabled() {
            api::tryrdlock(rw)
        } else {
            real::pthread_rwlock_tryrdlock(rw)
        }
    }
}

/// # Safety
/// As glibc's `pthread_rwlock_timedrdlock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_timedrdlock(rw: *mut pthread_rwlock_t, t: *const timespec) -> c_int {
    // SAFETY: `rw` is an initialised rwlock and `t` a timespec pointer (pthread_rwlock_timedrdlock's contract);
    // `api::rdlock` reads `t` only as glibc would.
    unsafe {
        if enabled() {
            api::rdlock(rw, None, t, true)
        } else {
            real::pthread_rwlock_timedrdlock(rw, t)
        }
    }
}

/// # Safety
/// As glibc's `pthread_rwlock_clockrdlock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_clockrdlock(rw: *mut pthread_rwlock_t, c: clockid_t, t: *const timespec) -> c_int {
    // SAFETY: `rw` is an initialised rwlock, `t` a timespec pointer (pthread_rwlock_clockrdlock's contract), what
    // `api::rdlock` and glibc need.
    unsafe {
        if enabled() {
            api::rdlock(rw, Some(c), t, true)
        } else {
            real::pthread_rwlock_clockrdlock(rw, c, t)
        }
    }
}

/// # Safety
/// As glibc's `pthread_rwlock_wrlock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_wrlock(rw: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: `rw` is an initialised pthread_rwlock_t (pthread_rwlock_wrlock's contract); `api::wrlock` with no
    // deadline needs just that.
    unsafe {
        if enabled() {
            api::wrlock(rw, None, ptr::null(), false)
        } else {
            real::pthread_rwlock_wrlock(rw)
        }
    }
}

/// # Safety
/// As glibc's `pthread_rwlock_trywrlock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_trywrlock(rw: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: `rw` is an initialised pthread_rwlock_t (pthread_rwlock_trywrlock's contract), which `api::trywrlock`
    // and glibc require.
    unsafe {
        if enabled() {
            api::trywrlock(rw)
        } else {
            real::pthread_rwlock_trywrlock(rw)
        }
    }
}

/// # Safety
/// As glibc's `pthread_rwlock_timedwrlock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_timedwrlock(rw: *mut pthread_rwlock_t, t: *const timespec) -> c_int {
    // SAFETY: `rw` is an initialised rwlock and `t` a timespec pointer (pthread_rwlock_timedwrlock's contract), as
    // `api::wrlock` and glibc require.
    unsafe {
        if enabled() {
            api::wrlock(rw, None, t, true)
        } else {
            real::pthread_rwlock_timedwrlock(rw, t)
        }
    }
}

/// # Safety
/// As glibc's `pthread_rwlock_clockwrlock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_clockwrlock(rw: *mut pthread_rwlock_t, c: clockid_t, t: *const timespec) -> c_int {
    // SAFETY: `rw` is an initialised rwlock and `t` a timespec pointer (pthread_rwlock_clockwrlock's contract), as
    // `api::wrlock` and glibc require.
    unsafe {
        if enabled() {
            api::wrlock(rw, Some(c), t, true)
        } else {
            real::pthread_rwlock_clockwrlock(rw, c, t)
        }
    }
}

/// # Safety
/// As glibc's `pthread_rwlock_unlock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_unlock(rw: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: `rw` is an initialised pthread_rwlock_t (pthread_rwlock_unlock's contract), which `api::unlock` and
    // glibc's unlock require.
    unsafe {
        if enabled() {
            api::unlock(rw)
        } else {
            real::pthread_rwlock_unlock(rw)
        }
    }
}

/// glibc alias of `pthread_rwlock_init`.
///
/// # Safety
/// As `pthread_rwlock_init`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __pthread_rwlock_init(rw: *mut pthread_rwlock_t, a: *const pthread_rwlockattr_t) -> c_int {
    // SAFETY: the alias's contract is `pthread_rwlock_init`'s (this fn's # Safety).
    unsafe { pthread_rwlock_init(rw, a) }
}

/// glibc alias of `pthread_rwlock_destroy`.
///
/// # Safety
/// As `pthread_rwlock_destroy`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __pthread_rwlock_destroy(rw: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: the alias's contract is `pthread_rwlock_destroy`'s: `rw` initialised and unused.
    unsafe { pthread_rwlock_destroy(rw) }
}

/// glibc alias of `pthread_rwlock_rdlock`.
///
/// # Safety
/// As `pthread_rwlock_rdlock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __pthread_rwlock_rdlock(rw: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: the alias's contract is `pthread_rwlock_rdlock`'s: `rw` is an initialised rwlock.
    unsafe { pthread_rwlock_rdlock(rw) }
}

/// glibc alias of `pthread_rwlock_tryrdlock`.
///
/// # Safety
/// As `pthread_rwlock_tryrdlock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __pthread_rwlock_tryrdlock(rw: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: the alias's contract is `pthread_rwlock_tryrdlock`'s: `rw` is an initialised rwlock.
    unsafe { pthread_rwlock_tryrdlock(rw) }
}

/// glibc alias of `pthread_rwlock_wrlock`.
///
/// # Safety
/// As `pthread_rwlock_wrlock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __pthread_rwlock_wrlock(rw: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: the alias's contract is `pthread_rwlock_wrlock`'s: `rw` is an initialised rwlock.
    unsafe { pthread_rwlock_wrlock(rw) }
}

/// glibc alias of `pthread_rwlock_trywrlock`.
///
/// # Safety
/// As `pthread_rwlock_trywrlock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __pthread_rwlock_trywrlock(rw: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: the alias's contract is `pthread_rwlock_trywrlock`'s: `rw` is an initialised rwlock.
    unsafe { pthread_rwlock_trywrlock(rw) }
}

/// glibc alias of `pthread_rwlock_unlock`.
///
/// # Safety
/// As `pthread_rwlock_unlock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __pthread_rwlock_unlock(rw: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: the alias's contract is `pthread_rwlock_unlock`'s: `rw` is an initialised rwlock.
    unsafe { pthread_rwlock_unlock(rw) }
}
