//! Conversions of the program's timespecs into our CLOCK_MONOTONIC deadlines, with
//! glibc's validation rules.

use libc::{c_int, clockid_t, timespec};

use crate::base::sys;

/// Whether `ts` is a valid timespec (0 <= tv_nsec < 1e9).
#[inline]
pub fn valid(ts: &timespec) -> bool {
    ts.tv_nsec >= 0 && ts.tv_nsec < 1_000_000_000
}

/// A relative timeout → absolute CLOCK_MONOTONIC deadline. EINVAL for a bad timespec
/// or a negative value.
pub fn relative_deadline(ts: &timespec) -> Result<u64, c_int> {
    if !valid(ts) || ts.tv_sec < 0 {
        return Err(libc::EINVAL);
    }
    Ok(sys::now_ns().saturating_add(sys::timespec_to_ns(ts)))
}

/// Whether we can wait on `clock` (as glibc's `futex_abstimed_supported_clockid`).
pub fn supported_clock(clock: clockid_t) -> bool {
    clock == libc::CLOCK_REALTIME || clock == libc::CLOCK_MONOTONIC
}

/// An absolute time on `clock` → absolute CLOCK_MONOTONIC deadline.
///
/// Converted once, at the start of the wait: a later jump of CLOCK_REALTIME does not
/// move the deadline (documented difference from glibc, which waits on the kernel's
/// realtime clock directly). Negative times are already expired (glibc: ETIMEDOUT).
pub fn absolute_deadline(clock: clockid_t, ts: &timespec) -> Result<u64, c_int> {
    if !valid(ts) {
        return Err(libc::EINVAL);
    }
    let now_mono = sys::now_ns();
    if ts.tv_sec < 0 {
        return Ok(now_mono);
    }
    let target = sys::timespec_to_ns(ts);
    let now_clock = if clock == libc::CLOCK_MONOTONIC { now_mono } else { sys::clock_ns(clock) };
    Ok(if target <= now_clock { now_mono } else { now_mono.saturating_add(target - now_clock) })
}

/// A `poll`-style timeout in milliseconds (negative: none) → absolute CLOCK_MONOTONIC
/// deadline (`None`: no limit).
#[inline]
pub fn deadline_in_ms(timeout_ms: c_int) -> Option<u64> {
    (timeout_ms >= 0).then(|| sys::now_ns().saturating_add(timeout_ms as u64 * 1_000_000))
}

/// Milliseconds left until `deadline`, for a `poll`/`epoll_wait` timeout: rounded up
/// (a wait never ends before its deadline), 0 once it passed, -1 for no deadline.
#[inline]
pub fn ms_until(deadline: Option<u64>) -> c_int {
    match deadline {
        None => -1,
        Some(d) => d.saturating_sub(sys::now_ns()).div_ceil(1_000_000).min(i32::MAX as u64) as c_int,
    }
}
