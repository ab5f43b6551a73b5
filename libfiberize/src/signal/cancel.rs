//! Deferred cancellation of fibers.
//!
//! glibc's `pthread_cancel` must never reach a fiber: it marks the target's TCB and
//! sends SIGCANCEL to the target's kernel thread id, which is the donor's; the fiber
//! would then act on the TCB flag at some glibc-internal cancellation point *while
//! running on a worker*, and glibc's cancellation unwinding ends with a longjmp into
//! the donor's `start_thread` frame — on the wrong kernel thread. So for a fiber,
//! `pthread_cancel` only records the request (`Fiber::cancel`, `Cancellation::request`) and wakes the
//! fiber; the fiber acts on it at the cancellation points the library implements
//! (`pthread_testcancel`, sleeps, condition and semaphore waits, blocking socket and
//! pipe calls, `poll`): it moves to its donor and calls glibc's real
//! `pthread_exit(PTHREAD_CANCELED)` there, which runs the cleanup handlers and
//! destructors on the right thread; `pthread_join` then returns `PTHREAD_CANCELED`.
//! `pthread_setcancelstate` is honoured. With the asynchronous type
//! (`pthread_setcanceltype`) a running target is kicked (`signal::kick`) and the kick
//! handler ends it right where it runs, unless it is inside the runtime (shielded, or
//! waiting in a park: such code is not async-cancel-safe, and POSIX allows only
//! async-cancel-safe calls there); a fiber that yields acts when it is resumed.

use crate::runtime::fibers::fiber::{self, Fiber, FiberRef};

crate::real_fns! {
    fn pthread_cancel(t: libc::pthread_t) -> libc::c_int;
    fn pthread_setcancelstate(state: libc::c_int, old: *mut libc::c_int) -> libc::c_int;
    fn pthread_setcanceltype(kind: libc::c_int, old: *mut libc::c_int) -> libc::c_int;
}

/// glibc's values (pthread.h), missing from the `libc` crate for Linux.
pub const PTHREAD_CANCEL_ENABLE: libc::c_int = 0;
pub const PTHREAD_CANCEL_DISABLE: libc::c_int = 1;
pub const PTHREAD_CANCELED: *mut libc::c_void = -1isize as *mut libc::c_void;

/// `pthread_cancel` of a fiber. Returns the error number (always 0: the target is live).
pub fn cancel_fiber(target: &FiberRef) -> libc::c_int {
    target.cancel.request();
    if target.signals.is_plain_thread() {
        // Demoted (or exiting): a plain thread, which glibc cancels. The request first,
        // then the flag; the demoted fiber sets the flag, then looks for a request
        // (`hand_cancellation_to_glibc`): one of them at least passes it to glibc,
        // which takes it twice as once.
        // SAFETY: the target is live (registered), so its pthread_t is valid for glibc.
        return unsafe { pthread_cancel(target.identity.pthread() as libc::pthread_t) };
    }
    crate::runtime::scheduler::unpark(target);
    if target.cancel.is_asynchronous() {
        crate::runtime::preemption::kick::kick(target);
    }
    crate::signal::delivery::interrupt_donor_wait(target);
    0
}

/// How long a fiber's wait that runs in glibc or the kernel on its donor (a join of a
/// plain thread, a process-shared condvar wait) blocks before it looks for a
/// cancellation request: our cancellation cannot reach into such a wait. (A signal
/// wait and a descriptor wait need no slices: their senders kick the donor, see
/// `signal::donor_waits::fiber_sigtimedwait` and `wait_on_donor`.) Origin: a cancellation latency of 10 ms is
/// invisible to the programs that cancel such waiters (shutdown paths); a donor waking
/// 100 times a second while it waits costs nothing measurable.
pub const DONOR_WAIT_SLICE_NS: u64 = 10_000_000;

pub const PTHREAD_CANCEL_DEFERRED: libc::c_int = 0;
pub const PTHREAD_CANCEL_ASYNCHRONOUS: libc::c_int = 1;

/// `pthread_setcanceltype` for a fiber. Returns the error number.
///
/// # Safety
/// `old` is null or a valid `int`.
pub unsafe fn set_type(f: &Fiber, kind: libc::c_int, old: *mut libc::c_int) -> libc::c_int {
    if kind != PTHREAD_CANCEL_DEFERRED && kind != PTHREAD_CANCEL_ASYNCHRONOUS {
        return libc::EINVAL;
    }
    let was_async = f.cancel.set_asynchronous(kind == PTHREAD_CANCEL_ASYNCHRONOUS);
    // SAFETY: `old` is null or the program's int.
    if let Some(o) = unsafe { old.as_mut() } {
        *o = if was_async { PTHREAD_CANCEL_ASYNCHRONOUS } else { PTHREAD_CANCEL_DEFERRED };
    }
    // Becoming asynchronous with a request pending acts at once, as glibc does.
    if kind == PTHREAD_CANCEL_ASYNCHRONOUS && f.cancel_pending() {
        act_on_cancel(f);
    }
    0
}

/// Asynchronous cancellation from the kick handler or a resumed fiber: ends `f` now if
/// it asked for the asynchronous type, a request is pending, and it is in program
/// code (not shielded runtime code, not inside a park).
pub fn act_on_async_cancel(f: &Fiber) {
    if !f.cancel.is_asynchronous() || !f.cancel_pending() {
        return;
    }
    if crate::base::shield::depth() != 0 || f.wait.is_waiting() {
        return;
    }
    // In a handler the kernel blocked the kick signal; the fiber leaves without a
    // sigreturn, so put the mask it runs under back first.
    crate::base::sys::sigmask_set(crate::signal::delivery::intended_mask(f) & !crate::runtime::preemption::kick::KICK_BIT);
    act_on_cancel(f);
}

/// A cancellation point: if a cancellation is pending for the calling fiber, it ends
/// the fiber here (never returns then).
#[inline]
pub fn testcancel() {
    if let Some(f) = fiber::current() {
        if f.cancel_pending() {
            act_on_cancel(f);
        }
    }
}

/// Ends the calling fiber as cancelled.
#[cold]
pub fn act_on_cancel(f: &Fiber) -> ! {
    // Only once: the cleanup handlers may themselves reach cancellation points.
    f.cancel.set_disabled(true);
    // SAFETY: PTHREAD_CANCELED is the value glibc's own cancellation exits with; the
    // fiber moves to its donor inside `thread::exit`.
    unsafe { (crate::runtime::fibers::hooks::get().exit_thread)(PTHREAD_CANCELED) }
}

/// A demoted fiber (now a plain thread on its donor, `switch::current_or_demote`) hands
/// its cancellation state, type and a pending request to glibc, which cancels plain
/// threads: without this a demoted thread was never cancelled (its `pthread_cancel`
/// only recorded the request in the fiber). Called on the donor.
pub fn hand_cancellation_to_glibc(f: &Fiber) {
    let kind = if f.cancel.is_asynchronous() { PTHREAD_CANCEL_ASYNCHRONOUS } else { PTHREAD_CANCEL_DEFERRED };
    let state = if f.cancel.is_disabled() { PTHREAD_CANCEL_DISABLE } else { PTHREAD_CANCEL_ENABLE };
    // SAFETY: glibc's own calls on the calling thread with valid values and no old value
    // wanted; a pending asynchronous request ends the thread in pthread_cancel, as the
    // kick would have ended the fiber.
    unsafe {
        pthread_setcanceltype(kind, core::ptr::null_mut());
        pthread_setcancelstate(state, core::ptr::null_mut());
        if f.cancel.is_requested() {
            pthread_cancel(libc::pthread_self());
        }
    }
}

/// `pthread_setcancelstate` for a fiber. Returns the error number.
///
/// # Safety
/// `old` is null or a valid `int`.
pub unsafe fn set_state(f: &Fiber, state: libc::c_int, old: *mut libc::c_int) -> libc::c_int {
    if state != PTHREAD_CANCEL_ENABLE && state != PTHREAD_CANCEL_DISABLE {
        return libc::EINVAL;
    }
    let was_disabled = f.cancel.set_disabled(state == PTHREAD_CANCEL_DISABLE);
    // SAFETY: `old` is null or the program's int.
    if let Some(o) = unsafe { old.as_mut() } {
        *o = if was_disabled { PTHREAD_CANCEL_DISABLE } else { PTHREAD_CANCEL_ENABLE };
    }
    if state == PTHREAD_CANCEL_ENABLE && f.cancel.is_asynchronous() && f.cancel_pending() {
        act_on_cancel(f);
    }
    0
}
