//! Unnamed POSIX semaphores (`sem_t`) for fibers and threads, and the rule that sends
//! process-shared and named ones to glibc.
//!
//! # Layout
//!
//! On x86_64 glibc's `sem_t` (32 bytes, 8-aligned) holds a `struct new_sem`:
//!
//! | offset | glibc field | meaning                                                   |
//! |--------|-------------|-----------------------------------------------------------|
//! | 0      | `data`      | u64: the value in bits 0..31, registered waiters in 32..63 |
//! | 8      | `private`   | futex flag: `FUTEX_PRIVATE` (0) or `FUTEX_SHARED` (128)     |
//! | 12     | `pad`       | unused                                                     |
//!
//! Our private semaphores keep exactly this encoding, so `sem_getvalue` means the same
//! thing on both sides and a semaphore that glibc initialized as private works with
//! our functions too:
//!
//! | bits of `data` | name     | meaning                                                  |
//! |----------------|----------|----------------------------------------------------------|
//! | 0..31          | VALUE    | the tokens, 0..=SEM_VALUE_MAX (0x7fffffff)               |
//! | 32..63         | NWAITERS | waiters registered in the slow path (parked or about to)  |
//!
//! `sem_post` adds a token with a CAS (EOVERFLOW at SEM_VALUE_MAX) and, if NWAITERS was
//! nonzero in the value it replaced, unparks one waiter keyed by the semaphore's
//! address. A waiter that finds no token registers (NWAITERS += 1, an RMW on the same
//! word, so a later post sees it), then parks while VALUE is 0 (re-checked under the
//! bucket lock), and takes a token and unregisters in one CAS. Tokens are not handed
//! over: a woken waiter competes with newcomers, as in glibc.
//!
//! # Whose semaphore is it? (the delegation rule)
//!
//! Process-shared semaphores are glibc's, because other processes (which may not run
//! under the preload at all) operate on the same bytes with glibc's code and wait in
//! the kernel on shared futexes. They come from two places:
//!
//! * `real::sem_init(sem, pshared != 0, v)`: our `sem_init` passes these to glibc, which
//!   stores `private = FUTEX_SHARED`;
//! * `sem_open`: we do not interpose it (nor `sem_close`/`sem_unlink`); glibc builds
//!   the semaphore in a `/dev/shm/sem.*` file with `__new_sem_open_init`, which also
//!   stores `private = FUTEX_SHARED`, whichever process created the file.
//!
//! Beware glibc's inverted naming: `FUTEX_PRIVATE` is `LLL_PRIVATE` = **0** and
//! `FUTEX_SHARED` is `LLL_SHARED` = `FUTEX_PRIVATE_FLAG` = **128**. So a private
//! semaphore has `private == 0` and every shared or named one has `private == 128`.
//!
//! **Rule: `private != 0` ⇒ glibc's semaphore: every `sem_*` call goes to the real
//! function. Otherwise it is ours.** Our `sem_init` for a private semaphore writes
//! `private = 0` as glibc does; we need no extra marker, because the only semaphores
//! with `private == 0` are private ones (initialized by us, or by glibc with the same
//! encoding). The bytes of a shared semaphore are never written by us, so the rule
//! stays true for its whole life. (Addresses we cannot overlay, NULL or not 8-aligned,
//! also stay glibc's, from `sem_init` on; see `api::overlayable`.)
//!
//! A fiber that would block on a glibc semaphore runs the real `sem_wait` on its donor
//! OS thread (after a real `sem_trywait` fails), so no worker blocks in the kernel.
//!
//! # Differences from glibc
//!
//! The parking lot interrupts only futex waits on a signal so far, so a waiter in our
//! slow path does not yet fail with EINTR when a signal handler runs (glibc's does,
//! since `sem_wait` is never restarted); the code maps `ParkResult::Interrupted` to
//! EINTR for when it does. Our waits are not cancellation points. A deadline on CLOCK_REALTIME is converted to CLOCK_MONOTONIC
//! once, at the start of the wait (see [`crate::base::time`]).

use core::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use libc::{c_int, c_uint, clockid_t, sem_t, timespec};

use crate::base::time;
use crate::runtime::fibers::fiber::{self, WaitKind};
use crate::sync::parking::{self, ParkResult, TOKEN_NORMAL};

/// `SEM_VALUE_MAX` on Linux (INT_MAX).
pub const SEM_VALUE_MAX: u32 = 0x7fff_ffff;
/// The low half of glibc's 64-bit `data` word: the semaphore's value.
const VALUE_MASK: u64 = 0xffff_ffff;
/// One waiter in the high half of `data` (glibc's `SEM_NWAITERS_SHIFT` = 32).
const ONE_WAITER: u64 = 1 << 32;
/// glibc's `FUTEX_SHARED` (= `LLL_SHARED` = `FUTEX_PRIVATE_FLAG`).
pub const GLIBC_FUTEX_SHARED: i32 = 128;

/// Our view of glibc's `struct new_sem` at the start of a `sem_t`.
#[repr(C)]
pub struct SemOverlay {
    pub data: AtomicU64,
    pub private: AtomicI32,
    pub pad: AtomicI32,
}

const _: () = {
    assert!(core::mem::size_of::<SemOverlay>() <= core::mem::size_of::<sem_t>());
    assert!(core::mem::align_of::<SemOverlay>() <= core::mem::align_of::<sem_t>());
    assert!(core::mem::offset_of!(SemOverlay, private) == 8);
};

impl SemOverlay {
    /// # Safety
    /// `p` points to a live, 8-aligned `sem_t`.
    #[inline]
    pub unsafe fn from_ptr<'a>(p: *mut sem_t) -> &'a SemOverlay {
        // SAFETY: the first 16 bytes of the sem_t, all atomics (caller's contract).
        unsafe { &*(p as *const SemOverlay) }
    }

    #[inline]
    fn key(&self) -> usize {
        self as *const SemOverlay as usize
    }
}

#[inline]
fn value(d: u64) -> u32 {
    (d & VALUE_MASK) as u32
}

/// The delegation rule of the module docs.
#[inline]
pub fn is_delegated(s: &SemOverlay) -> bool {
    s.private.load(Ordering::Relaxed) != 0
}

/// `sem_init` of a private semaphore (the value was checked by the caller).
pub fn init(s: &SemOverlay, v: u32) {
    s.data.store(v as u64, Ordering::Relaxed);
    s.pad.store(0, Ordering::Relaxed);
    s.private.store(0, Ordering::Release);
}

/// Takes a token if there is one.
#[inline]
pub fn trywait(s: &SemOverlay) -> Result<(), c_int> {
    let mut d = s.data.load(Ordering::Relaxed);
    loop {
        if value(d) == 0 {
            return Err(libc::EAGAIN);
        }
        match s.data.compare_exchange_weak(d, d - 1, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return Ok(()),
            Err(x) => d = x,
        }
    }
}

/// A wait's (clock, abstime), already validated as glibc does; None waits forever.
pub type Timeout<'a> = Option<(clockid_t, &'a timespec)>;

/// `sem_wait` / `sem_timedwait` / `sem_clockwait` once the arguments were validated.
#[inline]
pub fn wait(s: &SemOverlay, timeout: Timeout<'_>) -> Result<(), c_int> {
    if trywait(s).is_ok() {
        return Ok(());
    }
    wait_slow(s, timeout)
}

#[cold]
fn wait_slow(s: &SemOverlay, timeout: Timeout<'_>) -> Result<(), c_int> {
    let deadline = match timeout {
        None => None,
        Some((clock, ts)) => Some(time::absolute_deadline(clock, ts)?),
    };
    let mut d = s.data.fetch_add(ONE_WAITER, Ordering::Relaxed) + ONE_WAITER;
    loop {
        if value(d) != 0 {
            match s.data.compare_exchange_weak(d, d - 1 - ONE_WAITER, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Ok(()),
                Err(x) => d = x,
            }
            continue;
        }
        let r = parking::park(
            s.key(),
            u32::MAX,
            WaitKind::Semaphore,
            || value(s.data.load(Ordering::SeqCst)) == 0,
            || {},
            |_| {},
            deadline,
        );
        let err = match r {
            ParkResult::TimedOut => libc::ETIMEDOUT,
            // glibc's sem_wait fails with EINTR when a signal handler runs: the parking
            // lot reports a signal delivered to a WaitKind::Semaphore wait.
            ParkResult::Interrupted => libc::EINTR,
            _ => {
                d = s.data.load(Ordering::Relaxed);
                continue;
            }
        };
        s.data.fetch_sub(ONE_WAITER, Ordering::Relaxed);
        // sem_wait is a cancellation point.
        crate::signal::cancel::testcancel();
        return Err(err);
    }
}

/// `sem_post`.
#[inline]
pub fn post(s: &SemOverlay) -> Result<(), c_int> {
    let key = s.key();
    let mut d = s.data.load(Ordering::Relaxed);
    loop {
        if value(d) >= SEM_VALUE_MAX {
            return Err(libc::EOVERFLOW);
        }
        match s.data.compare_exchange_weak(d, d + 1, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => break,
            Err(x) => d = x,
        }
    }
    if d >> 32 != 0 {
        // From here on the semaphore may already be destroyed by a waiter that took
        // our token: use its address only as the parking key.
        wake_one(key);
    }
    Ok(())
}

#[cold]
fn wake_one(key: usize) {
    parking::unpark_one(key, |_| TOKEN_NORMAL);
}

/// `sem_getvalue`: the number of tokens (never negative, as in glibc).
pub fn getvalue(s: &SemOverlay) -> c_int {
    value(s.data.load(Ordering::Relaxed)) as c_int
}

// ---------------------------------------------------------------------------------
// Entry points behind the `sem_*` exports. They return Ok/Err(errno); the exports
// turn that into glibc's -1/errno convention.
// ---------------------------------------------------------------------------------

pub mod api {
    use super::*;

    /// glibc's own functions (looked up with dlsym/dlvsym), for the objects and
    /// attributes the runtime leaves to glibc: `real::` always means glibc's.
    pub mod real {
        use super::*;
        crate::real_fns! {
            fn sem_init(s: *mut sem_t, pshared: c_int, v: c_uint) -> c_int;
            fn sem_destroy(s: *mut sem_t) -> c_int;
            fn sem_wait(s: *mut sem_t) -> c_int;
            fn sem_trywait(s: *mut sem_t) -> c_int;
            fn sem_timedwait(s: *mut sem_t, t: *const timespec) -> c_int;
            fn sem_clockwait(s: *mut sem_t, c: clockid_t, t: *const timespec) -> c_int;
            fn sem_post(s: *mut sem_t) -> c_int;
            fn sem_getvalue(s: *mut sem_t, v: *mut c_int) -> c_int;
        }
    }

    /// What an entry point did: our own result, or a real function's raw return value
    /// (which already set errno).
    pub enum Outcome {
        Ours(Result<(), c_int>),
        Real(c_int),
    }

    /// Whether we can overlay this address at all. NULL and misaligned semaphores stay
    /// glibc's from `sem_init` on (glibc crashes on NULL and copes with misalignment,
    /// exactly as natively); alignment is a property of the address, so every call on
    /// one semaphore takes the same side.
    #[inline]
    fn overlayable(s: *mut sem_t) -> bool {
        !s.is_null() && (s as usize).is_multiple_of(core::mem::align_of::<SemOverlay>())
    }

    /// Our semaphore, or None for glibc's (see the module docs and [`overlayable`]).
    ///
    /// # Safety
    /// `s` is NULL or points to a sem_t.
    #[inline]
    unsafe fn ours<'a>(s: *mut sem_t) -> Option<&'a SemOverlay> {
        if !overlayable(s) {
            return None;
        }
        // SAFETY: non-null and aligned; the program's sem_t (caller's contract).
        let o = unsafe { SemOverlay::from_ptr(s) };
        if is_delegated(o) {
            None
        } else {
            Some(o)
        }
    }

    #[inline]
    fn errno() -> c_int {
        // SAFETY: this thread's (fiber's) errno slot.
        unsafe { *libc::__errno_location() }
    }

    /// # Safety
    /// As `sem_init`.
    pub unsafe fn init(s: *mut sem_t, pshared: c_int, v: c_uint) -> Outcome {
        if v > SEM_VALUE_MAX {
            return Outcome::Ours(Err(libc::EINVAL));
        }
        if pshared != 0 || !overlayable(s) {
            // SAFETY: a semaphore we cannot overlay: glibc's sem_init gets the program's `s` (storage
            // for a sem_t, sem_init's contract).
            return Outcome::Real(unsafe { real::sem_init(s, pshared, v) });
        }
        // SAFETY: non-null and aligned; the program's sem_t.
        super::init(unsafe { SemOverlay::from_ptr(s) }, v);
        Outcome::Ours(Ok(()))
    }

    /// # Safety
    /// As `sem_destroy`.
    pub unsafe fn destroy(s: *mut sem_t) -> Outcome {
        // SAFETY: `s` is NULL or a sem_t (sem_destroy's contract), all `ours` asks.
        match unsafe { ours(s) } {
            Some(_) => Outcome::Ours(Ok(())),
            // SAFETY: glibc's semaphore: its sem_destroy gets the program's initialised, unused `s`.
            None => Outcome::Real(unsafe { real::sem_destroy(s) }),
        }
    }

    /// `sem_wait` (`timed` false), `sem_timedwait` (`clock` None) or `sem_clockwait`.
    ///
    /// # Safety
    /// As `sem_clockwait`.
    pub unsafe fn wait(s: *mut sem_t, clock: Option<clockid_t>, ts: *const timespec, timed: bool) -> Outcome {
        // SAFETY: `s` is NULL or a sem_t (sem_wait's contract), all `ours` asks.
        let Some(o) = (unsafe { ours(s) }) else {
            // SAFETY: glibc's semaphore and the program's `ts` (null or a timespec): sem_clockwait's
            // contract, which is `delegated_wait`'s.
            return Outcome::Real(unsafe { delegated_wait(s, clock, ts, timed) });
        };
        if !timed {
            return Outcome::Ours(super::wait(o, None));
        }
        // glibc's checks, before the fast path: sem_clockwait checks the clock, then
        // both check tv_nsec. (glibc would crash on NULL; we report EINVAL.)
        let clk = clock.unwrap_or(libc::CLOCK_REALTIME);
        if !time::supported_clock(clk) {
            return Outcome::Ours(Err(libc::EINVAL));
        }
        // SAFETY: the program's timespec pointer or NULL.
        match unsafe { ts.as_ref() } {
            Some(t) if time::valid(t) => Outcome::Ours(super::wait(o, Some((clk, t)))),
            _ => Outcome::Ours(Err(libc::EINVAL)),
        }
    }

    /// # Safety
    /// As `sem_clockwait`, on a glibc semaphore.
    unsafe fn delegated_wait(s: *mut sem_t, clock: Option<clockid_t>, ts: *const timespec, timed: bool) -> c_int {
        // SAFETY (all calls): `s` is a glibc semaphore the program initialised and `ts` null or a
        // timespec (sem_clockwait's contract, this fn's # Safety), what glibc's waits require.
        let block = || unsafe {
            match (timed, clock) {
                (false, _) => real::sem_wait(s),
                (true, None) => real::sem_timedwait(s, ts),
                (true, Some(c)) => real::sem_clockwait(s, c, ts),
            }
        };
        if !fiber::is_fiber() || s.is_null() {
            return block();
        }
        // Try first, unless glibc would reject the arguments before trying.
        // SAFETY: the program's timespec pointer or NULL.
        let args_ok = !timed
            || (time::supported_clock(clock.unwrap_or(libc::CLOCK_REALTIME)) && unsafe { ts.as_ref() }.is_some_and(time::valid));
        if !args_ok {
            return block(); // glibc fails with EINVAL at once
        }
        // SAFETY: `s` is a glibc semaphore the program initialised (this fn's # Safety), as
        // sem_trywait requires.
        let r = unsafe { real::sem_trywait(s) };
        if r == 0 || errno() != libc::EAGAIN {
            return r;
        }
        // The donor shares the fiber's TCB, so errno set there is the fiber's errno.
        crate::signal::on_donor::run_on_donor_taking_signals(block)
    }

    /// # Safety
    /// As `sem_trywait`.
    pub unsafe fn trywait(s: *mut sem_t) -> Outcome {
        // SAFETY: `s` is NULL or a sem_t (sem_trywait's contract), all `ours` asks.
        match unsafe { ours(s) } {
            Some(o) => Outcome::Ours(super::trywait(o)),
            // SAFETY: glibc's semaphore: its sem_trywait gets the program's initialised `s`.
            None => Outcome::Real(unsafe { real::sem_trywait(s) }),
        }
    }

    /// # Safety
    /// As `sem_post`.
    pub unsafe fn post(s: *mut sem_t) -> Outcome {
        // SAFETY: `s` is NULL or a sem_t (sem_post's contract), all `ours` asks.
        match unsafe { ours(s) } {
            Some(o) => Outcome::Ours(super::post(o)),
            // SAFETY: glibc's semaphore: its sem_post gets the program's initialised `s`.
            None => Outcome::Real(unsafe { real::sem_post(s) }),
        }
    }

    /// # Safety
    /// As `sem_getvalue`.
    pub unsafe fn getvalue(s: *mut sem_t, out: *mut c_int) -> Outcome {
        // SAFETY: `s` is NULL or a sem_t (sem_getvalue's contract), all `ours` asks.
        match unsafe { ours(s) } {
            Some(o) if !out.is_null() => {
                // SAFETY: the program's out-pointer.
                unsafe { *out = super::getvalue(o) };
                Outcome::Ours(Ok(()))
            }
            // SAFETY: glibc's semaphore and `out` as the program passed it (sem_getvalue's contract); a
            // NULL `out` crashes glibc as it would natively.
            _ => Outcome::Real(unsafe { real::sem_getvalue(s, out) }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    struct Sem(Box<sem_t>);
    // SAFETY: accessed only through the overlay's atomics.
    unsafe impl Send for Sem {}
    // SAFETY: as above.
    unsafe impl Sync for Sem {}
    impl Sem {
        fn new(v: u32) -> Sem {
            // SAFETY: zero bytes are a valid sem_t to overwrite.
            let s = Sem(Box::new(unsafe { core::mem::zeroed() }));
            init(s.o(), v);
            s
        }
        fn o(&self) -> &SemOverlay {
            // SAFETY: a live, 8-aligned sem_t.
            unsafe { SemOverlay::from_ptr(&*self.0 as *const sem_t as *mut sem_t) }
        }
    }

    #[test]
    fn tokens_and_errors() {
        let s = Sem::new(0);
        let o = s.o();
        assert!(!is_delegated(o));
        assert_eq!(trywait(o), Err(libc::EAGAIN));
        let past = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        assert_eq!(wait(o, Some((libc::CLOCK_REALTIME, &past))), Err(libc::ETIMEDOUT));
        assert_eq!(o.data.load(Ordering::Relaxed), 0, "a timed-out waiter unregisters");
        assert_eq!(post(o), Ok(()));
        assert_eq!(getvalue(o), 1);
        assert_eq!(wait(o, Some((libc::CLOCK_MONOTONIC, &past))), Ok(()));
        let m = Sem::new(SEM_VALUE_MAX);
        assert_eq!(post(m.o()), Err(libc::EOVERFLOW));
        assert_eq!(getvalue(m.o()), SEM_VALUE_MAX as c_int);
    }

    #[test]
    fn shared_semaphores_are_glibcs() {
        let s = Sem::new(0);
        s.o().private.store(GLIBC_FUTEX_SHARED, Ordering::Relaxed);
        assert!(is_delegated(s.o()));
    }

    #[test]
    fn producers_and_consumers() {
        let s = Arc::new(Sem::new(0));
        let consumers: Vec<_> = (0..4)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for _ in 0..5000 {
                        assert_eq!(wait(s.o(), None), Ok(()));
                    }
                })
            })
            .collect();
        let producers: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for _ in 0..10000 {
                        assert_eq!(post(s.o()), Ok(()));
                    }
                })
            })
            .collect();
        for h in producers.into_iter().chain(consumers) {
            h.join().unwrap();
        }
        assert_eq!(s.o().data.load(Ordering::Relaxed), 0);
    }
}
