//! Write locks: taking one (fast path, spin, park), `trywrlock`, and write unlock,
//! which hands the lock to a parked writer or to every parked reader (module essay,
//! "Policy").

use super::*;

/// `pthread_rwlock_wrlock` / `timedwrlock` / `clockwrlock`.
#[inline]
pub fn wrlock(o: &RwlockOverlay, timeout: Timeout<'_>) -> c_int {
    if let Err(e) = check_timeout(timeout) {
        return e;
    }
    let me = self_id();
    if o.writer.load(Ordering::Relaxed) == me {
        return libc::EDEADLK;
    }
    if o.state.compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed).is_err() {
        let r = wrlock_slow(o, timeout);
        if r != 0 {
            return r;
        }
    }
    o.writer.store(me, Ordering::Relaxed);
    0
}

#[cold]
fn wrlock_slow(o: &RwlockOverlay, timeout: Timeout<'_>) -> c_int {
    let mut deadline = None;
    let mut spins = 0;
    loop {
        let s = o.state.load(Ordering::Relaxed);
        if can_write(s) {
            if o.state.compare_exchange_weak(s, s | WRITER, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return 0;
            }
            continue;
        }
        if s & WPARKED == 0 && spins < SPIN_LIMIT {
            spin(spins);
            spins += 1;
            continue;
        }
        if s & WPARKED == 0 && o.state.compare_exchange_weak(s, s | WPARKED, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            continue;
        }
        if deadline.is_none() {
            deadline = deadline_of(timeout);
        }
        let mut was_last = false;
        let r = parking::park(
            write_key(o),
            u32::MAX,
            WaitKind::RwLock,
            || {
                let s = o.state.load(Ordering::SeqCst);
                s & WPARKED != 0 && !can_write(s)
            },
            || {},
            |more| {
                if !more {
                    o.state.fetch_and(!WPARKED, Ordering::Relaxed);
                    was_last = true;
                }
            },
            deadline,
        );
        match r {
            // The unlocker left WRITER set for us.
            ParkResult::Unparked(TOKEN_HANDOFF) => return 0,
            ParkResult::TimedOut => {
                // Readers of a kind-2 lock may be parked only because we waited.
                let s = o.state.load(Ordering::Relaxed);
                if was_last && s & RPARKED != 0 && s & WRITER == 0 {
                    wake_readers_retry(o);
                }
                return libc::ETIMEDOUT;
            }
            _ => spins = 0,
        }
    }
}

/// `pthread_rwlock_trywrlock`.
pub fn trywrlock(o: &RwlockOverlay) -> c_int {
    let mut s = o.state.load(Ordering::Relaxed);
    loop {
        if !can_write(s) {
            return libc::EBUSY;
        }
        match o.state.compare_exchange_weak(s, s | WRITER, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => break,
            Err(x) => s = x,
        }
    }
    o.writer.store(self_id(), Ordering::Relaxed);
    0
}

/// Write unlock (the caller is the writer).
#[inline]
pub(super) fn write_unlock(o: &RwlockOverlay) {
    o.writer.store(0, Ordering::Relaxed);
    if o.state.compare_exchange(WRITER, 0, Ordering::Release, Ordering::Relaxed).is_err() {
        write_unlock_slow(o);
    }
}

/// Releases WRITER, which the caller owns, to whoever is parked (module docs, Policy).
#[cold]
pub(super) fn write_unlock_slow(o: &RwlockOverlay) {
    let prefer_writer = o.flags.load(Ordering::Relaxed) != KIND_PREFER_READER;
    loop {
        let s = o.state.load(Ordering::Relaxed);
        if s & (RPARKED | WPARKED) == 0 {
            if o.state.compare_exchange_weak(s, s & !WRITER, Ordering::Release, Ordering::Relaxed).is_ok() {
                return;
            }
            continue;
        }
        if s & WPARKED != 0 && (prefer_writer || s & RPARKED == 0) {
            if prefer_writer {
                if hand_to_writer(o) {
                    return;
                }
                continue; // nobody was parked after all; WPARKED is clear now
            }
            release_and_wake_writer(o);
            return;
        }
        if hand_to_readers(o) {
            return;
        }
        // RPARKED was stale and is clear now; we still own WRITER.
    }
}

/// Hands WRITER (owned by the caller) to one parked writer. False if none was parked
/// (then WPARKED is cleared and the caller still owns WRITER).
pub(super) fn hand_to_writer(o: &RwlockOverlay) -> bool {
    let mut found = false;
    parking::unpark_one(write_key(o), |info| {
        // Under the writers' bucket lock; we own the lock, so it is alive.
        if info.unparked {
            found = true;
            if !info.have_more {
                o.state.fetch_and(!WPARKED, Ordering::Relaxed);
            }
            TOKEN_HANDOFF
        } else {
            o.state.fetch_and(!WPARKED, Ordering::Relaxed);
            TOKEN_NORMAL
        }
    });
    found
}

/// Kind 0, only writers parked: release WRITER and wake one writer to compete.
fn release_and_wake_writer(o: &RwlockOverlay) {
    let mut after = 0;
    parking::unpark_one(write_key(o), |info| {
        // Under the writers' bucket lock, and we still own WRITER until this CAS.
        let mut s = o.state.load(Ordering::Relaxed);
        loop {
            let mut n = s & !WRITER;
            if !info.have_more {
                n &= !WPARKED;
            }
            match o.state.compare_exchange_weak(s, n, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => {
                    after = n;
                    break;
                }
                Err(x) => s = x,
            }
        }
        TOKEN_NORMAL
    });
    if after & RPARKED != 0 {
        // A reader parked while we were deciding: let it compete too.
        wake_readers_retry(o);
    }
}

/// Gives a read lock to every parked reader, WRITER (owned by the caller) becoming
/// the first of them. False if no reader was parked (RPARKED is then clear and the
/// caller still owns WRITER).
fn hand_to_readers(o: &RwlockOverlay) -> bool {
    let mut handed = false;
    loop {
        let mut got = false;
        let mut more = false;
        parking::unpark_one(read_key(o), |info| {
            // Under the readers' bucket lock. The lock is alive: we own WRITER (first
            // round) or a reader is still queued on it (later rounds).
            if !info.unparked {
                if !handed {
                    o.state.fetch_and(!RPARKED, Ordering::Relaxed);
                }
                return TOKEN_NORMAL;
            }
            got = true;
            more = info.have_more;
            let mut s = o.state.load(Ordering::Relaxed);
            loop {
                if handed && s & WRITER != 0 {
                    // A writer took the lock after our read phase drained: this reader
                    // tries again (and parks again behind that writer).
                    if !more {
                        o.state.fetch_and(!RPARKED, Ordering::Relaxed);
                    }
                    more = false;
                    return TOKEN_NORMAL;
                }
                let mut n = (s + READER) & !WRITER;
                if !more {
                    n &= !RPARKED;
                }
                match o.state.compare_exchange_weak(s, n, Ordering::Release, Ordering::Relaxed) {
                    Ok(_) => return TOKEN_HANDOFF,
                    Err(x) => s = x,
                }
            }
        });
        if got {
            handed = true;
        }
        if !got || !more {
            return handed;
        }
    }
}

/// Wakes every parked reader to try again (not a hand-over).
fn wake_readers_retry(o: &RwlockOverlay) {
    parking::unpark_some(read_key(o), u32::MAX, usize::MAX, |n| {
        // Only if we dequeued somebody: then the lock is alive (they were queued), and
        // the queue is empty now.
        if n > 0 {
            o.state.fetch_and(!RPARKED, Ordering::Relaxed);
        }
    });
}
