//! Model checks (loom) of the lock-free hand-shakes the runtime relies on. Each model
//! is a faithful miniature of one protocol, with the same atomics, orderings and
//! fences as the real code it names; loom explores every interleaving and every
//! memory-model outcome the C++11 model allows for them.
//!
//! Run: `cargo test -p libfiberize --test loom_protocols --release`.

use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

const RUNNING: u32 = 0;
const PARKED: u32 = 1;
const NOTIFIED: u32 = 2;

/// `scheduler::unpark` against `scheduler::park_current` + the worker's handling of
/// `Switch::Park` (fiber.rs "Park protocol"): an unpark is never lost, and a fiber is
/// never queued twice.
#[test]
fn park_unpark_never_loses_a_wakeup() {
    loom::model(|| {
        let state = Arc::new(AtomicU32::new(RUNNING));
        let queued = Arc::new(AtomicUsize::new(0));
        let (s2, q2) = (state.clone(), queued.clone());
        let unparker = thread::spawn(move || {
            // scheduler::unpark
            let mut s = s2.load(Ordering::Acquire);
            loop {
                match s {
                    PARKED => match s2.compare_exchange(PARKED, RUNNING, Ordering::AcqRel, Ordering::Acquire) {
                        Ok(_) => {
                            q2.fetch_add(1, Ordering::SeqCst);
                            return;
                        }
                        Err(x) => s = x,
                    },
                    RUNNING => match s2.compare_exchange(RUNNING, NOTIFIED, Ordering::AcqRel, Ordering::Acquire) {
                        Ok(_) => return,
                        Err(x) => s = x,
                    },
                    _ => return,
                }
            }
        });
        // park_current: fast path consumes an early notification.
        let mut suspended = false;
        if state.compare_exchange(NOTIFIED, RUNNING, Ordering::AcqRel, Ordering::Acquire).is_err() {
            // ... the fiber switches out; the worker, after the switch:
            suspended = true;
            if state.compare_exchange(RUNNING, PARKED, Ordering::AcqRel, Ordering::Acquire).is_err() {
                state.store(RUNNING, Ordering::Release);
                queued.fetch_add(1, Ordering::SeqCst);
            }
        }
        unparker.join().unwrap();
        let q = queued.load(Ordering::SeqCst);
        assert!(q <= 1, "queued twice");
        if suspended {
            // The unpark happened (joined): the fiber must have been queued.
            assert_eq!(q, 1, "a parked fiber was left without its wake-up");
            assert_ne!(state.load(Ordering::SeqCst), PARKED);
        }
    });
}

const AWAKE: u32 = 0;
const SLEEPING: u32 = 1;
const NOTIFIED_W: u32 = 2;

/// The idle worker's sleep against `Runtime::notify` (scheduler.rs "Sleep / wake
/// protocol"): either the sleeper's re-check sees the new fiber, or the producer sees
/// the sleeper and notifies it.
#[test]
fn idle_sleep_and_notify_form_a_dekker_pair() {
    loom::model(|| {
        let queue_len = Arc::new(AtomicUsize::new(0));
        let num_sleeping = Arc::new(AtomicUsize::new(0));
        let sleep_word = Arc::new(AtomicU32::new(AWAKE));
        let (q2, n2, w2) = (queue_len.clone(), num_sleeping.clone(), sleep_word.clone());
        let producer = thread::spawn(move || {
            q2.fetch_add(1, Ordering::Release); // push
            fence(Ordering::SeqCst); // notify()
            if n2.load(Ordering::SeqCst) > 0 {
                return w2.compare_exchange(SLEEPING, NOTIFIED_W, Ordering::SeqCst, Ordering::Relaxed).is_ok();
            }
            false
        });
        // idle(): announce, re-check, decide to sleep
        sleep_word.store(SLEEPING, Ordering::SeqCst);
        num_sleeping.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let saw_work = queue_len.load(Ordering::SeqCst) > 0;
        let notified = producer.join().unwrap();
        // The futex wait returns at once if the word is no longer SLEEPING.
        let woke_by_word = sleep_word.load(Ordering::SeqCst) == NOTIFIED_W;
        assert!(saw_work || notified || woke_by_word, "worker sleeps while a fiber waits in the queue");
    });
}

/// `parking::park` (queue, fence, validate) against `parking::unpark_some_quick`
/// (publish, fence, peek at the queue without the lock): no lost wake-up.
#[test]
fn parking_lot_quick_unpark_is_not_lost() {
    loom::model(|| {
        let bucket = Arc::new(Mutex::new(()));
        let head = Arc::new(AtomicBool::new(false)); // "a waiter is linked"
        let seq = Arc::new(AtomicU32::new(0)); // the state waiters validate
        let woken = Arc::new(AtomicBool::new(false));
        let (b2, h2, s2, wk2) = (bucket.clone(), head.clone(), seq.clone(), woken.clone());
        let waker = thread::spawn(move || {
            s2.fetch_add(1, Ordering::AcqRel); // publish (reactor: bump read_seq)
            fence(Ordering::SeqCst);
            if !h2.load(Ordering::Relaxed) {
                return; // nobody queued: skip the lock
            }
            let _g = b2.lock().unwrap();
            if h2.load(Ordering::Relaxed) {
                h2.store(false, Ordering::Relaxed);
                wk2.store(true, Ordering::Release);
            }
        });
        // park(): observed seq 0 before its attempt.
        let sleeps = {
            let _g = bucket.lock().unwrap();
            head.store(true, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            if seq.load(Ordering::Acquire) == 0 {
                true
            } else {
                head.store(false, Ordering::Relaxed); // invalid: unlink, don't sleep
                false
            }
        };
        waker.join().unwrap();
        if sleeps {
            assert!(woken.load(Ordering::Acquire), "waiter sleeps forever: the quick check skipped it");
        }
    });
}
