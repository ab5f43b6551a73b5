//! `pthread_spin_*` exports. Same encoding as glibc (so process-shared spinlocks need
//! no delegation); waiters yield instead of spinning forever (`fiberize_rt::sync::spin`).

use libc::{c_int, pthread_spinlock_t};

use fiberize_rt::sync::spin;

/// glibc's own functions, declared once where the runtime needs them too.
use fiberize_rt::sync::spin::real;

sync_export!(fn pthread_spin_init(l: *mut pthread_spinlock_t, pshared: c_int) -> c_int
    => spin::init(l, pshared), real::pthread_spin_init(l, pshared));
sync_export!(fn pthread_spin_lock(l: *mut pthread_spinlock_t) -> c_int => spin::lock(l), real::pthread_spin_lock(l));
sync_export!(fn pthread_spin_trylock(l: *mut pthread_spinlock_t) -> c_int => spin::trylock(l), real::pthread_spin_trylock(l));
sync_export!(fn pthread_spin_unlock(l: *mut pthread_spinlock_t) -> c_int => spin::unlock(l), real::pthread_spin_unlock(l));
sync_export!(fn pthread_spin_destroy(l: *mut pthread_spinlock_t) -> c_int => spin::destroy(l), real::pthread_spin_destroy(l));
