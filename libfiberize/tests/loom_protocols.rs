//! Model checks (loom) of the lock-free hand-shakes the runtime relies on.
//!
//! **Real code.** The protocol files `runtime/sleep/park_state.rs`, `runtime/sleep/sleep_state.rs`,
//! `sync/lock_word.rs`, `sync/rwlock/word.rs`, `sync/parking_quick.rs`,
//! `runtime/signals/signal_state.rs`, `runtime/signals/donor_signals.rs`,
//! `io/epoll_membership.rs` and `io/waiter_slot.rs` are compiled into this test as they are (`#[path]` below),
//! against a `base::loom` of this crate that re-exports loom's atomics: the models call
//! the functions the runtime calls (`crate::base::loom` in the library re-exports
//! `core`'s). loom explores every interleaving and every outcome the C++11 memory model
//! allows for them.
//!
//! The mutex word reaches the parking lot through `lock_word::WaitQueue`; the model
//! queue (`loom_protocols/mutex_models.rs`) has the parking lot's order (queue at the
//! front or back, fence, validate under the bucket lock; time out under it unless
//! woken) and says `be_fair` never, always or every second time.
//!
//! The rwlock word reaches its two queues through `rwlock::word::RwQueues`; the model
//! queues are in `loom_protocols/rwlock_models.rs`.
//!
//! The parking lot's quick unpark sees the bucket lock through
//! `parking_quick::BucketLock`; the model's lock is a loom mutex and condition variable.
//!
//! The epoll-set removal (`io/epoll_membership.rs`) sees the epoll set through
//! `EpollSet`; the model's set is a flag under a loom mutex.
//!
//! Run: `cargo test -p libfiberize --test loom_protocols --release`.

use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

/// What the protocol files import as `crate::base::loom` (see `src/base/loom.rs`).
mod base {
    pub mod loom {
        pub use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
        /// A spin is a yield to the other model threads (loom requires it: a busy wait
        /// would otherwise explore forever).
        #[allow(dead_code)]
        pub fn spin_hint() {
            loom::thread::yield_now();
        }
        /// A thread yield is a yield to the other model threads.
        #[allow(dead_code)]
        pub fn yield_thread() {
            loom::thread::yield_now();
        }
        /// A spin of any length is one yield in the model.
        #[allow(dead_code)]
        pub fn spin_wait(_iterations: u32) {
            loom::thread::yield_now();
        }
    }
}

#[allow(dead_code)]
#[path = "../src/runtime/signals/donor_signals.rs"]
mod donor_signals;
#[allow(dead_code)]
#[path = "../src/io/epoll_membership.rs"]
mod epoll_membership;
#[allow(dead_code)]
#[path = "../src/sync/lock_word.rs"]
mod lock_word;
#[path = "loom_protocols/model_queue.rs"]
mod model_queue;
#[path = "loom_protocols/mutex_models.rs"]
mod mutex_models;
#[allow(dead_code)]
#[path = "../src/runtime/sleep/park_state.rs"]
mod park_state;
#[allow(dead_code)]
#[path = "../src/sync/parking_quick.rs"]
mod parking_quick;
#[path = "loom_protocols/rwlock_models.rs"]
mod rwlock_models;
#[path = "loom_protocols/signal_models.rs"]
mod signal_models;
#[allow(dead_code)]
#[path = "../src/runtime/signals/signal_state.rs"]
mod signal_state;
#[path = "loom_protocols/slot_models.rs"]
mod slot_models;
/// `crate::sync::lock_word`, as `rwlock/word.rs` names it (it shares `Woken`).
mod sync {
    pub(crate) use super::lock_word;
}
#[allow(dead_code)]
#[path = "../src/sync/rwlock/word.rs"]
mod rwlock_word;
#[allow(dead_code)]
#[path = "../src/runtime/sleep/sleep_state.rs"]
mod sleep_state;
#[allow(dead_code)]
#[path = "../src/io/waiter_slot.rs"]
mod waiter_slot;

use park_state::{ParkState, UnparkAction};
use sleep_state::{DonorWait, IdleCounts, MonitorDoze, SleepWord};

/// `scheduler::unpark` against `scheduler::park_current` + the worker's handling of
/// `Switch::Park`, through the real [`ParkState`]: an unpark is never lost, and a fiber
/// is never queued twice.
#[test]
fn park_unpark_never_loses_a_wakeup() {
    loom::model(|| {
        let state = Arc::new(ParkState::new());
        let queued = Arc::new(AtomicUsize::new(0));
        let (s2, q2) = (state.clone(), queued.clone());
        let unparker = thread::spawn(move || {
            if s2.unpark() == UnparkAction::Schedule {
                q2.fetch_add(1, Ordering::SeqCst);
            }
        });
        // park_current: an early notification makes the park return at once.
        let mut suspended = false;
        if !state.take_notification() {
            // ... the fiber switches out; the worker, after the switch:
            suspended = true;
            if !state.park_after_switch() {
                queued.fetch_add(1, Ordering::SeqCst); // notified meanwhile: run it again
            }
        }
        unparker.join().unwrap();
        let q = queued.load(Ordering::SeqCst);
        assert!(q <= 1, "queued twice");
        if suspended {
            // The unpark happened (joined): the fiber must have been queued.
            assert_eq!(q, 1, "a parked fiber was left without its wake-up");
            assert_ne!(state.get(), park_state::Park::Parked);
        }
    });
}

/// Two unparks and one park: still one queueing at most, none lost.
#[test]
fn park_with_two_unparkers_queues_once() {
    loom::model(|| {
        let state = Arc::new(ParkState::new());
        let queued = Arc::new(AtomicUsize::new(0));
        let unparkers: Vec<_> = (0..2)
            .map(|_| {
                let (s2, q2) = (state.clone(), queued.clone());
                thread::spawn(move || {
                    if s2.unpark() == UnparkAction::Schedule {
                        q2.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        let suspended = !state.take_notification();
        if suspended && !state.park_after_switch() {
            queued.fetch_add(1, Ordering::SeqCst);
        }
        for u in unparkers {
            u.join().unwrap();
        }
        let q = queued.load(Ordering::SeqCst);
        assert!(q <= 1, "queued twice");
        if suspended {
            assert_eq!(q, 1, "a parked fiber was left without its wake-up");
        }
    });
}

/// The idle worker's sleep (`worker::idle`) against `Runtime::notify`, through the real
/// [`SleepWord`] and [`IdleCounts`]: either the sleeper's re-check sees the new fiber,
/// or the producer sees the sleeper and notifies it.
#[test]
fn idle_sleep_and_notify_form_a_dekker_pair() {
    loom::model(|| {
        let queue_len = Arc::new(AtomicUsize::new(0));
        let counts = Arc::new(IdleCounts::new());
        let word = Arc::new(SleepWord::new());
        let (q2, c2, w2) = (queue_len.clone(), counts.clone(), word.clone());
        let producer = thread::spawn(move || {
            q2.fetch_add(1, Ordering::Release); // push
            c2.wake_needed() && w2.try_notify()
        });
        word.announce(&counts);
        let saw_work = queue_len.load(Ordering::SeqCst) > 0;
        // The sleep itself returns at once (futex value, or the polling re-check) if
        // the word is no longer Sleeping.
        let sleeps_anyway = !saw_work && word.still_sleeping();
        let notified = producer.join().unwrap();
        if sleeps_anyway {
            assert!(notified, "worker sleeps while a fiber waits in the queue");
        }
        let was_notified = word.wake(&counts);
        assert_eq!(was_notified, notified);
        assert_eq!(counts.sleeping(), 0);
    });
}

/// The monitor's doze (`scheduler::monitor`, "Dozing") against a worker that leaves
/// its sleep, through the real [`MonitorDoze`] and [`IdleCounts`]: if the monitor saw
/// the pool quiet and dozes, the worker moved the word past the value it waits on (so
/// its futex wait returns at once, or the worker's wake ends it).
#[test]
fn monitor_doze_and_worker_wake_form_a_dekker_pair() {
    loom::model(|| {
        let counts = Arc::new(IdleCounts::new());
        let word = Arc::new(SleepWord::new());
        let doze = Arc::new(MonitorDoze::new());
        word.announce(&counts); // the pool's only worker sleeps
        let (c2, w2, d2) = (counts.clone(), word.clone(), doze.clone());
        let worker = thread::spawn(move || {
            w2.wake(&c2);
            d2.worker_woke()
        });
        let seen = doze.announce();
        let quiet = counts.sleeping() >= 1;
        let woke_monitor = worker.join().unwrap();
        if quiet {
            assert!(woke_monitor, "the monitor dozes and nobody wakes it");
            assert_ne!(doze.word_value(), seen, "the monitor's futex wait would sleep on");
        }
        doze.end();
    });
}

/// `signal::delivery::fiber_sigtimedwait` on the donor ([`DonorWait::begin`], then a look
/// for held signals and a cancellation request) against `pthread_kill` / `pthread_cancel`
/// (publish, then [`DonorWait::interrupt_needed`], then the kick to the donor): a waiter
/// that did not see the request has a kick pending, so its `rt_sigtimedwait` returns.
#[test]
fn donor_wait_and_its_interruption_form_a_dekker_pair() {
    loom::model(|| {
        let wait = Arc::new(DonorWait::new());
        let requested = Arc::new(AtomicBool::new(false));
        let kicks = Arc::new(AtomicUsize::new(0));
        let (w2, r2, k2) = (wait.clone(), requested.clone(), kicks.clone());
        let signaller = thread::spawn(move || {
            r2.store(true, Ordering::SeqCst); // SignalState::hold, Cancellation::request
            if w2.interrupt_needed() {
                k2.fetch_add(1, Ordering::SeqCst); // tgkill(donor, KICK_SIGNAL)
            }
        });
        wait.begin();
        let saw_request = requested.load(Ordering::SeqCst);
        signaller.join().unwrap();
        if !saw_request {
            assert_eq!(kicks.load(Ordering::SeqCst), 1, "the donor waits with the request unseen and no kick pending");
        }
        let kicked = wait.end();
        assert_eq!(kicked, kicks.load(Ordering::SeqCst) == 1);
    });
}

/// `scheduler::direct_wait` (publish the wake fd, then [`ParkState::is_notified_after_publishing`])
/// against `scheduler::unpark` of a running fiber ([`ParkState::unpark`] gives
/// `Notified`, then a look for a wake fd): a fiber that goes to wait in
/// ppoll always gets its eventfd written.
#[test]
fn direct_wait_and_unpark_form_a_dekker_pair() {
    const NO_FD: u32 = u32::MAX;
    loom::model(|| {
        let state = Arc::new(ParkState::new());
        let wake_fd = Arc::new(AtomicU32::new(NO_FD));
        let eventfd = Arc::new(AtomicUsize::new(0));
        let (p2, w2, e2) = (state.clone(), wake_fd.clone(), eventfd.clone());
        let unparker = thread::spawn(move || {
            if p2.unpark() == UnparkAction::Notified && w2.load(Ordering::SeqCst) != NO_FD {
                e2.fetch_add(1, Ordering::SeqCst); // sys::eventfd_signal
            }
        });
        wake_fd.store(7, Ordering::SeqCst);
        let waits = !state.is_notified_after_publishing();
        unparker.join().unwrap();
        wake_fd.store(NO_FD, Ordering::SeqCst);
        if waits {
            // ppoll on the eventfd returns only if somebody wrote it.
            assert_eq!(eventfd.load(Ordering::SeqCst), 1, "direct waiter missed its unpark");
        }
    });
}

/// `parking::park` (the real [`parking_quick::queue_then_validate`]: link, fence,
/// validate) against `parking::unpark_some_quick` (publish, then the real
/// [`parking_quick::anybody_queued_after_publishing`]: fence, peek at the list without
/// the lock): no lost wake-up.
#[test]
fn parking_lot_quick_unpark_is_not_lost() {
    use parking_quick::{anybody_queued_after_publishing, first, queue_then_validate, set_first, BucketLock};
    /// The bucket's raw lock (Acquire/Release, as `RawMutex`); a blocking lock, since
    /// loom cannot explore a spin lock's unbounded retries.
    struct ModelLock {
        held: Mutex<bool>,
        released: loom::sync::Condvar,
    }
    impl BucketLock for ModelLock {
        fn lock(&self) {
            let mut held = self.held.lock().unwrap();
            while *held {
                held = self.released.wait(held).unwrap();
            }
            *held = true;
        }
        fn unlock(&self) {
            *self.held.lock().unwrap() = false;
            self.released.notify_one();
        }
    }
    struct Bucket {
        lock: ModelLock,
        head: AtomicPtr<u8>,
    }
    loom::model(|| {
        let me = core::ptr::NonNull::<u8>::dangling().as_ptr(); // the waiter's address
        let lock = ModelLock { held: Mutex::new(false), released: loom::sync::Condvar::new() };
        let bucket = Arc::new(Bucket { lock, head: AtomicPtr::new(core::ptr::null_mut()) });
        let seq = Arc::new(AtomicU32::new(0)); // the state waiters validate (reactor: read_seq)
        let woken = Arc::new(AtomicBool::new(false));
        let (b2, s2, wk2) = (bucket.clone(), seq.clone(), woken.clone());
        let waker = thread::spawn(move || {
            s2.fetch_add(1, Ordering::AcqRel); // publish (FdState::bump_and_wake)
            if !anybody_queued_after_publishing(&b2.head) {
                return; // nobody queued: skip the lock
            }
            b2.lock.lock();
            if !first(&b2.head).is_null() {
                set_first(&b2.head, core::ptr::null_mut()); // take(): unlink, then wake
                wk2.store(true, Ordering::Release);
            }
            b2.lock.unlock();
        });
        // park(): observed seq 0 before its attempt.
        let sleeps = queue_then_validate(
            &bucket.lock,
            || set_first(&bucket.head, me),
            || seq.load(Ordering::Acquire) == 0,
            || set_first(&bucket.head, core::ptr::null_mut()),
        );
        waker.join().unwrap();
        if sleeps {
            assert!(woken.load(Ordering::Acquire), "waiter sleeps forever: the quick check skipped it");
        }
    });
}

/// `FdState::leave_epoll_set` (a direct waiter takes the fd out of the epoll set)
/// against a fiber that parks on the same fd through the reactor (`count_waiter`, then
/// `ensure_registered`), both the real `io/epoll_membership.rs`: the parked fiber never
/// ends up relying on a registration that was removed. The model's epoll set is a
/// flag under a loom mutex (the kernel serializes epoll_ctl calls).
#[test]
fn epoll_removal_never_strands_a_parked_waiter() {
    use epoll_membership::{count_waiter, ensure_registered, leave_epoll_set, EpollSet, REGISTERED};
    struct ModelSet(Mutex<bool>);
    impl EpollSet for ModelSet {
        fn put(&self, _already_in: bool, _for_write: bool) -> Result<(), i32> {
            *self.0.lock().unwrap() = true; // EPOLL_CTL_ADD / MOD
            Ok(())
        }
        fn remove(&self) {
            *self.0.lock().unwrap() = false; // EPOLL_CTL_DEL
        }
    }
    loom::model(|| {
        let flags = Arc::new(AtomicU32::new(REGISTERED));
        let waiters = Arc::new(AtomicU32::new(0));
        let set = Arc::new(ModelSet(Mutex::new(true)));
        let (f2, w2, s2) = (flags.clone(), waiters.clone(), set.clone());
        let parker = thread::spawn(move || {
            count_waiter(&w2, true);
            ensure_registered(&f2, false, &*s2).unwrap();
            // ... parks, relying on the registration.
        });
        let out = leave_epoll_set(&flags, &waiters, &*set);
        parker.join().unwrap();
        assert!(*set.0.lock().unwrap(), "a fiber parked on an fd that is not in the epoll set (direct waiter out: {out})");
        assert_eq!(flags.load(Ordering::SeqCst) & REGISTERED, REGISTERED);
    });
}

/// The real `sync::lock_word` (what `pthread_mutex_lock`/`unlock` run) over a model
/// parking lot ("One wake-up in flight"): a contended unlock wakes one waiter and
/// clears PARKED; the wakee carries PARKED back when the unlocker said others remain.
/// Three threads lock and unlock once each; loom reports a deadlock if a waiter is
/// never woken, and the guarded cell checks mutual exclusion.
#[test]
fn mutex_one_wakeup_in_flight_loses_no_waiter() {
    assert!(!mutex_models::contenders(mutex_models::Fairness::Never, true));
}

/// "Eventual fairness": every contended unlock hands the lock over (LOCKED stays set,
/// PARKED as the wakee would have put it), or every second one (hand-offs mixed with
/// barging): exclusion (the hand-off's wakee reaches the data ordered after the
/// unlocker), no lost wake-up, the mutex ends free.
#[test]
fn mutex_hand_off_excludes_and_loses_no_waiter() {
    assert!(mutex_models::contenders(mutex_models::Fairness::Always, true), "no interleaving handed over");
    assert!(mutex_models::contenders(mutex_models::Fairness::Alternate, true), "no interleaving handed over");
}

/// A timed waiter whose deadline passes while the owner unlocks (hand-off or plain
/// wake-up) and a third thread contends: the lock never ends owned by nobody or by
/// the waiter that left.
#[test]
fn mutex_timed_out_waiter_racing_hand_off_leaves_no_owner() {
    mutex_models::timed_waiter_racing_unlock(mutex_models::Fairness::Always);
    mutex_models::timed_waiter_racing_unlock(mutex_models::Fairness::Never);
}

/// The same with a queue that drops the wakee's token (so the wakee never carries
/// PARKED back): loom finds the lost wake-up (T1 wakes T2 and clears PARKED, T2
/// acquires without it and unlocks on the fast path, T3 sleeps forever) and aborts the
/// process with its deadlock report, so this is run by hand:
/// `cargo test -p libfiberize --test loom_protocols --release -- --ignored mutex_model`.
#[test]
#[ignore]
fn mutex_model_without_carrying_parked_deadlocks() {
    mutex_models::contenders(mutex_models::Fairness::Never, false);
}

/// The real `sync::rwlock::word` (what `pthread_rwlock_*` run) over a model pair of
/// queues: a writer, a reader and a second writer, each locking once, for every kind.
/// loom reports a deadlock if a waiter is never woken (lost wake-up) and a causality
/// violation if the guarded data is reached without the lock's Acquire/Release
/// (writer exclusion); the word ends free.
#[test]
fn rwlock_writer_reader_writer_lose_no_wakeup() {
    for kind in rwlock_models::all_kinds() {
        rwlock_models::mixed(kind, &['w', 'r', 'w'], 3);
    }
}

/// Two readers and a writer, for every kind (the last reader out hands the lock over).
#[test]
fn rwlock_reader_reader_writer_lose_no_wakeup() {
    for kind in rwlock_models::all_kinds() {
        rwlock_models::mixed(kind, &['r', 'r', 'w'], 3);
    }
}

/// The write unlock's rule with a reader and a writer parked: kind 0 (prefer readers)
/// starts a read phase, kinds 1 and 2 hand the lock to the writer (glibc's WRHANDOVER).
#[test]
fn rwlock_write_unlock_prefers_by_kind() {
    use rwlock_word::*;
    assert_eq!(rwlock_models::unlock_preference(KIND_PREFER_READER), vec!['r', 'w']);
    assert_eq!(rwlock_models::unlock_preference(KIND_PREFER_WRITER), vec!['w', 'r']);
    assert_eq!(rwlock_models::unlock_preference(KIND_PREFER_WRITER_NONRECURSIVE), vec!['w', 'r']);
}

/// A new reader behind a parked writer: kind 2 refuses it (EBUSY for tryrdlock), kinds
/// 0 and 1 let it in (glibc's reader preference in a read phase).
#[test]
fn rwlock_new_reader_behind_parked_writer_by_kind() {
    use rwlock_word::*;
    assert_eq!(rwlock_models::new_reader_behind_parked_writer(KIND_PREFER_READER), Ok(()));
    assert_eq!(rwlock_models::new_reader_behind_parked_writer(KIND_PREFER_WRITER), Ok(()));
    assert_eq!(rwlock_models::new_reader_behind_parked_writer(KIND_PREFER_WRITER_NONRECURSIVE), Err(RwError::Busy));
}

/// Kind 2's writer preference holds readers back; a writer that times out must let
/// them in again (while the first reader still holds the lock, nobody else would).
#[test]
fn rwlock_timed_out_writer_releases_held_back_readers() {
    rwlock_models::timed_out_writer_releases_held_back_readers(rwlock_word::KIND_PREFER_WRITER_NONRECURSIVE);
}
