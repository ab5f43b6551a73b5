//! Thread lifecycle exports: create, join, exit.

use libc::{c_int, c_void, clockid_t, pthread_attr_t, pthread_t, timespec};

use fiberize_rt::thread::pthread::{self, StartRoutine};

/// glibc's own functions, declared once in the runtime.
mod real {
    pub use fiberize_rt::base::real::pthread_create;
    pub use fiberize_rt::thread::pthread::{pthread_clockjoin_np, pthread_join, pthread_timedjoin_np};
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
        // SAFETY: preload off: glibc's pthread_create gets the program's `t` (writable), `attr` (null or initialised) and
        // start routine.
        return unsafe { real::pthread_create(t, attr, start, arg) };
    }
    // SAFETY: `t` is writable, `attr` null or initialised, `start` a function taking `arg` (pthread_create's
    // contract), which `pthread::create` requires.
    unsafe { pthread::create(t, attr, start, arg) }
}

/// # Safety
/// As glibc's `pthread_join`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_join(t: pthread_t, r: *mut *mut c_void) -> c_int {
    if crate::gate::fiber().is_none() {
        // SAFETY: preload off: `t` is a joinable thread and `r` null or writable, as pthread_join requires of the program.
        return unsafe { real::pthread_join(t, r) };
    }
    // SAFETY: `t` is a joinable thread and `r` null or writable (pthread_join's contract), which `pthread::join`
    // requires.
    unsafe { pthread::join(t, r) }
}

/// # Safety
/// As glibc's `pthread_timedjoin_np`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_timedjoin_np(t: pthread_t, r: *mut *mut c_void, ts: *const timespec) -> c_int {
    if crate::gate::fiber().is_none() {
        // SAFETY: preload off: the program's `t`, `r`, `ts` are valid as pthread_timedjoin_np requires.
        return unsafe { real::pthread_timedjoin_np(t, r, ts) };
    }
    // SAFETY: `t` joinable, `r` null or writable, `ts` a timespec pointer (pthread_timedjoin_np's contract), as
    // `pthread::timedjoin` requires.
    unsafe { pthread::timedjoin(t, r, ts) }
}

/// # Safety
/// As glibc's `pthread_clockjoin_np`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_clockjoin_np(t: pthread_t, r: *mut *mut c_void, c: clockid_t, ts: *const timespec) -> c_int {
    if crate::gate::fiber().is_none() {
        // SAFETY: preload off: the program's `t`, `r`, `c`, `ts` are valid as pthread_clockjoin_np requires.
        return unsafe { real::pthread_clockjoin_np(t, r, c, ts) };
    }
    // SAFETY: `t` joinable, `r` null or writable, `ts` a timespec pointer (pthread_clockjoin_np's contract), as
    // `pthread::clockjoin` requires.
    unsafe { pthread::clockjoin(t, r, c, ts) }
}

/// # Safety
/// As glibc's `pthread_exit`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_exit(v: *mut c_void) -> ! {
    // SAFETY: pthread_exit's contract (called by a thread of the program, `v` any value) is `pthread::exit`'s, which
    // passes it to glibc for plain threads.
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
        if let Some(f) = fiberize_rt::runtime::fibers::registry::find_by_pthread(t as usize) {
            return fiberize_rt::signal::cancel::cancel_fiber(&f);
        }
    }
    // SAFETY: `t` is a thread the program created and has not joined (pthread_cancel's contract), which glibc's
    // pthread_cancel requires.
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
        // SAFETY: `old` is null or a writable int (pthread_setcanceltype's contract), what `cancel::set_type` writes.
        return unsafe { fiberize_rt::signal::cancel::set_type(f, kind, old) };
    }
    // SAFETY: a plain thread: glibc's pthread_setcanceltype gets `old`, null or writable.
    unsafe { real_cancel::pthread_setcanceltype(kind, old) }
}

/// # Safety
/// As glibc's `pthread_setcancelstate`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_setcancelstate(state: c_int, old: *mut c_int) -> c_int {
    if let Some(f) = crate::gate::fiber() {
        // SAFETY: `old` is null or a writable int (pthread_setcancelstate's contract), what `cancel::set_state` writes.
        return unsafe { fiberize_rt::signal::cancel::set_state(f, state, old) };
    }
    // SAFETY: a plain thread: glibc's pthread_setcancelstate gets `old`, null or writable.
    unsafe { real_cancel::pthread_setcancelstate(state, old) }
}
