//! The mktime/tzset throttle (issue 4; DESIGN "Hidden serialization: mktime").
//!
//! glibc re-runs `tzset()` at the start of every `mktime`/`timelocal`, `localtime`,
//! `ctime` and `tzset` call. That takes glibc's process-wide tz lock and, when `TZ` is
//! unset (any daemon started by systemd), also frees and re-duplicates a string and
//! `stat`s `/etc/localtime` every time: logging libraries that call `mktime` per log
//! statement turn it into a serialization point.
//!
//! What we do instead:
//!
//! * **The gate.** The real `tzset` runs when at least one second has passed since its
//!   last run, or when the value of `TZ` differs from the one the last run saw (so the
//!   `setenv("TZ", …); tzset(); mktime(…)` idiom keeps working at once). Entering the
//!   real call goes through a try-lock: a caller that finds another one inside simply
//!   goes on with the zone that is loaded, it never waits. The lock word holds the
//!   time it was taken, so a holder lost in `fork` (or stuck for 5 s) is taken over.
//! * **Conversions** in between go through glibc's `localtime_r`, which only takes the
//!   tz lock for a moment and never re-reads `TZ` (glibc initializes it once). So a
//!   converted value is glibc's own, by construction.
//! * **mktime** is glibc's search algorithm as shipped since 2.37 and in the 2.35/2.36
//!   stable branches (Debian 12's 2.36-9+deb12u*): `__mktime_internal` — probe with
//!   the previous call's UTC offset, correct by the difference, oscillation at
//!   spring-forward gaps, the ±601200 s stride search for a requested `tm_isdst` with
//!   the one-hour fallback, leap second repair — written anew here over glibc's
//!   `localtime_r`. glibc older than 2.35 (a different isdst heuristic) gets the
//!   pass-through. It issues the same
//!   probes in the same order and keeps the same process-wide offset guess as glibc's
//!   static `localtime_offset` does, so results, `errno`, `tzname`, `timezone` and
//!   `daylight` come out as glibc's for every input.
//! * **localtime** converts with `localtime_r` into a private buffer and copies the
//!   result into glibc's static `struct tm` (the one `gmtime` also returns), so the
//!   pointer identity of glibc's `localtime`/`gmtime` is kept. `ctime` is
//!   `asctime(localtime(t))`, as in glibc.
//!
//! Differences from glibc (see scripts/README-tz.md): a replaced `/etc/localtime` (or
//! a `TZ` that names a file whose content changed, which glibc does not notice either
//! while `TZ` is unchanged) is picked up within a second instead of at the next call;
//! glibc-internal callers of mktime (`strftime("%s")`, `getdate`) keep using glibc's
//! own offset guess, which only matters for the choice between two valid answers at an
//! ambiguous local time with `tm_isdst = -1`.
//!
//! `FIBERIZE_TZ=off` turns all of this off (every export calls glibc's function).
//! `FIBERIZE=off` does not: the throttle is independent of the fiber runtime.
//!
//! Everything here is lock-free, TLS-free except `errno`, allocation-free, and usable
//! from fibers and plain threads alike.

use core::sync::atomic::{AtomicI64, AtomicU64, AtomicU8, Ordering::Relaxed, Ordering::Acquire, Ordering::Release};

use libc::{c_char, c_int, time_t, tm};

use crate::config;

mod real {
    use libc::{c_char, time_t, tm};
    crate::real_fns! {
        fn tzset() -> ();
        fn mktime(tp: *mut tm) -> time_t;
        fn timelocal(tp: *mut tm) -> time_t;
        fn localtime(t: *const time_t) -> *mut tm;
        fn localtime_r(t: *const time_t, tp: *mut tm) -> *mut tm;
        fn gmtime(t: *const time_t) -> *mut tm;
        fn ctime(t: *const time_t) -> *mut c_char;
        fn asctime(tp: *const tm) -> *mut c_char;
    }
}

// ---------------------------------------------------------------------------------
// On/off

const UNDECIDED: u8 = 0;
const ON: u8 = 1;
const OFF: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// Whether the throttle is in use (not `FIBERIZE_TZ=off`). Read once.
#[inline]
pub fn enabled() -> bool {
    match STATE.load(Relaxed) {
        ON => true,
        OFF => false,
        _ => decide(),
    }
}

#[cold]
fn decide() -> bool {
    // Set, non-empty and not a "yes" value (off, 0, false, no, disable...) means off.
    let off = (matches!(config::env_str(b"FIBERIZE_TZ\0"), Some(v) if !v.is_empty())
        && !config::env_flag(b"FIBERIZE_TZ\0"))
        || !glibc_supported();
    let _ = STATE.compare_exchange(UNDECIDED, if off { OFF } else { ON }, Relaxed, Relaxed);
    STATE.load(Relaxed) == ON
}

/// Whether the running glibc's mktime is the algorithm reimplemented here (>= 2.35).
fn glibc_supported() -> bool {
    // SAFETY: returns a static NUL-terminated string such as "2.36".
    let v = unsafe { core::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
    let mut it = v.to_str().unwrap_or("").split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    (major, minor) >= (2, 35)
}

// ---------------------------------------------------------------------------------
// The gate

/// Minimum distance between two runs of the real tzset (unless TZ changed).
const INTERVAL_NS: u64 = 1_000_000_000;
/// A try-lock held longer than this is considered lost (e.g. its holder forked away).
const STALE_NS: u64 = 5_000_000_000;

/// Coarse monotonic time (+1, so that 0 means "never") of the last real tzset.
static LAST_RUN: AtomicU64 = AtomicU64::new(0);
/// Hash of the TZ value the last real tzset saw.
static LAST_TZ: AtomicU64 = AtomicU64::new(0);
/// The try-lock: 0 when free, else the coarse time at which it was taken.
static BUSY: AtomicU64 = AtomicU64::new(0);
/// Number of real tzset runs (for tests and `fiberize_tz_real_tzset_calls`).
static REAL_RUNS: AtomicU64 = AtomicU64::new(0);
/// Number of gate checks that found the lock taken and went on without waiting.
static SKIPPED_BUSY: AtomicU64 = AtomicU64::new(0);

#[inline]
fn coarse_now() -> u64 {
    // CLOCK_MONOTONIC_COARSE goes through the vDSO (a few ns); its resolution (a few
    // ms) is plenty for a one-second gate. clock_gettime is not one of our exports.
    crate::sys::clock_ns(libc::CLOCK_MONOTONIC_COARSE).wrapping_add(1)
}

/// FNV-1a of the current TZ value; distinct constants for "unset".
#[inline]
fn tz_hash() -> u64 {
    match config::env_str(b"TZ\0") {
        None => 0x5a5a_0000_0000_0001,
        Some(v) => {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for &b in v {
                h ^= b as u64;
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
            h | 2 // never 0 (0 is "no run yet") nor the "unset" constant
        }
    }
}

/// Runs glibc's tzset if the gate says so and nobody else is running it.
#[inline]
fn maybe_tzset() {
    let now = coarse_now();
    let last = LAST_RUN.load(Relaxed);
    let h = tz_hash();
    if last != 0 && now.wrapping_sub(last) < INTERVAL_NS && h == LAST_TZ.load(Relaxed) {
        return;
    }
    run_tzset(now, h);
}

#[cold]
fn run_tzset(now: u64, h: u64) {
    let held = BUSY.load(Relaxed);
    if held != 0 && now.wrapping_sub(held) < STALE_NS {
        SKIPPED_BUSY.fetch_add(1, Relaxed);
        return;
    }
    if BUSY.compare_exchange(held, now, Acquire, Relaxed).is_err() {
        SKIPPED_BUSY.fetch_add(1, Relaxed);
        return;
    }
    // SAFETY: tzset has no preconditions. It takes glibc's own tz lock; callers that
    // convert meanwhile wait on that lock inside glibc, as they would natively.
    unsafe { real::tzset() };
    // `h` was read before the real call: if TZ changed in between, the next check
    // sees a different hash and runs tzset again.
    LAST_TZ.store(h, Relaxed);
    LAST_RUN.store(now, Relaxed);
    REAL_RUNS.fetch_add(1, Relaxed);
    BUSY.store(0, Release);
}

/// How many times glibc's real tzset ran on our behalf.
pub fn real_tzset_calls() -> u64 {
    REAL_RUNS.load(Relaxed)
}

/// How many gate checks found another caller inside the real tzset and went on.
pub fn skipped_busy() -> u64 {
    SKIPPED_BUSY.load(Relaxed)
}

// ---------------------------------------------------------------------------------
// Entry points (called by interpose/src/exports/time.rs)

/// `tzset()`: the real one at most once a second, or at once when TZ changed.
///
/// # Safety
/// None beyond glibc's (it reads the environment).
pub unsafe fn tzset() {
    if !enabled() {
        // SAFETY: no arguments.
        return unsafe { real::tzset() };
    }
    maybe_tzset();
}

/// `mktime(tp)` / `timelocal(tp)`.
///
/// # Safety
/// `tp` must be valid for reads and writes of a `struct tm` (as for glibc).
pub unsafe fn mktime(tp: *mut tm) -> time_t {
    if !enabled() || tp.is_null() {
        // SAFETY: forwarded contract (a null pointer faults inside glibc, as natively).
        return unsafe { real::mktime(tp) };
    }
    maybe_tzset();
    // SAFETY: the caller passes a valid struct tm.
    unsafe { mktime_local(&mut *tp) }
}

/// `timelocal(tp)`: glibc's alias of mktime.
///
/// # Safety
/// As [`mktime`].
pub unsafe fn timelocal(tp: *mut tm) -> time_t {
    if !enabled() || tp.is_null() {
        // SAFETY: forwarded contract.
        return unsafe { real::timelocal(tp) };
    }
    // SAFETY: forwarded contract.
    unsafe { mktime(tp) }
}

/// glibc's static `struct tm`, shared by `localtime` and `gmtime`.
static TMBUF: AtomicU64 = AtomicU64::new(0);

fn glibc_tmbuf() -> *mut tm {
    let p = TMBUF.load(Relaxed);
    if p != 0 {
        return p as *mut tm;
    }
    let zero: time_t = 0;
    // SAFETY: gmtime(0) cannot fail; it returns glibc's static buffer (the same one
    // glibc's localtime fills). The caller overwrites it right away.
    let p = unsafe { real::gmtime(&zero) };
    if p.is_null() {
        crate::fatal(&["tz: gmtime(0) failed"]);
    }
    TMBUF.store(p as u64, Relaxed);
    p
}

/// `localtime(t)`: converts with the loaded zone into glibc's static buffer.
///
/// # Safety
/// `t` must be valid for reads (as for glibc).
pub unsafe fn localtime(t: *const time_t) -> *mut tm {
    if !enabled() || t.is_null() {
        // SAFETY: forwarded contract.
        return unsafe { real::localtime(t) };
    }
    maybe_tzset();
    // A private buffer: glibc's localtime_r called with glibc's own static buffer
    // would re-run tzset itself (it recognizes the buffer).
    // SAFETY: all-zero is a valid struct tm (tm_zone null).
    let mut out: tm = unsafe { core::mem::zeroed() };
    // SAFETY: `t` is readable (caller), `out` is ours.
    if unsafe { real::localtime_r(t, &mut out) }.is_null() {
        return core::ptr::null_mut(); // errno = EOVERFLOW, set by glibc
    }
    let buf = glibc_tmbuf();
    // SAFETY: `buf` is glibc's static struct tm; localtime's result is not
    // thread-safe natively either.
    unsafe { buf.write(out) };
    buf
}

/// `ctime(t)` = `asctime(localtime(t))`, as glibc defines it.
///
/// # Safety
/// `t` must be valid for reads (as for glibc).
pub unsafe fn ctime(t: *const time_t) -> *mut c_char {
    if !enabled() || t.is_null() {
        // SAFETY: forwarded contract.
        return unsafe { real::ctime(t) };
    }
    // SAFETY: forwarded contract; asctime(NULL) fails with EINVAL like glibc's ctime.
    unsafe { real::asctime(localtime(t)) }
}

// ---------------------------------------------------------------------------------
// mktime: glibc 2.36's search, over glibc's localtime_r

/// glibc's `localtime_offset`: the UTC offset guess carried from one call to the next.
static OFFSET_GUESS: AtomicI64 = AtomicI64::new(0);

/// Days before each month, normal and leap years.
const MON_YDAY: [[u16; 13]; 2] = [
    [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334, 365],
    [0, 31, 60, 91, 121, 152, 182, 213, 244, 274, 305, 335, 366],
];

/// Shortest DST (or non-DST between DST) period in the tz database, seconds.
const ISDST_STRIDE: i32 = 601_200;
/// Longest period (of DST, or of non-DST) whose DST difference is not one hour, in
/// the tz database: the isdst search covers half of it each way.
const ISDST_DURATION_MAX: i32 = 457_243_209;
/// How many leap-second probes glibc allows before giving up with EOVERFLOW.
const MAX_PROBES: i32 = 6;

#[inline]
fn errno() -> c_int {
    // SAFETY: __errno_location returns this thread's (fiber's) errno slot.
    unsafe { *libc::__errno_location() }
}

#[inline]
fn set_errno(e: c_int) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = e };
}

/// Is `tm_year` (years since 1900) a leap year? Works for negative years.
fn is_leap(year: i64) -> bool {
    // (1900 + year) % 400 == 0  ⟺  (year / 100) % 4 == 1 for year % 100 == 0, written
    // without adding 1900 (which could overflow in C).
    (year & 3) == 0 && (year % 100 != 0 || ((year / 100) & 3) == (-19i64 & 3))
}

/// Floor-dividing shift (`a >> b` on two's complement).
#[inline]
fn shr(a: i64, b: u32) -> i64 {
    a >> b
}

/// Seconds from (year0, yday0 hour0:min0:sec0) to (year1, yday1 hour1:min1:sec1),
/// years counted from 1900, fields not necessarily in range, no clock changes.
#[allow(clippy::too_many_arguments)]
fn ydhms_diff(year1: i64, yday1: i64, hour1: c_int, min1: c_int, sec1: c_int,
              year0: c_int, yday0: c_int, hour0: c_int, min0: c_int, sec0: c_int) -> i64 {
    // Leap days between the two years, valid for negative years too. The quotients
    // fit in 32 bits (as in glibc, where they are `int`).
    let leap4 = |y: i64| (shr(y, 2) + shr(1900, 2) - ((y & 3) == 0) as i64) as i32;
    let cent = |q: i32| {
        let neg = (q < 0) as i32;
        (q + neg) / 25 - neg
    };
    let (a4, b4) = (leap4(year1), leap4(year0 as i64));
    let (a100, b100) = (cent(a4), cent(b4));
    let (a400, b400) = (shr(a100 as i64, 2) as i32, shr(b100 as i64, 2) as i32);
    let leaps = a4.wrapping_sub(b4)
        .wrapping_sub(a100.wrapping_sub(b100))
        .wrapping_add(a400.wrapping_sub(b400));

    let years = year1.wrapping_sub(year0 as i64);
    let days = (365i64.wrapping_mul(years)).wrapping_add(yday1).wrapping_sub(yday0 as i64)
        .wrapping_add(leaps as i64);
    let hours = (24i64.wrapping_mul(days)).wrapping_add(hour1 as i64).wrapping_sub(hour0 as i64);
    let minutes = (60i64.wrapping_mul(hours)).wrapping_add(min1 as i64).wrapping_sub(min0 as i64);
    (60i64.wrapping_mul(minutes)).wrapping_add(sec1 as i64).wrapping_sub(sec0 as i64)
}

/// The requested broken-down time, with month folded into the year.
struct Want {
    year: i64,
    yday: i64,
    hour: c_int,
    min: c_int,
    sec: c_int,
}

impl Want {
    /// Requested time minus the converted `got`, in seconds.
    fn diff(&self, got: &tm) -> i64 {
        ydhms_diff(self.year, self.yday, self.hour, self.min, self.sec,
                   got.tm_year, got.tm_yday, got.tm_hour, got.tm_min, got.tm_sec)
    }
}

/// tm_isdst values differ in the sense of mktime: one zero, the other positive.
#[inline]
fn isdst_differ(a: c_int, b: c_int) -> bool {
    ((a == 0) != (b == 0)) && a >= 0 && b >= 0
}

/// glibc's localtime_r (no tzset; the tz lock only). Errors leave errno set.
#[inline]
fn convert(t: i64, out: &mut tm) -> bool {
    let x: time_t = t;
    // SAFETY: both pointers are valid for the call.
    !unsafe { real::localtime_r(&x, out) }.is_null()
}

/// Average rounding toward +infinity without overflow.
#[inline]
fn avg_up(a: i64, b: i64) -> i64 {
    shr(a, 1) + shr(b, 1) + ((a | b) & 1)
}

/// Converts `*t`; if it is out of range (EOVERFLOW), converts instead the in-range
/// time nearest to it between 0 and `*t` (binary search) and stores that in `*t`.
fn ranged_convert(t: &mut i64, out: &mut tm) -> bool {
    if convert(*t, out) {
        return true;
    }
    if errno() != libc::EOVERFLOW {
        return false;
    }
    let mut bad = *t;
    let mut ok = 0i64;
    let mut ok_tm: Option<tm> = None;
    loop {
        let mid = avg_up(ok, bad);
        if mid == ok || mid == bad {
            break;
        }
        if convert(mid, out) {
            ok = mid;
            ok_tm = Some(*out);
        } else if errno() != libc::EOVERFLOW {
            return false;
        } else {
            bad = mid;
        }
    }
    match ok_tm {
        Some(v) => {
            *t = ok;
            *out = v;
            true
        }
        None => false,
    }
}

/// mktime for the loaded zone: normalizes `*tp` and returns its time_t, or -1 with
/// errno (EOVERFLOW) leaving `*tp` alone.
fn mktime_local(tp: &mut tm) -> time_t {
    let isdst = tp.tm_isdst;

    // Month into range, carrying into the year; then day of year (not in range).
    let mon_rem = tp.tm_mon % 12;
    let mon_neg = (mon_rem < 0) as c_int;
    let year = tp.tm_year as i64 + (tp.tm_mon / 12 - mon_neg) as i64;
    let month = (mon_rem + 12 * mon_neg) as usize; // 0..=11
    let yday = (MON_YDAY[is_leap(year) as usize][month] as i64 - 1) + tp.tm_mday as i64;

    // ydhms_diff counts 60-second minutes: clamp, and apply the requested seconds at
    // the end (this also repairs a false match on a leap second).
    let sec_requested = tp.tm_sec;
    let sec = sec_requested.clamp(0, 59);
    let want = Want { year, yday, hour: tp.tm_hour, min: tp.tm_min, sec };

    // First probe: the requested time read as UTC, shifted by the previous offset.
    let off = OFFSET_GUESS.load(Relaxed);
    let neg_guess = 0i64.wrapping_sub(off) as i32;
    let t0 = ydhms_diff(year, yday, want.hour, want.min, sec, 70, 0, 0, 0, neg_guess);

    // SAFETY: all-zero is a valid struct tm.
    let mut got: tm = unsafe { core::mem::zeroed() };
    let mut t = t0;
    let (mut t1, mut t2) = (t0, t0);
    let mut prev_dst = false;
    let mut probes_left = MAX_PROBES;
    let mut matched = true; // false: settled on a spring-forward gap
    loop {
        if !ranged_convert(&mut t, &mut got) {
            return -1;
        }
        let dt = want.diff(&got);
        if dt == 0 {
            break;
        }
        // Oscillating between two times: the request falls in a gap. Take the probe we
        // are at; with tm_isdst = -1 prefer a DST result when only one of the two is.
        let got_dst = got.tm_isdst != 0;
        let oscillating = t == t1 && t != t2;
        if oscillating
            && (got.tm_isdst < 0
                || if isdst < 0 { prev_dst <= got_dst } else { (isdst != 0) != got_dst })
        {
            matched = false;
            break;
        }
        probes_left -= 1;
        if probes_left == 0 {
            set_errno(libc::EOVERFLOW);
            return -1;
        }
        t1 = t2;
        t2 = t;
        t = t.wrapping_add(dt);
        prev_dst = got_dst;
    }

    if matched && isdst_differ(isdst, got.tm_isdst) {
        // The wall time exists but with the other tm_isdst: look at neighbouring times
        // for one with the requested tm_isdst and use its UTC offset.
        match find_isdst_neighbour(&want, isdst, t, &mut got) {
            Some(Ok(gt)) => t = gt,
            Some(Err(())) => return -1,
            None => {
                // None nearby: assume a one-hour DST difference.
                let dst_difference = (isdst == 0) as i64 - (got.tm_isdst == 0) as i64;
                t = t.wrapping_add(3600 * dst_difference);
                if !convert(t, &mut got) {
                    set_errno(libc::EOVERFLOW);
                    return -1;
                }
            }
        }
    }

    // Remember the offset for the next call (glibc stores it unconditionally; writing
    // only on change keeps the cache line shared between cores).
    let new_off = t.wrapping_sub(t0).wrapping_sub(neg_guess as i64);
    if OFFSET_GUESS.load(Relaxed) != new_off {
        OFFSET_GUESS.store(new_off, Relaxed);
    }

    if sec_requested != got.tm_sec {
        let adjust = ((sec == 0 && got.tm_sec == 60) as i64) - sec as i64 + sec_requested as i64;
        match t.checked_add(adjust) {
            Some(v) => t = v,
            None => {
                set_errno(libc::EOVERFLOW);
                return -1;
            }
        }
        if !convert(t, &mut got) {
            return -1;
        }
    }

    *tp = got;
    t
}

/// Probes t ± k·stride (k = 1, 2, … up to half the longest DST period) for a time with
/// the requested tm_isdst, and extrapolates from it to the wanted wall time.
/// `Some(Ok(t))`: found (and `got` holds its conversion); `Some(Err)`: a conversion
/// failed with an error other than EOVERFLOW; `None`: not found.
fn find_isdst_neighbour(want: &Want, isdst: c_int, t: i64, got: &mut tm) -> Option<Result<i64, ()>> {
    let bound = ISDST_DURATION_MAX / 2 + ISDST_STRIDE;
    let mut delta = ISDST_STRIDE;
    while delta < bound {
        for direction in [-1i32, 1] {
            let Some(mut ot) = t.checked_add((delta * direction) as i64) else { continue };
            // SAFETY: all-zero is a valid struct tm.
            let mut otm: tm = unsafe { core::mem::zeroed() };
            if !ranged_convert(&mut ot, &mut otm) {
                return Some(Err(()));
            }
            if isdst_differ(isdst, otm.tm_isdst) {
                continue;
            }
            let gt = ot.wrapping_add(want.diff(&otm));
            if convert(gt, got) {
                return Some(Ok(gt));
            }
            if errno() != libc::EOVERFLOW {
                return Some(Err(()));
            }
        }
        delta += ISDST_STRIDE;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leap_years() {
        // tm_year counts from 1900.
        assert!(is_leap(100)); // 2000
        assert!(!is_leap(0)); // 1900
        assert!(!is_leap(200)); // 2100
        assert!(is_leap(124)); // 2024
        assert!(is_leap(-300)); // 1600
        assert!(!is_leap(-1800)); // 100
        assert!(is_leap(-1904)); // -4
    }

    #[test]
    fn ydhms_matches_calendar() {
        // 1970-01-01 00:00:00 is 0; 2000-03-01 is day 11017 since the epoch.
        assert_eq!(ydhms_diff(70, 0, 0, 0, 0, 70, 0, 0, 0, 0), 0);
        assert_eq!(ydhms_diff(100, 60, 0, 0, 0, 70, 0, 0, 0, 0), 11017 * 86400);
        assert_eq!(ydhms_diff(69, 364, 23, 59, 59, 70, 0, 0, 0, 0), -1);
        assert_eq!(ydhms_diff(-1900, 0, 0, 0, 0, 70, 0, 0, 0, 0), -62167219200);
    }

    #[test]
    fn mktime_agrees_with_glibc_here() {
        // The test binary is not preloaded: our search over localtime_r must equal
        // glibc's mktime for whatever zone this process has (TZ of the test run).
        let mut state: u64 = 0x1234_5678;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for i in 0..20000 {
            // SAFETY: all-zero is a valid struct tm.
            let mut a: tm = unsafe { core::mem::zeroed() };
            a.tm_year = (next() % 300) as c_int;
            a.tm_mon = (next() % 14) as c_int - 1;
            a.tm_mday = (next() % 33) as c_int;
            a.tm_hour = (next() % 26) as c_int - 1;
            a.tm_min = (next() % 61) as c_int;
            a.tm_sec = (next() % 62) as c_int;
            a.tm_isdst = (next() % 3) as c_int - 1;
            let mut b = a;
            set_errno(0);
            // SAFETY: valid struct tm.
            let rb = unsafe { libc::mktime(&mut b) };
            let eb = errno();
            set_errno(0);
            let ra = mktime_local(&mut a);
            let ea = errno();
            assert_eq!((ra, ea), (rb, eb), "input #{i} {} {} {} {} {} {} {}", b.tm_year, b.tm_mon, b.tm_mday, b.tm_hour, b.tm_min, b.tm_sec, b.tm_isdst);
            assert_eq!((a.tm_year, a.tm_yday, a.tm_hour, a.tm_min, a.tm_sec, a.tm_isdst, a.tm_gmtoff),
                       (b.tm_year, b.tm_yday, b.tm_hour, b.tm_min, b.tm_sec, b.tm_isdst, b.tm_gmtoff));
        }
    }
}
