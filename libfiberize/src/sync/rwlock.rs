//! `pthread_rwlock_t` for fibers and threads, living in the program's own 56 bytes.
//!
//! # Layout
//!
//! We keep our state where glibc keeps `__readers`, `__writers` and the futex words,
//! and leave alone the two fields that static initializers and `pthread_rwlock_init`
//! give meaning to:
//!
//! | offset | glibc field                        | ours                                      |
//! |--------|------------------------------------|-------------------------------------------|
//! | 0      | `__readers`                        | `state`, the lock word (below)            |
//! | 4      | `__writers`                        | `waiters`: its *address* is the writers' parking key; the word stays 0 |
//! | 8      | `__wrphase_futex`, `__writers_futex` | `writer`: `pthread_self()` of the write owner, 0 if none |
//! | 28     | `__shared`                         | nonzero: process-shared, glibc's lock (we never touch it) |
//! | 48     | `__flags`                          | the kind: 0 prefer readers (default), 1 prefer writers, 2 prefer writers non-recursive |
//!
//! All zeros is an unlocked reader-preferring lock, so `PTHREAD_RWLOCK_INITIALIZER`
//! needs no lazy initialization; `PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP`
//! only sets `__flags = 2`, which we read as the kind.
//!
//! # Lock word (`state`)
//!
//! | bit   | name    | meaning                                                        |
//! |-------|---------|----------------------------------------------------------------|
//! | 0     | WRITER  | a writer owns the lock (or it is being handed to one)           |
//! | 1     | WPARKED | writers may be parked on the writers' key (`&waiters`)          |
//! | 2     | RPARKED | readers may be parked on the readers' key (`&state`)            |
//! | 3..30 | READERS | number of read locks held (recursive ones count each time)      |
//! | 31    | -       | always 0                                                        |
//!
//! Invariant: WRITER set ⇒ READERS = 0. A PARKED bit is set by a waiter with a CAS on
//! a state that really makes it wait, and re-checked under the parking-lot bucket lock
//! before it sleeps (the `pthread_mutex_t` scheme); it is cleared under that bucket
//! lock by whoever removes the last waiter of its key. A stale PARKED bit (a waiter
//! that set it and then found it need not sleep) only sends an unlock down its slow
//! path, where an owner clears it.
//!
//! # Policy (what glibc's `pthread_rwlock_common.c` guarantees)
//!
//! * **Readers in a read phase.** Kinds 0 and 1: a reader gets in whenever no writer
//!   owns the lock, even if writers wait (reader preference; glibc's kind 1 prefers
//!   writers only between writers). Kind 2: a reader waits while a writer waits and
//!   other readers hold the lock, so that the writer is not starved; recursive read
//!   locking can then deadlock, which is why glibc calls the kind "non-recursive".
//! * **Last reader out** with writers parked: it sets WRITER in the same CAS that
//!   drops READERS to 0 and hands the lock to one parked writer (glibc's explicit
//!   hand-over of the write phase to the primary writer).
//! * **Writer unlock.** Kinds 1 and 2 hand the lock directly to a parked writer if
//!   there is one (glibc's `WRHANDOVER`); otherwise, and always for kind 0 when readers
//!   are parked, every parked reader gets a read lock directly (the new read phase:
//!   the writer adds each reader to READERS, under the bucket lock, before waking
//!   it). Kind 0 with only writers parked releases the lock and wakes one writer,
//!   which competes again (glibc releases `WRLOCKED` and wakes one writer).
//! * **Errors**, checked in glibc's order: EINVAL for a timed call with an unsupported
//!   clock or a bad `tv_nsec` (even if the lock is free), then EDEADLK for a
//!   `rdlock`/`wrlock` by the current writer, EAGAIN when a read lock would make
//!   READERS reach 2^28 (glibc's `PTHREAD_RWLOCK_READER_OVERFLOW`), EBUSY for the try
//!   variants, ETIMEDOUT for timed ones (a negative `tv_sec` is already expired). A
//!   NULL `abstime` waits forever, as in glibc.
//! * **Unlock** decides read vs write by the owner identity, as glibc does with
//!   `__cur_writer`; the identity is `pthread_self()` (a fiber's is its donor's
//!   `pthread_t`), never `gettid()`. Unlocking a lock one does not hold is undefined;
//!   where glibc would corrupt the lock we return EPERM.
//!
//! # Lifetime
//!
//! POSIX lets a program destroy (and free) a lock as soon as nobody holds it or waits
//! for it. So an unlock touches the lock word only while it still owns the lock or,
//! under a bucket lock, while some waiter is still queued on it; the wake-ups that
//! follow use the address only as a parking key.
//!
//! Process-shared locks (`__shared` ≠ 0) are glibc's from `pthread_rwlock_init` on:
//! the entry points pass them to the real functions, and a fiber that would block on
//! one runs the real call on its donor thread (see [`api`]).

use core::sync::atomic::{AtomicU32, Ordering};

use libc::{c_int, clockid_t, timespec};

use crate::base::sys;
use crate::base::time;
use crate::runtime::fiber::WaitKind;
use crate::sync::mutex::self_id;
use crate::sync::parking::{self, ParkResult, TOKEN_HANDOFF, TOKEN_NORMAL};

// Our view of the 56 bytes (module docs): glibc-layout's overlay, whose const
// assertions tie `state`@0, `waiters`@4, `writer`@8, `shared`@28 and `flags`@48 to
// glibc 2.36's `struct __pthread_rwlock_arch_t`.
pub use glibc_layout::RwlockOverlay;

/// Readers park on the address of `state`.
#[inline]
fn read_key(o: &RwlockOverlay) -> usize {
    &o.state as *const AtomicU32 as usize
}

/// Writers park on the address of `waiters`.
#[inline]
fn write_key(o: &RwlockOverlay) -> usize {
    &o.waiters as *const AtomicU32 as usize
}

pub const WRITER: u32 = 1;
pub const WPARKED: u32 = 2;
pub const RPARKED: u32 = 4;
const READER_SHIFT: u32 = 3;
pub const READER: u32 = 1 << READER_SHIFT;
/// glibc fails a read lock with EAGAIN when the count would reach 2^28.
pub const MAX_READERS: u32 = (1 << 28) - 1;

pub const KIND_PREFER_READER: u32 = glibc_layout::RWLOCK_PREFER_READER;
pub const KIND_PREFER_WRITER: u32 = glibc_layout::RWLOCK_PREFER_WRITER;
pub const KIND_PREFER_WRITER_NONRECURSIVE: u32 = glibc_layout::RWLOCK_PREFER_WRITER_NONRECURSIVE;

/// Short spins before parking. Origin: as for `pthread_mutex_t` (a lock held by a
/// fiber running on another worker is usually released within a microsecond).
const SPIN_LIMIT: u32 = 3;

#[inline]
fn readers(s: u32) -> u32 {
    s >> READER_SHIFT
}

/// Whether a reader may take a read lock in state `s` without waiting.
#[inline]
fn can_read(s: u32, kind: u32) -> bool {
    s & WRITER == 0 && !(kind == KIND_PREFER_WRITER_NONRECURSIVE && s & WPARKED != 0 && readers(s) > 0)
}

/// Whether a writer may take the lock in state `s` without waiting.
#[inline]
fn can_write(s: u32) -> bool {
    s & WRITER == 0 && readers(s) == 0
}

#[inline]
fn spin(round: u32) {
    for _ in 0..(16u32 << round) {
        sys::cpu_relax();
    }
}

/// A timed call's (clock, abstime); None waits forever (also glibc's reading of a
/// NULL abstime).
pub type Timeout<'a> = Option<(clockid_t, &'a timespec)>;

/// glibc's up-front check of a timed call's arguments.
#[inline]
fn check_timeout(t: Timeout<'_>) -> Result<(), c_int> {
    match t {
        Some((clock, ts)) if !time::supported_clock(clock) || !time::valid(ts) => Err(libc::EINVAL),
        _ => Ok(()),
    }
}

#[inline]
fn deadline_of(t: Timeout<'_>) -> Option<u64> {
    // The arguments were validated up front, so the conversion cannot fail.
    t.map(|(clock, ts)| time::absolute_deadline(clock, ts).unwrap_or_else(|_| sys::now_ns()))
}

/// `pthread_rwlock_init` for a process-private lock of `kind`.
pub fn init(o: &RwlockOverlay, kind: u32) {
    o.state.store(0, Ordering::Relaxed);
    o.waiters.store(0, Ordering::Relaxed);
    o.writer.store(0, Ordering::Relaxed);
    o.shared.store(0, Ordering::Relaxed);
    o.flags.store(kind, Ordering::Release);
}

// ---------------------------------------------------------------------------------
// Read locks
// ---------------------------------------------------------------------------------

/// `pthread_rwlock_rdlock` / `timedrdlock` / `clockrdlock`.
#[inline]
pub fn rdlock(o: &RwlockOverlay, timeout: Timeout<'_>) -> c_int {
    if let Err(e) = check_timeout(timeout) {
        return e;
    }
    if o.writer.load(Ordering::Relaxed) == self_id() {
        return libc::EDEADLK;
    }
    let s = o.state.load(Ordering::Relaxed);
    if s & (WRITER | WPARKED) == 0
        && readers(s) < MAX_READERS
        && o.state.compare_exchange_weak(s, s + READER, Ordering::Acquire, Ordering::Relaxed).is_ok()
    {
        return 0;
    }
    rdlock_slow(o, timeout)
}

#[cold]
fn rdlock_slow(o: &RwlockOverlay, timeout: Timeout<'_>) -> c_int {
    let kind = o.flags.load(Ordering::Relaxed);
    let mut deadline = None;
    let mut spins = 0;
    loop {
        let s = o.state.load(Ordering::Relaxed);
        if can_read(s, kind) {
            if readers(s) >= MAX_READERS {
                return libc::EAGAIN;
            }
            if o.state.compare_exchange_weak(s, s + READER, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return 0;
            }
            continue;
        }
        if s & RPARKED == 0 && spins < SPIN_LIMIT {
            spin(spins);
            spins += 1;
            continue;
        }
        if s & RPARKED == 0 && o.state.compare_exchange_weak(s, s | RPARKED, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            continue;
        }
        if deadline.is_none() {
            deadline = deadline_of(timeout);
        }
        let r = parking::park(
            read_key(o),
            u32::MAX,
            WaitKind::RwLock,
            || {
                let s = o.state.load(Ordering::SeqCst);
                s & RPARKED != 0 && !can_read(s, kind)
            },
            || {},
            |more| {
                if !more {
                    o.state.fetch_and(!RPARKED, Ordering::Relaxed);
                }
            },
            deadline,
        );
        match r {
            // The unlocker counted us in READERS before waking us.
            ParkResult::Unparked(TOKEN_HANDOFF) => return 0,
            ParkResult::TimedOut => return libc::ETIMEDOUT,
            _ => spins = 0,
        }
    }
}

/// `pthread_rwlock_tryrdlock`.
pub fn tryrdlock(o: &RwlockOverlay) -> c_int {
    let kind = o.flags.load(Ordering::Relaxed);
    let mut s = o.state.load(Ordering::Relaxed);
    loop {
        if s & WRITER != 0 || (kind == KIND_PREFER_WRITER_NONRECURSIVE && s & WPARKED != 0) {
            return libc::EBUSY;
        }
        if readers(s) >= MAX_READERS {
            return libc::EAGAIN;
        }
        match o.state.compare_exchange_weak(s, s + READER, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return 0,
            Err(x) => s = x,
        }
    }
}

/// Read unlock (the caller is not the writer).
fn read_unlock(o: &RwlockOverlay) -> c_int {
    let mut s = o.state.load(Ordering::Relaxed);
    loop {
        if readers(s) == 0 {
            return libc::EPERM;
        }
        let n = s - READER;
        if readers(n) == 0 && s & WPARKED != 0 {
            // Last reader out with writers parked: reserve the lock for one of them.
            match o.state.compare_exchange_weak(s, n | WRITER, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => {
                    last_reader_handoff(o);
                    return 0;
                }
                Err(x) => s = x,
            }
            continue;
        }
        match o.state.compare_exchange_weak(s, n, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return 0,
            Err(x) => s = x,
        }
    }
}

#[cold]
fn last_reader_handoff(o: &RwlockOverlay) {
    // We own WRITER (reserved above).
    if !hand_to_writer(o) {
        write_unlock_slow(o);
    }
}

// ---------------------------------------------------------------------------------
// Write locks
// ---------------------------------------------------------------------------------

/// `pthread_rwlock_wrlock` / `timedwrlock` / `clockwrlock`.
#[inline]
pub fn wrlock(o: &RwlockOverlay, timeout: Timeout<'_>) -> c_int {
    if let Err(e) = check_timeout(timeout) {
        return e;
    }
    let me = self_id();
    if o.writer.load(Ordering::Relaxed) == me {
        return libc::EDEADLK;
    }
    if o.state.compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed).is_err() {
        let r = wrlock_slow(o, timeout);
        if r != 0 {
            return r;
        }
    }
    o.writer.store(me, Ordering::Relaxed);
    0
}

#[cold]
fn wrlock_slow(o: &RwlockOverlay, timeout: Timeout<'_>) -> c_int {
    let mut deadline = None;
    let mut spins = 0;
    loop {
        let s = o.state.load(Ordering::Relaxed);
        if can_write(s) {
            if o.state.compare_exchange_weak(s, s | WRITER, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return 0;
            }
            continue;
        }
        if s & WPARKED == 0 && spins < SPIN_LIMIT {
            spin(spins);
            spins += 1;
            continue;
        }
        if s & WPARKED == 0 && o.state.compare_exchange_weak(s, s | WPARKED, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            continue;
        }
        if deadline.is_none() {
            deadline = deadline_of(timeout);
        }
        let mut was_last = false;
        let r = parking::park(
            write_key(o),
            u32::MAX,
            WaitKind::RwLock,
            || {
                let s = o.state.load(Ordering::SeqCst);
                s & WPARKED != 0 && !can_write(s)
            },
            || {},
            |more| {
                if !more {
                    o.state.fetch_and(!WPARKED, Ordering::Relaxed);
                    was_last = true;
                }
            },
            deadline,
        );
        match r {
            // The unlocker left WRITER set for us.
            ParkResult::Unparked(TOKEN_HANDOFF) => return 0,
            ParkResult::TimedOut => {
                // Readers of a kind-2 lock may be parked only because we waited.
                let s = o.state.load(Ordering::Relaxed);
                if was_last && s & RPARKED != 0 && s & WRITER == 0 {
                    wake_readers_retry(o);
                }
                return libc::ETIMEDOUT;
            }
            _ => spins = 0,
        }
    }
}

/// `pthread_rwlock_trywrlock`.
pub fn trywrlock(o: &RwlockOverlay) -> c_int {
    let mut s = o.state.load(Ordering::Relaxed);
    loop {
        if !can_write(s) {
            return libc::EBUSY;
        }
        match o.state.compare_exchange_weak(s, s | WRITER, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => break,
            Err(x) => s = x,
        }
    }
    o.writer.store(self_id(), Ordering::Relaxed);
    0
}

/// Write unlock (the caller is the writer).
#[inline]
fn write_unlock(o: &RwlockOverlay) {
    o.writer.store(0, Ordering::Relaxed);
    if o.state.compare_exchange(WRITER, 0, Ordering::Release, Ordering::Relaxed).is_err() {
        write_unlock_slow(o);
    }
}

/// Releases WRITER, which the caller owns, to whoever is parked (module docs, Policy).
#[cold]
fn write_unlock_slow(o: &RwlockOverlay) {
    let prefer_writer = o.flags.load(Ordering::Relaxed) != KIND_PREFER_READER;
    loop {
        let s = o.state.load(Ordering::Relaxed);
        if s & (RPARKED | WPARKED) == 0 {
            if o.state.compare_exchange_weak(s, s & !WRITER, Ordering::Release, Ordering::Relaxed).is_ok() {
                return;
            }
            continue;
        }
        if s & WPARKED != 0 && (prefer_writer || s & RPARKED == 0) {
            if prefer_writer {
                if hand_to_writer(o) {
                    return;
                }
                continue; // nobody was parked after all; WPARKED is clear now
            }
            release_and_wake_writer(o);
            return;
        }
        if hand_to_readers(o) {
            return;
        }
        // RPARKED was stale and is clear now; we still own WRITER.
    }
}

/// Hands WRITER (owned by the caller) to one parked writer. False if none was parked
/// (then WPARKED is cleared and the caller still owns WRITER).
fn hand_to_writer(o: &RwlockOverlay) -> bool {
    let mut found = false;
    parking::unpark_one(write_key(o), |info| {
        // Under the writers' bucket lock; we own the lock, so it is alive.
        if info.unparked {
            found = true;
            if !info.have_more {
                o.state.fetch_and(!WPARKED, Ordering::Relaxed);
            }
            TOKEN_HANDOFF
        } else {
            o.state.fetch_and(!WPARKED, Ordering::Relaxed);
            TOKEN_NORMAL
        }
    });
    found
}

/// Kind 0, only writers parked: release WRITER and wake one writer to compete.
fn release_and_wake_writer(o: &RwlockOverlay) {
    let mut after = 0;
    parking::unpark_one(write_key(o), |info| {
        // Under the writers' bucket lock, and we still own WRITER until this CAS.
        let mut s = o.state.load(Ordering::Relaxed);
        loop {
            let mut n = s & !WRITER;
            if !info.have_more {
                n &= !WPARKED;
            }
            match o.state.compare_exchange_weak(s, n, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => {
                    after = n;
                    break;
                }
                Err(x) => s = x,
            }
        }
        TOKEN_NORMAL
    });
    if after & RPARKED != 0 {
        // A reader parked while we were deciding: let it compete too.
        wake_readers_retry(o);
    }
}

/// Gives a read lock to every parked reader, WRITER (owned by the caller) becoming
/// the first of them. False if no reader was parked (RPARKED is then clear and the
/// caller still owns WRITER).
fn hand_to_readers(o: &RwlockOverlay) -> bool {
    let mut handed = false;
    loop {
        let mut got = false;
        let mut more = false;
        parking::unpark_one(read_key(o), |info| {
            // Under the readers' bucket lock. The lock is alive: we own WRITER (first
            // round) or a reader is still queued on it (later rounds).
            if !info.unparked {
                if !handed {
                    o.state.fetch_and(!RPARKED, Ordering::Relaxed);
                }
                return TOKEN_NORMAL;
            }
            got = true;
            more = info.have_more;
            let mut s = o.state.load(Ordering::Relaxed);
            loop {
                if handed && s & WRITER != 0 {
                    // A writer took the lock after our read phase drained: this reader
                    // tries again (and parks again behind that writer).
                    if !more {
                        o.state.fetch_and(!RPARKED, Ordering::Relaxed);
                    }
                    more = false;
                    return TOKEN_NORMAL;
                }
                let mut n = (s + READER) & !WRITER;
                if !more {
                    n &= !RPARKED;
                }
                match o.state.compare_exchange_weak(s, n, Ordering::Release, Ordering::Relaxed) {
                    Ok(_) => return TOKEN_HANDOFF,
                    Err(x) => s = x,
                }
            }
        });
        if got {
            handed = true;
        }
        if !got || !more {
            return handed;
        }
    }
}

/// Wakes every parked reader to try again (not a hand-over).
fn wake_readers_retry(o: &RwlockOverlay) {
    parking::unpark_some(read_key(o), u32::MAX, usize::MAX, |n| {
        // Only if we dequeued somebody: then the lock is alive (they were queued), and
        // the queue is empty now.
        if n > 0 {
            o.state.fetch_and(!RPARKED, Ordering::Relaxed);
        }
    });
}

/// `pthread_rwlock_unlock`: write unlock if the caller is the writer, else read unlock.
#[inline]
pub fn unlock(o: &RwlockOverlay) -> c_int {
    if o.writer.load(Ordering::Relaxed) == self_id() {
        write_unlock(o);
        return 0;
    }
    read_unlock(o)
}

/// `pthread_rwlock_destroy`: glibc does nothing and returns 0.
pub fn destroy(_o: &RwlockOverlay) -> c_int {
    0
}

// ---------------------------------------------------------------------------------
// Entry points behind the `pthread_rwlock_*` exports.
// ---------------------------------------------------------------------------------

pub mod api {
    //! Dispatch between glibc (process-shared locks) and us.
    //!
    //! A fiber must not block its worker in the kernel, so for a shared lock it first
    //! tries the real try-variant and, if the lock is busy, runs the real blocking call
    //! on its donor OS thread ([`crate::runtime::fiber::run_on_donor`]). glibc's owner identity
    //! is the TCB's tid, which the fiber shares with its donor, so the lock can be
    //! released later from any worker.
    use super::*;
    use crate::runtime::fiber;
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
            return fiber::run_on_donor(block);
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
            // SAFETY: forwarded contract (glibc's, for an address we cannot overlay).
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
                // SAFETY: forwarded contract.
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
        // SAFETY: forwarded contract.
        match unsafe { ours(rw) } {
            Some(o) => super::destroy(o),
            // SAFETY: forwarded contract.
            None => unsafe { pthread_rwlock_destroy(rw) },
        }
    }

    /// `pthread_rwlock_rdlock` (`ts` NULL), `timedrdlock` (`clock` None) or
    /// `clockrdlock`.
    ///
    /// # Safety
    /// As `pthread_rwlock_clockrdlock`.
    pub unsafe fn rdlock(rw: *mut pthread_rwlock_t, clock: Option<clockid_t>, ts: *const timespec, timed: bool) -> c_int {
        // SAFETY: forwarded contract.
        let Some(o) = (unsafe { ours(rw) }) else {
            let clk = clock.unwrap_or(libc::CLOCK_REALTIME);
            // SAFETY (closures): forwarded contract.
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
                (true, Some(c)) => delegated_lock(
                    || unsafe { pthread_rwlock_tryrdlock(rw) },
                    || unsafe { pthread_rwlock_clockrdlock(rw, c, ts) },
                ),
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
        // SAFETY: forwarded contract.
        let Some(o) = (unsafe { ours(rw) }) else {
            let clk = clock.unwrap_or(libc::CLOCK_REALTIME);
            // SAFETY (closures): forwarded contract.
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
                (true, Some(c)) => delegated_lock(
                    || unsafe { pthread_rwlock_trywrlock(rw) },
                    || unsafe { pthread_rwlock_clockwrlock(rw, c, ts) },
                ),
            };
        };
        // SAFETY: the program's timespec pointer or NULL (NULL: no timeout, as glibc).
        let t = if timed { unsafe { ts.as_ref() }.map(|ts| (clock.unwrap_or(libc::CLOCK_REALTIME), ts)) } else { None };
        super::wrlock(o, t)
    }

    /// # Safety
    /// As `pthread_rwlock_tryrdlock`.
    pub unsafe fn tryrdlock(rw: *mut pthread_rwlock_t) -> c_int {
        // SAFETY: forwarded contract.
        match unsafe { ours(rw) } {
            Some(o) => super::tryrdlock(o),
            // SAFETY: forwarded contract.
            None => unsafe { pthread_rwlock_tryrdlock(rw) },
        }
    }

    /// # Safety
    /// As `pthread_rwlock_trywrlock`.
    pub unsafe fn trywrlock(rw: *mut pthread_rwlock_t) -> c_int {
        // SAFETY: forwarded contract.
        match unsafe { ours(rw) } {
            Some(o) => super::trywrlock(o),
            // SAFETY: forwarded contract.
            None => unsafe { pthread_rwlock_trywrlock(rw) },
        }
    }

    /// # Safety
    /// As `pthread_rwlock_unlock`.
    #[inline]
    pub unsafe fn unlock(rw: *mut pthread_rwlock_t) -> c_int {
        // SAFETY: forwarded contract.
        match unsafe { ours(rw) } {
            Some(o) => super::unlock(o),
            // SAFETY: forwarded contract.
            None => unsafe { pthread_rwlock_unlock(rw) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::time::Duration;

    struct Lock(Box<libc::pthread_rwlock_t>);
    // SAFETY: only accessed through the atomics of the overlay.
    unsafe impl Send for Lock {}
    // SAFETY: as above.
    unsafe impl Sync for Lock {}
    impl Lock {
        fn new(kind: u32) -> Lock {
            // SAFETY: all-zero bytes are a valid (unlocked) pthread_rwlock_t.
            let mut b: Box<libc::pthread_rwlock_t> = Box::new(unsafe { core::mem::zeroed() });
            // SAFETY: a live, aligned pthread_rwlock_t.
            init(unsafe { RwlockOverlay::from_ptr(&mut *b) }, kind);
            Lock(b)
        }
        fn o(&self) -> &RwlockOverlay {
            // SAFETY: a live, aligned pthread_rwlock_t, accessed only atomically.
            unsafe { RwlockOverlay::from_ptr(&*self.0 as *const _ as *mut _) }
        }
    }

    #[test]
    fn single_thread_rules() {
        let l = Lock::new(KIND_PREFER_READER);
        let o = l.o();
        assert_eq!(rdlock(o, None), 0);
        assert_eq!(rdlock(o, None), 0);
        assert_eq!(tryrdlock(o), 0);
        assert_eq!(trywrlock(o), libc::EBUSY);
        for _ in 0..3 {
            assert_eq!(unlock(o), 0);
        }
        assert_eq!(unlock(o), libc::EPERM);
        assert_eq!(wrlock(o, None), 0);
        assert_eq!(wrlock(o, None), libc::EDEADLK);
        assert_eq!(rdlock(o, None), libc::EDEADLK);
        assert_eq!(tryrdlock(o), libc::EBUSY);
        let bad = libc::timespec { tv_sec: 0, tv_nsec: -1 };
        assert_eq!(rdlock(o, Some((libc::CLOCK_REALTIME, &bad))), libc::EINVAL);
        assert_eq!(wrlock(o, Some((libc::CLOCK_PROCESS_CPUTIME_ID, &bad))), libc::EINVAL);
        assert_eq!(unlock(o), 0);
        assert_eq!(o.state.load(Ordering::Relaxed), 0);
        assert_eq!(o.writer.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn reader_overflow() {
        let l = Lock::new(KIND_PREFER_READER);
        let o = l.o();
        o.state.store((MAX_READERS - 1) * READER, Ordering::Relaxed);
        assert_eq!(rdlock(o, None), 0);
        assert_eq!(rdlock(o, None), libc::EAGAIN);
        assert_eq!(tryrdlock(o), libc::EAGAIN);
        assert_eq!(unlock(o), 0);
        assert_eq!(tryrdlock(o), 0);
    }

    #[test]
    fn timed_out_writer_and_reader() {
        let l = Lock::new(KIND_PREFER_READER);
        let o = l.o();
        assert_eq!(rdlock(o, None), 0);
        let past = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        let neg = libc::timespec { tv_sec: -1, tv_nsec: 0 };
        assert_eq!(wrlock(o, Some((libc::CLOCK_MONOTONIC, &past))), libc::ETIMEDOUT);
        assert_eq!(wrlock(o, Some((libc::CLOCK_REALTIME, &neg))), libc::ETIMEDOUT);
        assert_eq!(unlock(o), 0);
        assert_eq!(wrlock(o, None), 0);
        // Another thread's reader times out against our write lock.
        let l2 = &l;
        std::thread::scope(|sc| {
            sc.spawn(|| {
                let d = libc::timespec { tv_sec: 0, tv_nsec: 0 };
                assert_eq!(rdlock(l2.o(), Some((libc::CLOCK_REALTIME, &d))), libc::ETIMEDOUT);
                assert_eq!(tryrdlock(l2.o()), libc::EBUSY);
            });
        });
        assert_eq!(unlock(o), 0);
        assert_eq!(o.state.load(Ordering::Relaxed), 0);
    }

    /// Kind 2: a new reader waits while a writer waits; kind 0: it does not.
    #[test]
    fn writer_preference_blocks_new_readers() {
        for (kind, reader_gets_in) in [(KIND_PREFER_READER, true), (KIND_PREFER_WRITER_NONRECURSIVE, false)] {
            let l = Arc::new(Lock::new(kind));
            assert_eq!(rdlock(l.o(), None), 0);
            let got = Arc::new(AtomicBool::new(false));
            let w = std::thread::spawn({
                let (l, got) = (l.clone(), got.clone());
                move || {
                    assert_eq!(wrlock(l.o(), None), 0);
                    got.store(true, Ordering::SeqCst);
                    assert_eq!(unlock(l.o()), 0);
                }
            });
            std::thread::sleep(Duration::from_millis(100));
            assert!(!got.load(Ordering::SeqCst));
            let r = std::thread::spawn({
                let l = l.clone();
                move || tryrdlock(l.o())
            })
            .join()
            .unwrap();
            assert_eq!(r == 0, reader_gets_in, "kind {kind}");
            if r == 0 {
                assert_eq!(read_unlock(l.o()), 0);
            }
            assert_eq!(unlock(l.o()), 0);
            w.join().unwrap();
            assert!(got.load(Ordering::SeqCst));
            assert_eq!(l.o().state.load(Ordering::Relaxed), 0);
        }
    }

    #[test]
    fn threads_hammer_invariants() {
        use core::sync::atomic::AtomicI32;
        for kind in [KIND_PREFER_READER, KIND_PREFER_WRITER, KIND_PREFER_WRITER_NONRECURSIVE] {
            let l = Arc::new(Lock::new(kind));
            let active = Arc::new(AtomicI32::new(0)); // readers count up, a writer sets -1000
            let hs: Vec<_> = (0..6)
                .map(|i| {
                    let (l, active) = (l.clone(), active.clone());
                    std::thread::spawn(move || {
                        for j in 0..3000 {
                            if (i + j) % 5 == 0 {
                                assert_eq!(wrlock(l.o(), None), 0);
                                assert_eq!(active.swap(-1000, Ordering::SeqCst), 0);
                                active.store(0, Ordering::SeqCst);
                                assert_eq!(unlock(l.o()), 0);
                            } else {
                                assert_eq!(rdlock(l.o(), None), 0);
                                assert!(active.fetch_add(1, Ordering::SeqCst) >= 0);
                                active.fetch_sub(1, Ordering::SeqCst);
                                assert_eq!(unlock(l.o()), 0);
                            }
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            assert_eq!(l.o().state.load(Ordering::Relaxed) & !(RPARKED | WPARKED), 0);
            assert_eq!(trywrlock(l.o()), 0);
            assert_eq!(unlock(l.o()), 0);
        }
    }
}
