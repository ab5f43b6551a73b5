//! Models of the real `sync/lock_word.rs` over a model wait queue: one wake-up in
//! flight, hand-offs (eventual fairness), and a timed waiter racing a hand-off.

use super::lock_word::{self as word, Place, Unparking, WaitQueue, Woken};
use super::model_queue::ModelQueue;
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

/// When the model queue tells a contended unlock to hand the lock over
/// (`Unparking::be_fair`; the parking lot says so once per randomised interval).
#[derive(Clone, Copy, Debug)]
pub enum Fairness {
    /// Never: barging only ("One wake-up in flight").
    Never,
    /// Every contended unlock hands over.
    Always,
    /// Every second dequeue (the first is not fair): hand-offs and barging mixed.
    Alternate,
}

/// The mutex's queue (`MutexQueue`: `parking::park_in` / `unpark_one_fair`) over the
/// model queue, with the model's fairness rule.
struct LockQueue {
    queue: ModelQueue,
    fairness: Fairness,
    /// Waiters dequeued so far (for `Fairness::Alternate`); changed under the queue's lock.
    dequeued: AtomicUsize,
    /// False: the wakee gets TOKEN_ALONE whatever the unlocker said (a broken queue).
    pass_tokens: bool,
    /// The deadline of the timed waiters passed (set by a model timer thread).
    expired: AtomicBool,
    /// Spin phases asked for so far: every second one is skipped (`spinning_pays`), as
    /// for a fiber whose worker has others queued, so that both ways to PARKED (after
    /// the spin, at once) are explored.
    spin_phases: AtomicUsize,
}

/// The queue as a timed call sees it (`MutexQueue` with a deadline).
struct Timed<'a>(&'a LockQueue);

impl WaitQueue for LockQueue {
    fn park(&self, place: Place, still_contended: impl FnOnce() -> bool, on_timeout: impl FnOnce(bool)) -> Woken {
        self.queue.park(place == Place::Front, None, still_contended, on_timeout)
    }

    fn unpark_one(&self, release: impl FnOnce(Unparking) -> usize) {
        self.queue.unpark_one(|dequeued, others_remain| {
            let be_fair = dequeued
                && match self.fairness {
                    Fairness::Never => false,
                    Fairness::Always => true,
                    Fairness::Alternate => self.dequeued.fetch_add(1, Ordering::Relaxed) % 2 == 1,
                };
            let token = release(Unparking { dequeued, others_remain, be_fair });
            if self.pass_tokens {
                token
            } else {
                word::TOKEN_ALONE
            }
        });
    }

    fn spinning_pays(&self) -> bool {
        self.spin_phases.fetch_add(1, Ordering::Relaxed).is_multiple_of(2)
    }
}

impl WaitQueue for Timed<'_> {
    fn park(&self, place: Place, still_contended: impl FnOnce() -> bool, on_timeout: impl FnOnce(bool)) -> Woken {
        self.0.queue.park(place == Place::Front, Some(&self.0.expired), still_contended, on_timeout)
    }
    fn unpark_one(&self, release: impl FnOnce(Unparking) -> usize) {
        self.0.unpark_one(release)
    }
    fn spinning_pays(&self) -> bool {
        self.0.spinning_pays()
    }
}

/// A mutex as `sync::mutex` drives the word: the word, its queue, and the data it
/// guards (a loom cell: loom reports any access not ordered by the lock).
struct Lock {
    word: AtomicU32,
    queue: LockQueue,
    data: UnsafeCell<usize>,
    handoffs: AtomicUsize,
}

// SAFETY: `data` is accessed only under the model lock (which is what is checked).
unsafe impl Sync for Lock {}

impl Lock {
    fn new(fairness: Fairness, pass_tokens: bool) -> Arc<Lock> {
        let queue = LockQueue {
            queue: ModelQueue::new(),
            fairness,
            dequeued: AtomicUsize::new(0),
            pass_tokens,
            expired: AtomicBool::new(false),
            spin_phases: AtomicUsize::new(0),
        };
        Arc::new(Lock { word: AtomicU32::new(0), queue, data: UnsafeCell::new(0), handoffs: AtomicUsize::new(0) })
    }

    /// `pthread_mutex_lock` (or `timedlock` when `timed`) + a write of the guarded data.
    fn lock(&self, timed: bool) -> bool {
        let got = word::try_lock_uncontended(&self.word)
            || if timed {
                word::lock_contended(&self.word, &Timed(&self.queue)).is_ok()
            } else {
                word::lock_contended(&self.word, &self.queue).is_ok()
            };
        if got {
            self.data.with_mut(|d| unsafe { *d += 1 });
        }
        got
    }

    /// `pthread_mutex_unlock`.
    fn unlock(&self) {
        if !word::unlock_uncontended(&self.word) && word::unlock_contended(&self.word, &self.queue) {
            self.handoffs.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// At the end, with every thread joined: the mutex is free, nobody is queued, and
    /// every acquisition wrote the data once.
    fn check_end(&self, acquisitions: usize) {
        assert_eq!(self.word.load(Ordering::Relaxed), 0, "the mutex is left locked (or PARKED with nobody queued)");
        assert!(self.queue.queue.is_empty(), "a waiter is left queued");
        assert_eq!(self.data.with(|d| unsafe { *d }), acquisitions, "mutual exclusion broken");
    }
}

fn model(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    builder.check(f);
}

/// Three threads lock and unlock once each under `fairness`; loom reports a deadlock
/// if a waiter is never woken and a causality violation if the guarded data is
/// reached without the lock's ordering (a hand-off's wakee included). Returns whether
/// some interleaving handed the lock over.
pub fn contenders(fairness: Fairness, pass_tokens: bool) -> bool {
    let handed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = handed.clone();
    model(3, move || {
        let lock = Lock::new(fairness, pass_tokens);
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let lock = lock.clone();
                thread::spawn(move || {
                    assert!(lock.lock(false));
                    lock.unlock();
                })
            })
            .collect();
        assert!(lock.lock(false));
        lock.unlock();
        for t in threads {
            t.join().unwrap();
        }
        lock.check_end(3);
        if lock.handoffs.load(Ordering::Relaxed) > 0 {
            seen.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    handed.load(std::sync::atomic::Ordering::Relaxed)
}

/// The owner unlocks (a hand-off when `fairness` says so) while a timed waiter is
/// parked and its deadline passes, and a third thread contends: whichever wins the
/// race under the queue's lock, the timed waiter either owns the lock (and unlocks)
/// or left with `ETIMEDOUT` and owns nothing; the mutex ends free with nobody queued.
/// The set-up is staged (the timed waiter queued before the owner unlocks); the
/// timeout, the unlock and the third thread are explored against each other.
pub fn timed_waiter_racing_unlock(fairness: Fairness) {
    model(2, move || {
        let lock = Lock::new(fairness, true);
        assert!(lock.lock(false));
        let (lt, lc, lx) = (lock.clone(), lock.clone(), lock.clone());
        let timed = thread::spawn(move || {
            let got = lt.lock(true);
            if got {
                lt.unlock();
            }
            got
        });
        lock.queue.queue.wait_until_queued(1);
        let timer = thread::spawn(move || {
            lx.queue.expired.store(true, Ordering::Relaxed);
            lx.queue.queue.deadline_passed();
        });
        let other = thread::spawn(move || {
            assert!(lc.lock(false));
            lc.unlock();
        });
        lock.unlock();
        let timed_got = timed.join().unwrap();
        other.join().unwrap();
        timer.join().unwrap();
        lock.check_end(2 + timed_got as usize);
    });
}
