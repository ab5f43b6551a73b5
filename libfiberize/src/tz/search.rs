//! mktime: glibc 2.36's `__mktime_internal` search, over glibc's `localtime_r` (or the
//! interval cache), with glibc's process-wide offset guess (module essay, "mktime").

use super::zone::{glibc_localtime_r, MON_YDAY};
use super::*;

/// glibc's `localtime_offset`: the UTC offset guess carried from one call to the next.
static OFFSET_GUESS: AtomicI64 = AtomicI64::new(0);

/// Shortest DST (or non-DST between DST) period in the tz database, seconds.
const ISDST_STRIDE: i32 = 601_200;
/// Longest period (of DST, or of non-DST) whose DST difference is not one hour, in
/// the tz database: the isdst search covers half of it each way.
const ISDST_DURATION_MAX: i32 = 457_243_209;
/// How many leap-second probes glibc allows before giving up with EOVERFLOW.
const MAX_PROBES: i32 = 6;

/// Is `tm_year` (years since 1900) a leap year? Works for negative years.
pub(super) fn is_leap(year: i64) -> bool {
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
pub(super) fn ydhms_diff(
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
pub(super) fn convert(t: i64, out: &mut tm) -> bool {
    if let Some(ok) = zone::convert_cached(t, out) {
        return ok;
    }
    glibc_localtime_r(t, out)
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
pub(super) fn mktime_local(tp: &mut tm) -> time_t {
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
