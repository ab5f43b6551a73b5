//! The mktime/tzset throttle (issue 4; docs/DESIGN.md §2.17).
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
//!   `setenv("TZ", …); mktime(…)` idiom keeps working at once). Entering the real call
//!   goes through a try-lock: a caller that finds another one inside simply goes on
//!   with the zone that is loaded, it never waits. The lock word holds the time it was
//!   taken, so a holder lost in `fork` (or stuck for 5 s) is taken over.
//! * **Conversions** in between never re-read `TZ`. They come from an interval cache
//!   (module `zone`): the transitions of the zone file glibc loaded, each interval
//!   confirmed once by glibc's own `localtime_r`, then broken down without glibc's tz
//!   lock. What the cache does not cover (POSIX TZ strings, leap-second files, times
//!   past a file's last transition) goes to glibc's `localtime_r`, which takes the tz
//!   lock for a moment but does not re-run tzset.
//! * **mktime** is glibc's search algorithm as shipped since 2.37 and in the 2.35/2.36
//!   stable branches (Debian 12's 2.36-9+deb12u*): `__mktime_internal` — probe with
//!   the previous call's UTC offset, correct by the difference, oscillation at
//!   spring-forward gaps, the ±601200 s stride search for a requested `tm_isdst` with
//!   the one-hour fallback, leap second repair — written anew here over those
//!   conversions. It issues the same probes in the same order and keeps the same
//!   process-wide offset guess as glibc's static `localtime_offset`, so results,
//!   `errno`, the normalized `struct tm`, `tzname`, `timezone` and `daylight` come out
//!   as glibc's for every input. glibc older than 2.35 (another isdst heuristic) gets
//!   the pass-through.
//! * **localtime** converts into a private buffer and copies the result into glibc's
//!   static `struct tm` (the one `gmtime` also returns), so the pointer identity of
//!   glibc's `localtime`/`gmtime` is kept. `ctime` is `asctime(localtime(t))`, as in
//!   glibc.
//!
//! Differences from glibc (see the README, "Time zones"): a replaced `/etc/localtime`
//! is picked up within a second instead of at the next call (with `TZ` set, glibc does
//! not look at the file again either); glibc-internal callers of its mktime
//! (`strftime("%s")`, `getdate`) keep using glibc's own offset guess, which only
//! matters for the choice between two valid answers at an ambiguous local time with
//! `tm_isdst = -1`.
//!
//! `FIBERIZE_TZ=off` turns all of this off (every export calls glibc's function).
//! `FIBERIZE=off` does not: the throttle is independent of the fiber runtime.
//!
//! The hot paths are lock-free, allocation-free, TLS-free except `errno`, and usable
//! from fibers and plain threads alike. Only the owner of the gate allocates (a zone's
//! tables, once per zone file) and reads a file (with raw system calls).

use core::sync::atomic::{AtomicI64, AtomicU64, AtomicU8, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};

use libc::{c_char, c_int, time_t, tm};

use crate::base::config;
use crate::base::sys::{errno, set_errno};

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
    let off = (matches!(config::env_str(b"FIBERIZE_TZ\0"), Some(v) if !v.is_empty()) && !config::env_flag(b"FIBERIZE_TZ\0"))
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
    crate::base::sys::clock_ns(libc::CLOCK_MONOTONIC_COARSE).wrapping_add(1)
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
    let first = LAST_RUN.load(Relaxed) == 0;
    let tz_changed = h != LAST_TZ.load(Relaxed);
    if tz_changed {
        // glibc is about to load another zone: until we know which, convert through
        // glibc (a thread racing with a TZ change may see either zone, as natively).
        zone::set_active(core::ptr::null());
    }
    // SAFETY: tzset has no preconditions. It takes glibc's own tz lock; callers that
    // convert meanwhile wait on that lock inside glibc, as they would natively.
    unsafe { real::tzset() };
    // glibc reloads its zone when TZ changed, and when TZ is unset and the file
    // /etc/localtime is another one than before; we follow it in the same cases.
    if first || tz_changed || config::env_str(b"TZ\0").is_none() {
        zone::select();
    }
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

/// Whether conversions of the current zone are served by the interval cache.
pub fn cache_active() -> bool {
    zone::active()
}

/// Intervals the cache has confirmed with glibc so far.
pub fn cache_intervals() -> u32 {
    zone::FILLED.load(Relaxed)
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
    // SAFETY: `t` is readable (caller).
    if !convert(unsafe { *t }, &mut out) {
        return core::ptr::null_mut(); // errno = EOVERFLOW, as glibc's
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
const MON_YDAY: [[u16; 13]; 2] =
    [[0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334, 365], [0, 31, 60, 91, 121, 152, 182, 213, 244, 274, 305, 335, 366]];

/// Shortest DST (or non-DST between DST) period in the tz database, seconds.
const ISDST_STRIDE: i32 = 601_200;
/// Longest period (of DST, or of non-DST) whose DST difference is not one hour, in
/// the tz database: the isdst search covers half of it each way.
const ISDST_DURATION_MAX: i32 = 457_243_209;
/// How many leap-second probes glibc allows before giving up with EOVERFLOW.
const MAX_PROBES: i32 = 6;

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
fn ydhms_diff(
    year1: i64,
    yday1: i64,
    hour1: c_int,
    min1: c_int,
    sec1: c_int,
    year0: c_int,
    yday0: c_int,
    hour0: c_int,
    min0: c_int,
    sec0: c_int,
) -> i64 {
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
    let leaps = a4.wrapping_sub(b4).wrapping_sub(a100.wrapping_sub(b100)).wrapping_add(a400.wrapping_sub(b400));

    let years = year1.wrapping_sub(year0 as i64);
    let days = (365i64.wrapping_mul(years)).wrapping_add(yday1).wrapping_sub(yday0 as i64).wrapping_add(leaps as i64);
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
        ydhms_diff(
            self.year,
            self.yday,
            self.hour,
            self.min,
            self.sec,
            got.tm_year,
            got.tm_yday,
            got.tm_hour,
            got.tm_min,
            got.tm_sec,
        )
    }
}

/// tm_isdst values differ in the sense of mktime: one zero, the other positive.
#[inline]
fn isdst_differ(a: c_int, b: c_int) -> bool {
    ((a == 0) != (b == 0)) && a >= 0 && b >= 0
}

/// localtime_r for the loaded zone: from the interval cache when it covers `t`, else
/// glibc's localtime_r (no tzset; the tz lock only). Errors set errno (EOVERFLOW).
#[inline]
fn convert(t: i64, out: &mut tm) -> bool {
    if let Some(ok) = zone::convert_cached(t, out) {
        return ok;
    }
    glibc_localtime_r(t, out)
}

#[inline]
fn glibc_localtime_r(t: i64, out: &mut tm) -> bool {
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
        if oscillating && (got.tm_isdst < 0 || if isdst < 0 { prev_dst <= got_dst } else { (isdst != 0) != got_dst }) {
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

// ---------------------------------------------------------------------------------
// The interval cache: glibc's conversions without glibc's lock

/// Converting a time through glibc's `localtime_r` takes glibc's tz lock; with many
/// threads that lock, not the arithmetic, bounds mktime's throughput. This cache lets
/// most conversions skip it, and still produce glibc's exact results.
///
/// When glibc has loaded a zone file (TZif version 2+), we read the same file
/// (the path glibc uses: `TZ` with `""` → `Universal` and a leading `:` dropped,
/// relative names under `TZDIR` or /usr/share/zoneinfo, `/etc/localtime` when unset).
/// Its transition times cut the time line into intervals; inside one, glibc's
/// `localtime_r` is `t + utoff` broken down (its `__offtime`) plus the fixed
/// `tm_isdst`, `tm_gmtoff`, `tm_zone` of the interval's type, and it sets the globals
/// `tzname`, `daylight` and `timezone` to values that depend only on the interval.
///
/// An interval is used from the cache only after glibc itself converted a time in it
/// and agreed with everything we derived from the file: the type, the broken-down
/// time, the zone name, `tzname` (computed from the file the way glibc does),
/// `daylight`, `timezone`, and glibc's values just inside both ends and just outside
/// them (so the boundaries are glibc's). The pointers (`tm_zone`, `tzname[]`) are
/// taken from glibc's result: glibc interns zone names, so equal names are equal
/// pointers. Any disagreement about the conversion itself marks the zone unusable and
/// everything goes to glibc; a snapshot of the globals spoiled by another thread's
/// glibc conversion is only retried later.
///
/// Not cached (glibc converts): zones given as POSIX TZ strings, files with leap
/// seconds (`right/…`), times after the last transition of a file with a POSIX rule
/// footer (after 2037 for Debian's "fat" tzdata), set-uid programs (glibc restricts
/// their paths), version-1 files.
///
/// Zones are kept for the life of the process (readers never wait for a reclaim):
/// at most [`MAX_ZONES`] distinct files; beyond that new zones go uncached.
mod zone {
    use core::sync::atomic::{
        AtomicBool, AtomicI32, AtomicI64, AtomicPtr, AtomicU32, AtomicU8, AtomicUsize,
        Ordering::{Acquire, Relaxed, Release},
    };

    use libc::{c_char, c_int, c_long, tm};

    use super::{errno, glibc_localtime_r, set_errno, MON_YDAY};
    use crate::base::config;
    use crate::base::sys::syscall6;

    pub const MAX_ZONES: usize = 16;
    const MAX_FILE: usize = 1 << 20;
    const AT_SECURE: libc::c_ulong = 23;

    extern "C" {
        // glibc's own names for tzname/daylight/timezone (what it writes internally;
        // a program's copy relocation defines both names at one address).
        static mut __tzname: [*mut c_char; 2];
        static mut __daylight: c_int;
        static mut __timezone: c_long;
    }

    #[derive(Clone, Copy, PartialEq, Eq)]
    struct Ident {
        dev: u64,
        ino: u64,
        size: i64,
        mtime: i64,
        mtime_ns: i64,
    }

    #[derive(Clone, Copy)]
    struct TType {
        utoff: i64,
        isdst: c_int,
        /// Start of the NUL-terminated name in `chars`.
        name: usize,
    }

    const E_UNKNOWN: u8 = 0;
    const E_FILLING: u8 = 1;
    const E_READY: u8 = 2;

    /// What glibc showed for one interval.
    struct Entry {
        state: AtomicU8,
        zone: AtomicUsize,
        tzname0: AtomicUsize,
        tzname1: AtomicUsize,
    }

    pub struct Zone {
        ident: Ident,
        trans: Box<[i64]>,
        idx: Box<[u8]>,
        types: Box<[TType]>,
        chars: Box<[u8]>,
        /// The file has a POSIX-rule footer: glibc computes times after the last
        /// transition from it (not cached).
        has_spec: bool,
        /// `daylight` and `timezone` as glibc derives them from this file.
        daylight: c_int,
        timezone: c_long,
        /// One entry per interval: before the first transition, between each pair,
        /// after the last.
        entries: Box<[Entry]>,
        /// glibc disagreed with us once: never use this zone.
        bad: AtomicBool,
        /// The interval of the last cached conversion (most conversions are near
        /// "now"): checked before the binary search. Own cache line: written only when
        /// conversions move to another interval.
        hint: Hint,
    }

    #[repr(align(64))]
    struct Hint(AtomicUsize);

    static ACTIVE: AtomicPtr<Zone> = AtomicPtr::new(core::ptr::null_mut());
    static ZONES: [AtomicPtr<Zone>; MAX_ZONES] = [const { AtomicPtr::new(core::ptr::null_mut()) }; MAX_ZONES];
    /// Intervals glibc confirmed, and fills abandoned because another thread's glibc
    /// conversion changed tzname & co. under our snapshot (statistics).
    pub static FILLED: AtomicU32 = AtomicU32::new(0);
    pub static SPOILED: AtomicU32 = AtomicU32::new(0);
    /// After this many spoiled snapshots, a zone is no longer cached.
    const MAX_SPOILED: u32 = 1000;

    pub fn set_active(z: *const Zone) {
        ACTIVE.store(z as *mut Zone, Release);
    }

    /// Whether a usable zone file is in use by the cache (for tests and stats).
    pub fn active() -> bool {
        let z = ACTIVE.load(Acquire);
        // SAFETY: zones are never freed.
        !z.is_null() && !unsafe { (*z).bad.load(Relaxed) }
    }

    /// After a real tzset that may have (re)loaded glibc's zone: find the file glibc
    /// uses and make its zone the active one (or none). Called by the gate's owner only.
    pub fn select() {
        let z = find_or_load();
        set_active(z);
    }

    fn find_or_load() -> *const Zone {
        // SAFETY: getauxval has no preconditions.
        if unsafe { libc::getauxval(AT_SECURE) } != 0 {
            return core::ptr::null();
        }
        let mut path = [0u8; 4096];
        let Some(len) = zone_path(&mut path) else { return core::ptr::null() };
        let Some(fd) = open(&path[..=len]) else { return core::ptr::null() };
        let z = load(fd);
        close(fd);
        z
    }

    /// The file glibc's tzset reads for the current TZ, NUL-terminated in `buf`;
    /// returns its length without the NUL. None when glibc reads no file for it.
    fn zone_path(buf: &mut [u8; 4096]) -> Option<usize> {
        let tz: &[u8] = match config::env_str(b"TZ\0") {
            None => b"/etc/localtime",
            Some(b"") => b"Universal",
            Some(v) => v.strip_prefix(b":").unwrap_or(v),
        };
        if tz.is_empty() {
            return None;
        }
        let mut n = 0;
        let mut put = |part: &[u8]| -> Option<()> {
            let end = n + part.len();
            if end >= buf.len() || part.contains(&0) {
                return None;
            }
            buf[n..end].copy_from_slice(part);
            n = end;
            Some(())
        };
        if tz[0] != b'/' {
            let dir: &[u8] = match config::env_str(b"TZDIR\0") {
                Some(d) if !d.is_empty() => d,
                _ => b"/usr/share/zoneinfo",
            };
            put(dir)?;
            put(b"/")?;
        }
        put(tz)?;
        buf[n] = 0;
        Some(n)
    }

    fn open(path_nul: &[u8]) -> Option<usize> {
        // SAFETY: NUL-terminated path; raw system call (open may be one of our exports).
        let fd = unsafe {
            syscall6(
                libc::SYS_openat as usize,
                libc::AT_FDCWD as usize,
                path_nul.as_ptr() as usize,
                (libc::O_RDONLY | libc::O_CLOEXEC) as usize,
                0,
                0,
                0,
            )
        };
        (fd >= 0).then_some(fd as usize)
    }

    fn close(fd: usize) {
        // SAFETY: closing our own descriptor.
        unsafe { syscall6(libc::SYS_close as usize, fd, 0, 0, 0, 0, 0) };
    }

    fn load(fd: usize) -> *const Zone {
        // SAFETY: all-zero is a valid struct stat; fstat fills it.
        let mut st: libc::stat = unsafe { core::mem::zeroed() };
        // SAFETY: `st` is a valid out-parameter.
        if unsafe { syscall6(libc::SYS_fstat as usize, fd, &mut st as *mut libc::stat as usize, 0, 0, 0, 0) } != 0 {
            return core::ptr::null();
        }
        let ident = Ident { dev: st.st_dev, ino: st.st_ino, size: st.st_size, mtime: st.st_mtime, mtime_ns: st.st_mtime_nsec };
        let cur = ACTIVE.load(Acquire);
        // SAFETY: zones are never freed.
        if !cur.is_null() && unsafe { (*cur).ident } == ident {
            return cur;
        }
        let mut free_slot = None;
        for (i, slot) in ZONES.iter().enumerate() {
            let z = slot.load(Acquire);
            if z.is_null() {
                free_slot.get_or_insert(i);
            // SAFETY: zones are never freed.
            } else if unsafe { (*z).ident } == ident {
                // SAFETY: as above.
                return if unsafe { (*z).bad.load(Relaxed) } { core::ptr::null() } else { z };
            }
        }
        let Some(slot) = free_slot else { return core::ptr::null() };
        if st.st_size <= 0 || st.st_size as usize > MAX_FILE {
            return core::ptr::null();
        }
        let mut data = vec![0u8; st.st_size as usize];
        let mut got = 0;
        while got < data.len() {
            // SAFETY: reading into the unfilled tail of `data`.
            let n =
                unsafe { syscall6(libc::SYS_read as usize, fd, data[got..].as_mut_ptr() as usize, data.len() - got, 0, 0, 0) };
            if n == -(libc::EINTR as isize) {
                continue;
            }
            if n <= 0 {
                return core::ptr::null();
            }
            got += n as usize;
        }
        let Some(z) = parse(&data, ident) else { return core::ptr::null() };
        let z = Box::into_raw(Box::new(z));
        ZONES[slot].store(z, Release);
        z
    }

    fn be32(d: &[u8], at: usize) -> Option<i64> {
        let b = d.get(at..at + 4)?;
        Some(i32::from_be_bytes([b[0], b[1], b[2], b[3]]) as i64)
    }

    fn be64(d: &[u8], at: usize) -> Option<i64> {
        let b = d.get(at..at + 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(i64::from_be_bytes(a))
    }

    /// Parses a TZif file (RFC 8536) the way glibc's `__tzfile_read` accepts it, and
    /// refuses whatever the cache does not handle (version 1, leap seconds, unsorted
    /// transitions, names not inside the name table).
    fn parse(d: &[u8], ident: Ident) -> Option<Zone> {
        struct Counts {
            isut: usize,
            isstd: usize,
            leap: usize,
            time: usize,
            typ: usize,
            chr: usize,
        }
        let counts = |at: usize| -> Option<Counts> {
            if d.get(at..at + 4)? != b"TZif" {
                return None;
            }
            let c = |i: usize| be32(d, at + 20 + 4 * i).and_then(|v| usize::try_from(v as u32).ok());
            Some(Counts { isut: c(0)?, isstd: c(1)?, leap: c(2)?, time: c(3)?, typ: c(4)?, chr: c(5)? })
        };
        let v1 = counts(0)?;
        if *d.get(4)? == 0 {
            return None; // version 1: 32-bit data only
        }
        let skip = v1.time * 5 + v1.typ * 6 + v1.chr + v1.leap * 8 + v1.isstd + v1.isut;
        let h2 = 44 + skip;
        let c = counts(h2)?;
        if c.isstd > c.typ || c.isut > c.typ || c.leap != 0 || c.typ == 0 || c.typ > 256 {
            return None;
        }
        let mut at = h2 + 44;
        let mut trans = Vec::with_capacity(c.time);
        for i in 0..c.time {
            trans.push(be64(d, at + 8 * i)?);
        }
        at += 8 * c.time;
        let idx: Vec<u8> = d.get(at..at + c.time)?.to_vec();
        at += c.time;
        let mut types = Vec::with_capacity(c.typ);
        for i in 0..c.typ {
            let p = at + 6 * i;
            let isdst = *d.get(p + 4)?;
            let name = *d.get(p + 5)? as usize;
            if isdst > 1 || name >= c.chr {
                return None;
            }
            types.push(TType { utoff: be32(d, p)?, isdst: isdst as c_int, name });
        }
        at += 6 * c.typ;
        let chars: Vec<u8> = d.get(at..at + c.chr)?.to_vec();
        at += c.chr + c.isstd + c.isut; // no leap records (checked above)
                                        // Footer: "\n<POSIX TZ>\n"; glibc ignores an empty one.
        if *d.get(at)? != b'\n' || *d.last()? != b'\n' || d.len() < at + 2 {
            return None;
        }
        let has_spec = d.len() > at + 2;
        if idx.iter().any(|&i| i as usize >= c.typ)
            || trans.windows(2).any(|w| w[0] >= w[1])
            || types.iter().any(|t| !chars[t.name..].contains(&0))
            || !chars.contains(&0)
        {
            return None;
        }
        // daylight and timezone as glibc computes them: the last standard-time type
        // transitioned to gives timezone; daylight if any DST type comes after it, or
        // failing that, before it.
        let (mut daylight, stdoff) = (0, if trans.is_empty() { types[0].utoff } else { 0 });
        let mut stdoff = stdoff;
        if !trans.is_empty() {
            let mut i = trans.len();
            let mut found = None;
            while i > 0 {
                i -= 1;
                let t = types[idx[i] as usize];
                if t.isdst == 0 {
                    stdoff = t.utoff;
                    found = Some(i);
                    break;
                }
                daylight = 1;
            }
            if let Some(mut j) = found {
                while j > 0 && daylight == 0 {
                    j -= 1;
                    daylight = types[idx[j] as usize].isdst;
                }
            }
        }
        let entries = (0..=trans.len())
            .map(|_| Entry {
                state: AtomicU8::new(E_UNKNOWN),
                zone: AtomicUsize::new(0),
                tzname0: AtomicUsize::new(0),
                tzname1: AtomicUsize::new(0),
            })
            .collect();
        Some(Zone {
            ident,
            trans: trans.into_boxed_slice(),
            idx: idx.into_boxed_slice(),
            types: types.into_boxed_slice(),
            chars: chars.into_boxed_slice(),
            has_spec,
            daylight,
            timezone: -stdoff,
            entries,
            bad: AtomicBool::new(false),
            hint: Hint(AtomicUsize::new(0)),
        })
    }

    impl Zone {
        fn name(&self, at: usize) -> &[u8] {
            let s = &self.chars[at..];
            &s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())]
        }

        /// Interval of `t`: the number of transitions at or before it.
        #[inline]
        fn interval(&self, t: i64) -> usize {
            let h = self.hint.0.load(Relaxed);
            let n = self.trans.len();
            if h <= n && (h == 0 || self.trans[h - 1] <= t) && (h == n || t < self.trans[h]) {
                return h;
            }
            let k = self.trans.partition_point(|&x| x <= t);
            self.hint.0.store(k, Relaxed);
            k
        }

        /// Whether glibc computes interval `k` from the file's table (not the footer).
        #[inline]
        fn in_table(&self, k: usize) -> bool {
            !(self.has_spec && k == self.trans.len() && k > 0)
        }

        /// The type glibc uses in interval `k`, and the tzname pair it sets there
        /// (glibc's `__tzfile_compute`).
        fn expect(&self, k: usize) -> (TType, [&[u8]; 2]) {
            let n = self.trans.len();
            let mut names: [Option<&[u8]>; 2] = [None, None];
            let ti;
            if n == 0 || k == 0 {
                // Before the first transition: the first standard-time type.
                let mut i = 0;
                while i < self.types.len() && self.types[i].isdst != 0 {
                    names[1].get_or_insert(self.name(self.types[i].name));
                    i += 1;
                }
                if i == self.types.len() {
                    i = 0;
                }
                names[0] = Some(self.name(self.types[i].name));
                if names[1].is_none() {
                    names[1] = self.types[i..].iter().find(|t| t.isdst != 0).map(|t| self.name(t.name));
                }
                ti = i;
            } else {
                let cur = self.idx[k - 1] as usize;
                names[self.types[cur].isdst as usize] = Some(self.name(self.types[cur].name));
                for &j in &self.idx[k..] {
                    let t = self.types[j as usize];
                    let d = t.isdst as usize;
                    if names[d].is_none() {
                        names[d] = Some(self.name(t.name));
                        if names[1 - d].is_some() {
                            break;
                        }
                    }
                }
                if names[0].is_none() {
                    names[0] = names[1];
                }
                ti = cur;
            }
            let n0 = names[0].unwrap_or_else(|| self.name(0));
            let n1 = names[1].unwrap_or(n0);
            (self.types[ti], [n0, n1])
        }
    }

    unsafe fn cstr<'a>(p: *const c_char) -> Option<&'a [u8]> {
        // SAFETY: the caller passes a glibc zone-name pointer or null.
        (!p.is_null()).then(|| unsafe { core::ffi::CStr::from_ptr(p) }.to_bytes())
    }

    fn tzname_slot(i: usize) -> &'static AtomicUsize {
        // SAFETY: glibc's __tzname array lives for the process; word-sized aligned
        // slots read and written atomically (glibc writes them under its lock).
        unsafe { &*(core::ptr::addr_of_mut!(__tzname[i]) as *const AtomicUsize) }
    }
    fn daylight_slot() -> &'static AtomicI32 {
        // SAFETY: as above.
        unsafe { &*(core::ptr::addr_of_mut!(__daylight) as *const AtomicI32) }
    }
    fn timezone_slot() -> &'static AtomicI64 {
        // SAFETY: as above.
        unsafe { &*(core::ptr::addr_of_mut!(__timezone) as *const AtomicI64) }
    }

    /// Converts `t` from the cache: `Some(ok)` when the active zone covers it (filling
    /// the interval through glibc on first use), `None` to let glibc convert.
    #[inline]
    pub fn convert_cached(t: i64, out: &mut tm) -> Option<bool> {
        let z = ACTIVE.load(Acquire);
        if z.is_null() {
            return None;
        }
        // SAFETY: zones are never freed.
        let z = unsafe { &*z };
        let k = z.interval(t);
        if !z.in_table(k) {
            return None;
        }
        let e = &z.entries[k];
        if e.state.load(Acquire) != E_READY {
            return fill(z, k, t, out);
        }
        if z.bad.load(Relaxed) {
            return None;
        }
        // glibc's conversion would leave tzname, daylight and timezone as they were
        // when it filled this entry. We may not write them ourselves: glibc writes them
        // under its lock and asserts on them while holding it. So when they differ
        // (the previous conversion was in an interval with other names), glibc
        // converts and sets them.
        if tzname_slot(0).load(Relaxed) != e.tzname0.load(Relaxed)
            || tzname_slot(1).load(Relaxed) != e.tzname1.load(Relaxed)
            || daylight_slot().load(Relaxed) != z.daylight
            || timezone_slot().load(Relaxed) != z.timezone
        {
            return None;
        }
        let ty = z.expect_fast(k);
        out.tm_isdst = ty.isdst;
        out.tm_gmtoff = ty.utoff;
        out.tm_zone = e.zone.load(Relaxed) as *const c_char;
        Some(offtime(t, ty.utoff, out))
    }

    impl Zone {
        /// The type of interval `k` (no names): the hit path.
        #[inline]
        fn expect_fast(&self, k: usize) -> TType {
            if self.trans.is_empty() || k == 0 {
                self.types.iter().copied().find(|t| t.isdst == 0).unwrap_or(self.types[0])
            } else {
                self.types[self.idx[k - 1] as usize]
            }
        }
    }

    /// First use of interval `k`: glibc converts `t` (that is the result), after checking
    /// glibc's view of the interval's ends against the file; if glibc agrees with
    /// everything, the interval goes into the cache.
    #[cold]
    fn fill(z: &Zone, k: usize, t: i64, out: &mut tm) -> Option<bool> {
        if z.bad.load(Relaxed) || z.entries[k].state.compare_exchange(E_UNKNOWN, E_FILLING, Acquire, Relaxed).is_err() {
            return None; // another thread is filling it, or the zone is unusable
        }
        let saved_errno = errno();
        let n = z.trans.len();
        let (ty, names) = z.expect(k);
        // glibc's view just inside and just outside the interval's ends.
        let mut probes: [(i64, usize); 4] = [(0, usize::MAX); 4];
        if k > 0 {
            probes[0] = (z.trans[k - 1] - 1, k - 1);
            probes[1] = (z.trans[k - 1], k);
        }
        if k < n {
            probes[2] = (z.trans[k] - 1, k);
            if z.in_table(k + 1) {
                probes[3] = (z.trans[k], k + 1);
            }
        }
        let mut agree = true;
        for &(p, pk) in probes.iter().filter(|p| p.1 != usize::MAX) {
            // SAFETY: all-zero is a valid struct tm.
            let mut r: tm = unsafe { core::mem::zeroed() };
            let (pty, pnames) = z.expect(pk);
            if !glibc_localtime_r(p, &mut r) {
                // Out of range for glibc (a file's "big bang" transition): then it must
                // be out of range for us too.
                agree &= !offtime(p, pty.utoff, &mut r);
            } else if r.tm_gmtoff != pty.utoff
                || r.tm_isdst != pty.isdst
                // SAFETY: glibc's result's zone name.
                || unsafe { cstr(r.tm_zone) } != Some(pnames[pty.isdst as usize])
            {
                agree = false;
            }
        }
        set_errno(saved_errno);
        // The call whose result we return, and whose side effects glibc leaves.
        let ok = glibc_localtime_r(t, out);
        let e = &z.entries[k];
        if !ok {
            e.state.store(E_UNKNOWN, Release);
            return Some(false);
        }
        // SAFETY: all-zero is a valid struct tm.
        let mut mine: tm = unsafe { core::mem::zeroed() };
        // What this very call produced: the type, the broken-down time, the name.
        let structural = agree
            && offtime(t, ty.utoff, &mut mine)
            && (mine.tm_year, mine.tm_mon, mine.tm_mday, mine.tm_hour, mine.tm_min, mine.tm_sec, mine.tm_wday, mine.tm_yday)
                == (out.tm_year, out.tm_mon, out.tm_mday, out.tm_hour, out.tm_min, out.tm_sec, out.tm_wday, out.tm_yday)
            && out.tm_gmtoff == ty.utoff
            && out.tm_isdst == ty.isdst
            // SAFETY: a glibc zone-name pointer (or null).
            && unsafe { cstr(out.tm_zone) } == Some(names[ty.isdst as usize]);
        if !structural {
            z.bad.store(true, Relaxed);
            return Some(true);
        }
        // The globals it left (another thread's glibc conversion may have replaced
        // them since: then try again another time).
        let tzn = [tzname_slot(0).load(Relaxed), tzname_slot(1).load(Relaxed)];
        // SAFETY: glibc zone-name pointers (or null).
        let globals = unsafe { cstr(tzn[0] as *const c_char) } == Some(names[0])
            && unsafe { cstr(tzn[1] as *const c_char) } == Some(names[1])
            && out.tm_zone as usize == tzn[ty.isdst as usize]
            && daylight_slot().load(Relaxed) == z.daylight
            && timezone_slot().load(Relaxed) == z.timezone;
        if !globals {
            if SPOILED.fetch_add(1, Relaxed) >= MAX_SPOILED {
                z.bad.store(true, Relaxed);
            }
            e.state.store(E_UNKNOWN, Release);
            return Some(true);
        }
        e.zone.store(out.tm_zone as usize, Relaxed);
        e.tzname0.store(tzn[0], Relaxed);
        e.tzname1.store(tzn[1], Relaxed);
        e.state.store(E_READY, Release);
        FILLED.fetch_add(1, Relaxed);
        Some(true)
    }

    /// What glibc's `__offtime` computes: `t + offset` broken down into `out` (year,
    /// yday, mon, mday, wday, hour, min, sec). False with errno = EOVERFLOW when the
    /// year does not fit in an int.
    pub fn offtime(t: i64, offset: i64, out: &mut tm) -> bool {
        const DAY: i64 = 86_400;
        let mut days = t / DAY;
        let mut rem = t % DAY + offset;
        while rem < 0 {
            rem += DAY;
            days -= 1;
        }
        while rem >= DAY {
            rem -= DAY;
            days += 1;
        }
        out.tm_hour = (rem / 3600) as c_int;
        rem %= 3600;
        out.tm_min = (rem / 60) as c_int;
        out.tm_sec = (rem % 60) as c_int;
        let wday = (4 + days) % 7;
        out.tm_wday = (if wday < 0 { wday + 7 } else { wday }) as c_int;
        // The proleptic Gregorian date of day `days` (0 = 1970-01-01), computed by
        // 400-year eras (H. Hinnant's days-to-civil) rather than glibc's year-guessing
        // loop: the same calendar, so the same result for every day (the unit test
        // checks it against glibc's gmtime_r over the whole range).
        let z = days + 719_468; // days since 0000-03-01
        let era = (if z >= 0 { z } else { z - 146_096 }) / 146_097;
        let doe = z - era * 146_097; // [0, 146096]
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365], from March 1st
        let mp = (5 * doy + 2) / 153; // [0, 11], March = 0
        let mday = doy - (153 * mp + 2) / 5 + 1;
        let mon = if mp < 10 { mp + 2 } else { mp - 10 }; // 0 = January
        let y = yoe + era * 400 + (mon < 2) as i64;
        let year = y - 1900;
        out.tm_year = year as c_int;
        if out.tm_year as i64 != year {
            set_errno(libc::EOVERFLOW);
            return false;
        }
        let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
        out.tm_yday = (MON_YDAY[leap as usize][mon as usize] as i64 + mday - 1) as c_int;
        out.tm_mon = mon as c_int;
        out.tm_mday = mday as c_int;
        true
    }
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
    fn offtime_is_gmtime() {
        let mut state: u64 = 0x9e37_79b9;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for i in 0..200_000u32 {
            let r = next();
            let t: i64 = match i % 6 {
                0 => (r % 20_000_000_000) as i64 - 10_000_000_000,
                1 => (r >> 8) as i64 * if r & 1 == 0 { 1 } else { -1 },
                2 => r as i64,
                3 => (r >> (r % 50)) as i64 * if r & 1 == 0 { 1 } else { -1 },
                // Around the last and first times whose year fits in an int.
                4 => 67_768_036_191_676_799 + (r % 200_000) as i64 - 100_000,
                _ => -67_768_040_609_740_800 + (r % 200_000) as i64 - 100_000,
            };
            // SAFETY: all-zero is a valid struct tm.
            let (mut a, mut b): (tm, tm) = unsafe { (core::mem::zeroed(), core::mem::zeroed()) };
            let ok_b = !unsafe { libc::gmtime_r(&t, &mut b) }.is_null();
            let ok_a = zone::offtime(t, 0, &mut a);
            assert_eq!(ok_a, ok_b, "t={t}");
            if ok_a {
                assert_eq!(
                    (a.tm_year, a.tm_mon, a.tm_mday, a.tm_hour, a.tm_min, a.tm_sec, a.tm_wday, a.tm_yday),
                    (b.tm_year, b.tm_mon, b.tm_mday, b.tm_hour, b.tm_min, b.tm_sec, b.tm_wday, b.tm_yday),
                    "t={t}"
                );
            } else {
                assert_eq!(errno(), libc::EOVERFLOW);
            }
        }
    }

    #[test]
    fn offtime_every_day_and_offset() {
        // Every day from about 400 BC to AD 4300, at a time of day and offset that vary.
        for d in -870_000i64..870_000 {
            let t = d * 86_400 + (d * 7919).rem_euclid(86_400);
            let off = (d * 104_729).rem_euclid(2 * 93_600) - 93_600; // within ±26 h
                                                                     // SAFETY: all-zero is a valid struct tm.
            let (mut a, mut b): (tm, tm) = unsafe { (core::mem::zeroed(), core::mem::zeroed()) };
            let shifted = t + off;
            assert!(!unsafe { libc::gmtime_r(&shifted, &mut b) }.is_null());
            assert!(zone::offtime(t, off, &mut a));
            assert_eq!(
                (a.tm_year, a.tm_mon, a.tm_mday, a.tm_hour, a.tm_min, a.tm_sec, a.tm_wday, a.tm_yday),
                (b.tm_year, b.tm_mon, b.tm_mday, b.tm_hour, b.tm_min, b.tm_sec, b.tm_wday, b.tm_yday),
                "t={t} off={off}"
            );
        }
    }

    #[test]
    fn mktime_agrees_with_glibc_here() {
        // The test binary is not preloaded: our search (over the interval cache, set up
        // by our tzset) must equal glibc's mktime for whatever zone this process has
        // (TZ of the test run).
        // SAFETY: no preconditions.
        unsafe { tzset() };
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
            assert_eq!(
                (ra, ea),
                (rb, eb),
                "input #{i} {} {} {} {} {} {} {}",
                b.tm_year,
                b.tm_mon,
                b.tm_mday,
                b.tm_hour,
                b.tm_min,
                b.tm_sec,
                b.tm_isdst
            );
            assert_eq!(
                (a.tm_year, a.tm_yday, a.tm_hour, a.tm_min, a.tm_sec, a.tm_isdst, a.tm_gmtoff),
                (b.tm_year, b.tm_yday, b.tm_hour, b.tm_min, b.tm_sec, b.tm_isdst, b.tm_gmtoff)
            );
        }
    }
}
