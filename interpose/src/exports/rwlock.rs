//! `pthread_rwlock_*` exports (and glibc's `__pthread_rwlock_*` aliases, which old
//! binaries may reference). Attribute functions are not interposed: `init` reads the
//! kind and pshared flag through glibc's real getters.

use core::ptr;

use libc::{c_int, clockid_t, pthread_rwlock_t, pthread_rwlockattr_t, timespec};

use fiberize_rt::sync::rwlock::api;

/// The real libc functions, declared once where the runtime needs them too.
use fiberize_rt::sync::rwlock::api as real;

sync_export!(fn pthread_rwlock_init(rw: *mut pthread_rwlock_t, a: *const pthread_rwlockattr_t) -> c_int
    => api::init(rw, a), real::pthread_rwlock_init(rw, a); alias __pthread_rwlock_init);
sync_export!(fn pthread_rwlock_destroy(rw: *mut pthread_rwlock_t) -> c_int
    => api::destroy(rw), real::pthread_rwlock_destroy(rw); alias __pthread_rwlock_destroy);
sync_export!(fn pthread_rwlock_rdlock(rw: *mut pthread_rwlock_t) -> c_int
    => api::rdlock(rw, None, ptr::null(), false), real::pthread_rwlock_rdlock(rw); alias __pthread_rwlock_rdlock);
sync_export!(fn pthread_rwlock_wrlock(rw: *mut pthread_rwlock_t) -> c_int
    => api::wrlock(rw, None, ptr::null(), false), real::pthread_rwlock_wrlock(rw); alias __pthread_rwlock_wrlock);
sync_export!(fn pthread_rwlock_tryrdlock(rw: *mut pthread_rwlock_t) -> c_int
    => api::tryrdlock(rw), real::pthread_rwlock_tryrdlock(rw); alias __pthread_rwlock_tryrdlock);
sync_export!(fn pthread_rwlock_trywrlock(rw: *mut pthread_rwlock_t) -> c_int
    => api::trywrlock(rw), real::pthread_rwlock_trywrlock(rw); alias __pthread_rwlock_trywrlock);
sync_export!(fn pthread_rwlock_timedrdlock(rw: *mut pthread_rwlock_t, t: *const timespec) -> c_int
    => api::rdlock(rw, None, t, true), real::pthread_rwlock_timedrdlock(rw, t));
sync_export!(fn pthread_rwlock_timedwrlock(rw: *mut pthread_rwlock_t, t: *const timespec) -> c_int
    => api::wrlock(rw, None, t, true), real::pthread_rwlock_timedwrlock(rw, t));
sync_export!(fn pthread_rwlock_clockrdlock(rw: *mut pthread_rwlock_t, c: clockid_t, t: *const timespec) -> c_int
    => api::rdlock(rw, Some(c), t, true), real::pthread_rwlock_clockrdlock(rw, c, t));
sync_export!(fn pthread_rwlock_clockwrlock(rw: *mut pthread_rwlock_t, c: clockid_t, t: *const timespec) -> c_int
    => api::wrlock(rw, Some(c), t, true), real::pthread_rwlock_clockwrlock(rw, c, t));
sync_export!(fn pthread_rwlock_unlock(rw: *mut pthread_rwlock_t) -> c_int
    => api::unlock(rw), real::pthread_rwlock_unlock(rw); alias __pthread_rwlock_unlock);
