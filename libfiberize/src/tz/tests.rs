//! Unit tests: leap years, `ydhms_diff`, `offtime` against glibc's `gmtime_r`, and
//! mktime against glibc's own in the machine's zone.

use super::search::{is_leap, ydhms_diff};
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
    // The epoch is 0; the first of March 2000 is day 11017 since the epoch.
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
