//! Read locks: glibc's argument and owner checks and error codes around the state
//! word's protocol ([`super::word`]).

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
    if word::try_read_uncontended(&o.state) {
        return 0;
    }
    let kind = o.flags.load(Ordering::Relaxed);
    status(word::read_lock_contended(&o.state, kind, &LotQueues::new(o, timeout)))
}

/// `pthread_rwlock_tryrdlock`.
pub fn tryrdlock(o: &RwlockOverlay) -> c_int {
    status(word::try_read(&o.state, o.flags.load(Ordering::Relaxed)))
}

/// Read unlock (the caller is not the writer).
pub(super) fn read_unlock(o: &RwlockOverlay) -> c_int {
    status(word::read_unlock(&o.state, o.flags.load(Ordering::Relaxed), &LotQueues::new(o, None)))
}
