//! The parking lot's lock-free emptiness check: a waker that finds a bucket's list empty
//! skips the bucket lock, and no waiter is lost to it.
//!
//! Wakers that fire often with nobody waiting (reactor readiness edges, futex wakes,
//! `pthread_once` and barrier releases) call `parking::unpark_some_quick`, which looks
//! at the bucket's first waiter without the bucket lock. That is safe only because both
//! sides follow one Dekker pair:
//!
//! ```text
//!   waiter (parking::park)                 waker (parking::unpark_some_quick)
//!   bucket lock                            publish the state change (read_seq += 1, ...)
//!   link itself: set_first(head, me)       ──
//!   fence(SeqCst)  ◄──── pairs with ────►  fence(SeqCst)
//!   validate(): does the state still       head == null?  yes: nobody to wake, return
//!     say "wait"?  no: unlink, return      no: bucket lock, wake the waiters
//!   bucket unlock, sleep
//! ```
//!
//! The two fences are SeqCst, so one of them comes first in their single total order:
//! if the waker's fence is first, the waiter's validation (after its own fence) sees
//! the published change and it does not sleep; if the waiter's fence is first, the
//! waker's load of `head` sees the waiter linked and takes the lock. Without either
//! fence both sides may read the old value (store buffering): the waiter sleeps on a
//! change it did not see and the waker skipped it, a wake-up lost for good.
//!
//! The list itself (links, key comparisons) is plain data under the bucket lock; only
//! its first pointer is read outside it, so only that pointer is atomic, and it is
//! written only under the lock ([`set_first`]).
//!
//! # Model-checked
//!
//! This file takes its atomics only from `crate::base::loom` and sees the bucket lock
//! only through [`BucketLock`], so `libfiberize/tests/loom_protocols.rs`
//! (`parking_lot_quick_unpark_is_not_lost`) compiles it as it is against loom's atomics
//! and a model lock, and drives [`queue_then_validate`] against
//! [`anybody_queued_after_publishing`].

use crate::base::loom::{fence, AtomicPtr, Ordering};

/// A bucket's raw lock, as this protocol uses it.
pub trait BucketLock {
    /// Takes the lock (Acquire).
    fn lock(&self);
    /// Releases it (Release).
    fn unlock(&self);
}

/// The bucket's first waiter (null: the list is empty). Under the bucket lock.
#[inline]
pub fn first<W>(head: &AtomicPtr<W>) -> *mut W {
    // Relaxed: the list is ordered by the bucket lock; lock-free readers use
    // `anybody_queued_after_publishing` and its fence.
    head.load(Ordering::Relaxed)
}

/// Sets the bucket's first waiter (linking or unlinking). Under the bucket lock only.
#[inline]
pub fn set_first<W>(head: &AtomicPtr<W>, waiter: *mut W) {
    // Relaxed: the fence in `queue_then_validate` orders it before the validation.
    head.store(waiter, Ordering::Relaxed);
}

/// The waiter's side: under `lock`, `link` the waiter into the list (through
/// [`set_first`] when it becomes the first), fence, then `validate`. If the state no
/// longer says "wait", `unlink` it again and return false (do not sleep). Returns with
/// the lock released.
#[inline]
pub fn queue_then_validate(
    lock: &impl BucketLock,
    link: impl FnOnce(),
    validate: impl FnOnce() -> bool,
    unlink: impl FnOnce(),
) -> bool {
    lock.lock();
    link();
    // SeqCst fence: pairs with the one in `anybody_queued_after_publishing`. Without
    // it, `validate` may read the state from before the waker's change while the waker
    // reads `head` from before our link: we sleep and the waker skipped the lock.
    fence(Ordering::SeqCst);
    let sleeps = validate();
    if !sleeps {
        unlink();
    }
    lock.unlock();
    sleeps
}

/// The waker's side, after it published the change that waiters validate against:
/// false means no waiter can be asleep on that change (the lock may be skipped).
#[inline]
pub fn anybody_queued_after_publishing<W>(head: &AtomicPtr<W>) -> bool {
    // SeqCst fence: pairs with the one in `queue_then_validate` (published change, then
    // `head`; the waiter: `head`, then the validation). Without it the load below may
    // see the empty list of before a waiter's link while that waiter's validation saw
    // the old state: the waiter sleeps with nobody to wake it.
    fence(Ordering::SeqCst);
    !head.load(Ordering::Relaxed).is_null()
}
