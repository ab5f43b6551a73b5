//! `pthread_barrier_*` exports. Attribute functions are not interposed: `init` reads
//! the pshared flag through glibc's real getter.

use libc::{c_int, c_uint, pthread_barrier_t, pthread_barrierattr_t};

use fiberize_rt::sync::barrier::api;

/// glibc's own functions, declared once where the runtime needs them too.
use fiberize_rt::sync::barrier::api::real;

sync_export!(fn pthread_barrier_init(b: *mut pthread_barrier_t, a: *const pthread_barrierattr_t, count: c_uint) -> c_int
    => api::init(b, a, count), real::pthread_barrier_init(b, a, count));
sync_export!(fn pthread_barrier_wait(b: *mut pthread_barrier_t) -> c_int => api::wait(b), real::pthread_barrier_wait(b));
sync_export!(fn pthread_barrier_destroy(b: *mut pthread_barrier_t) -> c_int => api::destroy(b), real::pthread_barrier_destroy(b));
