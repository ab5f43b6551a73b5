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
//! path, where an owner clears it. The code of this word and of the policy below is
//! [`word`], a protocol file that the loom models run as it is.
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
//!
//! # Files
//!
//! | file | what it holds |
//! |------|---------------|
//! | `mod.rs` | the overlay, the parking-lot queues of a lock (`LotQueues`, the [`word::RwQueues`] of the library), glibc's error codes, `init`, `unlock` (read or write by the owner identity), `destroy` |
//! | [`read`] | read locks: `rdlock`, `tryrdlock`, read unlock (glibc's checks and error codes around [`word`]) |
//! | [`write`] | write locks: `wrlock`, `trywrlock`, write unlock |
//! | [`word`] | the state word's protocol: the bits, taking and releasing read and write locks, the wake-up and hand-over decisions of an unlock; the parking lot seen through a trait (model-checked with loom) |
//! | [`api`] | the entry points behind the exports: ours, or glibc's for process-shared locks |
//! | `tests.rs` | unit tests of the protocol on plain threads |

use core::cell::Cell;
use core::sync::atomic::{AtomicU32, Ordering};

use libc::{c_int, clockid_t, timespec};

use crate::base::sys;
use crate::base::time;
use crate::runtime::fibers::fiber::WaitKind;
use crate::sync::mutex::self_id;
use crate::sync::parking;
use word::{Dequeued, Queue, RwError, RwQueues, Woken};

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

// The state word's bits (the table in the module docs) and the protocol on them.
pub use word::{
    KIND_PREFER_READER, KIND_PREFER_WRITER, KIND_PREFER_WRITER_NONRECURSIVE, MAX_READERS, READER, RPARKED, WPARKED, WRITER,
};
// The kinds are glibc's `__flags` values, read from the program's lock.
const _: () = assert!(
    KIND_PREFER_READER == glibc_layout::RWLOCK_PREFER_READER
        && KIND_PREFER_WRITER == glibc_layout::RWLOCK_PREFER_WRITER
        && KIND_PREFER_WRITER_NONRECURSIVE == glibc_layout::RWLOCK_PREFER_WRITER_NONRECURSIVE
);

/// The lock's two wait queues in the parking lot (readers on `read_key`, writers on
/// `write_key`), with the deadline of the call that waits.
struct LotQueues<'a> {
    o: &'a RwlockOverlay,
    timeout: Timeout<'a>,
    /// Computed at the first park (a call that never parks never reads the clock).
    deadline: Cell<Option<parking::Deadline>>,
}

impl<'a> LotQueues<'a> {
    fn new(o: &'a RwlockOverlay, timeout: Timeout<'a>) -> Self {
        LotQueues { o, timeout, deadline: Cell::new(None) }
    }

    fn key(&self, queue: Queue) -> usize {
        match queue {
            Queue::Readers => read_key(self.o),
            Queue::Writers => write_key(self.o),
        }
    }
}

impl RwQueues for LotQueues<'_> {
    fn park(&self, queue: Queue, still_waits: impl FnOnce() -> bool, on_timeout: impl FnOnce(bool)) -> Woken {
        let deadline = match self.deadline.get() {
            Some(d) => d,
            None => {
                let d = deadline_of(self.timeout);
                self.deadline.set(Some(d));
                d
            }
        };
        parking::park(self.key(queue), u32::MAX, WaitKind::RwLock, still_waits, || {}, on_timeout, deadline).into()
    }

    fn unpark_one(&self, queue: Queue, decide: impl FnOnce(Dequeued) -> usize) -> bool {
        parking::unpark_one(self.key(queue), |info| decide(Dequeued { unparked: info.unparked, have_more: info.have_more }))
    }

    fn unpark_all(&self, queue: Queue, after: impl FnOnce(usize)) {
        parking::unpark_some(self.key(queue), u32::MAX, usize::MAX, after);
    }
    fn spinning_pays(&self) -> bool {
        crate::sync::mutex::spinning_pays()
    }
}

/// glibc's error code for a failed lock call.
fn errno_of(e: RwError) -> c_int {
    match e {
        RwError::TooManyReaders => libc::EAGAIN,
        RwError::Busy => libc::EBUSY,
        RwError::TimedOut => libc::ETIMEDOUT,
        RwError::NotHeld => libc::EPERM,
    }
}

/// 0 or glibc's error code.
fn status(r: Result<(), RwError>) -> c_int {
    r.map_or_else(errno_of, |()| 0)
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

pub mod api;
mod read;
#[cfg(test)]
mod tests;
pub mod word;
mod write;

use read::read_unlock;
pub use read::{rdlock, tryrdlock};
use write::write_unlock;
pub use write::{trywrlock, wrlock};

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
