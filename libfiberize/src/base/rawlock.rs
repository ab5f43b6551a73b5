//! The runtime's own lock: a three-state futex mutex that uses only raw system calls.
//!
//! Why not `std::sync::Mutex` or `parking_lot`? They call `syscall(SYS_futex, …)`, which
//! in this library resolves to our own export, i.e. back into the runtime (docs/DESIGN.md §2.1).
//! `RawMutex` is used only for short critical sections that never park a fiber: a fiber
//! that finds it contended blocks its worker OS thread for a moment, like any spin lock.
//! A hold is shielded from program signal handlers ([`crate::signal::handlers`]): a handler
//! that interrupted the holder and needed the same lock would deadlock its own thread.
//!
//! State word (`u32`):
//!
//! | value | meaning                          |
//! |-------|----------------------------------|
//! | 0     | unlocked                         |
//! | 1     | locked, nobody sleeps on it      |
//! | 2     | locked, sleepers may exist       |

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::base::sys;

pub struct RawMutex {
    state: AtomicU32,
}

impl RawMutex {
    pub const fn new() -> Self {
        RawMutex { state: AtomicU32::new(0) }
    }

    #[inline]
    pub fn lock(&self) {
        crate::base::shield::enter();
        if self.state.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.lock_contended();
        }
    }

    #[inline]
    pub fn try_lock(&self) -> bool {
        crate::base::shield::enter();
        let locked = self.state.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok();
        if !locked {
            crate::base::shield::exit();
        }
        locked
    }

    #[cold]
    fn lock_contended(&self) {
        // Critical sections are a few dozen instructions: spin a little first.
        for _ in 0..100 {
            sys::cpu_relax();
            if self.state.load(Ordering::Relaxed) == 0
                && self.state.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                return;
            }
        }
        // Announce a sleeper (2) and sleep until we are the one that moves 0 -> 2.
        if self.state.swap(2, Ordering::Acquire) == 0 {
            return;
        }
        let _sleep = RecordedSleep::begin(&self.state, true);
        while self.state.swap(2, Ordering::Acquire) != 0 {
            sys::futex_wait(&self.state, 2, None);
        }
    }

    #[inline]
    pub fn unlock(&self) {
        if self.state.swap(0, Ordering::Release) == 2 {
            sys::futex_wake(&self.state, 1);
        }
        crate::base::shield::exit();
    }
}

impl RawMutex {
    /// In a forked child: unlocked, whoever held it in the parent (that thread does
    /// not exist here). No wake-up, no shield change: nobody else is left to wake.
    pub fn reset_in_forked_child(&self) {
        self.state.store(0, Ordering::Relaxed);
    }
}

impl Default for RawMutex {
    fn default() -> Self {
        Self::new()
    }
}

// ---------------------------------------------------------------------------------
// Sleeps on the runtime's own lock words: for the monitor (crate::runtime::scheduler)
// and the stall watchdog (crate::observe::watchdog)
// ---------------------------------------------------------------------------------

/// One thread asleep on a runtime-internal lock word right now.
struct Sleep {
    /// The lock word's address (0 = free slot). The monitor asks [`is_internal_wait`]
    /// before it declares a worker blocked: a worker asleep on one of these waits for
    /// a holder that never parks while holding it (it runs, or the kernel preempted
    /// it), so a spare worker would only add a runnable thread to the CPUs the holder
    /// needs.
    word: AtomicUsize,
    /// When a contended [`RawMutex`] wait went to sleep (CLOCK_MONOTONIC ns) while the
    /// watchdog is on ([`track_contended_waits`]); 0 otherwise ([`oldest_contended_wait`]).
    since_ns: AtomicU64,
}

/// The sleeps in progress. Origin of the size: more sleepers than this at once on
/// runtime-internal locks is itself a sign of trouble, and one long wait is enough for
/// the watchdog to see it; a sleeper that finds every slot taken is not recorded (it
/// may cost a spare worker, and the watchdog does not see its wait).
static SLEEPS: [Sleep; 64] = [const { Sleep { word: AtomicUsize::new(0), since_ns: AtomicU64::new(0) } }; 64];
static TRACK_WAITS: AtomicBool = AtomicBool::new(false);

/// One recorded sleep on a lock word (its slot in [`SLEEPS`]), until dropped.
struct RecordedSleep(Option<usize>);

impl RecordedSleep {
    /// Records a sleep on `word`; `timed`: a contended mutex wait, which the watchdog
    /// times when it is on.
    #[cold]
    fn begin(word: &AtomicU32, timed: bool) -> RecordedSleep {
        let addr = word as *const AtomicU32 as usize;
        // Acquire: pairs with the Release that freed the slot, so the old since_ns = 0
        // is seen before ours.
        let slot = SLEEPS.iter().position(|s| s.word.compare_exchange(0, addr, Ordering::Acquire, Ordering::Relaxed).is_ok());
        if let Some(i) = slot.filter(|_| timed && TRACK_WAITS.load(Ordering::Relaxed)) {
            SLEEPS[i].since_ns.store(sys::now_ns().max(1), Ordering::Relaxed);
        }
        RecordedSleep(slot)
    }
}

impl Drop for RecordedSleep {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            SLEEPS[i].since_ns.store(0, Ordering::Relaxed);
            // Release: the since_ns = 0 above before the slot is free.
            SLEEPS[i].word.store(0, Ordering::Release);
        }
    }
}

/// Turns the timing of contended waits on (the watchdog does, once).
pub fn track_contended_waits() {
    TRACK_WAITS.store(true, Ordering::Release);
}

/// The start time of the oldest contended wait in progress (None: none tracked).
pub fn oldest_contended_wait() -> Option<u64> {
    SLEEPS.iter().map(|s| s.since_ns.load(Ordering::Relaxed)).filter(|&t| t != 0).min()
}

/// Whether some thread sleeps on the runtime-internal lock word at `addr` (a futex
/// address read from `/proc/self/task/TID/syscall`). Relaxed: a stale answer costs one
/// monitor tick, after which the monitor looks again.
pub fn is_internal_wait(addr: usize) -> bool {
    addr != 0 && SLEEPS.iter().any(|s| s.word.load(Ordering::Relaxed) == addr)
}

/// A value protected by a [`RawMutex`].
pub struct RawLock<T> {
    mutex: RawMutex,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialized by `mutex`.
unsafe impl<T: Send> Sync for RawLock<T> {}
unsafe impl<T: Send> Send for RawLock<T> {}

impl<T> RawLock<T> {
    pub const fn new(value: T) -> Self {
        RawLock { mutex: RawMutex::new(), value: UnsafeCell::new(value) }
    }

    #[inline]
    pub fn lock(&self) -> RawLockGuard<'_, T> {
        self.mutex.lock();
        RawLockGuard { lock: self }
    }

    /// In a forked child: unlocked and holding `value`. The parent's value is forgotten,
    /// not dropped: another thread may have been changing it at the fork.
    ///
    /// # Safety
    /// Only in a forked child, on its one thread, before anything else uses the lock.
    pub unsafe fn reset_in_forked_child(&self, value: T) {
        self.mutex.reset_in_forked_child();
        // SAFETY: nobody else runs in the child (caller's contract); ptr::write does not
        // drop the old contents.
        unsafe { core::ptr::write(self.value.get(), value) };
    }
}

impl<T> RawLock<T> {
    /// In a forked child: unlocked, the value kept as it is (for a value too large to
    /// build anew on the forking thread's stack; the caller repairs it in place).
    ///
    /// # Safety
    /// Only in a forked child, on its one thread, before anything else uses the lock.
    pub unsafe fn unlock_in_forked_child(&self) {
        self.mutex.reset_in_forked_child();
    }
}

pub struct RawLockGuard<'a, T> {
    lock: &'a RawLock<T>,
}

impl<T> Deref for RawLockGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard proves the mutex is held.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for RawLockGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard proves the mutex is held, and `&mut self` is unique.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for RawLockGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.mutex.unlock();
    }
}

/// One-time initialization that works before constructors ran and on any thread.
pub struct RawOnce {
    state: AtomicU32, // 0 = new, 1 = running, 2 = done
}

impl RawOnce {
    pub const fn new() -> Self {
        RawOnce { state: AtomicU32::new(0) }
    }

    #[inline]
    pub fn is_done(&self) -> bool {
        self.state.load(Ordering::Acquire) == 2
    }

    /// Whether no caller has begun `call_once` yet.
    #[inline]
    pub fn never_called(&self) -> bool {
        self.state.load(Ordering::Acquire) == 0
    }

    /// Runs `f` exactly once; concurrent callers wait until it finished.
    pub fn call_once(&self, f: impl FnOnce()) {
        if self.is_done() {
            return;
        }
        if self.state.compare_exchange(0, 1, Ordering::Acquire, Ordering::Acquire).is_ok() {
            f();
            self.state.store(2, Ordering::Release);
            sys::futex_wake(&self.state, u32::MAX);
            return;
        }
        let _sleep = RecordedSleep::begin(&self.state, false);
        while self.state.load(Ordering::Acquire) != 2 {
            sys::futex_wait(&self.state, 1, None);
        }
    }
}

impl Default for RawOnce {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[test]
    fn contended_lock_excludes_and_counts_every_increment() {
        let counter = Arc::new(RawLock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let counter = Arc::clone(&counter);
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        *counter.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*counter.lock(), 80_000);
    }

    /// The watchdog's second condition: a waiter asleep on a held lock shows up in
    /// `oldest_contended_wait` while it waits, and is gone once it got the lock.
    #[test]
    fn a_long_contended_wait_is_seen_by_the_watchdog_bookkeeping() {
        track_contended_waits();
        let lock = Arc::new(RawMutex::new());
        lock.lock();
        let before = sys::now_ns();
        let waiter = {
            let lock = Arc::clone(&lock);
            std::thread::spawn(move || {
                lock.lock();
                lock.unlock();
            })
        };
        // The waiter spins ~100 rounds, then sleeps with its start time recorded.
        let deadline = Instant::now() + Duration::from_secs(10);
        let seen = loop {
            if let Some(start) = oldest_contended_wait().filter(|&s| s >= before) {
                break start;
            }
            assert!(Instant::now() < deadline, "the sleeping waiter was never recorded");
            std::thread::sleep(Duration::from_millis(1));
        };
        assert!(sys::now_ns() >= seen);
        lock.unlock();
        waiter.join().unwrap();
        // The bookkeeping is global and the crate's other tests run meanwhile: the
        // oldest wait may now be another test's (or `seen` itself was another test's
        // short sleep, gone soon). What must hold: the start seen is released at once
        // if it was ours, within a moment if it was somebody else's.
        let deadline = Instant::now() + Duration::from_secs(2);
        while SLEEPS.iter().any(|s| s.since_ns.load(Ordering::Relaxed) == seen) {
            assert!(Instant::now() < deadline, "the finished wait is still recorded");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
