//! The parking lot's wake-ups: what a waker takes off a bucket's list under the bucket
//! lock ([`Wake`]) and runs after releasing it, one at a time or as a [`WakeBatch`].
//!
//! Taking under the lock and running after it keeps the bucket lock's hold short: an
//! unpark of a fiber queues it on a worker (and may tell an idle worker), a thread's
//! wake is a `FUTEX_WAKE` system call, and neither needs the list.
//!
//! A batch holds its wake-ups in an uninitialised array with a length, not in
//! `[Option<Wake>; N]`: the latter is written in full when it is made and read in full
//! when it is dropped, on every `unpark_some` however few waiters it found.

use core::mem::MaybeUninit;
use core::sync::atomic::AtomicU32;

use crate::base::sys;
use crate::runtime::fibers::fiber::FiberRef;
use crate::runtime::scheduler;

/// A dequeued waiter's wake-up, performed after the bucket lock is released.
pub(crate) enum Wake {
    Fiber(FiberRef),
    Thread(*const AtomicU32),
}

impl Wake {
    /// Runs the wake-up. `lock_waiter`: see [`scheduler::unpark_lock_waiter`].
    pub(crate) fn run_as(self, lock_waiter: bool) {
        match self {
            Wake::Fiber(f) if lock_waiter => scheduler::unpark_lock_waiter(&f),
            Wake::Fiber(f) => scheduler::unpark(&f),
            Wake::Thread(word) => {
                sys::futex_wake(word, 1);
            }
        }
    }
}

/// How many wake-ups one pass of `unpark_some` takes under the bucket lock before it
/// releases the lock and runs them (a bound on the lock's hold, not a tuned figure).
pub(crate) const WAKE_BATCH: usize = 16;

/// Up to [`WAKE_BATCH`] wake-ups taken under a bucket lock, to run after it.
pub(crate) struct WakeBatch {
    slots: [MaybeUninit<Wake>; WAKE_BATCH],
    /// Slots `..len` hold a wake-up not run yet.
    len: usize,
}

impl WakeBatch {
    pub(crate) fn new() -> Self {
        Self { slots: [const { MaybeUninit::uninit() }; WAKE_BATCH], len: 0 }
    }

    /// How many wake-ups it holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether another wake-up fits.
    pub(crate) fn has_room(&self) -> bool {
        self.len < WAKE_BATCH
    }

    /// Adds a wake-up; the caller checked [`has_room`](Self::has_room).
    pub(crate) fn push(&mut self, wake: Wake) {
        self.slots[self.len].write(wake);
        self.len += 1;
    }

    /// Runs every wake-up it holds and empties it: threads one by one, the fibers as
    /// one batch (the idle workers told once).
    pub(crate) fn run(&mut self) {
        let n = core::mem::replace(&mut self.len, 0);
        let mut fibers = self.slots[..n].iter().filter_map(|slot| {
            // SAFETY: slots `..n` were written by `push`, and `len` is already 0, so
            // each is read exactly once (here) and never dropped again.
            match unsafe { slot.assume_init_read() } {
                Wake::Fiber(f) => Some(f),
                thread => {
                    thread.run_as(false);
                    None
                }
            }
        });
        scheduler::unpark_many(&mut fibers);
        // `unpark_many` consumes the iterator; whatever it left (it leaves nothing)
        // still runs, so that no wake-up is lost.
        for f in fibers {
            scheduler::unpark(&f);
        }
    }
}

impl Drop for WakeBatch {
    fn drop(&mut self) {
        // Not reached with wake-ups in it (each pass runs its batch), unless a panic
        // unwinds between a push and the run: the wake-ups still run then.
        if self.len != 0 {
            self.run();
        }
    }
}
