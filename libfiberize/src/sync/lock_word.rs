//! The mutex lock word and its protocol with the parking lot: one wake-up in flight,
//! and a hand-off now and then (eventual fairness).
//!
//! The word is glibc's `__lock` (`MutexOverlay::lock`); the type rules (owner,
//! recursion count, errorcheck) live in `crate::sync::mutex` around it.
//!
//! | bit | name   | meaning                                                  |
//! |-----|--------|----------------------------------------------------------|
//! | 0   | LOCKED | somebody owns the mutex                                  |
//! | 1   | PARKED | waiters may be queued in the parking lot on this address |
//!
//! Uncontended lock and unlock are one CAS each. A contended unlock usually does not
//! hand the lock over: it releases it and wakes one waiter, which competes again
//! (barging, as glibc does); with fibers this keeps the lock moving while the wakee is
//! still in a run queue. Now and then it does hand it over (see "Eventual fairness").
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
//! worker, is stolen by an idle worker and contends from there; on many CPUs every
//! lock then crossed cores and a many-thread hammer collapsed
//! (docs/RESULTS.md#mutex-one-wakeup-in-flight). glibc's futex word (0/1/2) has the same one-in-flight shape: a
//! barging owner writes 1 over 2, and the woken thread writes 2 back.
//!
//! # The wake-up's latency is the queue's drain rate
//!
//! With one wake-up in flight, every parked waiter waits until the woken one has run.
//! The kernel runs a thread that `FUTEX_WAKE` woke soon (it slept, so EEVDF owes it
//! time); a fiber woken into a run queue waited behind whatever its worker ran next,
//! and that worker for its kernel time slice. So when others still queue behind a
//! wakee that waited a millisecond or more (a convoy: `scheduler::parked_long`), a fiber
//! unlocker gives the wakee its worker, which has a CPU now: the wakee is queued to run
//! first there, and the unlocker yields to run right after it
//! (`scheduler::unpark_lock_waiter`; counted: `lock_wakes_yielded`). A plain thread
//! unlocker, a lone waiter or a short wait wakes the ordinary way.
//!
//! # Eventual fairness (parking_lot's `be_fair`, Go's starvation mode)
//!
//! Barging alone can starve a waiter: a woken fiber waits in a run queue behind others
//! while the lock's regulars take and release it many times, and when it runs it
//! finds the lock taken and parks again. Two rules bound that:
//!
//! * **A woken waiter that loses re-parks at the front** of the queue (Go's rule), not
//!   behind everybody who queued since: the next contended unlock wakes it again.
//! * **Now and then a contended unlock hands the lock over** instead of releasing it:
//!   when the queue says so (`Unparking::be_fair`), the unlocker leaves LOCKED set,
//!   puts PARKED as the wakee would have (set iff others remain), and wakes the waiter
//!   with [`TOKEN_HANDOFF`]: it returns owning the lock without touching the word. The
//!   parking lot says so only for a waiter that queued at the front (it lost once
//!   already), and at most once per randomised interval per bucket (0.5 ms on
//!   average, parking_lot's rule).
//!
//! ```text
//!   owner                       queue (bucket lock held)          wakee
//!   unlock_contended ─────────► dequeue W, be_fair
//!                               word = LOCKED | (PARKED if others remain)
//!                               token = HANDOFF ───────────────►  W owns the lock
//! ```
//!
//! The hand-off goes to the waiter that needs it: a starving waiter gets the lock
//! within about one fairness interval after its first loss. Both conditions keep
//! hand-offs rare, on purpose: a hand-off leaves the lock owned by a fiber that is not
//! running yet, a convoy for as long as its wake-up takes, which is what the barging
//! above avoids. With the interval alone, TPC-C's table-cache mutex made convoys of
//! hand-offs and waited far longer in all (docs/RESULTS.md#mutex-fairness).
//!
//! A timed-out waiter and a hand-off cannot both happen: the queue decides under its
//! lock (a waiter whose deadline passed after it was dequeued reports the wake-up, and
//! then owns the lock), so the lock is never left owned by a waiter that left.
//!
//! # Spinning
//!
//! A contended locker spins a little (3 rounds, ~224 `pause`s in all) before it sets
//! PARKED and parks. A woken waiter that finds the lock taken again (it lost to a
//! barger) spins only when [`WaitQueue::spinning_pays`] says so, asked once per wake-up:
//! for a fiber, only while its worker has no other fiber queued (Go's rule,
//! `sync_runtime_canSpin`: never while the P's run queue holds goroutines). A woken
//! fiber runs next on its waker's worker (the lifo slot), and the barger is usually
//! that waker: it took the lock back at once, then yielded or was queued behind us, on
//! our worker. Then no spin can end well, and it delays every fiber queued there. A
//! first contender still spins as before: its owner is more likely running on another
//! worker (a producer/consumer pair ran at half its rate when first contenders whose
//! worker had others queued parked instead of spinning). Plain threads, and woken fibers
//! whose worker has nothing else to run, spin as before. With the spin, every wake-up
//! lost to a barger (counter `mutex_wakes_lost`) cost a spin phase (`lock_spins` the
//! same), most of `sysbench threads`' profile (docs/RESULTS.md#mutex-woken-spin);
//! `lock_spins_skipped` counts the skipped phases.
//!
//! # Model-checked
//!
//! This file takes its atomics only from `crate::base::loom` and reaches the parking
//! lot only through the [`WaitQueue`] trait, so `libfiberize/tests/loom_protocols.rs`
//! compiles it as it is against loom's atomics and a model queue (a loom mutex and
//! condition variable) and checks that no waiter is ever left asleep, that the data
//! the mutex guards is reached by one owner at a time (a loom cell), with hand-offs
//! and with timeouts racing them.
//! Orderings: acquiring is `Acquire` and releasing `Release` (the data the mutex
//! guards); a hand-off's wakee is ordered after the unlocker by the queue's wake-up
//! (the parking lot's `woken` flag is Release/Acquire, see [`WaitQueue::unpark_one`]);
//! every change of PARKED that matters is made or checked under the queue's lock
//! (`still_contended`, `on_timeout`, `release`), which orders it against queueing, so
//! PARKED itself needs no stronger ordering than `Relaxed`.

use crate::base::loom::{spin_wait, AtomicU32, Ordering};

/// Somebody owns the mutex.
pub const LOCKED: u32 = 1;
/// Waiters may be queued on the mutex's address.
pub const PARKED: u32 = 2;

/// Token for a wakee from a contended unlock: nobody else waits.
pub const TOKEN_ALONE: usize = 0;
/// Token for a wakee from a contended unlock: the lock is its own now (LOCKED stayed
/// set, and PARKED is set iff others remain; see "Eventual fairness").
pub const TOKEN_HANDOFF: usize = 1;
/// Token for a wakee from a contended unlock: other waiters remain queued, so the
/// wakee must put PARKED back (see "One wake-up in flight").
pub const TOKEN_WAITERS_REMAIN: usize = 2;

/// How many short spin rounds before parking, when spinning pays at all (see
/// "Spinning"). Origin: a lock held by a fiber on another worker is usually released
/// within a microsecond; beyond that the owner is descheduled (parked or queued) and
/// spinning only delays our worker. 3 rounds were the fastest measured
/// (docs/RESULTS.md#mutex-spin-limit).
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

/// What a contended unlock learns from the queue, under its lock, about the waiter it
/// dequeued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unparking {
    /// A waiter was dequeued (false: the queue was empty; the last waiter timed out
    /// after the unlocker saw PARKED).
    pub dequeued: bool,
    /// Other waiters remain queued after this one.
    pub others_remain: bool,
    /// Hand the lock over this time (the queue's fairness interval has passed).
    pub be_fair: bool,
}

/// Where a waiter joins the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Behind everybody (a first wait).
    Back,
    /// Before everybody (a woken waiter that lost the lock again).
    Front,
}

/// The parking lot, as the lock word uses it: one queue per mutex, with a lock.
pub trait WaitQueue {
    /// Queues the caller at `place`; then, under the queue's lock and after a SeqCst
    /// fence, `still_contended()` decides whether it sleeps (false: leave the queue,
    /// `Retry`). If the deadline passes first, `on_timeout(others_remain)` runs under
    /// the lock after the caller left the queue; a waiter already dequeued by
    /// `unpark_one` is woken instead (never both).
    fn park(&self, place: Place, still_contended: impl FnOnce() -> bool, on_timeout: impl FnOnce(bool)) -> Woken;
    /// Dequeues one waiter (if any); under the queue's lock, `release(unparking)` runs
    /// (also when nobody was queued) and returns the token the waiter wakes with. The
    /// waiter's return from `park` happens-after `release` (Release/Acquire).
    fn unpark_one(&self, release: impl FnOnce(Unparking) -> usize);
    /// Whether a woken waiter that found the lock taken again should spin before it
    /// parks again (see "Spinning"). A hint only: the protocol is the same either way.
    fn spinning_pays(&self) -> bool;
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
/// parked, then parks in `queue` until woken, barging in again each time, until it
/// acquires or is handed the lock.
#[cold]
pub fn lock_contended(word: &AtomicU32, queue: &impl WaitQueue) -> Result<(), TimedOut> {
    let mut spins = 0;
    // Set once we were woken with other waiters left behind: we carry PARKED for them.
    let mut carry_parked = 0;
    // Once woken and beaten to the lock, we queue at the front ("Eventual fairness").
    let mut place = Place::Back;
    loop {
        let s = word.load(Ordering::Relaxed);
        if s & LOCKED == 0 {
            if word.compare_exchange_weak(s, s | LOCKED | carry_parked, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return Ok(());
            }
            continue;
        }
        if s & PARKED == 0 && spins < SPIN_LIMIT {
            // Only a woken waiter that lost to a barger asks ("Spinning").
            if spins == 0 && place == Place::Front && !queue.spinning_pays() {
                spins = SPIN_LIMIT;
                continue;
            }
            spins += 1;
            spin_wait(16 << spins);
            continue;
        }
        if s & PARKED == 0 && word.compare_exchange_weak(s, s | PARKED, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            continue;
        }
        let woken = queue.park(
            place,
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
            // The unlocker left LOCKED set for us; its queue ordered us after it.
            Woken::Unparked(TOKEN_HANDOFF) => return Ok(()),
            Woken::Unparked(token) => {
                // Re-parking sets PARKED itself; a plain wake-up leaves nobody behind.
                carry_parked = if token == TOKEN_WAITERS_REMAIN { PARKED } else { 0 };
                place = Place::Front;
            }
            Woken::Retry => {}
        }
        spins = 0;
    }
}

/// Releases the lock when PARKED was set: wakes one waiter under the queue's lock
/// (nobody can take the lock meanwhile, LOCKED is still set, nor queue). Usually it
/// clears the word and the wakee learns from its token whether it must carry PARKED
/// back; when the queue says `be_fair`, it hands the lock to the wakee instead.
/// Returns true for a hand-off.
#[cold]
pub fn unlock_contended(word: &AtomicU32, queue: &impl WaitQueue) -> bool {
    let mut handed_off = false;
    queue.unpark_one(|u| {
        if u.dequeued && u.be_fair {
            handed_off = true;
            word.store(LOCKED | if u.others_remain { PARKED } else { 0 }, Ordering::Release);
            return TOKEN_HANDOFF;
        }
        // Also when nobody was dequeued (the last waiter timed out after we saw
        // PARKED): the release must happen under the queue's lock, or a locker that
        // sets PARKED and queues meanwhile would sleep with the lock free. A swap, not
        // a store: a locker may have set PARKED since the last waiter timed out, and
        // its validation (under the queue's lock, after ours) must then see our 0. A
        // plain store gives that too (its CAS precedes our store in the word's
        // modification order, as it read the value before), but loom orders a store
        // and a concurrent CAS by their threads' clocks only and let the locker read
        // its own PARKED back: a false deadlock (`mutex_timed_out_…`, seen while first
        // contenders could skip their spin). On x86_64 the swap is one `xchg`, on a
        // path that just took the queue's lock.
        word.swap(0, Ordering::Release);
        if u.others_remain {
            TOKEN_WAITERS_REMAIN
        } else {
            TOKEN_ALONE
        }
    });
    handed_off
}
