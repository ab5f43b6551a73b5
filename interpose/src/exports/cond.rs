//! `pthread_cond_*` exports. Unversioned definitions here replace both glibc versions
//! (GLIBC_2.2.5 and GLIBC_2.3.2) for the program; the real ones are looked up as
//! GLIBC_2.3.2 (see `fiberize_rt::sync::cond`).

use libc::{c_int, clockid_t, pthread_cond_t, pthread_condattr_t, pthread_mutex_t, timespec};

use fiberize_rt::sync::cond;

/// glibc's own functions, declared once where the runtime needs them too.
use fiberize_rt::sync::cond::real;

use crate::gate::enabled;

sync_export!(fn pthread_cond_init(c: *mut pthread_cond_t, a: *const pthread_condattr_t) -> c_int
    => cond::init(c, a), real::pthread_cond_init(c, a));
sync_export!(fn pthread_cond_wait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t) -> c_int
    => cond::wait(c, m, core::ptr::null(), None), real::pthread_cond_wait(c, m));

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

sync_export!(fn pthread_cond_signal(c: *mut pthread_cond_t) -> c_int => cond::signal(c), real::pthread_cond_signal(c));
sync_export!(fn pthread_cond_broadcast(c: *mut pthread_cond_t) -> c_int => cond::broadcast(c), real::pthread_cond_broadcast(c));
sync_export!(fn pthread_cond_destroy(c: *mut pthread_cond_t) -> c_int => cond::destroy(c), real::pthread_cond_destroy(c));
