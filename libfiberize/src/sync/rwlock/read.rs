//! Read locks: taking one (fast path, spin, park), `tryrdlock`, and read unlock,
//! where the last reader out hands the lock to a parked writer.

use super::write::{hand_to_writer, write_unlock_slow};
use super::*;

/// `pthread_rwlock_rdlock` / `timedrdlock` / `clockrdlock`.
#[inline]
pub fn rdlock(o: &RwlockOverlay, timeout: Timeout<'_>) -> c_int {
    if let Err(e) = check_timeout(timeout) {
        return e;
    }
    if o.writer.load(Ordering::Relaxed) == self_id() {
        return libc::EDEADLK;
    }
    let s = o.state.load(Ordering::Relaxed);
    if s & (WRITER | WPARKED) == 0
        && readers(s) < MAX_READERS
        && o.state.compare_exchange_weak(s, s + READER, Ordering::Acquire, Ordering::Relaxed).is_ok()
    {
        return 0;
    }
    rdlock_slow(o, timeout)
}

#[cold]
fn rdlock_slow(o: &RwlockOverlay, timeout: Timeout<'_>) -> c_int {
    let kind = o.flags.load(Ordering::Relaxed);
    let mut deadline = None;
    let mut spins = 0;
    loop {
        let s = o.state.load(Ordering::Relaxed);
        if can_read(s, kind) {
            if readers(s) >= MAX_READERS {
                return libc::EAGAIN;
            }
            if o.state.compare_exchange_weak(s, s + READER, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return 0;
            }
            continue;
        }
        if s & RPARKED == 0 && spins < SPIN_LIMIT {
            spin(spins);
            spins += 1;
            continue;
        }
        if s & RPARKED == 0 && o.state.compare_exchange_weak(s, s | RPARKED, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            continue;
        }
        if deadline.is_none() {
            deadline = deadline_of(timeout);
        }
        let r = parking::park(
            read_key(o),
            u32::MAX,
            WaitKind::RwLock,
            || {
                let s = o.state.load(Ordering::SeqCst);
                s & RPARKED != 0 && !can_read(s, kind)
            },
            || {},
            |more| {
                if !more {
                    o.state.fetch_and(!RPARKED, Ordering::Relaxed);
                }
            },
            deadline,
        );
        match r {
            // The unlocker counted us in READERS before waking us.
            ParkResult::Unparked(TOKEN_HANDOFF) => return 0,
            ParkResult::TimedOut => return libc::ETIMEDOUT,
            _ => spins = 0,
        }
    }
}

/// `pthread_rwlock_tryrdlock`.
pub fn tryrdlock(o: &RwlockOverlay) -> c_int {
    let kind = o.flags.load(Ordering::Relaxed);
    let mut s = o.state.load(Ordering::Relaxed);
    loop {
        if s & WRITER != 0 || (kind == KIND_PREFER_WRITER_NONRECURSIVE && s & WPARKED != 0) {
            return libc::EBUSY;
        }
        if readers(s) >= MAX_READERS {
            return libc::EAGAIN;
        }
        match o.state.compare_exchange_weak(s, s + READER, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return 0,
            Err(x) => s = x,
        }
    }
}

/// Read unlock (the caller is not the writer).
pub(super) fn read_unlock(o: &RwlockOverlay) -> c_int {
    let mut s = o.state.load(Ordering::Relaxed);
    loop {
        if readers(s) == 0 {
            return libc::EPERM;
        }
        let n = s - READER;
        if readers(n) == 0 && s & WPARKED != 0 {
            // Last reader out with writers parked: reserve the lock for one of them.
            match o.state.compare_exchange_weak(s, n | WRITER, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => {
                    last_reader_handoff(o);
                    return 0;
                }
                Err(x) => s = x,
            }
            continue;
        }
        match o.state.compare_exchange_weak(s, n, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return 0,
            Err(x) => s = x,
        }
    }
}

#[cold]
fn last_reader_handoff(o: &RwlockOverlay) {
    // We own WRITER (reserved above).
    if !hand_to_writer(o) {
        write_unlock_slow(o);
    }
}
