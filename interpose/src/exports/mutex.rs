//! `pthread_mutex_*` exports (and glibc's `__pthread_mutex_*` aliases, which old
//! binaries and libstdc++'s gthreads may reference).

use libc::{c_int, clockid_t, pthread_mutex_t, pthread_mutexattr_t, timespec};

use fiberize_rt::sync::mutex::api;

/// glibc's own functions, declared once where the runtime needs them too.
use fiberize_rt::sync::mutex::api::real;

sync_export!(fn pthread_mutex_init(m: *mut pthread_mutex_t, a: *const pthread_mutexattr_t) -> c_int
    => api::init(m, a), real::pthread_mutex_init(m, a); alias __pthread_mutex_init);
sync_export!(fn pthread_mutex_lock(m: *mut pthread_mutex_t) -> c_int
    => api::lock(m), real::pthread_mutex_lock(m); alias __pthread_mutex_lock);
sync_export!(fn pthread_mutex_trylock(m: *mut pthread_mutex_t) -> c_int
    => api::trylock(m), real::pthread_mutex_trylock(m); alias __pthread_mutex_trylock);
sync_export!(fn pthread_mutex_timedlock(m: *mut pthread_mutex_t, t: *const timespec) -> c_int
    => api::clocklock(m, libc::CLOCK_REALTIME, t, true), real::pthread_mutex_timedlock(m, t));
sync_export!(fn pthread_mutex_clocklock(m: *mut pthread_mutex_t, c: clockid_t, t: *const timespec) -> c_int
    => api::clocklock(m, c, t, false), real::pthread_mutex_clocklock(m, c, t));
// Unlock: ownership errors are reported, not undefined, so the contract asks no more than an initialised mutex.
sync_export!(fn pthread_mutex_unlock(m: *mut pthread_mutex_t) -> c_int
    => api::unlock(m), real::pthread_mutex_unlock(m); alias __pthread_mutex_unlock);
sync_export!(fn pthread_mutex_destroy(m: *mut pthread_mutex_t) -> c_int
    => api::destroy(m), real::pthread_mutex_destroy(m); alias __pthread_mutex_destroy);
