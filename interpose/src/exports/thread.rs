//! Thread lifecycle exports: create, join, exit.

use libc::{c_int, c_void, clockid_t, pthread_attr_t, pthread_t, timespec};

use fiberize_rt::thread::pthread::{self, StartRoutine};

mod real {
    use super::*;
    fiberize_rt::real_fns! {
    fn pthread_create(t: *mut pthread_t, a: *const pthread_attr_t, f: StartRoutine, arg: *mut c_void) -> c_int;
    fn pthread_join(t: pthread_t, r: *mut *mut c_void) -> c_int;
    fn pthread_timedjoin_np(t: pthread_t, r: *mut *mut c_void, ts: *const timespec) -> c_int;
    fn pthread_clockjoin_np(t: pthread_t, r: *mut *mut c_void, c: clockid_t, ts: *const timespec) -> c_int;
    }
}

/// # Safety
/// As glibc's `pthread_create`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_create(
    t: *mut pthread_t,
    attr: *const pthread_attr_t,
    start: StartRoutine,
    arg: *mut c_void,
) -> c_int {
    if !fiberize_rt::base::config::fibers_allowed() {
        // SAFETY: forwarded contract.
        return unsafe { real::pthread_create(t, attr, start, arg) };
    }
    // SAFETY: forwarded contract.
    unsafe { pthread::create(t, attr, start, arg) }
}

/// # Safety
/// As glibc's `pthread_join`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_join(t: pthread_t, r: *mut *mut c_void) -> c_int {
    if crate::gate::fiber().is_none() {
        // SAFETY: forwarded contract.
        return unsafe { real::pthread_join(t, r) };
    }
    // SAFETY: forwarded contract.
    unsafe { pthread::join(t, r) }
}

/// # Safety
/// As glibc's `pthread_timedjoin_np`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_timedjoin_np(t: pthread_t, r: *mut *mut c_void, ts: *const timespec) -> c_int {
    if crate::gate::fiber().is_none() {
        // SAFETY: forwarded contract.
        return unsafe { real::pthread_timedjoin_np(t, r, ts) };
    }
    // SAFETY: forwarded contract.
    unsafe { pthread::timedjoin(t, r, ts) }
}

/// # Safety
/// As glibc's `pthread_clockjoin_np`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_clockjoin_np(t: pthread_t, r: *mut *mut c_void, c: clockid_t, ts: *const timespec) -> c_int {
    if crate::gate::fiber().is_none() {
        // SAFETY: forwarded contract.
        return unsafe { real::pthread_clockjoin_np(t, r, c, ts) };
    }
    // SAFETY: forwarded contract.
    unsafe { pthread::clockjoin(t, r, c, ts) }
}

/// # Safety
/// As glibc's `pthread_exit`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_exit(v: *mut c_void) -> ! {
    // SAFETY: forwarded contract (passes through for plain threads inside).
    unsafe { pthread::exit(v) }
}

mod real_cancel {
    use super::*;
    fiberize_rt::real_fns! {
        fn pthread_cancel(t: pthread_t) -> c_int;
        fn pthread_testcancel() -> ();
        fn pthread_setcancelstate(state: c_int, old: *mut c_int) -> c_int;
        fn pthread_setcanceltype(kind: c_int, old: *mut c_int) -> c_int;
    }
}

/// `pthread_cancel`: for a fiber, a deferred request it acts on at the library's
/// cancellation points (glibc's own mechanism would unwind it on the wrong kernel
/// thread; see `fiberize_rt::signal::cancel`).
///
/// # Safety
/// As glibc's `pthread_cancel`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_cancel(t: pthread_t) -> c_int {
    if crate::gate::enabled() {
        if let Some(f) = fiberize_rt::runtime::registry::find_by_pthread(t as usize) {
            return fiberize_rt::signal::cancel::cancel_fiber(&f);
        }
    }
    // SAFETY: forwarded contract.
    unsafe { real_cancel::pthread_cancel(t) }
}

/// # Safety
/// As glibc's `pthread_testcancel`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_testcancel() {
    if crate::gate::fiber().is_some() {
        fiberize_rt::signal::cancel::testcancel();
        return;
    }
    // SAFETY: no arguments.
    unsafe { real_cancel::pthread_testcancel() }
}

/// # Safety
/// As glibc's `pthread_setcanceltype`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_setcanceltype(kind: c_int, old: *mut c_int) -> c_int {
    if let Some(f) = crate::gate::fiber() {
        // SAFETY: forwarded contract (`old` null or valid).
        return unsafe { fiberize_rt::signal::cancel::set_type(f, kind, old) };
    }
    // SAFETY: forwarded contract.
    unsafe { real_cancel::pthread_setcanceltype(kind, old) }
}

/// # Safety
/// As glibc's `pthread_setcancelstate`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_setcancelstate(state: c_int, old: *mut c_int) -> c_int {
    if let Some(f) = crate::gate::fiber() {
        // SAFETY: forwarded contract (`old` null or valid).
        return unsafe { fiberize_rt::signal::cancel::set_state(f, state, old) };
    }
    // SAFETY: forwarded contract.
    unsafe { real_cancel::pthread_setcancelstate(state, old) }
}
