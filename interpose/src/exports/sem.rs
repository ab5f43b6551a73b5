//! Unnamed-semaphore exports (`sem_init`, `sem_destroy`, `sem_wait`, `sem_trywait`,
//! `sem_timedwait`, `sem_clockwait`, `sem_post`, `sem_getvalue`). Named semaphores
//! (`sem_open`, `sem_close`, `sem_unlink`) are not interposed; the semaphores they
//! return are process-shared, and the functions below hand those to glibc (see
//! `fiberize_rt::sync::sem` for the rule). They return 0, or -1 with errno, like glibc.

use core::ptr;

use libc::{c_int, c_uint, clockid_t, sem_t, timespec};

use crate::gate::set_errno;
use fiberize_rt::sync::sem::api::{self, Outcome};

/// glibc's own functions, declared once where the runtime needs them too.
use fiberize_rt::sync::sem::api::real;

/// glibc's return convention.
#[inline]
fn ret(o: Outcome) -> c_int {
    match o {
        Outcome::Ours(Ok(())) => 0,
        Outcome::Ours(Err(e)) => {
            set_errno(e);
            -1
        }
        Outcome::Real(r) => r,
    }
}

sync_export!(fn sem_init(s: *mut sem_t, pshared: c_int, v: c_uint) -> c_int
    => ret(api::init(s, pshared, v)), real::sem_init(s, pshared, v));
sync_export!(fn sem_destroy(s: *mut sem_t) -> c_int => ret(api::destroy(s)), real::sem_destroy(s));
sync_export!(fn sem_wait(s: *mut sem_t) -> c_int => ret(api::wait(s, None, ptr::null(), false)), real::sem_wait(s));
sync_export!(fn sem_trywait(s: *mut sem_t) -> c_int => ret(api::trywait(s)), real::sem_trywait(s));
sync_export!(fn sem_timedwait(s: *mut sem_t, t: *const timespec) -> c_int
    => ret(api::wait(s, None, t, true)), real::sem_timedwait(s, t));
sync_export!(fn sem_clockwait(s: *mut sem_t, c: clockid_t, t: *const timespec) -> c_int
    => ret(api::wait(s, Some(c), t, true)), real::sem_clockwait(s, c, t));
sync_export!(fn sem_post(s: *mut sem_t) -> c_int => ret(api::post(s)), real::sem_post(s));
sync_export!(fn sem_getvalue(s: *mut sem_t, v: *mut c_int) -> c_int => ret(api::getvalue(s, v)), real::sem_getvalue(s, v));
