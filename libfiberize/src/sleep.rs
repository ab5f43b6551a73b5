//! Sleeping and yielding fibers: `nanosleep`, `clock_nanosleep`, `usleep`, `sleep`,
//! `sched_yield`. Plain threads get the real calls (the exports decide).

use core::sync::atomic::Ordering;

use libc::{c_int, clockid_t, timespec};

use crate::fiber::{Fiber, WaitKind};
use crate::{scheduler, sys, time};

/// Parks `f` until CLOCK_MONOTONIC `deadline`.
pub fn sleep_until(f: &Fiber, deadline: u64) {
    f.wait_kind.store(WaitKind::Sleep as u32, Ordering::Relaxed);
    while sys::now_ns() < deadline {
        scheduler::park_current(f, Some(deadline));
    }
    f.wait_kind.store(WaitKind::None as u32, Ordering::Relaxed);
}

/// `nanosleep` for a fiber: 0, or the error number (EINVAL, EFAULT).
pub fn nanosleep(f: &Fiber, req: *const timespec) -> Result<(), c_int> {
    // SAFETY: the program's pointer; null is EFAULT as in the kernel.
    let Some(req) = (unsafe { req.as_ref() }) else { return Err(libc::EFAULT) };
    let d = time::relative_deadline(req)?;
    sleep_until(f, d);
    Ok(())
}

/// `clock_nanosleep` for a fiber; returns the error number (0 on success). None: a clock
/// we do not emulate (CPU-time clocks): the caller uses the real call.
pub fn clock_nanosleep(f: &Fiber, clock: clockid_t, flags: c_int, req: *const timespec) -> Option<c_int> {
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
    sleep_until(f, d);
    Some(0)
}
