//! The parking lot's wake-ups: what a waker takes off a bucket's list under the bucket
//! lock ([`Wake`]) and runs after releasing it, one at a time or as a [`WakeBatch`].
//!
//! Taking under the lock and running after it keeps the bucket lock's hold short: an
//! unpark of a fiber queues it on a worker (and may tell an idle worker), a thread's
//! wake is a `FUTEX_WAKE` system call, and neither needs the list.
//!
//! A batch is a [`Batch`] (`base::batch`): only the slots it fills are touched.

use core::sync::atomic::AtomicU32;

use crate::base::batch::Batch;
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
pub(crate) type WakeBatch = Batch<Wake, WAKE_BATCH>;

/// Runs every wake-up `batch` holds and empties it: threads one by one, the fibers as
/// one batch (the idle workers told once).
pub(crate) fn run(batch: &mut WakeBatch) {
    let mut fibers = batch.drain().filter_map(|wake| match wake {
        Wake::Fiber(f) => Some(f),
        thread => {
            thread.run_as(false);
            None
        }
    });
    // `unpark_many` takes every fiber the iterator yields (a wake-up left in it would
    // be dropped, and lost).
    scheduler::unpark_many(&mut fibers);
}
