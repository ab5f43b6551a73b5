//! `pthread_spin_*` exports. Same encoding as glibc (so process-shared spinlocks need
//! no delegation); waiters yield instead of spinning forever (`fiberize_rt::sync::spin`).

use libc::{c_int, pthread_spinlock_t};

use crate::gate::enabled;
use fiberize_rt::sync::spin;

/// glibc's own functions, declared once where the runtime needs them too.
use fiberize_rt::sync::spin::real;

/// # Safety
/// As glibc's `pthread_spin_init`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_spin_init(l: *mut pthread_spinlock_t, pshared: c_int) -> c_int {
    // SAFETY: `l` is storage for a pthread_spinlock_t (pthread_spin_init's contract), which
    // `spin::init` and glibc initialise.
    unsafe {
        if enabled() {
            spin::init(l, pshared)
        } else {
            real::pthread_spin_init(l, pshared)
        }
    }
}

/// # Safety
/// As glibc's `pthread_spin_lock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_spin_lock(l: *mut pthread_spinlock_t) -> c_int {
    // SAFETY: `l` is an initialised spinlock (pthread_spin_lock's contract), which `spin::lock`
    // and glibc require.
    unsafe {
        if enabled() {
            spin::lock(l)
        } else {
            real::pthread_spin_lock(l)
        }
    }
}

/// # Safety
/// As glibc's `pthread_spin_trylock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_spin_trylock(l: *mut pthread_spinlock_t) -> c_int {
    // SAFETY: `l` is an initialised spinlock (pthread_spin_trylock's contract), as
    // `spin::trylock` and glibc require.
    unsafe {
        if enabled() {
            spin::trylock(l)
        } else {
            real::pthread_spin_trylock(l)
        }
    }
}

/// # Safety
/// As glibc's `pthread_spin_unlock`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_spin_unlock(l: *mut pthread_spinlock_t) -> c_int {
    // SAFETY: `l` is a spinlock the caller holds (pthread_spin_unlock's contract), which
    // `spin::unlock` and glibc require.
    unsafe {
        if enabled() {
            spin::unlock(l)
        } else {
            real::pthread_spin_unlock(l)
        }
    }
}

/// # Safety
/// As glibc's `pthread_spin_destroy`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_spin_destroy(l: *mut pthread_spinlock_t) -> c_int {
    // SAFETY: `l` is an initialised, unlocked spinlock (pthread_spin_destroy's contract), as
    // `spin::destroy` requires.
    unsafe {
        if enabled() {
            spin::destroy(l)
        } else {
            real::pthread_spin_destroy(l)
        }
    }
}
