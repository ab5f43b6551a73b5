//! Models of the real `sync/rwlock/word.rs` over a model pair of wait queues.

use super::model_queue::ModelQueue;
use super::rwlock_word::{self as word, Dequeued, Queue, RwError, RwQueues, Woken};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

/// The readers' and the writers' queue of one lock, each with its own lock (in the
/// parking lot they are two keys, usually in two buckets).
pub struct ModelQueues {
    readers: ModelQueue,
    writers: ModelQueue,
    /// The deadline of the timed waiters passed (set by a model timer thread).
    expired: AtomicBool,
    /// Spin phases asked for after a wake-up: every second one is skipped
    /// (`spinning_pays`), as for a fiber whose worker has others queued, so that both
    /// ways back to parking are explored.
    spin_phases: AtomicUsize,
}

/// The queues as a timed call sees them (`LotQueues` with a deadline).
struct Timed<'a>(&'a ModelQueues);

impl ModelQueues {
    fn get(&self, queue: Queue) -> &ModelQueue {
        match queue {
            Queue::Readers => &self.readers,
            Queue::Writers => &self.writers,
        }
    }
}

impl ModelQueues {
    /// `parking::park`; a timed waiter looks at the shared deadline flag.
    fn park_until(&self, queue: Queue, timed: bool, still_waits: impl FnOnce() -> bool, on_timeout: impl FnOnce(bool)) -> Woken {
        self.get(queue).park(false, if timed { Some(&self.expired) } else { None }, still_waits, on_timeout)
    }

    /// The model timer: the timed waiters' deadline passes.
    fn expire(&self) {
        self.expired.store(true, Ordering::Relaxed);
        self.readers.deadline_passed();
        self.writers.deadline_passed();
    }
}

impl RwQueues for Timed<'_> {
    fn park(&self, queue: Queue, still_waits: impl FnOnce() -> bool, on_timeout: impl FnOnce(bool)) -> Woken {
        self.0.park_until(queue, true, still_waits, on_timeout)
    }
    fn unpark_one(&self, queue: Queue, decide: impl FnOnce(Dequeued) -> usize) -> bool {
        self.0.unpark_one(queue, decide)
    }
    fn unpark_all(&self, queue: Queue, after: impl FnOnce(usize)) {
        self.0.unpark_all(queue, after)
    }
    fn spinning_pays(&self) -> bool {
        self.0.spinning_pays()
    }
}

impl RwQueues for ModelQueues {
    fn park(&self, queue: Queue, still_waits: impl FnOnce() -> bool, on_timeout: impl FnOnce(bool)) -> Woken {
        self.park_until(queue, false, still_waits, on_timeout)
    }

    fn unpark_one(&self, queue: Queue, decide: impl FnOnce(Dequeued) -> usize) -> bool {
        self.get(queue).unpark_one(|unparked, have_more| decide(Dequeued { unparked, have_more }))
    }

    fn unpark_all(&self, queue: Queue, after: impl FnOnce(usize)) {
        self.get(queue).unpark_all(word::TOKEN_RETRY, after)
    }

    fn spinning_pays(&self) -> bool {
        self.spin_phases.fetch_add(1, Ordering::Relaxed).is_multiple_of(2)
    }
}

/// A lock as `sync::rwlock` drives the word: the word, its kind, its queues, and the
/// data it guards (a loom cell: loom reports any access not ordered by the lock).
pub struct Lock {
    state: AtomicU32,
    kind: u32,
    queues: ModelQueues,
    data: UnsafeCell<usize>,
    /// Who got in, in order ('r' / 'w'), for the preference models.
    log: Mutex<Vec<char>>,
}

// SAFETY: `data` is accessed only under the model lock (which is what is checked).
unsafe impl Sync for Lock {}

impl Lock {
    pub fn new(kind: u32) -> Arc<Lock> {
        Arc::new(Lock {
            state: AtomicU32::new(0),
            kind,
            queues: ModelQueues {
                readers: ModelQueue::new(),
                writers: ModelQueue::new(),
                expired: AtomicBool::new(false),
                spin_phases: AtomicUsize::new(0),
            },
            data: UnsafeCell::new(0),
            log: Mutex::new(Vec::new()),
        })
    }

    /// `rdlock` + read the guarded data + `unlock`.
    pub fn read(&self) {
        if !word::try_read_uncontended(&self.state) {
            word::read_lock_contended(&self.state, self.kind, &self.queues).unwrap();
        }
        self.data.with(|d| unsafe { core::ptr::read(d) });
        self.log.lock().unwrap().push('r');
        word::read_unlock(&self.state, self.kind, &self.queues).unwrap();
    }

    /// `wrlock` + write the guarded data + `unlock`.
    pub fn write(&self) {
        self.write_lock();
        self.log.lock().unwrap().push('w');
        self.write_unlock();
    }

    fn write_lock(&self) {
        if !word::try_write_uncontended(&self.state) {
            word::write_lock_contended(&self.state, &self.queues).unwrap();
        }
        self.data.with_mut(|d| unsafe { *d += 1 });
    }

    fn write_unlock(&self) {
        word::write_unlock(&self.state, self.kind, &self.queues);
    }
}

const KINDS: [u32; 3] = [word::KIND_PREFER_READER, word::KIND_PREFER_WRITER, word::KIND_PREFER_WRITER_NONRECURSIVE];

fn model(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    builder.check(f);
}

/// Readers and writers mixed (the caller names who runs), each locking once, for one
/// kind: loom reports a deadlock if a waiter is never woken and a causality violation
/// if the guarded data is touched without the lock's ordering; at the end the word is
/// free with no PARKED bit left behind.
pub fn mixed(kind: u32, roles: &'static [char], preemptions: usize) {
    model(preemptions, move || {
        let lock = Lock::new(kind);
        let threads: Vec<_> = roles[1..]
            .iter()
            .map(|&role| {
                let lock = lock.clone();
                thread::spawn(move || if role == 'w' { lock.write() } else { lock.read() })
            })
            .collect();
        if roles[0] == 'w' {
            lock.write()
        } else {
            lock.read()
        }
        for t in threads {
            t.join().unwrap();
        }
        let writes = roles.iter().filter(|&&r| r == 'w').count();
        assert_eq!(lock.data.with(|d| unsafe { *d }), writes, "a write was lost");
        assert_eq!(lock.state.load(Ordering::Relaxed) & !(word::RPARKED | word::WPARKED), 0, "lock left held");
    });
}

/// A writer unlocks while one reader and one writer are parked: kind 0 gives the lock
/// to the reader first (a new read phase), kinds 1 and 2 hand it to the writer first.
pub fn unlock_preference(kind: u32) -> Vec<char> {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let out = seen.clone();
    model(2, move || {
        let lock = Lock::new(kind);
        lock.write_lock();
        let (l1, l2) = (lock.clone(), lock.clone());
        let reader = thread::spawn(move || l1.read());
        let writer = thread::spawn(move || l2.write());
        lock.queues.readers.wait_until_queued(1);
        lock.queues.writers.wait_until_queued(1);
        lock.write_unlock();
        reader.join().unwrap();
        writer.join().unwrap();
        let order = lock.log.lock().unwrap().clone();
        let mut seen = seen.lock().unwrap();
        if seen.is_empty() {
            *seen = order;
        } else {
            assert_eq!(*seen, order, "the order depends on the interleaving");
        }
    });
    let order = out.lock().unwrap().clone();
    order
}

/// A reader holds the lock and a writer is parked behind it: may a new reader get in?
/// (kind 2: no, the writer would starve; kinds 0 and 1: yes.) Then the last reader out
/// hands the lock to the parked writer.
pub fn new_reader_behind_parked_writer(kind: u32) -> Result<(), RwError> {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let out = seen.clone();
    model(2, move || {
        let lock = Lock::new(kind);
        assert!(word::try_read_uncontended(&lock.state));
        let l2 = lock.clone();
        let writer = thread::spawn(move || l2.write());
        lock.queues.writers.wait_until_queued(1);
        let second = word::try_read(&lock.state, kind);
        if second.is_ok() {
            word::read_unlock(&lock.state, kind, &lock.queues).unwrap();
        }
        word::read_unlock(&lock.state, kind, &lock.queues).unwrap();
        writer.join().unwrap();
        assert_eq!(*lock.log.lock().unwrap(), vec!['w']);
        let mut seen = seen.lock().unwrap();
        assert!(seen.is_none() || *seen == Some(second));
        *seen = Some(second);
    });
    let r = out.lock().unwrap().unwrap();
    r
}

pub fn all_kinds() -> [u32; 3] {
    KINDS
}

/// Kind 2: a reader holds the lock, a timed writer parks behind it, a second reader
/// parks behind the writer (kind 2 refuses it), and the writer's deadline passes. The
/// writer that leaves last must wake the readers it held back (`write_lock_contended`'s
/// timeout path), or the second reader sleeps until somebody else unlocks — here
/// nobody: loom reports the deadlock. The set-up is staged (each waiter queued before
/// the next starts; a spinning waiter's rounds would otherwise need more preemptions
/// than the bound allows to reach it); the timeout against the rest is explored.
pub fn timed_out_writer_releases_held_back_readers(kind: u32) {
    model(2, move || {
        let lock = Lock::new(kind);
        assert!(word::try_read_uncontended(&lock.state));
        let (lw, lr, lt) = (lock.clone(), lock.clone(), lock.clone());
        let writer = thread::spawn(move || {
            let timed = Timed(&lw.queues);
            let got = word::try_write_uncontended(&lw.state) || word::write_lock_contended(&lw.state, &timed).is_ok();
            if got {
                lw.data.with_mut(|d| unsafe { *d += 1 });
                word::write_unlock(&lw.state, kind, &timed);
            }
        });
        lock.queues.writers.wait_until_queued(1);
        let reader = thread::spawn(move || lr.read());
        lock.queues.readers.wait_until_queued(1);
        let timer = thread::spawn(move || lt.queues.expire());
        reader.join().unwrap(); // the second reader gets in while we still hold ours
        word::read_unlock(&lock.state, kind, &lock.queues).unwrap();
        writer.join().unwrap();
        timer.join().unwrap();
        assert_eq!(lock.state.load(Ordering::Relaxed) & !(word::RPARKED | word::WPARKED), 0, "lock left held");
    });
}
