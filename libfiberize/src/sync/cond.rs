//! `pthread_cond_t` for fibers and threads, in the program's own 48 bytes.
//!
//! Waiters queue in the parking lot under the condition variable's address. The
//! waiter is queued (under the bucket lock) *before* it releases the mutex, so a
//! signal sent by anyone who acquires the mutex afterwards finds it: no lost wake-up.
//! `waiters` (`CondOverlay::waiters`) counts queued waiters; it changes only under the
//! bucket lock, and lets `signal`/`broadcast` return without locking when nobody waits.
//! Clock and process-shared flags stay where glibc's `pthread_cond_init` puts them
//! (`__wrefs` bit 1 = CLOCK_MONOTONIC, bit 0 = shared); shared ones go to glibc.

use core::sync::atomic::Ordering;

use crate::base::layout::CondOverlay;
use libc::{c_int, clockid_t, pthread_cond_t, pthread_condattr_t, pthread_mutex_t, timespec};

use crate::base::time;
use crate::runtime::fibers::fiber::WaitKind;
use crate::sync::mutex;
use crate::sync::parking::{self, ParkResult};

/// `CondOverlay::flags`: process-shared (glibc keeps it; see `init`).
const FLAG_SHARED: u32 = 1;
/// `CondOverlay::flags`: timed waits measure against CLOCK_MONOTONIC
/// (`pthread_condattr_setclock`), else CLOCK_REALTIME.
const FLAG_MONOTONIC: u32 = 2;

/// glibc's own functions (looked up with dlsym/dlvsym), for the objects and
/// attributes the runtime leaves to glibc: `real::` always means glibc's.
pub mod real {
    use super::*;
    crate::real_fns! {
        @"GLIBC_2.3.2" fn pthread_cond_init(c: *mut pthread_cond_t, a: *const pthread_condattr_t) -> c_int;
        @"GLIBC_2.3.2" fn pthread_cond_wait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t) -> c_int;
        @"GLIBC_2.3.2" fn pthread_cond_timedwait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t, t: *const timespec) -> c_int;
        fn pthread_cond_clockwait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t, clock: clockid_t, t: *const timespec) -> c_int;
        @"GLIBC_2.3.2" fn pthread_cond_signal(c: *mut pthread_cond_t) -> c_int;
        @"GLIBC_2.3.2" fn pthread_cond_broadcast(c: *mut pthread_cond_t) -> c_int;
        @"GLIBC_2.3.2" fn pthread_cond_destroy(c: *mut pthread_cond_t) -> c_int;
        fn pthread_condattr_getclock(a: *const pthread_condattr_t, c: *mut clockid_t) -> c_int;
        fn pthread_condattr_getpshared(a: *const pthread_condattr_t, p: *mut c_int) -> c_int;
    }
}

/// # Safety
/// `c` points to a pthread_cond_t.
#[inline]
unsafe fn overlay<'a>(c: *mut pthread_cond_t) -> &'a CondOverlay {
    // SAFETY: same bytes and alignment (checked in glibc-layout).
    unsafe { CondOverlay::from_ptr(c) }
}

#[inline]
fn is_shared(c: &CondOverlay) -> bool {
    c.flags.load(Ordering::Relaxed) & FLAG_SHARED != 0
}

/// # Safety
/// As `pthread_cond_init`.
pub unsafe fn init(c: *mut pthread_cond_t, attr: *const pthread_condattr_t) -> c_int {
    if c.is_null() {
        return libc::EINVAL;
    }
    let mut flags = 0;
    if !attr.is_null() {
        let (mut clock, mut pshared) = (libc::CLOCK_REALTIME, 0);
        // SAFETY: the program's initialized attribute object.
        unsafe {
            real::pthread_condattr_getclock(attr, &mut clock);
            real::pthread_condattr_getpshared(attr, &mut pshared);
        }
        if pshared != libc::PTHREAD_PROCESS_PRIVATE {
            // SAFETY: `c` is storage for a pthread_cond_t and `attr` null or initialised
            // (pthread_cond_init's contract, this fn's # Safety), as glibc's init requires.
            return unsafe { real::pthread_cond_init(c, attr) };
        }
        if clock == libc::CLOCK_MONOTONIC {
            flags |= FLAG_MONOTONIC;
        }
    }
    // SAFETY: the program owns the 48 bytes; we fill them as pthread_cond_init would.
    unsafe { core::ptr::write_bytes(c as *mut u8, 0, core::mem::size_of::<pthread_cond_t>()) };
    // SAFETY: as above.
    unsafe { overlay(c) }.flags.store(flags, Ordering::Release);
    0
}

/// The CLOCK_MONOTONIC deadline of a wait (None: untimed), or the error number.
/// `clock` None: the condvar's own clock.
///
/// # Safety
/// `abstime` is null or a valid timespec.
unsafe fn wait_deadline(o: &CondOverlay, abstime: *const timespec, clock: Option<clockid_t>) -> Result<Option<u64>, c_int> {
    if abstime.is_null() {
        return Ok(None);
    }
    let clk = match clock {
        Some(k) if !time::supported_clock(k) => return Err(libc::EINVAL),
        Some(k) => k,
        None if o.flags.load(Ordering::Relaxed) & FLAG_MONOTONIC != 0 => libc::CLOCK_MONOTONIC,
        None => libc::CLOCK_REALTIME,
    };
    // SAFETY: non-null timespec from the program (caller's contract).
    time::absolute_deadline(clk, unsafe { &*abstime }).map(Some)
}

/// `pthread_cond_wait`/`timedwait`/`clockwait`. `clock` None: the condvar's own clock.
///
/// # Safety
/// As `pthread_cond_timedwait`.
pub unsafe fn wait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t, abstime: *const timespec, clock: Option<clockid_t>) -> c_int {
    // SAFETY: `c` points to a pthread_cond_t (pthread_cond_wait's contract), which is all
    // `overlay` asks.
    let o = unsafe { overlay(c) };
    if is_shared(o) {
        if let Some(me) = crate::runtime::fibers::fiber::current() {
            // SAFETY: `c` initialised, `m` held by the caller, `abstime` null or a timespec (this fn's #
            // Safety, pthread_cond_timedwait's contract), which `shared_wait_for_fiber` requires.
            return unsafe { shared_wait_for_fiber(me, o, c, m, abstime, clock) };
        }
        // SAFETY: a process-shared condition on a plain thread: glibc gets the program's `c`, held
        // `m` and `abstime`, valid per its contract.
        return unsafe {
            match (abstime.is_null(), clock) {
                (true, _) => real::pthread_cond_wait(c, m),
                (false, None) => real::pthread_cond_timedwait(c, m, abstime),
                (false, Some(k)) => real::pthread_cond_clockwait(c, m, k, abstime),
            }
        };
    }
    // SAFETY: `abstime` is null or a readable timespec (pthread_cond_timedwait's contract), what
    // `wait_deadline` reads.
    let deadline = match unsafe { wait_deadline(o, abstime, clock) } {
        Ok(d) => d,
        Err(e) => return e,
    };
    // SAFETY: `m` points to a pthread_mutex_t (pthread_cond_wait's contract), what
    // `check_owner_for_wait` requires.
    let e = unsafe { mutex::api::check_owner_for_wait(m) };
    if e != 0 {
        return e;
    }
    let key = o as *const CondOverlay as usize;
    let r = parking::park(
        key,
        u32::MAX,
        WaitKind::Cond,
        || {
            o.waiters.fetch_add(1, Ordering::Relaxed);
            true
        },
        || {
            let me = crate::runtime::fibers::fiber::current();
            me.inspect(|f| f.unlocking_to_park.set(true));
            // SAFETY: the caller owns `m` (checked above for the types that can tell).
            unsafe { mutex::api::unlock(m) };
            me.inspect(|f| f.unlocking_to_park.set(false));
        },
        |_| {
            o.waiters.fetch_sub(1, Ordering::Relaxed);
        },
        deadline,
    );
    // Re-acquire as glibc does, whatever happened (a recursive mutex gets back the one
    // level its unlock removed).
    // SAFETY: `m` is the initialised mutex the caller held when it called wait
    // (pthread_cond_wait's contract), as `mutex::api::lock` requires.
    unsafe { mutex::api::lock(m) };
    // A cancelled waiter leaves with the mutex held, as POSIX requires for cleanup
    // handlers.
    crate::signal::cancel::testcancel();
    if r == ParkResult::TimedOut {
        libc::ETIMEDOUT
    } else {
        0
    }
}

/// A fiber's wait on a process-shared condvar sleeps in glibc for at most this long
/// before it returns (a spurious wake-up, which POSIX allows and callers loop on), so
/// that a cancellation request is seen.
const SHARED_WAIT_SLICE_NS: u64 = crate::signal::cancel::DONOR_WAIT_SLICE_NS;

/// A fiber waiting on a process-shared condvar (glibc's object): the wait runs on the
/// fiber's donor, so it never blocks a worker, in slices so that `pthread_cancel`
/// reaches it. A slice that ends without a wake-up returns 0 (spurious); the caller's
/// own deadline, if earlier, is waited for exactly.
///
/// # Safety
/// As `pthread_cond_timedwait`.
unsafe fn shared_wait_for_fiber(
    me: &crate::runtime::fibers::fiber::Fiber,
    o: &CondOverlay,
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    abstime: *const timespec,
    clock: Option<clockid_t>,
) -> c_int {
    // SAFETY: `abstime` is null or a readable timespec (this fn's # Safety:
    // pthread_cond_timedwait's contract), what `wait_deadline` reads.
    let user_deadline = match unsafe { wait_deadline(o, abstime, clock) } {
        Ok(d) => d,
        Err(e) => return e,
    };
    let cancellable = !me.cancel.is_disabled();
    let r = crate::signal::on_donor::run_on_donor_taking_signals(|| {
        let now = crate::base::sys::now_ns();
        let (end, last) = match user_deadline {
            Some(d) if !cancellable || d <= now + SHARED_WAIT_SLICE_NS => (d, true),
            _ if !cancellable => return unsafe { real::pthread_cond_wait(c, m) },
            _ => (now + SHARED_WAIT_SLICE_NS, false),
        };
        let ts = crate::base::sys::ns_to_timespec(end);
        // SAFETY: `c` is an initialised process-shared condition and `m` the mutex the caller holds
        // (pthread_cond_wait's contract); `ts` is our own CLOCK_MONOTONIC deadline.
        let r = unsafe { real::pthread_cond_clockwait(c, m, libc::CLOCK_MONOTONIC, &ts) };
        if r == libc::ETIMEDOUT && !last {
            0
        } else {
            r
        }
    });
    // Cancelled meanwhile: leave with the mutex held, as glibc's cancellation does.
    crate::signal::cancel::testcancel();
    r
}

/// # Safety
/// As `pthread_cond_signal`.
pub unsafe fn signal(c: *mut pthread_cond_t) -> c_int {
    // SAFETY: `c` points to a pthread_cond_t (pthread_cond_signal's contract), all `overlay`
    // asks.
    let o = unsafe { overlay(c) };
    if is_shared(o) {
        // SAFETY: a process-shared condition: glibc's signal gets the program's initialised `c`.
        return unsafe { real::pthread_cond_signal(c) };
    }
    if o.waiters.load(Ordering::SeqCst) == 0 {
        return 0;
    }
    parking::unpark_one(o as *const CondOverlay as usize, |info| {
        if info.unparked {
            o.waiters.fetch_sub(1, Ordering::Relaxed);
        }
        parking::TOKEN_NORMAL
    });
    0
}

/// # Safety
/// As `pthread_cond_broadcast`.
pub unsafe fn broadcast(c: *mut pthread_cond_t) -> c_int {
    // SAFETY: `c` points to a pthread_cond_t (pthread_cond_broadcast's contract), all `overlay`
    // asks.
    let o = unsafe { overlay(c) };
    if is_shared(o) {
        // SAFETY: a process-shared condition: glibc's broadcast gets the program's initialised `c`.
        return unsafe { real::pthread_cond_broadcast(c) };
    }
    if o.waiters.load(Ordering::SeqCst) == 0 {
        return 0;
    }
    parking::unpark_some(o as *const CondOverlay as usize, u32::MAX, usize::MAX, |n| {
        o.waiters.fetch_sub(n as u32, Ordering::Relaxed);
    });
    0
}

/// # Safety
/// As `pthread_cond_destroy`.
pub unsafe fn destroy(c: *mut pthread_cond_t) -> c_int {
    // SAFETY: `c` points to a pthread_cond_t (pthread_cond_destroy's contract), all `overlay`
    // asks.
    let o = unsafe { overlay(c) };
    if is_shared(o) {
        // SAFETY: a process-shared condition: glibc's destroy gets the program's initialised, unused
        // `c`.
        return unsafe { real::pthread_cond_destroy(c) };
    }
    0
}
