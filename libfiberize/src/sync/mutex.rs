//! `pthread_mutex_t` for fibers and threads, living in the program's own 40 bytes.
//!
//! Lock word (`MutexOverlay::lock`, glibc's `__lock`):
//!
//! | bit | name   | meaning                                                  |
//! |-----|--------|----------------------------------------------------------|
//! | 0   | LOCKED | somebody owns the mutex                                  |
//! | 1   | PARKED | waiters may be queued in the parking lot on this address |
//!
//! Uncontended lock and unlock are one CAS each. Contended unlock does not hand the
//! lock over: it releases it and wakes one waiter, which competes again (barging, as
//! glibc does); with fibers this keeps the lock moving while the wakee is still in a
//! run queue.
//!
//! # One wake-up in flight (glibc's protocol, not parking_lot's)
//!
//! A contended unlock wakes one waiter and **clears** PARKED even when more waiters
//! remain; the woken waiter takes over the duty of the bit: it acquires with
//! `LOCKED | PARKED` (or sets PARKED again before it re-parks) when the unlocker told
//! it, through its token, that others still wait. Meanwhile the owner can lock and
//! unlock with one CAS each, without a wake-up per unlock. Invariant: while waiters
//! are queued, PARKED is set or a woken waiter is on its way to set it (it leaves
//! `lock_slow` only by acquiring, and re-parks only after setting PARKED).
//!
//! Why: keeping PARKED while waiters remain (parking_lot's rule) woke one waiter per
//! unlock. A woken fiber is runnable within a microsecond, lands on the unlocker's
//! worker, is stolen by an idle worker and contends from there; on 4–16 CPUs every
//! lock then crossed cores and the 64-thread hammer collapsed to ~1 M locks/s (issue
//! 10). glibc's futex word (0/1/2) has the same one-in-flight shape: a barging owner
//! writes 1 over 2, and the woken thread writes 2 back. Type rules (recursive counts, errorcheck's EDEADLK/EPERM, EINVAL after
//! destroy) follow glibc's `pthread_mutex_lock.c`. The owner is `pthread_self()`, which
//! for a fiber is its donor's `pthread_t`: stable across workers (never `gettid()`).
//!
//! Process-shared, robust and priority-protocol mutexes are not ours: the exports hand
//! them to glibc (`is_delegated`), and they keep glibc's layout for their lifetime.

use core::sync::atomic::Ordering;

use crate::base::layout::MutexOverlay;
use libc::{c_int, clockid_t, timespec};

use crate::base::sys;
use crate::base::time;
use crate::runtime::fiber::WaitKind;
use crate::sync::parking::{self, ParkResult, TOKEN_NORMAL};

pub const LOCKED: u32 = 1;
pub const PARKED: u32 = 2;

pub const TYPE_NORMAL: i32 = 0;
pub const TYPE_RECURSIVE: i32 = 1;
pub const TYPE_ERRORCHECK: i32 = 2;
pub const TYPE_ADAPTIVE: i32 = 3;
const TYPE_MASK: i32 = 3;
/// glibc's robust, priority-inherit, priority-protect and process-shared kind bits.
const DELEGATED_FLAGS: i32 = 16 | 32 | 64 | 128;
/// How many short spins before parking. Origin: a lock held by a fiber on another
/// worker is usually released within a microsecond; beyond that the owner is
/// descheduled (parked or queued) and spinning only delays our worker. Measured on 16
/// CPUs (issue 10, prodcons 8+8 on one mutex, ratio to native): 0 rounds 1.8–2.0x,
/// 1 round 2.5x, 3 rounds 3.3x; hammer the same (4.1–5.3x) for all three.
const SPIN_LIMIT: u32 = 3;
/// Token from a contended unlock: other waiters remain queued, so the wakee must put
/// PARKED back (see "One wake-up in flight").
const TOKEN_WAITERS_REMAIN: usize = 2;

/// A timeout for `lock`: none, or an absolute time on a clock (validated lazily, only
/// when the caller would block, as glibc does).
#[derive(Clone, Copy)]
pub enum Timeout {
    Never,
    At(clockid_t, *const timespec),
}

#[inline]
pub fn self_id() -> u64 {
    // glibc's pthread_self() is the TCB address (x86_64: `pthread_t` is the `struct
    // pthread *`, whose first word points to itself), read here from FS without the
    // PLT call; for a fiber FS is its donor's TCB, so this is the donor's pthread_t.
    sys::thread_pointer() as u64
}

/// Whether glibc owns this mutex (pshared, robust, PI/PP).
#[inline]
pub fn is_delegated(m: &MutexOverlay) -> bool {
    let k = m.kind.load(Ordering::Relaxed);
    k >= 0 && k & DELEGATED_FLAGS != 0
}

/// `pthread_mutex_init` for one of our types.
pub fn init(m: &MutexOverlay, mtype: i32) {
    m.init(mtype & TYPE_MASK);
}

/// Reads the type, or EINVAL for a destroyed/corrupt mutex.
#[inline]
fn mtype(m: &MutexOverlay) -> Result<i32, c_int> {
    let k = m.kind.load(Ordering::Relaxed);
    // glibc may leave elision hints (256/512) next to the type; anything else here
    // (destroyed: -1) is EINVAL, as in glibc's pthread_mutex_lock.
    if !glibc_layout::mutex_kind_is_valid_runtime(k) {
        return Err(libc::EINVAL);
    }
    Ok(glibc_layout::mutex_kind_type(k))
}

#[inline]
pub fn lock(m: &MutexOverlay, timeout: Timeout) -> c_int {
    let t = match mtype(m) {
        Ok(t) => t,
        Err(e) => return e,
    };
    if t == TYPE_NORMAL || t == TYPE_ADAPTIVE {
        if m.lock.compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed).is_err() {
            let r = lock_slow(m, timeout);
            if r != 0 {
                return r;
            }
        }
        m.owner.store(self_id(), Ordering::Relaxed);
        return 0;
    }
    let me = self_id();
    if m.owner.load(Ordering::Relaxed) == me {
        if t == TYPE_ERRORCHECK {
            return libc::EDEADLK;
        }
        let c = m.count.load(Ordering::Relaxed);
        if c == u32::MAX {
            return libc::EAGAIN;
        }
        m.count.store(c + 1, Ordering::Relaxed);
        return 0;
    }
    if m.lock.compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed).is_err() {
        let r = lock_slow(m, timeout);
        if r != 0 {
            return r;
        }
    }
    m.owner.store(me, Ordering::Relaxed);
    m.count.store(1, Ordering::Relaxed);
    0
}

#[cold]
fn lock_slow(m: &MutexOverlay, timeout: Timeout) -> c_int {
    // A statically initialized mutex meets the runtime here at the latest (the fast
    // paths need no initialization: zero bytes are a valid unlocked state).
    m.ensure_initialized();
    let mut deadline: Option<u64> = None;
    if let Timeout::At(clock, ts) = timeout {
        if !time::supported_clock(clock) {
            return libc::EINVAL;
        }
        // SAFETY: the program passed a timespec pointer for a timed lock.
        let ts = match unsafe { ts.as_ref() } {
            Some(ts) => ts,
            None => return libc::EINVAL,
        };
        match time::absolute_deadline(clock, ts) {
            Ok(d) => deadline = Some(d),
            Err(e) => return e,
        }
    }
    let key = m as *const MutexOverlay as usize;
    let mut spins = 0;
    // Set once we were woken with other waiters left behind: we carry PARKED for them.
    let mut carry_parked = 0;
    loop {
        let s = m.lock.load(Ordering::Relaxed);
        if s & LOCKED == 0 {
            if m.lock.compare_exchange_weak(s, s | LOCKED | carry_parked, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return 0;
            }
            continue;
        }
        if s & PARKED == 0 && spins < SPIN_LIMIT {
            spins += 1;
            for _ in 0..(16 << spins) {
                sys::cpu_relax();
            }
            continue;
        }
        if s & PARKED == 0 && m.lock.compare_exchange_weak(s, s | PARKED, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            continue;
        }
        let r = parking::park(
            key,
            u32::MAX,
            WaitKind::Mutex,
            || m.lock.load(Ordering::Relaxed) == LOCKED | PARKED,
            || {},
            |more| {
                if !more {
                    m.lock.fetch_and(!PARKED, Ordering::Relaxed);
                }
            },
            deadline,
        );
        match r {
            ParkResult::TimedOut => return libc::ETIMEDOUT,
            ParkResult::Unparked(TOKEN_WAITERS_REMAIN) => carry_parked = PARKED,
            // Re-parking sets PARKED itself; a plain wake-up leaves nobody behind.
            ParkResult::Unparked(_) => carry_parked = 0,
            _ => {}
        }
        spins = 0;
    }
}

pub fn trylock(m: &MutexOverlay) -> c_int {
    let t = match mtype(m) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let me = self_id();
    if t == TYPE_RECURSIVE && m.owner.load(Ordering::Relaxed) == me {
        let c = m.count.load(Ordering::Relaxed);
        if c == u32::MAX {
            return libc::EAGAIN;
        }
        m.count.store(c + 1, Ordering::Relaxed);
        return 0;
    }
    let mut s = m.lock.load(Ordering::Relaxed);
    loop {
        if s & LOCKED != 0 {
            return libc::EBUSY;
        }
        match m.lock.compare_exchange_weak(s, s | LOCKED, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => break,
            Err(x) => s = x,
        }
    }
    m.owner.store(me, Ordering::Relaxed);
    if t == TYPE_RECURSIVE {
        m.count.store(1, Ordering::Relaxed);
    }
    0
}

#[inline]
pub fn unlock(m: &MutexOverlay) -> c_int {
    let t = match mtype(m) {
        Ok(t) => t,
        Err(e) => return e,
    };
    if t == TYPE_RECURSIVE || t == TYPE_ERRORCHECK {
        if m.owner.load(Ordering::Relaxed) != self_id() || m.lock.load(Ordering::Relaxed) & LOCKED == 0 {
            return libc::EPERM;
        }
        if t == TYPE_RECURSIVE {
            let c = m.count.load(Ordering::Relaxed) - 1;
            m.count.store(c, Ordering::Relaxed);
            if c != 0 {
                return 0;
            }
        }
    }
    m.owner.store(0, Ordering::Relaxed);
    if m.lock.compare_exchange(LOCKED, 0, Ordering::Release, Ordering::Relaxed).is_err() {
        unlock_slow(m);
    }
    0
}

#[cold]
fn unlock_slow(m: &MutexOverlay) {
    let key = m as *const MutexOverlay as usize;
    parking::unpark_one(key, |info| {
        // Under the bucket lock: nobody can take the lock (LOCKED is set) or queue.
        // PARKED is cleared even if others wait: the wakee carries it back.
        m.lock.store(0, Ordering::Release);
        if info.have_more {
            TOKEN_WAITERS_REMAIN
        } else {
            TOKEN_NORMAL
        }
    });
}

/// `pthread_mutex_destroy`: EBUSY while locked, then poison the kind as glibc does
/// (later locks get EINVAL).
pub fn destroy(m: &MutexOverlay) -> c_int {
    if mtype(m).is_err() {
        return libc::EINVAL;
    }
    if m.lock.load(Ordering::Relaxed) & LOCKED != 0 {
        return libc::EBUSY;
    }
    m.mark_destroyed();
    0
}

/// For condition variables: does the caller own `m` as far as glibc would check?
pub fn check_owner_for_wait(m: &MutexOverlay) -> c_int {
    match mtype(m) {
        Err(e) => e,
        Ok(t) if (t == TYPE_ERRORCHECK || t == TYPE_RECURSIVE) && m.owner.load(Ordering::Relaxed) != self_id() => libc::EPERM,
        Ok(_) => 0,
    }
}

// ---------------------------------------------------------------------------------
// Entry points behind the `pthread_mutex_*` exports: dispatch between glibc (for the
// types it keeps) and us.
// ---------------------------------------------------------------------------------

pub mod api {
    use super::*;
    use libc::{pthread_mutex_t, pthread_mutexattr_t};

    crate::real_fns! {
        fn pthread_mutex_init(m: *mut pthread_mutex_t, a: *const pthread_mutexattr_t) -> c_int;
        fn pthread_mutex_lock(m: *mut pthread_mutex_t) -> c_int;
        fn pthread_mutex_trylock(m: *mut pthread_mutex_t) -> c_int;
        fn pthread_mutex_timedlock(m: *mut pthread_mutex_t, t: *const timespec) -> c_int;
        fn pthread_mutex_clocklock(m: *mut pthread_mutex_t, c: clockid_t, t: *const timespec) -> c_int;
        fn pthread_mutex_unlock(m: *mut pthread_mutex_t) -> c_int;
        fn pthread_mutex_destroy(m: *mut pthread_mutex_t) -> c_int;
        fn pthread_mutexattr_gettype(a: *const pthread_mutexattr_t, t: *mut c_int) -> c_int;
        fn pthread_mutexattr_getpshared(a: *const pthread_mutexattr_t, t: *mut c_int) -> c_int;
        fn pthread_mutexattr_getrobust(a: *const pthread_mutexattr_t, t: *mut c_int) -> c_int;
        fn pthread_mutexattr_getprotocol(a: *const pthread_mutexattr_t, t: *mut c_int) -> c_int;
    }

    /// # Safety
    /// `m` must point to a pthread_mutex_t (the program's contract with glibc).
    #[inline]
    unsafe fn overlay<'a>(m: *mut pthread_mutex_t) -> &'a MutexOverlay {
        // SAFETY: same bytes, same alignment (checked in glibc-layout).
        unsafe { MutexOverlay::from_ptr(m) }
    }

    /// # Safety
    /// As `pthread_mutex_init`.
    pub unsafe fn init(m: *mut pthread_mutex_t, attr: *const pthread_mutexattr_t) -> c_int {
        if m.is_null() {
            return libc::EINVAL;
        }
        let mut mtype = TYPE_NORMAL;
        if !attr.is_null() {
            let (mut t, mut pshared, mut robust, mut proto) = (0, 0, 0, 0);
            // SAFETY: `attr` is the program's initialized attribute object.
            unsafe {
                pthread_mutexattr_gettype(attr, &mut t);
                pthread_mutexattr_getpshared(attr, &mut pshared);
                pthread_mutexattr_getrobust(attr, &mut robust);
                pthread_mutexattr_getprotocol(attr, &mut proto);
            }
            if pshared != libc::PTHREAD_PROCESS_PRIVATE || robust != 0 || proto != 0 {
                // SAFETY: forwarded contract.
                return unsafe { pthread_mutex_init(m, attr) };
            }
            mtype = t;
        }
        // SAFETY: forwarded contract.
        super::init(unsafe { overlay(m) }, mtype);
        0
    }

    /// # Safety
    /// As `pthread_mutex_lock`.
    #[inline]
    pub unsafe fn lock(m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: forwarded contract.
        let o = unsafe { overlay(m) };
        if is_delegated(o) {
            // SAFETY: forwarded contract.
            return unsafe { pthread_mutex_lock(m) };
        }
        super::lock(o, Timeout::Never)
    }

    /// # Safety
    /// As `pthread_mutex_trylock`.
    pub unsafe fn trylock(m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: forwarded contract.
        let o = unsafe { overlay(m) };
        if is_delegated(o) {
            // SAFETY: forwarded contract.
            return unsafe { pthread_mutex_trylock(m) };
        }
        super::trylock(o)
    }

    /// # Safety
    /// As `pthread_mutex_clocklock` (`timedlock` is CLOCK_REALTIME).
    pub unsafe fn clocklock(m: *mut pthread_mutex_t, clock: clockid_t, ts: *const timespec, timed: bool) -> c_int {
        // SAFETY: forwarded contract.
        let o = unsafe { overlay(m) };
        if is_delegated(o) {
            // SAFETY: forwarded contract.
            return unsafe {
                if timed {
                    pthread_mutex_timedlock(m, ts)
                } else {
                    pthread_mutex_clocklock(m, clock, ts)
                }
            };
        }
        super::lock(o, Timeout::At(clock, ts))
    }

    /// # Safety
    /// As `pthread_mutex_unlock`.
    #[inline]
    pub unsafe fn unlock(m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: forwarded contract.
        let o = unsafe { overlay(m) };
        if is_delegated(o) {
            // SAFETY: forwarded contract.
            return unsafe { pthread_mutex_unlock(m) };
        }
        super::unlock(o)
    }

    /// # Safety
    /// As `pthread_mutex_destroy`.
    pub unsafe fn destroy(m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: forwarded contract.
        let o = unsafe { overlay(m) };
        if is_delegated(o) {
            // SAFETY: forwarded contract.
            return unsafe { pthread_mutex_destroy(m) };
        }
        super::destroy(o)
    }

    /// EPERM if a condition wait by the caller would fail glibc's ownership check.
    ///
    /// # Safety
    /// `m` points to a pthread_mutex_t.
    pub unsafe fn check_owner_for_wait(m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: forwarded contract.
        let o = unsafe { overlay(m) };
        if is_delegated(o) {
            return 0;
        }
        super::check_owner_for_wait(o)
    }
}
