//! The sleep of a waiter that is queued already: one loop for the parking lot's
//! waiters (`parking::park_in`) and a descriptor's waiter slot
//! (`io::waiter_slot`), so that both end a wait the same way: by a waker, by the
//! deadline, by a signal handler (interruptible kinds), by a pending cancellation
//! (cancellation points), by an asynchronous cancel (mutex waits).
//!
//! ```text
//!   note the wait (dump)
//!   loop: taken by a waker?                    yes: Unparked(token)
//!         deadline passed, interrupted, cancelled?
//!                 yes: withdraw from the queue: done: TimedOut / Interrupted
//!                                               a waker took it first: loop (take it)
//!         sleep: a fiber parks (scheduler::park_current), a thread on its futex word
//!   end the note; act on an asynchronous cancel
//! ```
//!
//! A sleep may end for nothing (a `pthread_kill`, an old notification, a timer): the
//! loop looks again, so no wake-up is lost and none is invented.

use crate::base::stats::{bump, STATS};
use crate::base::sys;
use crate::runtime::fibers::fiber::{Fiber, WaitKind};
use crate::runtime::scheduler;

/// How a park ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParkResult {
    /// Woken by an unpark, with its token.
    Unparked(usize),
    /// `validate` returned false: the caller did not sleep.
    Invalid,
    /// The deadline passed first.
    TimedOut,
    /// A signal was delivered to the waiting fiber (interruptible waits only).
    Interrupted,
}

/// Deadline of a wait, on CLOCK_MONOTONIC, in nanoseconds.
pub type Deadline = Option<u64>;

/// A waiter queued somewhere (a bucket's list, a descriptor's slot), as the loop sees it.
pub(crate) trait Queued {
    /// `Some(token)` once a waker took it off its queue (its wake-up is on its way or
    /// came): the wait ended by it.
    fn taken(&self) -> Option<usize>;
    /// Leaves the queue because the wait ends otherwise (deadline, signal, cancel):
    /// true if it left, false if a waker took it first.
    fn withdraw(&self) -> bool;
    /// A plain thread's sleep until woken or `deadline`: true when a signal handler
    /// interrupted it (EINTR).
    fn sleep_thread(&self, deadline: Deadline) -> bool;
}

/// Sleeps until a waker takes `q` or the wait ends otherwise (the module). `me`: the
/// waiting fiber (None: a plain thread); `key`: the address the wait is noted on.
/// Inlined: one frame less to reload after the switch (`scheduler::park_current`).
#[inline(always)]
pub(crate) fn sleep_queued(
    me: Option<&'static Fiber>,
    kind: WaitKind,
    key: usize,
    deadline: Deadline,
    q: &impl Queued,
) -> ParkResult {
    // Futex and semaphore waits return EINTR when a signal is delivered to the fiber,
    // as the kernel's and glibc's do; lock and condition waits never do (POSIX). A
    // descriptor wait ends on any handler: the I/O layer then decides between EINTR and
    // a restart (SA_RESTART, signal(7)).
    let interruptible = matches!(kind, WaitKind::Futex | WaitKind::Semaphore | WaitKind::Io);
    // Waits that are POSIX cancellation points end early on a pending cancellation
    // (the caller then acts on it, see `crate::signal::cancel`).
    let cancellation_point = matches!(
        kind,
        WaitKind::Cond | WaitKind::Semaphore | WaitKind::Io | WaitKind::Sleep | WaitKind::Barrier | WaitKind::Join
    );
    // A mutex wait is no cancellation point, but with the asynchronous cancelability
    // type a request ends it as glibc's SIGCANCEL would (the waiter is unlinked first).
    let async_cancellable = kind == WaitKind::Mutex;
    // A plain thread that was a fiber (demoted, say) notes its wait too, for the dump.
    let noted = me.or_else(crate::runtime::fibers::fiber::owner_of_tcb);
    if let Some(f) = noted {
        f.wait.begin(kind, key);
    }
    if let Some(f) = me {
        // A handler that ran before the wait did not interrupt it. Except in a
        // descriptor wait: the I/O call cleared the mark when it began, and a handler
        // that ran since (between its attempt and this park, say) interrupted the call,
        // as it would the thread blocked in the kernel all that time.
        if kind != WaitKind::Io {
            f.interruption.clear();
        }
    } else {
        bump(&STATS.thread_waits);
    }
    // A plain thread's futex wait returned EINTR: a handler ran (one installed without
    // SA_RESTART, as the kernel restarts the wait otherwise).
    let mut thread_interrupted = false;
    let result = loop {
        if let Some(token) = q.taken() {
            break ParkResult::Unparked(token);
        }
        let interrupted = (interruptible && (thread_interrupted || me.is_some_and(|f| f.interruption.is_set())))
            || (cancellation_point && me.is_some_and(|f| f.cancel_pending()))
            || (async_cancellable && me.is_some_and(|f| f.cancel.is_asynchronous() && f.cancel_pending()));
        let expired = deadline.is_some_and(|d| sys::now_ns() >= d);
        if interrupted || expired {
            if q.withdraw() {
                break if expired { ParkResult::TimedOut } else { ParkResult::Interrupted };
            }
            continue; // a waker won the race; take its wake-up
        }
        match me {
            Some(f) => scheduler::park_current(f, deadline),
            None => thread_interrupted |= q.sleep_thread(deadline),
        }
    };
    if let Some(f) = noted {
        f.wait.end();
    }
    if let Some(f) = me {
        if result == ParkResult::Interrupted && async_cancellable {
            crate::signal::cancel::act_on_async_cancel(f);
        }
    }
    result
}
