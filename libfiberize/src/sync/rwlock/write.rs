//! Write locks: glibc's argument and owner checks, the owner identity (`writer`) and
//! error codes around the state word's protocol ([`super::word`]).

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
    if !word::try_write_uncontended(&o.state) {
        let r = status(word::write_lock_contended(&o.state, &LotQueues::new(o, timeout)));
        if r != 0 {
            return r;
        }
    }
    o.writer.store(me, Ordering::Relaxed);
    0
}

/// `pthread_rwlock_trywrlock`.
pub fn trywrlock(o: &RwlockOverlay) -> c_int {
    if let Err(e) = word::try_write(&o.state) {
        return errno_of(e);
    }
    o.writer.store(self_id(), Ordering::Relaxed);
    0
}

/// Write unlock (the caller is the writer).
#[inline]
pub(super) fn write_unlock(o: &RwlockOverlay) {
    o.writer.store(0, Ordering::Relaxed);
    word::write_unlock(&o.state, o.flags.load(Ordering::Relaxed), &LotQueues::new(o, None));
}
