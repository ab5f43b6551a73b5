//! `pthread_mutex_t` for fibers and threads, living in the program's own 40 bytes.
//!
//! The lock word (`MutexOverlay::lock`, glibc's `__lock`), its bits and its protocol
//! with the parking lot ("one wake-up in flight") are in [`crate::sync::lock_word`],
//! which the loom models check as it is. Type rules (recursive counts, errorcheck's EDEADLK/EPERM, EINVAL after
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
use crate::runtime::fibers::fiber::{self, WaitKind};
use crate::runtime::scheduler;
use crate::sync::parking::{self, ParkResult};

use crate::base::stats::{bump, STATS};
use crate::sync::lock_word::{self, Place, Unparking, WaitQueue, Woken};
pub use crate::sync::lock_word::{LOCKED, PARKED};

// The kind bits are glibc's encoding, defined once in `glibc_layout`.
pub use glibc_layout::{
    MUTEX_KIND_ADAPTIVE as TYPE_ADAPTIVE, MUTEX_KIND_ERRORCHECK as TYPE_ERRORCHECK, MUTEX_KIND_NORMAL as TYPE_NORMAL,
    MUTEX_KIND_RECURSIVE as TYPE_RECURSIVE,
};

/// How a parking-lot wait ended, as the lock words (mutex and rwlock) see it.
impl From<ParkResult> for Woken {
    #[inline]
    fn from(r: ParkResult) -> Woken {
        match r {
            ParkResult::Unparked(token) => Woken::Unparked(token),
            ParkResult::TimedOut => Woken::TimedOut,
            // Not queued (the word changed) or interrupted: look at the word again.
            ParkResult::Invalid | ParkResult::Interrupted => Woken::Retry,
        }
    }
}

/// The parking-lot queue of one mutex (keyed by its address), for [`lock_word`].
struct MutexQueue {
    key: usize,
    deadline: Option<u64>,
}

impl WaitQueue for MutexQueue {
    #[inline]
    fn park(&self, place: Place, still_contended: impl FnOnce() -> bool, on_timeout: impl FnOnce(bool)) -> Woken {
        let woken: Woken =
            parking::park_in(place, self.key, u32::MAX, WaitKind::Mutex, still_contended, || {}, on_timeout, self.deadline)
                .into();
        // Front: we were woken before and found the lock taken again (a barger won).
        if place == Place::Front && woken != Woken::Retry {
            bump(&STATS.mutex_wakes_lost);
        }
        woken
    }
    #[inline]
    fn unpark_one(&self, release: impl FnOnce(Unparking) -> usize) {
        parking::unpark_one_fair(self.key, |info| {
            release(Unparking { dequeued: info.unparked, others_remain: info.have_more, be_fair: info.be_fair })
        });
    }
    #[inline]
    fn spinning_pays(&self) -> bool {
        spinning_pays()
    }
}

/// Whether a woken waiter that found the mutex taken again should spin before it parks
/// again ("Spinning" in [`crate::sync::lock_word`]): a plain thread always (it has its
/// CPU to itself); a fiber only while its worker has no other fiber queued (lifo slot,
/// deque and side queues empty), Go's `sync_runtime_canSpin` rule. Counted: `lock_spins`,
/// `lock_spins_skipped`.
pub(crate) fn spinning_pays() -> bool {
    let pays = match fiber::current().and_then(scheduler::worker_of) {
        Some(w) => !w.has_queued_fibers(),
        None => true,
    };
    bump(if pays { &STATS.lock_spins } else { &STATS.lock_spins_skipped });
    pays
}

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
    glibc_layout::mutex_kind_is_delegated(m.kind.load(Ordering::Relaxed))
}

/// `pthread_mutex_init` for one of our types.
pub fn init(m: &MutexOverlay, mtype: i32) {
    m.init(glibc_layout::mutex_kind_type(mtype));
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
        if !lock_word::try_lock_uncontended(&m.lock) {
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
    if !lock_word::try_lock_uncontended(&m.lock) {
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
    let queue = MutexQueue { key: m as *const MutexOverlay as usize, deadline };
    match lock_word::lock_contended(&m.lock, &queue) {
        Ok(()) => 0,
        Err(lock_word::TimedOut) => libc::ETIMEDOUT,
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
    if !lock_word::try_lock(&m.lock) {
        return libc::EBUSY;
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
        if m.owner.load(Ordering::Relaxed) != self_id() || !lock_word::is_locked(&m.lock) {
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
    if !lock_word::unlock_uncontended(&m.lock) {
        unlock_slow(m);
    }
    0
}

#[cold]
fn unlock_slow(m: &MutexOverlay) {
    let queue = MutexQueue { key: m as *const MutexOverlay as usize, deadline: None };
    if lock_word::unlock_contended(&m.lock, &queue) {
        bump(&STATS.mutex_handoffs);
    }
}

/// `pthread_mutex_destroy`: EBUSY while locked, then poison the kind as glibc does
/// (later locks get EINVAL).
pub fn destroy(m: &MutexOverlay) -> c_int {
    if mtype(m).is_err() {
        return libc::EINVAL;
    }
    if lock_word::is_locked(&m.lock) {
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

    /// glibc's own functions (looked up with dlsym/dlvsym), for the objects and
    /// attributes the runtime leaves to glibc: `real::` always means glibc's.
    pub mod real {
        use super::*;
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
                real::pthread_mutexattr_gettype(attr, &mut t);
                real::pthread_mutexattr_getpshared(attr, &mut pshared);
                real::pthread_mutexattr_getrobust(attr, &mut robust);
                real::pthread_mutexattr_getprotocol(attr, &mut proto);
            }
            if pshared != libc::PTHREAD_PROCESS_PRIVATE || robust != 0 || proto != 0 {
                // SAFETY: a mutex glibc keeps (robust, PI/PP or shared): its init gets the program's `m`
                // (storage) and initialised `attr`.
                return unsafe { real::pthread_mutex_init(m, attr) };
            }
            mtype = t;
        }
        // SAFETY: `m` is storage for a pthread_mutex_t (pthread_mutex_init's contract, this fn's #
        // Safety), which is `overlay`'s contract.
        super::init(unsafe { overlay(m) }, mtype);
        0
    }

    /// # Safety
    /// As `pthread_mutex_lock`.
    #[inline]
    pub unsafe fn lock(m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: `m` points to a pthread_mutex_t (pthread_mutex_lock's contract), which is
        // `overlay`'s contract.
        let o = unsafe { overlay(m) };
        if is_delegated(o) {
            // SAFETY: a mutex glibc owns: its lock gets the program's initialised `m`.
            return unsafe { real::pthread_mutex_lock(m) };
        }
        super::lock(o, Timeout::Never)
    }

    /// # Safety
    /// As `pthread_mutex_trylock`.
    pub unsafe fn trylock(m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: `m` points to a pthread_mutex_t (pthread_mutex_trylock's contract), which is
        // `overlay`'s contract.
        let o = unsafe { overlay(m) };
        if is_delegated(o) {
            // SAFETY: a mutex glibc owns: its trylock gets the program's initialised `m`.
            return unsafe { real::pthread_mutex_trylock(m) };
        }
        super::trylock(o)
    }

    /// # Safety
    /// As `pthread_mutex_clocklock` (`timedlock` is CLOCK_REALTIME).
    pub unsafe fn clocklock(m: *mut pthread_mutex_t, clock: clockid_t, ts: *const timespec, timed: bool) -> c_int {
        // SAFETY: `m` points to a pthread_mutex_t (pthread_mutex_clocklock's contract), which is
        // `overlay`'s contract.
        let o = unsafe { overlay(m) };
        if is_delegated(o) {
            // SAFETY: a mutex glibc owns: its timed locks get the program's initialised `m` and `ts` (a
            // timespec pointer), as they require.
            return unsafe {
                if timed {
                    real::pthread_mutex_timedlock(m, ts)
                } else {
                    real::pthread_mutex_clocklock(m, clock, ts)
                }
            };
        }
        super::lock(o, Timeout::At(clock, ts))
    }

    /// # Safety
    /// As `pthread_mutex_unlock`.
    #[inline]
    pub unsafe fn unlock(m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: `m` points to a pthread_mutex_t (pthread_mutex_unlock's contract), which is
        // `overlay`'s contract.
        let o = unsafe { overlay(m) };
        if is_delegated(o) {
            // SAFETY: a mutex glibc owns: its unlock gets the program's initialised `m`.
            return unsafe { real::pthread_mutex_unlock(m) };
        }
        super::unlock(o)
    }

    /// # Safety
    /// As `pthread_mutex_destroy`.
    pub unsafe fn destroy(m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: `m` points to a pthread_mutex_t (pthread_mutex_destroy's contract), which is
        // `overlay`'s contract.
        let o = unsafe { overlay(m) };
        if is_delegated(o) {
            // SAFETY: a mutex glibc owns: its destroy gets the program's initialised, unlocked `m`.
            return unsafe { real::pthread_mutex_destroy(m) };
        }
        super::destroy(o)
    }

    /// EPERM if a condition wait by the caller would fail glibc's ownership check.
    ///
    /// # Safety
    /// `m` points to a pthread_mutex_t.
    pub unsafe fn check_owner_for_wait(m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: `m` points to a pthread_mutex_t (this fn's # Safety, from pthread_cond_wait's
        // contract), which is `overlay`'s contract.
        let o = unsafe { overlay(m) };
        if is_delegated(o) {
            return 0;
        }
        super::check_owner_for_wait(o)
    }
}
