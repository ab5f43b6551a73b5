//! The mutex lock word and its protocol with the parking lot: one wake-up in flight.
//!
//! The word is glibc's `__lock` (`MutexOverlay::lock`); the type rules (owner,
//! recursion count, errorcheck) live in `crate::sync::mutex` around it.
//!
//! | bit | name   | meaning                                                  |
//! |-----|--------|----------------------------------------------------------|
//! | 0   | LOCKED | somebody owns the mutex                                  |
//! | 1   | PARKED | waiters may be queued in the parking lot on this address |
//!
//! Uncontended lock and unlock are one CAS each. A contended unlock does not hand the
//! lock over: it releases it and wakes one waiter, which competes again (barging, as
//! glibc does); with fibers this keeps the lock moving while the wakee is still in a
//! run queue.
//!
//! # One wake-up in flight (glibc's protocol, not parking_lot's)
//!
//! ```text
//!   owner                       queue (bucket lock held)          wakee
//!   unlock: CAS LOCKED->0 fails
//!   unlock_contended ─────────► dequeue W, others_remain?
//!                               word = 0 (PARKED cleared)
//!                               token = WAITERS_REMAIN | ALONE ─► W runs again
//!                                                                  CAS 0 -> LOCKED|PARKED
//!                                                                  (PARKED only if told
//!                                                                   others remain)
//! ```
//!
//! A contended unlock wakes one waiter and **clears** PARKED even when more waiters
//! remain; the woken waiter takes over the duty of the bit: it acquires with
//! `LOCKED | PARKED` (or sets PARKED again before it re-parks) when the unlocker told
//! it, through its token, that others still wait. Meanwhile the owner can lock and
//! unlock with one CAS each, without a wake-up per unlock. Invariant: while waiters
//! are queued, PARKED is set or a woken waiter is on its way to set it (it leaves
//! `lock_contended` only by acquiring, and re-parks only after setting PARKED).
//!
//! Why: keeping PARKED while waiters remain (parking_lot's rule) woke one waiter per
//! unlock. A woken fiber is runnable within a microsecond, lands on the unlocker's
//! worker, is stolen by an idle worker and contends from there; on 4–16 CPUs every
//! lock then crossed cores and the 64-thread hammer collapsed to ~1 M locks/s (issue
//! 10). glibc's futex word (0/1/2) has the same one-in-flight shape: a barging owner
//! writes 1 over 2, and the woken thread writes 2 back.
//!
//! # Model-checked
//!
//! This file takes its atomics only from `crate::base::loom` and reaches the parking
//! lot only through the [`WaitQueue`] trait, so `libfiberize/tests/loom_protocols.rs`
//! compiles it as it is against loom's atomics and a model queue (a loom mutex and
//! condition variable) and checks that no waiter is ever left asleep.
//! Orderings: acquiring is `Acquire` and releasing `Release` (the data the mutex
//! guards); every change of PARKED that matters is made or checked under the queue's
//! lock (`still_contended`, `on_timeout`, `release`), which orders it against queueing,
//! so PARKED itself needs no stronger ordering than `Relaxed`.

use crate::base::loom::{spin_wait, AtomicU32, Ordering};

/// Somebody owns the mutex.
pub const LOCKED: u32 = 1;
/// Waiters may be queued on the mutex's address.
pub const PARKED: u32 = 2;

/// Token for a wakee from a contended unlock: nobody else waits.
pub const TOKEN_ALONE: usize = 0;
/// Token for a wakee from a contended unlock: other waiters remain queued, so the
/// wakee must put PARKED back (see "One wake-up in flight").
pub const TOKEN_WAITERS_REMAIN: usize = 2;

/// How many short spin rounds before parking. Origin: a lock held by a fiber on
/// another worker is usually released within a microsecond; beyond that the owner is
/// descheduled (parked or queued) and spinning only delays our worker. Measured on 16
/// CPUs (issue 10, prodcons 8+8 on one mutex, ratio to native): 0 rounds 1.8–2.0x,
/// 1 round 2.5x, 3 rounds 3.3x; hammer the same (4.1–5.3x) for all three.
const SPIN_LIMIT: u32 = 3;

/// How a wait in the queue ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woken {
    /// Woken by a contended unlock, with its token.
    Unparked(usize),
    /// The deadline passed first (`on_timeout` ran).
    TimedOut,
    /// Did not sleep (`still_contended` said no) or was interrupted: look again.
    Retry,
}

/// The deadline of a timed lock passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedOut;

/// The parking lot, as the lock word uses it: one queue per mutex, with a lock.
pub trait WaitQueue {
    /// Queues the caller; then, under the queue's lock and after a SeqCst fence,
    /// `still_contended()` decides whether it sleeps (false: leave the queue, `Retry`).
    /// If the deadline passes first, `on_timeout(others_remain)` runs under the lock
    /// after the caller left the queue.
    fn park(&self, still_contended: impl FnOnce() -> bool, on_timeout: impl FnOnce(bool)) -> Woken;
    /// Dequeues one waiter (if any); under the queue's lock, `release(others_remain)`
    /// runs and returns the token the waiter wakes with.
    fn unpark_one(&self, release: impl FnOnce(bool) -> usize);
}

/// The uncontended lock: 0 -> LOCKED.
#[inline]
pub fn try_lock_uncontended(word: &AtomicU32) -> bool {
    word.compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed).is_ok()
}

/// `trylock`: takes the lock if nobody owns it, keeping PARKED as it is.
#[inline]
pub fn try_lock(word: &AtomicU32) -> bool {
    let mut s = word.load(Ordering::Relaxed);
    loop {
        if s & LOCKED != 0 {
            return false;
        }
        match word.compare_exchange_weak(s, s | LOCKED, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(x) => s = x,
        }
    }
}

/// The uncontended unlock: LOCKED -> 0. False when PARKED is set (call
/// [`unlock_contended`]).
#[inline]
pub fn unlock_uncontended(word: &AtomicU32) -> bool {
    word.compare_exchange(LOCKED, 0, Ordering::Release, Ordering::Relaxed).is_ok()
}

/// Whether somebody owns the mutex (a hint: it may change at once).
#[inline]
pub fn is_locked(word: &AtomicU32) -> bool {
    word.load(Ordering::Relaxed) & LOCKED != 0
}

/// Takes the lock after the uncontended CAS failed: spins a little while nobody is
/// parked, then parks in `queue` until woken, barging in again each time.
#[cold]
pub fn lock_contended(word: &AtomicU32, queue: &impl WaitQueue) -> Result<(), TimedOut> {
    let mut spins = 0;
    // Set once we were woken with other waiters left behind: we carry PARKED for them.
    let mut carry_parked = 0;
    loop {
        let s = word.load(Ordering::Relaxed);
        if s & LOCKED == 0 {
            if word.compare_exchange_weak(s, s | LOCKED | carry_parked, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return Ok(());
            }
            continue;
        }
        if s & PARKED == 0 && spins < SPIN_LIMIT {
            spins += 1;
            spin_wait(16 << spins);
            continue;
        }
        if s & PARKED == 0 && word.compare_exchange_weak(s, s | PARKED, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            continue;
        }
        let woken = queue.park(
            // Sleep only if the owner has not released it since we set PARKED: its
            // unlock then takes the contended path and finds us queued.
            || word.load(Ordering::Relaxed) == LOCKED | PARKED,
            // The last waiter to leave by timeout takes the bit away.
            |others_remain| {
                if !others_remain {
                    word.fetch_and(!PARKED, Ordering::Relaxed);
                }
            },
        );
        match woken {
            Woken::TimedOut => return Err(TimedOut),
            Woken::Unparked(TOKEN_WAITERS_REMAIN) => carry_parked = PARKED,
            // Re-parking sets PARKED itself; a plain wake-up leaves nobody behind.
            Woken::Unparked(_) => carry_parked = 0,
            Woken::Retry => {}
        }
        spins = 0;
    }
}

/// Releases the lock when PARKED was set: wakes one waiter and clears the word under
/// the queue's lock (nobody can take the lock meanwhile, LOCKED is still set, nor
/// queue); the wakee learns from its token whether it must carry PARKED back.
#[cold]
pub fn unlock_contended(word: &AtomicU32, queue: &impl WaitQueue) {
    queue.unpark_one(|others_remain| {
        word.store(0, Ordering::Release);
        if others_remain {
            TOKEN_WAITERS_REMAIN
        } else {
            TOKEN_ALONE
        }
    });
}
