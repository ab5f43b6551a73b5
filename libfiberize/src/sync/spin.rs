//! `pthread_spinlock_t` that lets other fibers run while it spins.
//!
//! A spinlock is an `int` with glibc's own x86_64 encoding
//! (`sysdeps/x86_64/nptl/pthread_spin_*.S`), which we keep unchanged:
//!
//! | value | meaning                                                        |
//! |-------|----------------------------------------------------------------|
//! | 1     | unlocked (`init` and `unlock` store 1)                          |
//! | ≤ 0   | locked; each failed `lock` attempt decremented it once more     |
//!
//! `lock` atomically decrements and owns the lock if the old value was 1; otherwise
//! it waits until the value is positive again and retries. `trylock` is a CAS 1 → 0
//! (EBUSY if that fails). Note that a zero-filled spinlock is *locked*, as in glibc.
//! Because the encoding and the operations are glibc's, process-shared spinlocks
//! need no delegation: another process running glibc's code interoperates with ours.
//!
//! On aarch64 glibc uses its generic encoding (`nptl/pthread_spin_*.c`), and so do we
//! there: 0 unlocked (a zero-filled spinlock is *unlocked*), 1 locked; `lock` is an
//! exchange with 1 that owns the lock if the old value was 0, `trylock` a CAS 0 → 1.
//! The two encodings are the [`encoding`] module, one per architecture.
//!
//! The only difference is what a waiter does while the lock is held. glibc spins
//! forever; a fiber that did so would hold its worker, and if the owner is a fiber
//! queued on that same worker it would never run (docs/DESIGN.md §2.8, "Spin-waits"). So after
//! a short spin a waiter yields: a fiber through the scheduler (to the back of its
//! worker's queue, where the owner may be waiting to run), a plain thread with the
//! real `sched_yield`. Like glibc, we detect no self-deadlock and no bad unlock.

use core::sync::atomic::{AtomicI32, Ordering};

use libc::{c_int, pthread_spinlock_t};

use crate::base::real::sched_yield;
use crate::base::sys;
use crate::runtime::fibers::fiber;
use crate::runtime::scheduler;

/// Relaxed loads between yields. Origin: a spinlock's critical section is meant to be
/// a handful of instructions; ~100 pauses (a few µs) cover an owner running on another
/// CPU, beyond that the owner is most likely descheduled.
const SPINS_BEFORE_YIELD: u32 = 100;
pub use encoding::UNLOCKED;

/// glibc's encoding of a spinlock on this architecture (see the module docs).
#[cfg(target_arch = "x86_64")]
mod encoding {
    use core::sync::atomic::{AtomicI32, Ordering};
    /// glibc's x86_64 "unlocked" value.
    pub const UNLOCKED: i32 = 1;
    /// One attempt of `lock`: decrement; owned if the old value was [`UNLOCKED`].
    #[inline]
    pub fn try_take(w: &AtomicI32) -> bool {
        w.fetch_sub(1, Ordering::Acquire) == UNLOCKED
    }
    /// Whether a value means "held" (waiters spin while it does).
    #[inline]
    pub fn is_held(v: i32) -> bool {
        v <= 0
    }
    /// The value `trylock` stores when it takes the lock.
    pub const TAKEN: i32 = 0;
}

/// glibc's generic encoding, used on aarch64.
#[cfg(target_arch = "aarch64")]
mod encoding {
    use core::sync::atomic::{AtomicI32, Ordering};
    /// glibc's generic "unlocked" value.
    pub const UNLOCKED: i32 = 0;
    /// One attempt of `lock`: exchange with [`TAKEN`]; owned if it was [`UNLOCKED`].
    #[inline]
    pub fn try_take(w: &AtomicI32) -> bool {
        w.swap(TAKEN, Ordering::Acquire) == UNLOCKED
    }
    /// Whether a value means "held" (waiters spin while it does).
    #[inline]
    pub fn is_held(v: i32) -> bool {
        v != UNLOCKED
    }
    /// The value a taken lock holds.
    pub const TAKEN: i32 = 1;
}

/// glibc's own functions (looked up with dlsym/dlvsym), for the objects and
/// attributes the runtime leaves to glibc: `real::` always means glibc's.
pub mod real {
    use super::*;
    crate::real_fns! {
        fn pthread_spin_init(l: *mut pthread_spinlock_t, pshared: c_int) -> c_int;
        fn pthread_spin_lock(l: *mut pthread_spinlock_t) -> c_int;
        fn pthread_spin_trylock(l: *mut pthread_spinlock_t) -> c_int;
        fn pthread_spin_unlock(l: *mut pthread_spinlock_t) -> c_int;
        fn pthread_spin_destroy(l: *mut pthread_spinlock_t) -> c_int;
    }
}

/// The lock word, or None for an address we cannot overlay (NULL or misaligned:
/// glibc's functions then run, crashing or coping exactly as natively).
///
/// # Safety
/// `l` is NULL or points to a live `pthread_spinlock_t`.
#[inline]
unsafe fn word<'a>(l: *mut pthread_spinlock_t) -> Option<&'a AtomicI32> {
    if l.is_null() || !(l as usize).is_multiple_of(core::mem::align_of::<AtomicI32>()) {
        return None;
    }
    // SAFETY: a non-null, aligned int (caller's contract), accessed atomically by all.
    Some(unsafe { &*(l as *const AtomicI32) })
}

/// `pthread_spin_init` (the `pshared` flag changes nothing, as in glibc).
///
/// # Safety
/// As glibc's.
pub unsafe fn init(l: *mut pthread_spinlock_t, pshared: c_int) -> c_int {
    // SAFETY: `l` is NULL or storage for a pthread_spinlock_t (pthread_spin_init's contract),
    // all `word` asks.
    match unsafe { word(l) } {
        Some(w) => w.store(UNLOCKED, Ordering::Relaxed),
        // SAFETY: an address we do not use as a word: glibc's init gets the program's `l`.
        None => return unsafe { real::pthread_spin_init(l, pshared) },
    }
    0
}

/// `pthread_spin_lock`.
///
/// # Safety
/// As glibc's.
#[inline]
pub unsafe fn lock(l: *mut pthread_spinlock_t) -> c_int {
    // SAFETY: `l` is NULL or an initialised spinlock (pthread_spin_lock's contract), all `word`
    // asks.
    let Some(w) = (unsafe { word(l) }) else {
        // SAFETY: an address we do not use as a word: glibc's lock gets the program's `l`.
        return unsafe { real::pthread_spin_lock(l) };
    };
    if encoding::try_take(w) {
        return 0;
    }
    lock_slow(w);
    0
}

#[cold]
fn lock_slow(w: &AtomicI32) {
    loop {
        let mut spins = 0;
        while encoding::is_held(w.load(Ordering::Relaxed)) {
            if spins == SPINS_BEFORE_YIELD {
                yield_now();
                spins = 0;
            } else {
                sys::cpu_relax();
                spins += 1;
            }
        }
        if encoding::try_take(w) {
            return;
        }
    }
}

fn yield_now() {
    if fiber::is_fiber() {
        scheduler::yield_now();
    } else {
        // SAFETY: no arguments.
        unsafe { sched_yield() };
    }
}

/// `pthread_spin_trylock`.
///
/// # Safety
/// As glibc's.
#[inline]
pub unsafe fn trylock(l: *mut pthread_spinlock_t) -> c_int {
    // SAFETY: `l` is NULL or an initialised spinlock (pthread_spin_trylock's contract), all
    // `word` asks.
    let Some(w) = (unsafe { word(l) }) else {
        // SAFETY: an address we do not use as a word: glibc's trylock gets the program's `l`.
        return unsafe { real::pthread_spin_trylock(l) };
    };
    match w.compare_exchange(UNLOCKED, encoding::TAKEN, Ordering::Acquire, Ordering::Relaxed) {
        Ok(_) => 0,
        Err(_) => libc::EBUSY,
    }
}

/// `pthread_spin_unlock`.
///
/// # Safety
/// As glibc's.
#[inline]
pub unsafe fn unlock(l: *mut pthread_spinlock_t) -> c_int {
    // SAFETY: `l` is NULL or a spinlock the caller holds (pthread_spin_unlock's contract), all
    // `word` asks.
    match unsafe { word(l) } {
        Some(w) => w.store(UNLOCKED, Ordering::Release),
        // SAFETY: an address we do not use as a word: glibc's unlock gets the program's `l`.
        None => return unsafe { real::pthread_spin_unlock(l) },
    }
    0
}

/// `pthread_spin_destroy`: nothing to do, as in glibc.
pub fn destroy(_l: *mut pthread_spinlock_t) -> c_int {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn glibc_x86_64_encoding() {
        let mut l: pthread_spinlock_t = 0;
        // SAFETY: a live, aligned spinlock on our stack.
        unsafe {
            assert_eq!(trylock(&mut l), libc::EBUSY, "zero means locked on x86_64");
            assert_eq!(init(&mut l, 0), 0);
            assert_eq!(l, UNLOCKED);
            assert_eq!(lock(&mut l), 0);
            assert_eq!(l, 0);
            assert_eq!(trylock(&mut l), libc::EBUSY);
            assert_eq!(unlock(&mut l), 0);
            assert_eq!(l, UNLOCKED);
        }
    }

    #[test]
    #[cfg(target_arch = "aarch64")]
    fn glibc_generic_encoding() {
        let mut l: pthread_spinlock_t = 0;
        // SAFETY: a live, aligned spinlock on our stack.
        unsafe {
            assert_eq!(trylock(&mut l), 0, "zero means unlocked in glibc's generic encoding");
            assert_eq!(l, 1);
            assert_eq!(trylock(&mut l), libc::EBUSY);
            assert_eq!(unlock(&mut l), 0);
            assert_eq!(l, UNLOCKED);
            assert_eq!(init(&mut l, 0), 0);
            assert_eq!(lock(&mut l), 0);
            assert_eq!(l, 1);
            assert_eq!(unlock(&mut l), 0);
        }
    }
}
