//! The model wait queue of the lock models (`mutex_models`, `rwlock_models`): one
//! parking-lot queue in miniature. Queue (at the front or the back), SeqCst fence,
//! validate under the bucket lock; a timed waiter whose deadline passed leaves under
//! the lock unless it was woken first; dequeue, decide the token and wake under it.

use super::lock_word::Woken;
use loom::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use loom::sync::{Condvar, Mutex};
use std::collections::VecDeque;

struct Waiter {
    woken: AtomicBool,
    token: AtomicUsize,
}

pub struct ModelQueue {
    bucket: Mutex<VecDeque<std::sync::Arc<Waiter>>>,
    /// Signalled on every queueing, every wake-up and when a deadline passes.
    changed: Condvar,
}

impl ModelQueue {
    pub fn new() -> Self {
        ModelQueue { bucket: Mutex::new(VecDeque::new()), changed: Condvar::new() }
    }

    /// `parking::park_in`; `expired` is the timed waiter's deadline flag (None: no
    /// deadline). On a timeout, `on_timeout(others_remain)` runs under the lock.
    pub fn park(
        &self,
        front: bool,
        expired: Option<&AtomicBool>,
        still_waits: impl FnOnce() -> bool,
        on_timeout: impl FnOnce(bool),
    ) -> Woken {
        let me = std::sync::Arc::new(Waiter { woken: AtomicBool::new(false), token: AtomicUsize::new(0) });
        let mut q = self.bucket.lock().unwrap();
        if front {
            q.push_front(me.clone());
        } else {
            q.push_back(me.clone());
        }
        fence(Ordering::SeqCst);
        if !still_waits() {
            q.retain(|w| !std::sync::Arc::ptr_eq(w, &me));
            return Woken::Retry;
        }
        self.changed.notify_all();
        loop {
            if me.woken.load(Ordering::Acquire) {
                return Woken::Unparked(me.token.load(Ordering::Relaxed));
            }
            if expired.is_some_and(|e| e.load(Ordering::Relaxed)) {
                q.retain(|w| !std::sync::Arc::ptr_eq(w, &me));
                on_timeout(!q.is_empty());
                return Woken::TimedOut;
            }
            q = self.changed.wait(q).unwrap();
        }
    }

    /// `parking::unpark_one`: `decide(dequeued, others_remain)` runs under the lock
    /// (also when nobody was queued) and gives the wakee's token.
    pub fn unpark_one(&self, decide: impl FnOnce(bool, bool) -> usize) -> bool {
        let mut q = self.bucket.lock().unwrap();
        let first = q.pop_front();
        let token = decide(first.is_some(), !q.is_empty());
        match first {
            Some(w) => {
                w.token.store(token, Ordering::Relaxed);
                w.woken.store(true, Ordering::Release);
                self.changed.notify_all();
                true
            }
            None => false,
        }
    }

    /// `parking::unpark_some` of everybody, each with `token`; `after(n)` runs under
    /// the lock.
    pub fn unpark_all(&self, token: usize, after: impl FnOnce(usize)) {
        let mut q = self.bucket.lock().unwrap();
        let n = q.len();
        for w in q.drain(..) {
            w.token.store(token, Ordering::Relaxed);
            w.woken.store(true, Ordering::Release);
        }
        after(n);
        self.changed.notify_all();
    }

    /// Blocks until `n` waiters are queued (a model's staged set-up).
    pub fn wait_until_queued(&self, n: usize) {
        let mut q = self.bucket.lock().unwrap();
        while q.len() < n {
            q = self.changed.wait(q).unwrap();
        }
    }

    /// Whether nobody is queued.
    pub fn is_empty(&self) -> bool {
        self.bucket.lock().unwrap().is_empty()
    }

    /// The model timer, after it set a deadline flag: the timed waiters look again.
    pub fn deadline_passed(&self) {
        let _q = self.bucket.lock().unwrap();
        self.changed.notify_all();
    }
}
