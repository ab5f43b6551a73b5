//! The mktime/tzset throttle (docs/DESIGN.md §2.17).
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
//!
//! # Files
//!
//! | file | what it holds |
//! |------|---------------|
//! | `mod.rs` | on/off, and the entry points behind the exports (`tzset`, `mktime`, `timelocal`, `localtime`, `ctime`) |
//! | [`gate`] | the throttle: when the real `tzset` runs, and the try-lock around it; its counters |
//! | [`search`] | mktime: glibc's `__mktime_internal` search over `localtime_r` conversions |
//! | [`zone`] | the interval cache: glibc's conversions without glibc's lock ([`zone::tzif`]: finding and parsing the zone file) |
//! | `tests.rs` | unit tests: the calendar arithmetic, `offtime`, mktime against glibc |

use core::sync::atomic::{AtomicI64, AtomicU64, AtomicU8, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};

use libc::{c_char, c_int, time_t, tm};

use crate::base::config;
use crate::base::sys::{errno, set_errno};

mod gate;
mod search;
#[cfg(test)]
mod tests;
mod zone;

use gate::maybe_tzset;
pub use gate::{cache_active, cache_intervals, real_tzset_calls, skipped_busy};
use search::{convert, mktime_local};

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
    let off = !config::tz_throttle_wanted() || !glibc_supported();
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
        // SAFETY: `tp` points to a struct tm (mktime's contract, this fn's # Safety), as glibc's
        // mktime requires; a null pointer faults inside glibc, as natively.
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
        // SAFETY: `tp` points to a struct tm (timelocal's contract), as glibc's timelocal requires.
        return unsafe { real::timelocal(tp) };
    }
    // SAFETY: `tp` points to a struct tm (timelocal's contract), which is `mktime`'s contract.
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
        // SAFETY: `t` points to a readable time_t (localtime's contract), as glibc's localtime
        // requires.
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
        // SAFETY: `t` points to a readable time_t (ctime's contract), as glibc's ctime requires.
        return unsafe { real::ctime(t) };
    }
    // SAFETY: `t` points to a readable time_t (ctime's contract), `localtime`'s contract;
    // asctime(NULL) fails with EINVAL like glibc's ctime.
    unsafe { real::asctime(localtime(t)) }
}
