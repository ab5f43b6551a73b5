//! The interval cache: glibc's conversions without glibc's lock.
//!
//! Converting a time through glibc's `localtime_r` takes glibc's tz lock; with many
//! threads that lock, not the arithmetic, bounds mktime's throughput. This cache lets
//! most conversions skip it, and still produce glibc's exact results.
//!
//! When glibc has loaded a zone file (TZif version 2+), we read the same file
//! (the path glibc uses: `TZ` with `""` → `Universal` and a leading `:` dropped,
//! relative names under `TZDIR` or /usr/share/zoneinfo, `/etc/localtime` when unset).
//! Its transition times cut the time line into intervals; inside one, glibc's
//! `localtime_r` is `t + utoff` broken down (its `__offtime`) plus the fixed
//! `tm_isdst`, `tm_gmtoff`, `tm_zone` of the interval's type, and it sets the globals
//! `tzname`, `daylight` and `timezone` to values that depend only on the interval.
//!
//! An interval is used from the cache only after glibc itself converted a time in it
//! and agreed with everything we derived from the file: the type, the broken-down
//! time, the zone name, `tzname` (computed from the file the way glibc does),
//! `daylight`, `timezone`, and glibc's values just inside both ends and just outside
//! them (so the boundaries are glibc's). The pointers (`tm_zone`, `tzname[]`) are
//! taken from glibc's result: glibc interns zone names, so equal names are equal
//! pointers. Any disagreement about the conversion itself marks the zone unusable and
//! everything goes to glibc; a snapshot of the globals spoiled by another thread's
//! glibc conversion is only retried later.
//!
//! Not cached (glibc converts): zones given as POSIX TZ strings, files with leap
//! seconds (`right/…`), times after the last transition of a file with a POSIX rule
//! footer (after 2037 for Debian's "fat" tzdata), set-uid programs (glibc restricts
//! their paths), version-1 files.
//!
//! Zones are kept for the life of the process (readers never wait for a reclaim):
//! at most [`MAX_ZONES`] distinct files; beyond that new zones go uncached.

use core::sync::atomic::{
    AtomicBool, AtomicI32, AtomicI64, AtomicPtr, AtomicU32, AtomicU8, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};

use libc::{c_char, c_int, c_long, time_t, tm};

use super::{errno, real, set_errno};

mod tzif;
use tzif::find_or_load;

/// Days before each month, normal and leap years.
pub(super) const MON_YDAY: [[u16; 13]; 2] =
    [[0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334, 365], [0, 31, 60, 91, 121, 152, 182, 213, 244, 274, 305, 335, 366]];

#[inline]
pub(super) fn glibc_localtime_r(t: i64, out: &mut tm) -> bool {
    let x: time_t = t;
    // SAFETY: both pointers are valid for the call.
    !unsafe { real::localtime_r(&x, out) }.is_null()
}

pub const MAX_ZONES: usize = 16;

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
