//! `pthread_barrier_*` exports. Attribute functions are not interposed: `init` reads
//! the pshared flag through glibc's real getter.

use libc::{c_int, c_uint, pthread_barrier_t, pthread_barrierattr_t};

use crate::gate::enabled;
use fiberize_rt::sync::barrier::api;

/// glibc's own functions, declared once where the runtime needs them too.
use fiberize_rt::sync::barrier::api::real;

/// # Safety
/// As glibc's `pthread_barrier_init`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_barrier_init(
    b: *mut pthread_barrier_t,
    a: *const pthread_barrierattr_t,
    count: c_uint,
) -> c_int {
    // SAFETY: `b` is storage for a pthread_barrier_t, `a` null or an initialised attribute
    // object (pthread_barrier_init's contract), which `api::init` and glibc require.
    unsafe {
        if enabled() {
            api::init(b, a, count)
        } else {
            real::pthread_barrier_init(b, a, count)
        }
    }
}

/// # Safety
/// As glibc's `pthread_barrier_wait`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_barrier_wait(b: *mut pthread_barrier_t) -> c_int {
    // SAFETY: `b` is an initialised barrier (pthread_barrier_wait's contract), which `api::wait`
    // and glibc require.
    unsafe {
        if enabled() {
            api::wait(b)
        } else {
            real::pthread_barrier_wait(b)
        }
    }
}

/// # Safety
/// As glibc's `pthread_barrier_destroy`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_barrier_destroy(b: *mut pthread_barrier_t) -> c_int {
    // SAFETY: `b` is an initialised barrier nobody waits on (pthread_barrier_destroy's
    // contract), as `api::destroy` requires.
    unsafe {
        if enabled() {
            api::destroy(b)
        } else {
            real::pthread_barrier_destroy(b)
        }
    }
}
