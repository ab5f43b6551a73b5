//! The rwlock's state word and its protocol with the parking lot: who waits, who is
//! woken on an unlock, and who gets the lock handed over (the module essay of
//! [`super`] has the bit table and the policy; this file is that policy's code).
//!
//! The word (`RwlockOverlay::state`): bit 0 `WRITER`, bit 1 `WPARKED`, bit 2 `RPARKED`,
//! bits 3..30 the reader count. Waiters queue on two keys (readers, writers), seen here
//! through the [`RwQueues`] trait: the library's implementation is the parking lot
//! (`super::LotQueues`), the model checks' a loom mutex and condition variable.
//!
//! # Orderings
//!
//! Taking a lock (read or write) is an `Acquire` RMW, releasing one a `Release` RMW:
//! they order the data the lock guards. A PARKED bit is set with a `Relaxed` CAS on a
//! state that makes the caller wait, and checked again by [`RwQueues::park`]'s
//! `still_waits` under the queue's lock after the waiter is queued; every unlock that
//! finds a PARKED bit takes the same queue lock before it decides whom to wake, and
//! every clearing of a PARKED bit happens under that lock. So queueing and the bits
//! are ordered by the queue lock, and no PARKED access needs more than `Relaxed`; there
//! is no SeqCst in this file. A hand-over (`TOKEN_HANDOFF`) is published by the
//! `Release` CAS that gives the lock away, made under the queue lock before the waiter
//! is woken (the wake-up itself is the queue's `Release`/`Acquire` on the waiter's
//! `woken` flag).
//!
//! # Model-checked
//!
//! This file takes its atomics only from `crate::base::loom` and reaches the parking
//! lot only through [`RwQueues`], so `libfiberize/tests/loom_protocols.rs` compiles it
//! as it is and drives its functions from loom threads (the `rwlock_*` models): no
//! lost wake-up for readers and writers, writer exclusion, and which side an unlock
//! prefers for each kind.

use crate::base::loom::{spin_wait, AtomicU32, Ordering};

/// A writer holds the lock (or it is being handed to one).
pub const WRITER: u32 = 1;
/// Writers may be queued on the writers' key.
pub const WPARKED: u32 = 2;
/// Readers may be queued on the readers' key.
pub const RPARKED: u32 = 4;
/// The reader count starts at this bit.
const READER_SHIFT: u32 = 3;
/// One reader in the count.
pub const READER: u32 = 1 << READER_SHIFT;
/// glibc fails a read lock with EAGAIN when the count would reach 2^28.
pub const MAX_READERS: u32 = (1 << 28) - 1;

/// glibc's `PTHREAD_RWLOCK_PREFER_READER_NP` (the default); `super` asserts that these
/// three equal glibc-layout's.
pub const KIND_PREFER_READER: u32 = 0;
/// `PTHREAD_RWLOCK_PREFER_WRITER_NP` (glibc treats it as prefer-reader for readers).
pub const KIND_PREFER_WRITER: u32 = 1;
/// `PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP`.
pub const KIND_PREFER_WRITER_NONRECURSIVE: u32 = 2;

/// Token of a waiter that is woken to compete again.
pub const TOKEN_RETRY: usize = 0;
/// Token of a waiter that was handed the lock (read: counted in READERS; write:
/// WRITER left set for it).
pub const TOKEN_HANDOFF: usize = 1;

/// Short spins before parking. Origin: as for `pthread_mutex_t` (a lock held by a
/// fiber running on another worker is usually released within a microsecond).
const SPIN_LIMIT: u32 = 3;

/// Which of the two queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    Readers,
    Writers,
}

/// How a wait in a queue ended: the mutex word's type (the two words wait in the same
/// parking lot, so a wait ends the same three ways).
pub use crate::sync::lock_word::Woken;

/// What an unparker learns under the queue's lock, before the waiter is released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dequeued {
    /// A waiter was dequeued.
    pub unparked: bool,
    /// More waiters remain in the queue.
    pub have_more: bool,
}

/// The two wait queues of one lock, as the protocol uses them.
pub trait RwQueues {
    /// Queues the caller in `queue`; then, under the queue's lock and after a SeqCst
    /// fence, `still_waits()` decides whether it sleeps (false: leave, `Retry`). If the
    /// deadline passes first, `on_timeout(others_remain)` runs under the lock after the
    /// caller left the queue.
    fn park(&self, queue: Queue, still_waits: impl FnOnce() -> bool, on_timeout: impl FnOnce(bool)) -> Woken;
    /// Dequeues one waiter (if any); `decide` runs under the queue's lock and returns
    /// its token. Returns whether one was dequeued.
    fn unpark_one(&self, queue: Queue, decide: impl FnOnce(Dequeued) -> usize) -> bool;
    /// Wakes every waiter of `queue` with [`TOKEN_RETRY`]; `after(n)` runs under the
    /// queue's lock with the number dequeued.
    fn unpark_all(&self, queue: Queue, after: impl FnOnce(usize));
    /// Whether a waiter that was woken and found the lock unavailable again should spin
    /// before it parks again (asked once per wake-up; the mutex's rule, "Spinning" in
    /// `crate::sync::lock_word`: not while the caller's worker has others queued, the
    /// holder may be among them).
    fn spinning_pays(&self) -> bool {
        true
    }
}

/// Why a lock call failed (the caller maps it to glibc's error code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwError {
    /// EAGAIN: the reader count would overflow.
    TooManyReaders,
    /// EBUSY: a try call would have to wait.
    Busy,
    /// ETIMEDOUT.
    TimedOut,
    /// EPERM: a read unlock without a read lock.
    NotHeld,
}

#[inline]
fn readers(s: u32) -> u32 {
    s >> READER_SHIFT
}

/// Whether a reader may take a read lock in state `s` without waiting: no writer, and
/// for kind 2 not while a writer waits behind current readers.
#[inline]
pub fn can_read(s: u32, kind: u32) -> bool {
    s & WRITER == 0 && !(kind == KIND_PREFER_WRITER_NONRECURSIVE && s & WPARKED != 0 && readers(s) > 0)
}

/// Whether a writer may take the lock in state `s` without waiting.
#[inline]
pub fn can_write(s: u32) -> bool {
    s & WRITER == 0 && readers(s) == 0
}

/// The read lock's fast path: nobody writes or waits to write.
#[inline]
pub fn try_read_uncontended(state: &AtomicU32) -> bool {
    let s = state.load(Ordering::Relaxed);
    s & (WRITER | WPARKED) == 0
        && readers(s) < MAX_READERS
        && state.compare_exchange_weak(s, s + READER, Ordering::Acquire, Ordering::Relaxed).is_ok()
}

/// Takes a read lock after the fast path failed: spins a little, then parks on the
/// readers' queue until it may read or is handed a read lock.
#[cold]
pub fn read_lock_contended(state: &AtomicU32, kind: u32, queues: &impl RwQueues) -> Result<(), RwError> {
    let mut spins = 0;
    let mut was_woken = false;
    loop {
        let s = state.load(Ordering::Relaxed);
        if can_read(s, kind) {
            if readers(s) >= MAX_READERS {
                return Err(RwError::TooManyReaders);
            }
            if state.compare_exchange_weak(s, s + READER, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return Ok(());
            }
            continue;
        }
        if s & RPARKED == 0 && spins < SPIN_LIMIT {
            if spins == 0 && was_woken && !queues.spinning_pays() {
                spins = SPIN_LIMIT;
                continue;
            }
            spin_wait(16 << spins);
            spins += 1;
            continue;
        }
        if s & RPARKED == 0 && state.compare_exchange_weak(s, s | RPARKED, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            continue;
        }
        let woken = queues.park(
            Queue::Readers,
            // Under the queue lock: every unlock that clears RPARKED or lets us read
            // does so under it too, so Relaxed sees it (module docs, Orderings).
            || {
                let s = state.load(Ordering::Relaxed);
                s & RPARKED != 0 && !can_read(s, kind)
            },
            |others_remain| {
                if !others_remain {
                    state.fetch_and(!RPARKED, Ordering::Relaxed);
                }
            },
        );
        match woken {
            // The unlocker counted us in READERS before waking us.
            Woken::Unparked(TOKEN_HANDOFF) => return Ok(()),
            Woken::TimedOut => return Err(RwError::TimedOut),
            _ => {
                spins = 0;
                was_woken = true;
            }
        }
    }
}

/// `tryrdlock`.
pub fn try_read(state: &AtomicU32, kind: u32) -> Result<(), RwError> {
    let mut s = state.load(Ordering::Relaxed);
    loop {
        if s & WRITER != 0 || (kind == KIND_PREFER_WRITER_NONRECURSIVE && s & WPARKED != 0) {
            return Err(RwError::Busy);
        }
        if readers(s) >= MAX_READERS {
            return Err(RwError::TooManyReaders);
        }
        match state.compare_exchange_weak(s, s + READER, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return Ok(()),
            Err(x) => s = x,
        }
    }
}

/// Read unlock (the caller is not the writer). The last reader out with writers
/// parked reserves WRITER in the same CAS and hands the lock to one of them.
pub fn read_unlock(state: &AtomicU32, kind: u32, queues: &impl RwQueues) -> Result<(), RwError> {
    let mut s = state.load(Ordering::Relaxed);
    loop {
        if readers(s) == 0 {
            return Err(RwError::NotHeld);
        }
        let n = s - READER;
        if readers(n) == 0 && s & WPARKED != 0 {
            // AcqRel: Release for our reads, Acquire because we now own WRITER.
            match state.compare_exchange_weak(s, n | WRITER, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => {
                    if !hand_to_writer(state, queues) {
                        write_unlock_contended(state, kind, queues);
                    }
                    return Ok(());
                }
                Err(x) => s = x,
            }
            continue;
        }
        match state.compare_exchange_weak(s, n, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return Ok(()),
            Err(x) => s = x,
        }
    }
}

/// The write lock's fast path: 0 -> WRITER.
#[inline]
pub fn try_write_uncontended(state: &AtomicU32) -> bool {
    state.compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed).is_ok()
}

/// Takes the write lock after the fast path failed: spins a little, then parks on the
/// writers' queue until it may write or is handed the lock.
#[cold]
pub fn write_lock_contended(state: &AtomicU32, queues: &impl RwQueues) -> Result<(), RwError> {
    let mut spins = 0;
    let mut was_woken = false;
    loop {
        let s = state.load(Ordering::Relaxed);
        if can_write(s) {
            if state.compare_exchange_weak(s, s | WRITER, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return Ok(());
            }
            continue;
        }
        if s & WPARKED == 0 && spins < SPIN_LIMIT {
            if spins == 0 && was_woken && !queues.spinning_pays() {
                spins = SPIN_LIMIT;
                continue;
            }
            spin_wait(16 << spins);
            spins += 1;
            continue;
        }
        if s & WPARKED == 0 && state.compare_exchange_weak(s, s | WPARKED, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            continue;
        }
        let mut was_last = false;
        let woken = queues.park(
            Queue::Writers,
            // Under the queue lock, as for readers.
            || {
                let s = state.load(Ordering::Relaxed);
                s & WPARKED != 0 && !can_write(s)
            },
            |others_remain| {
                if !others_remain {
                    state.fetch_and(!WPARKED, Ordering::Relaxed);
                    was_last = true;
                }
            },
        );
        match woken {
            // The unlocker left WRITER set for us.
            Woken::Unparked(TOKEN_HANDOFF) => return Ok(()),
            Woken::TimedOut => {
                // Readers of a kind-2 lock may be parked only because we waited.
                let s = state.load(Ordering::Relaxed);
                if was_last && s & RPARKED != 0 && s & WRITER == 0 {
                    wake_readers_retry(state, queues);
                }
                return Err(RwError::TimedOut);
            }
            _ => {
                spins = 0;
                was_woken = true;
            }
        }
    }
}

/// `trywrlock`.
pub fn try_write(state: &AtomicU32) -> Result<(), RwError> {
    let mut s = state.load(Ordering::Relaxed);
    loop {
        if !can_write(s) {
            return Err(RwError::Busy);
        }
        match state.compare_exchange_weak(s, s | WRITER, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return Ok(()),
            Err(x) => s = x,
        }
    }
}

/// Write unlock (the caller is the writer): WRITER -> 0, or the contended path.
#[inline]
pub fn write_unlock(state: &AtomicU32, kind: u32, queues: &impl RwQueues) {
    if state.compare_exchange(WRITER, 0, Ordering::Release, Ordering::Relaxed).is_err() {
        write_unlock_contended(state, kind, queues);
    }
}

/// Releases WRITER, which the caller owns, to whoever is parked (module docs of
/// [`super`], Policy): kinds 1 and 2 hand it to a parked writer first; otherwise every
/// parked reader gets a read lock; kind 0 with only writers parked releases it and
/// wakes one writer to compete.
#[cold]
pub fn write_unlock_contended(state: &AtomicU32, kind: u32, queues: &impl RwQueues) {
    let prefer_writer = kind != KIND_PREFER_READER;
    loop {
        let s = state.load(Ordering::Relaxed);
        if s & (RPARKED | WPARKED) == 0 {
            if state.compare_exchange_weak(s, s & !WRITER, Ordering::Release, Ordering::Relaxed).is_ok() {
                return;
            }
            continue;
        }
        if s & WPARKED != 0 && (prefer_writer || s & RPARKED == 0) {
            if prefer_writer {
                if hand_to_writer(state, queues) {
                    return;
                }
                continue; // nobody was parked after all; WPARKED is clear now
            }
            release_and_wake_writer(state, queues);
            return;
        }
        if hand_to_readers(state, queues) {
            return;
        }
        // RPARKED was stale and is clear now; we still own WRITER.
    }
}

/// Hands WRITER (owned by the caller) to one parked writer. False if none was parked
/// (then WPARKED is cleared and the caller still owns WRITER).
fn hand_to_writer(state: &AtomicU32, queues: &impl RwQueues) -> bool {
    queues.unpark_one(Queue::Writers, |d| {
        // Under the writers' queue lock; we own the lock, so it is alive.
        if d.unparked {
            if !d.have_more {
                state.fetch_and(!WPARKED, Ordering::Relaxed);
            }
            TOKEN_HANDOFF
        } else {
            state.fetch_and(!WPARKED, Ordering::Relaxed);
            TOKEN_RETRY
        }
    })
}

/// Kind 0, only writers parked: release WRITER and wake one writer to compete.
fn release_and_wake_writer(state: &AtomicU32, queues: &impl RwQueues) {
    let mut after = 0;
    queues.unpark_one(Queue::Writers, |d| {
        // Under the writers' queue lock, and we still own WRITER until this CAS.
        let mut s = state.load(Ordering::Relaxed);
        loop {
            let mut n = s & !WRITER;
            if !d.have_more {
                n &= !WPARKED;
            }
            match state.compare_exchange_weak(s, n, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => {
                    after = n;
                    break;
                }
                Err(x) => s = x,
            }
        }
        TOKEN_RETRY
    });
    if after & RPARKED != 0 {
        // A reader parked while we were deciding: let it compete too.
        wake_readers_retry(state, queues);
    }
}

/// Gives a read lock to every parked reader, WRITER (owned by the caller) becoming the
/// first of them. False if no reader was parked (RPARKED is then clear and the caller
/// still owns WRITER).
fn hand_to_readers(state: &AtomicU32, queues: &impl RwQueues) -> bool {
    let mut handed = false;
    loop {
        let mut got = false;
        let mut more = false;
        queues.unpark_one(Queue::Readers, |d| {
            // Under the readers' queue lock. The lock is alive: we own WRITER (first
            // round) or a reader is still queued on it (later rounds).
            if !d.unparked {
                if !handed {
                    state.fetch_and(!RPARKED, Ordering::Relaxed);
                }
                return TOKEN_RETRY;
            }
            got = true;
            more = d.have_more;
            let mut s = state.load(Ordering::Relaxed);
            loop {
                if handed && s & WRITER != 0 {
                    // A writer took the lock after our read phase drained: this reader
                    // tries again (and parks again behind that writer).
                    if !more {
                        state.fetch_and(!RPARKED, Ordering::Relaxed);
                    }
                    more = false;
                    return TOKEN_RETRY;
                }
                let mut n = (s + READER) & !WRITER;
                if !more {
                    n &= !RPARKED;
                }
                match state.compare_exchange_weak(s, n, Ordering::Release, Ordering::Relaxed) {
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
fn wake_readers_retry(state: &AtomicU32, queues: &impl RwQueues) {
    queues.unpark_all(Queue::Readers, |n| {
        // Only if we dequeued somebody: then the lock is alive (they were queued), and
        // the queue is empty now.
        if n > 0 {
            state.fetch_and(!RPARKED, Ordering::Relaxed);
        }
    });
}
