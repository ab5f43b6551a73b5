//! Sleeping and yielding fibers: `nanosleep`, `clock_nanosleep`, `usleep`, `sleep`,
//! `sched_yield`. Plain threads get the real calls (the exports decide).

use libc::{c_int, clockid_t, timespec};

use crate::base::sys;
use crate::base::time;
use crate::runtime::fibers::fiber::{Fiber, WaitKind};
use crate::runtime::scheduler;

/// Parks `f` until CLOCK_MONOTONIC `deadline`. Err(remaining ns) if a signal was
/// delivered to the fiber first (the kernel's EINTR).
pub fn sleep_until(f: &Fiber, deadline: u64) -> Result<(), u64> {
    f.wait.begin(WaitKind::Sleep, 0);
    f.interruption.clear();
    let mut r = Ok(());
    let mut first = true;
    loop {
        let now = sys::now_ns();
        if now >= deadline {
            break;
        }
        if first {
            // A long sleep gives the stack's dead pages back.
            crate::runtime::sleep::stack_release::release_dead_pages(f, deadline - now);
            first = false;
        }
        if f.cancel_pending() {
            f.wait.end();
            crate::signal::cancel::act_on_cancel(f);
        }
        if f.interruption.is_set() {
            r = Err(deadline - now);
            break;
        }
        scheduler::park_current(f, Some(deadline));
    }
    f.wait.end();
    r
}

/// `nanosleep` for a fiber: Ok, or the error number (EINVAL, EFAULT, EINTR with the
/// unslept time stored in `rem` when given).
///
/// # Safety
/// `req` and `rem` are null or valid, as for the system call.
pub unsafe fn nanosleep(f: &Fiber, req: *const timespec, rem: *mut timespec) -> Result<(), c_int> {
    // SAFETY: the program's pointer; null is EFAULT as in the kernel.
    let Some(req) = (unsafe { req.as_ref() }) else { return Err(libc::EFAULT) };
    let d = time::relative_deadline(req)?;
    sleep_until(f, d).map_err(|left| {
        // SAFETY: `rem` is null or the program's writable timespec.
        if let Some(rem) = unsafe { rem.as_mut() } {
            *rem = sys::ns_to_timespec(left);
        }
        libc::EINTR
    })
}

/// `clock_nanosleep` for a fiber; returns the error number (0 on success). None: a clock
/// we do not emulate (CPU-time clocks): the caller uses the real call.
///
/// # Safety
/// `req` and `rem` are null or valid, as for the system call.
pub unsafe fn clock_nanosleep(
    f: &Fiber,
    clock: clockid_t,
    flags: c_int,
    req: *const timespec,
    rem: *mut timespec,
) -> Option<c_int> {
    let base = match clock {
        libc::CLOCK_REALTIME | libc::CLOCK_MONOTONIC | libc::CLOCK_BOOTTIME | libc::CLOCK_TAI => clock,
        _ => return None,
    };
    // SAFETY: the program's pointer.
    let Some(req) = (unsafe { req.as_ref() }) else { return Some(libc::EFAULT) };
    let d = if flags & libc::TIMER_ABSTIME != 0 {
        match time::absolute_deadline(base, req) {
            Ok(d) => d,
            Err(e) => return Some(e),
        }
    } else {
        match time::relative_deadline(req) {
            Ok(d) => d,
            Err(e) => return Some(e),
        }
    };
    match sleep_until(f, d) {
        Ok(()) => Some(0),
        Err(left) => {
            if flags & libc::TIMER_ABSTIME == 0 {
                // SAFETY: `rem` is null or the program's writable timespec.
                if let Some(rem) = unsafe { rem.as_mut() } {
                    *rem = sys::ns_to_timespec(left);
                }
            }
            Some(libc::EINTR)
        }
    }
}
