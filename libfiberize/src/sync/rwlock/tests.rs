//! Unit tests of the protocol on plain threads (no runtime): the rules of a single
//! thread, reader overflow, timeouts, writer preference, and invariants under threads.

use super::*;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

struct Lock(Box<libc::pthread_rwlock_t>);
// SAFETY: only accessed through the atomics of the overlay.
unsafe impl Send for Lock {}
// SAFETY: as above.
unsafe impl Sync for Lock {}
impl Lock {
    fn new(kind: u32) -> Lock {
        // SAFETY: all-zero bytes are a valid (unlocked) pthread_rwlock_t.
        let mut b: Box<libc::pthread_rwlock_t> = Box::new(unsafe { core::mem::zeroed() });
        // SAFETY: a live, aligned pthread_rwlock_t.
        init(unsafe { RwlockOverlay::from_ptr(&mut *b) }, kind);
        Lock(b)
    }
    fn o(&self) -> &RwlockOverlay {
        // SAFETY: a live, aligned pthread_rwlock_t, accessed only atomically.
        unsafe { RwlockOverlay::from_ptr(&*self.0 as *const _ as *mut _) }
    }
}

#[test]
fn single_thread_rules() {
    let l = Lock::new(KIND_PREFER_READER);
    let o = l.o();
    assert_eq!(rdlock(o, None), 0);
    assert_eq!(rdlock(o, None), 0);
    assert_eq!(tryrdlock(o), 0);
    assert_eq!(trywrlock(o), libc::EBUSY);
    for _ in 0..3 {
        assert_eq!(unlock(o), 0);
    }
    assert_eq!(unlock(o), libc::EPERM);
    assert_eq!(wrlock(o, None), 0);
    assert_eq!(wrlock(o, None), libc::EDEADLK);
    assert_eq!(rdlock(o, None), libc::EDEADLK);
    assert_eq!(tryrdlock(o), libc::EBUSY);
    let bad = libc::timespec { tv_sec: 0, tv_nsec: -1 };
    assert_eq!(rdlock(o, Some((libc::CLOCK_REALTIME, &bad))), libc::EINVAL);
    assert_eq!(wrlock(o, Some((libc::CLOCK_PROCESS_CPUTIME_ID, &bad))), libc::EINVAL);
    assert_eq!(unlock(o), 0);
    assert_eq!(o.state.load(Ordering::Relaxed), 0);
    assert_eq!(o.writer.load(Ordering::Relaxed), 0);
}

#[test]
fn reader_overflow() {
    let l = Lock::new(KIND_PREFER_READER);
    let o = l.o();
    o.state.store((MAX_READERS - 1) * READER, Ordering::Relaxed);
    assert_eq!(rdlock(o, None), 0);
    assert_eq!(rdlock(o, None), libc::EAGAIN);
    assert_eq!(tryrdlock(o), libc::EAGAIN);
    assert_eq!(unlock(o), 0);
    assert_eq!(tryrdlock(o), 0);
}

#[test]
fn timed_out_writer_and_reader() {
    let l = Lock::new(KIND_PREFER_READER);
    let o = l.o();
    assert_eq!(rdlock(o, None), 0);
    let past = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    let neg = libc::timespec { tv_sec: -1, tv_nsec: 0 };
    assert_eq!(wrlock(o, Some((libc::CLOCK_MONOTONIC, &past))), libc::ETIMEDOUT);
    assert_eq!(wrlock(o, Some((libc::CLOCK_REALTIME, &neg))), libc::ETIMEDOUT);
    assert_eq!(unlock(o), 0);
    assert_eq!(wrlock(o, None), 0);
    // Another thread's reader times out against our write lock.
    let l2 = &l;
    std::thread::scope(|sc| {
        sc.spawn(|| {
            let d = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            assert_eq!(rdlock(l2.o(), Some((libc::CLOCK_REALTIME, &d))), libc::ETIMEDOUT);
            assert_eq!(tryrdlock(l2.o()), libc::EBUSY);
        });
    });
    assert_eq!(unlock(o), 0);
    assert_eq!(o.state.load(Ordering::Relaxed), 0);
}

/// Kind 2: a new reader waits while a writer waits; kind 0: it does not.
#[test]
fn writer_preference_blocks_new_readers() {
    for (kind, reader_gets_in) in [(KIND_PREFER_READER, true), (KIND_PREFER_WRITER_NONRECURSIVE, false)] {
        let l = Arc::new(Lock::new(kind));
        assert_eq!(rdlock(l.o(), None), 0);
        let got = Arc::new(AtomicBool::new(false));
        let w = std::thread::spawn({
            let (l, got) = (l.clone(), got.clone());
            move || {
                assert_eq!(wrlock(l.o(), None), 0);
                got.store(true, Ordering::SeqCst);
                assert_eq!(unlock(l.o()), 0);
            }
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(!got.load(Ordering::SeqCst));
        let r = std::thread::spawn({
            let l = l.clone();
            move || tryrdlock(l.o())
        })
        .join()
        .unwrap();
        assert_eq!(r == 0, reader_gets_in, "kind {kind}");
        if r == 0 {
            assert_eq!(read_unlock(l.o()), 0);
        }
        assert_eq!(unlock(l.o()), 0);
        w.join().unwrap();
        assert!(got.load(Ordering::SeqCst));
        assert_eq!(l.o().state.load(Ordering::Relaxed), 0);
    }
}

#[test]
fn threads_hammer_invariants() {
    use core::sync::atomic::AtomicI32;
    for kind in [KIND_PREFER_READER, KIND_PREFER_WRITER, KIND_PREFER_WRITER_NONRECURSIVE] {
        let l = Arc::new(Lock::new(kind));
        let active = Arc::new(AtomicI32::new(0)); // readers count up, a writer sets -1000
        let hs: Vec<_> = (0..6)
            .map(|i| {
                let (l, active) = (l.clone(), active.clone());
                std::thread::spawn(move || {
                    for j in 0..3000 {
                        if (i + j) % 5 == 0 {
                            assert_eq!(wrlock(l.o(), None), 0);
                            assert_eq!(active.swap(-1000, Ordering::SeqCst), 0);
                            active.store(0, Ordering::SeqCst);
                            assert_eq!(unlock(l.o()), 0);
                        } else {
                            assert_eq!(rdlock(l.o(), None), 0);
                            assert!(active.fetch_add(1, Ordering::SeqCst) >= 0);
                            active.fetch_sub(1, Ordering::SeqCst);
                            assert_eq!(unlock(l.o()), 0);
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(l.o().state.load(Ordering::Relaxed) & !(RPARKED | WPARKED), 0);
        assert_eq!(trywrlock(l.o()), 0);
        assert_eq!(unlock(l.o()), 0);
    }
}
