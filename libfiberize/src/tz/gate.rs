//! The gate: the real `tzset` runs at most once a second, or at once when `TZ`
//! changed, behind a try-lock that nobody waits for (module essay, "The gate").

use super::*;

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
pub(super) fn maybe_tzset() {
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
