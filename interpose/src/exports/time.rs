//! Time-zone exports (docs/DESIGN.md §2.17): the entry points where glibc re-runs
//! `tzset` on every call. All the logic is in `fiberize_rt::tz`; these are the C ABI
//! only.
//!
//! They do not consult the runtime's gate: the throttle also applies with
//! `FIBERIZE=off` and to plain threads, and is turned off with `FIBERIZE_TZ=off`.
//! Not exported (no per-call tzset in glibc): `localtime_r`, `gmtime*`, `ctime_r`,
//! `asctime*`, `timegm`. glibc-internal users of its own mktime/tzset (`strftime` with
//! `%s`, or `%Z` when `tm_zone` is null; `getdate`) are out of our reach.

use libc::{c_char, c_ulonglong, time_t, tm};

use fiberize_rt::tz;

/// # Safety
/// As glibc's `mktime`: `tp` points to a valid `struct tm`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn mktime(tp: *mut tm) -> time_t {
    // SAFETY: `tp` points to a valid, writable struct tm (mktime's contract, this fn's #
    // Safety), which `tz::mktime` normalises in place.
    unsafe { tz::mktime(tp) }
}

/// glibc's alias of `mktime`.
///
/// # Safety
/// As glibc's `timelocal`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn timelocal(tp: *mut tm) -> time_t {
    // SAFETY: `tp` points to a writable struct tm (timelocal's contract, as mktime's), which
    // `tz::timelocal` requires.
    unsafe { tz::timelocal(tp) }
}

/// # Safety
/// As glibc's `tzset`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn tzset() {
    // SAFETY: no arguments.
    unsafe { tz::tzset() }
}

/// # Safety
/// As glibc's `localtime`: `t` points to a readable `time_t`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn localtime(t: *const time_t) -> *mut tm {
    // SAFETY: `t` points to a readable time_t (localtime's contract, this fn's # Safety), as
    // `tz::localtime` requires.
    unsafe { tz::localtime(t) }
}

/// # Safety
/// As glibc's `ctime`: `t` points to a readable `time_t`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn ctime(t: *const time_t) -> *mut c_char {
    // SAFETY: `t` points to a readable time_t (ctime's contract, this fn's # Safety), as
    // `tz::ctime` requires.
    unsafe { tz::ctime(t) }
}

/// Marker and statistic: how many times glibc's real `tzset` ran on the throttle's
/// behalf in this process (0 while nothing called the exports above).
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn fiberize_tz_real_tzset_calls() -> c_ulonglong {
    tz::real_tzset_calls()
}

/// 1 when the tz throttle is in use (not `FIBERIZE_TZ=off`), else 0.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn fiberize_tz_active() -> libc::c_int {
    tz::enabled() as libc::c_int
}

/// 1 when conversions of the current zone come from the interval cache (a zone file
/// glibc and we agree on), else 0 (glibc converts: POSIX TZ strings, leap seconds...).
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn fiberize_tz_cache_active() -> libc::c_int {
    tz::cache_active() as libc::c_int
}

/// How many intervals (between two transitions of the zone) glibc has confirmed.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn fiberize_tz_cache_intervals() -> libc::c_uint {
    tz::cache_intervals()
}
