//! Dispatch between glibc (process-shared locks) and us.
//!
//! A fiber must not block its worker in the kernel, so for a shared lock it first
//! tries the real try-variant and, if the lock is busy, runs the real blocking call
//! on its donor OS thread ([`crate::runtime::fibers::switch::run_on_donor`]). glibc's owner identity
//! is the TCB's tid, which the fiber shares with its donor, so the lock can be
//! released later from any worker.

use super::*;
use crate::runtime::fibers::fiber;
use libc::{pthread_rwlock_t, pthread_rwlockattr_t};

crate::real_fns! {
    fn pthread_rwlock_init(rw: *mut pthread_rwlock_t, a: *const pthread_rwlockattr_t) -> c_int;
    fn pthread_rwlock_destroy(rw: *mut pthread_rwlock_t) -> c_int;
    fn pthread_rwlock_rdlock(rw: *mut pthread_rwlock_t) -> c_int;
    fn pthread_rwlock_tryrdlock(rw: *mut pthread_rwlock_t) -> c_int;
    fn pthread_rwlock_timedrdlock(rw: *mut pthread_rwlock_t, t: *const timespec) -> c_int;
    fn pthread_rwlock_clockrdlock(rw: *mut pthread_rwlock_t, c: clockid_t, t: *const timespec) -> c_int;
    fn pthread_rwlock_wrlock(rw: *mut pthread_rwlock_t) -> c_int;
    fn pthread_rwlock_trywrlock(rw: *mut pthread_rwlock_t) -> c_int;
    fn pthread_rwlock_timedwrlock(rw: *mut pthread_rwlock_t, t: *const timespec) -> c_int;
    fn pthread_rwlock_clockwrlock(rw: *mut pthread_rwlock_t, c: clockid_t, t: *const timespec) -> c_int;
    fn pthread_rwlock_unlock(rw: *mut pthread_rwlock_t) -> c_int;
    fn pthread_rwlockattr_getkind_np(a: *const pthread_rwlockattr_t, k: *mut c_int) -> c_int;
    fn pthread_rwlockattr_getpshared(a: *const pthread_rwlockattr_t, p: *mut c_int) -> c_int;
}

/// Our lock, or None for one that glibc owns: process-shared (`__shared` ≠ 0),
/// or at an address we cannot overlay (NULL or misaligned: glibc's functions
/// crash or cope exactly as they would natively). Alignment is a property of the
/// address, so every call on one object takes the same side.
///
/// # Safety
/// `rw` is NULL or points to a pthread_rwlock_t (the program's contract with glibc).
#[inline]
unsafe fn ours<'a>(rw: *mut pthread_rwlock_t) -> Option<&'a RwlockOverlay> {
    if rw.is_null() || !(rw as usize).is_multiple_of(core::mem::align_of::<RwlockOverlay>()) {
        return None;
    }
    // SAFETY: non-null, aligned, the program's lock (caller's contract).
    let o = unsafe { RwlockOverlay::from_ptr(rw) };
    if o.shared.load(Ordering::Relaxed) != 0 {
        None
    } else {
        Some(o)
    }
}

/// The blocking real call for a shared lock: a fiber tries first and blocks on its
/// donor only if the lock is busy.
fn delegated_lock(try_first: impl FnOnce() -> c_int, block: impl FnOnce() -> c_int) -> c_int {
    if fiber::is_fiber() {
        let r = try_first();
        if r != libc::EBUSY {
            return r;
        }
        return crate::signal::on_donor::run_on_donor_taking_signals(block);
    }
    block()
}

/// Whether a timed call's arguments pass glibc's up-front check (so that trying
/// first cannot turn glibc's EINVAL into a success).
fn timed_args_ok(clock: clockid_t, ts: *const timespec) -> bool {
    // SAFETY: the program passed a timespec pointer or NULL.
    match unsafe { ts.as_ref() } {
        None => true,
        Some(ts) => time::supported_clock(clock) && time::valid(ts),
    }
}

/// # Safety
/// As `pthread_rwlock_init`.
pub unsafe fn init(rw: *mut pthread_rwlock_t, attr: *const pthread_rwlockattr_t) -> c_int {
    if rw.is_null() || !(rw as usize).is_multiple_of(core::mem::align_of::<RwlockOverlay>()) {
        // SAFETY: `rw` is storage for a pthread_rwlock_t (here NULL or misaligned, which glibc
        // handles as natively) and `attr` null or initialised: pthread_rwlock_init's contract,
        // passed to glibc.
        return unsafe { pthread_rwlock_init(rw, attr) };
    }
    let mut kind = KIND_PREFER_READER as c_int;
    if !attr.is_null() {
        let mut pshared = libc::PTHREAD_PROCESS_PRIVATE;
        // SAFETY: the program's initialized attribute object.
        unsafe {
            pthread_rwlockattr_getkind_np(attr, &mut kind);
            pthread_rwlockattr_getpshared(attr, &mut pshared);
        }
        if pshared != libc::PTHREAD_PROCESS_PRIVATE {
            // SAFETY: `attr` is a process-shared attribute object the program initialised and `rw`
            // storage for the lock (pthread_rwlock_init's contract); glibc's init takes them.
            return unsafe { pthread_rwlock_init(rw, attr) };
        }
    }
    // SAFETY: the program owns the 56 bytes; we fill them as pthread_rwlock_init
    // would (zeros, then the kind).
    unsafe { core::ptr::write_bytes(rw as *mut u8, 0, core::mem::size_of::<pthread_rwlock_t>()) };
    // SAFETY: as above; non-null and aligned.
    super::init(unsafe { RwlockOverlay::from_ptr(rw) }, kind as u32);
    0
}

/// # Safety
/// As `pthread_rwlock_destroy`.
pub unsafe fn destroy(rw: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: `rw` is NULL or a pthread_rwlock_t (pthread_rwlock_destroy's contract), what
    // `ours` requires.
    match unsafe { ours(rw) } {
        Some(o) => super::destroy(o),
        // SAFETY: an address we do not overlay: glibc's destroy gets the program's `rw` as it came.
        None => unsafe { pthread_rwlock_destroy(rw) },
    }
}

/// `pthread_rwlock_rdlock` (`ts` NULL), `timedrdlock` (`clock` None) or
/// `clockrdlock`.
///
/// # Safety
/// As `pthread_rwlock_clockrdlock`.
pub unsafe fn rdlock(rw: *mut pthread_rwlock_t, clock: Option<clockid_t>, ts: *const timespec, timed: bool) -> c_int {
    // SAFETY: `rw` is NULL or a pthread_rwlock_t (pthread_rwlock_rdlock's contract), what `ours`
    // requires.
    let Some(o) = (unsafe { ours(rw) }) else {
        let clk = clock.unwrap_or(libc::CLOCK_REALTIME);
        // SAFETY (closures): an address we do not overlay: glibc's lock functions get the program's
        // `rw` and `ts` (null or a timespec), as their contracts have them.
        return match (timed, clock) {
            (false, _) => delegated_lock(|| unsafe { pthread_rwlock_tryrdlock(rw) }, || unsafe { pthread_rwlock_rdlock(rw) }),
            _ if !timed_args_ok(clk, ts) => unsafe {
                if clock.is_some() {
                    pthread_rwlock_clockrdlock(rw, clk, ts)
                } else {
                    pthread_rwlock_timedrdlock(rw, ts)
                }
            },
            (true, None) => {
                delegated_lock(|| unsafe { pthread_rwlock_tryrdlock(rw) }, || unsafe { pthread_rwlock_timedrdlock(rw, ts) })
            }
            (true, Some(c)) => {
                delegated_lock(|| unsafe { pthread_rwlock_tryrdlock(rw) }, || unsafe { pthread_rwlock_clockrdlock(rw, c, ts) })
            }
        };
    };
    // SAFETY: the program's timespec pointer or NULL (NULL: no timeout, as glibc).
    let t = if timed { unsafe { ts.as_ref() }.map(|ts| (clock.unwrap_or(libc::CLOCK_REALTIME), ts)) } else { None };
    super::rdlock(o, t)
}

/// `pthread_rwlock_wrlock` (`timed` false), `timedwrlock` (`clock` None) or
/// `clockwrlock`.
///
/// # Safety
/// As `pthread_rwlock_clockwrlock`.
pub unsafe fn wrlock(rw: *mut pthread_rwlock_t, clock: Option<clockid_t>, ts: *const timespec, timed: bool) -> c_int {
    // SAFETY: `rw` is NULL or a pthread_rwlock_t (pthread_rwlock_wrlock's contract), what `ours`
    // requires.
    let Some(o) = (unsafe { ours(rw) }) else {
        let clk = clock.unwrap_or(libc::CLOCK_REALTIME);
        // SAFETY (closures): an address we do not overlay: glibc's lock functions get the program's
        // `rw` and `ts` (null or a timespec), as their contracts have them.
        return match (timed, clock) {
            (false, _) => delegated_lock(|| unsafe { pthread_rwlock_trywrlock(rw) }, || unsafe { pthread_rwlock_wrlock(rw) }),
            _ if !timed_args_ok(clk, ts) => unsafe {
                if clock.is_some() {
                    pthread_rwlock_clockwrlock(rw, clk, ts)
                } else {
                    pthread_rwlock_timedwrlock(rw, ts)
                }
            },
            (true, None) => {
                delegated_lock(|| unsafe { pthread_rwlock_trywrlock(rw) }, || unsafe { pthread_rwlock_timedwrlock(rw, ts) })
            }
            (true, Some(c)) => {
                delegated_lock(|| unsafe { pthread_rwlock_trywrlock(rw) }, || unsafe { pthread_rwlock_clockwrlock(rw, c, ts) })
            }
        };
    };
    // SAFETY: the program's timespec pointer or NULL (NULL: no timeout, as glibc).
    let t = if timed { unsafe { ts.as_ref() }.map(|ts| (clock.unwrap_or(libc::CLOCK_REALTIME), ts)) } else { None };
    super::wrlock(o, t)
}

/// # Safety
/// As `pthread_rwlock_tryrdlock`.
pub unsafe fn tryrdlock(rw: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: `rw` is NULL or a pthread_rwlock_t (pthread_rwlock_tryrdlock's contract), what
    // `ours` requires.
    match unsafe { ours(rw) } {
        Some(o) => super::tryrdlock(o),
        // SAFETY: an address we do not overlay: glibc's tryrdlock gets the program's `rw`.
        None => unsafe { pthread_rwlock_tryrdlock(rw) },
    }
}

/// # Safety
/// As `pthread_rwlock_trywrlock`.
pub unsafe fn trywrlock(rw: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: `rw` is NULL or a pthread_rwlock_t (pthread_rwlock_trywrlock's contract), what
    // `ours` requires.
    match unsafe { ours(rw) } {
        Some(o) => super::trywrlock(o),
        // SAFETY: an address we do not overlay: glibc's trywrlock gets the program's `rw`.
        None => unsafe { pthread_rwlock_trywrlock(rw) },
    }
}

/// # Safety
/// As `pthread_rwlock_unlock`.
#[inline]
pub unsafe fn unlock(rw: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: `rw` is NULL or a pthread_rwlock_t (pthread_rwlock_unlock's contract), what `ours`
    // requires.
    match unsafe { ours(rw) } {
        Some(o) => super::unlock(o),
        // SAFETY: an address we do not overlay: glibc's unlock gets the program's `rw`.
        None => unsafe { pthread_rwlock_unlock(rw) },
    }
}
