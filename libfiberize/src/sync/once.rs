//! `pthread_once` (and C11 `call_once`) for fibers and threads.
//!
//! # Who runs the routine: glibc
//!
//! The routine itself is run by glibc's real `pthread_once`, because only glibc can
//! keep glibc's behaviour when it does not return: if the routine is cancelled, calls
//! `pthread_exit`, or throws a C++ exception, glibc's cleanup handler (compiled with
//! `-fexceptions`) resets the control word to 0 so that another caller runs the
//! routine again, and the unwinding continues through our frames (which have unwind
//! tables and no landing pads) to the program's handler. What glibc cannot do for us
//! is *waiting*: a concurrent caller inside glibc's `pthread_once` sleeps on a kernel
//! futex, which would block a fiber's worker. So we decide, before glibc sees the
//! word, that exactly one caller enters glibc and everybody else parks with us.
//!
//! # Control word (`pthread_once_t`, an `int`)
//!
//! | value                  | written by | meaning                                      |
//! |------------------------|------------|----------------------------------------------|
//! | 0                      | init, glibc's cleanup | not run yet (or the run was unwound) |
//! | CLAIMED (`INT_MIN`)    | us         | one caller won the right to enter glibc      |
//! | `gen | 1` (bit 0)      | glibc      | glibc runs the routine (gen: fork generation, bits 2..) |
//! | 2 (bit 1)              | glibc      | done                                         |
//!
//! CLAIMED has bits 0 and 1 clear, so glibc reads it as "not started" and takes it
//! over with its CAS; nobody else calls glibc's `pthread_once` on this word while it
//! is claimed or in progress.
//!
//! A caller that finds the word 0 (or any value glibc would also take over: neither
//! done, nor in progress, nor CLAIMED) CASes it to CLAIMED, calls the real
//! `pthread_once`, and on return unparks everybody parked on the word's address.
//! Others park there while the word keeps the value they saw (re-checked under the
//! bucket lock, with the Dekker fence of [`parking::unpark_some_quick`]).
//!
//! # Abnormal ends
//!
//! When the routine is unwound, glibc writes 0 and wakes the kernel futex, where
//! nobody waits: our parked waiters would not learn of it. So they park with a
//! timeout and look again: 1 ms at first, doubling up to 64 ms. A normal completion
//! wakes them at once; an unwound one is noticed within that poll period, and one of
//! them runs the routine, as in glibc.
//!
//! Recursion for *different* once objects nests naturally (each has its own word and
//! its own glibc call); recursion on the *same* object deadlocks, as in glibc.
//!
//! # fork
//!
//! In a forked child there are no fibers and no workers: every call goes straight to
//! glibc, which knows its fork generation and reclaims a run interrupted by the fork
//! (a CLAIMED word, left by a parent thread that did not survive, is "not started" to
//! glibc too).

use core::sync::atomic::{AtomicI32, Ordering};

use libc::{c_int, pthread_once_t};

use crate::base::config;
use crate::base::sys;
use crate::runtime::fibers::fiber::WaitKind;
use crate::sync::parking;

/// glibc's `__PTHREAD_ONCE_INPROGRESS`.
pub const INPROGRESS: i32 = 1;
/// glibc's `__PTHREAD_ONCE_DONE`.
pub const DONE: i32 = 2;
/// Ours: a caller is about to run the routine through glibc.
pub const CLAIMED: i32 = i32::MIN;

/// First poll period of a parked waiter (see "Abnormal ends"). Origin: short enough
/// that a retried run after an exception is not noticeably late, long enough that a
/// waiter costs nothing measurable while a slow routine runs.
const POLL_MIN_NS: u64 = 1_000_000;
/// Longest poll period. Origin: bounds the delay after an unwound run to < 0.1 s.
const POLL_MAX_NS: u64 = 64_000_000;

pub type InitRoutine = unsafe extern "C" fn();

/// glibc's own functions (looked up with dlsym/dlvsym), for the objects and
/// attributes the runtime leaves to glibc: `real::` always means glibc's.
pub mod real {
    use super::*;
    crate::real_fns! {
        fn pthread_once(o: *mut pthread_once_t, f: InitRoutine) -> c_int;
        fn call_once(o: *mut pthread_once_t, f: InitRoutine) -> ();
    }
}

/// `pthread_once`.
///
/// # Safety
/// As glibc's `pthread_once`: `ctl` points to a `pthread_once_t` and `init` is a
/// function the program may call.
#[inline]
pub unsafe fn once(ctl: *mut pthread_once_t, init: InitRoutine) -> c_int {
    if ctl.is_null() || !(ctl as usize).is_multiple_of(core::mem::align_of::<AtomicI32>()) {
        // Not overlayable: glibc's, as natively (it crashes on NULL).
        // SAFETY: not overlayable: glibc's pthread_once gets the program's `ctl` and `init`, as
        // natively (it crashes on NULL).
        return unsafe { real::pthread_once(ctl, init) };
    }
    // SAFETY: a non-null, aligned int that lives as long as the program uses it.
    let word = unsafe { &*(ctl as *const AtomicI32) };
    if word.load(Ordering::Acquire) & DONE != 0 {
        return 0;
    }
    // SAFETY: `ctl` is the program's pthread_once_t and `init` its routine (pthread_once's
    // contract), `once_slow`'s contract; `word` is `ctl` as an atomic.
    unsafe { once_slow(ctl, word, init) }
}

/// # Safety
/// As [`once`].
#[cold]
unsafe fn once_slow(ctl: *mut pthread_once_t, word: &AtomicI32, init: InitRoutine) -> c_int {
    if config::in_forked_child() {
        // SAFETY: in a forked child: glibc's pthread_once gets the program's `ctl` and `init`, valid
        // per its contract.
        return unsafe { real::pthread_once(ctl, init) };
    }
    let key = ctl as usize;
    let mut poll = POLL_MIN_NS;
    loop {
        let v = word.load(Ordering::Acquire);
        if v & DONE != 0 {
            return 0;
        }
        if v & INPROGRESS == 0 && v != CLAIMED {
            if word.compare_exchange(v, CLAIMED, Ordering::Acquire, Ordering::Acquire).is_err() {
                continue;
            }
            // SAFETY: `ctl` and `init` are the program's, valid per pthread_once's contract; glibc takes
            // the CLAIMED word over and runs `init`; if `init` is unwound, so is this frame (see the
            // module docs).
            let r = unsafe { real::pthread_once(ctl, init) };
            parking::unpark_some_quick(key, u32::MAX, usize::MAX);
            return r;
        }
        let deadline = sys::now_ns().saturating_add(poll);
        poll = (poll * 2).min(POLL_MAX_NS);
        parking::park(key, u32::MAX, WaitKind::Once, || word.load(Ordering::SeqCst) == v, || {}, |_| {}, Some(deadline));
    }
}
