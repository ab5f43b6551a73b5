//! POSIX timers aimed at a fiber's thread id.
//!
//! `timer_create(clock, {SIGEV_THREAD_ID, tid, sig, value}, &t)` asks the kernel to send
//! each expiry to thread `tid` (a profiler's per-thread timer, a thread's periodic
//! tick). A fiber's `gettid()` names its donor ([`super::tid`]), which blocks every
//! signal while the fiber lives and never takes one: the expiries would never be
//! delivered. The kernel cannot follow a fiber from worker to worker, so such a timer
//! is created aimed at the **relay**, a thread of the runtime started at the first such
//! timer, with the library's own signal (the kick signal, which no program can send,
//! handle or wait for) in place of the program's and the program's `sigev_value` kept:
//!
//! ```text
//!   kernel timer ──SI_TIMER, kick signal──> relay: sigtimedwait(kick)
//!        └─ timer id ─> (fiber, program's signal) ─> delivery::queue_to_fiber
//!              (runtime::signals::queued_signals: held with the timer's siginfo; the fiber's
//!               handler or sigtimedwait gets SI_TIMER, si_timerid, si_overrun, si_value)
//! ```
//!
//! The relay waits for the kick signal alone, which nothing but these timers sends it:
//! it never takes a signal the program sent to the process. The program's `timer_t`
//! is the kernel's timer, so `timer_settime`, `timer_gettime` and `timer_getoverrun` are
//! glibc's; `timer_delete` also forgets the relay's entry ([`delete`]).
//!
//! Where it differs from natively:
//! - the relay takes each expiry at once, so the kernel counts no overrun
//!   (`timer_getoverrun` says 0); an expiry still held for the fiber (it blocks the
//!   signal, or has not run yet) when the timer fires again grows the held one's
//!   `si_overrun` instead, as the kernel's pending signal would;
//! - an expiry held when the timer is deleted is still delivered (the kernel drops a
//!   deleted timer's pending signal);
//! - a fiber that went to its donor for good gets its expiries there, through the relay
//!   (a timer created after that is the kernel's: the tid names a plain thread);
//! - a forked child has no timers (as natively: they are not inherited) and no relay.

use core::sync::atomic::{AtomicU32, Ordering};
use std::collections::BTreeMap;

use libc::c_int;

use crate::base::rawlock::{RawLock, RawMutex};
use crate::base::sys;
use crate::runtime::preemption::kick::{KICK_BIT, KICK_SIGNAL};

/// A relayed timer: the fiber it is aimed at (its id) and the program's signal.
#[derive(Clone, Copy)]
struct Relayed {
    fiber: u64,
    sig: c_int,
}

/// Relayed timers by kernel timer id.
static TIMERS: RawLock<BTreeMap<c_int, Relayed>> = RawLock::new(BTreeMap::new());
/// The relay's kernel thread id (0: not started).
static RELAY_TID: AtomicU32 = AtomicU32::new(0);
/// Serializes the relay's start.
static STARTING: RawMutex = RawMutex::new();

/// `timer_create(clock, sev, timer)` when `sev` aims the timer at a fiber's thread id
/// (`SIGEV_THREAD_ID`): created aimed at the relay (module docs). `None` when the kernel
/// should have the call as it is (another notification, not a fiber's tid, a plain
/// thread's); else the result, or the error number for `errno`.
///
/// # Safety
/// `sev` is null or a readable `sigevent`; `timer` is what glibc's `timer_create`
/// accepts.
pub unsafe fn create(clock: libc::clockid_t, sev: *const libc::sigevent, timer: *mut libc::timer_t) -> Option<Result<(), c_int>> {
    // SAFETY: null or a readable sigevent (this fn's # Safety).
    let ev = unsafe { sev.as_ref() }?;
    if ev.sigev_notify != libc::SIGEV_THREAD_ID || !(1..=64).contains(&ev.sigev_signo) {
        return None;
    }
    let target = super::tid::fiber_of_tid(ev.sigev_notify_thread_id, ev.sigev_signo)?;
    if target.signals.is_plain_thread() {
        return None;
    }
    let relay = match relay_tid() {
        Ok(tid) => tid,
        Err(e) => return Some(Err(e)),
    };
    let mut ours = *ev;
    ours.sigev_signo = KICK_SIGNAL;
    ours.sigev_notify_thread_id = relay as c_int;
    // The entry goes in under the lock that the relay's lookup takes, before the
    // program can arm the timer (it has no id yet), so no expiry comes first.
    let mut timers = TIMERS.lock();
    // SAFETY: `ours` is a valid sigevent; `timer` as the caller passes it (# Safety).
    if unsafe { crate::base::real::timer_create(clock, &mut ours, timer) } != 0 {
        return Some(Err(sys::errno()));
    }
    // SAFETY: the call succeeded, so it wrote the timer; glibc's id of a timer without a
    // helper thread is the kernel's.
    let id = unsafe { *timer } as usize as c_int;
    timers.insert(id, Relayed { fiber: target.id(), sig: ev.sigev_signo });
    Some(Ok(()))
}

/// `timer_delete(timer)`: a relayed timer's entry goes (the kernel timer is the
/// caller's to delete).
pub fn delete(timer: libc::timer_t) {
    let raw = timer as isize;
    // glibc's ids of timers with a helper thread are negative: never relayed ones.
    if (0..=c_int::MAX as isize).contains(&raw) {
        TIMERS.lock().remove(&(raw as c_int));
    }
}

/// The relay's tid, starting it at the first call.
fn relay_tid() -> Result<u32, c_int> {
    let tid = RELAY_TID.load(Ordering::Acquire);
    if tid != 0 {
        return Ok(tid);
    }
    start_relay()
}

#[cold]
fn start_relay() -> Result<u32, c_int> {
    STARTING.lock();
    let started = if RELAY_TID.load(Ordering::Acquire) != 0 {
        Ok(())
    } else {
        crate::runtime::scheduler::try_spawn_runtime_thread(relay_main, core::ptr::null_mut())
    };
    let result = started.map(|()| loop {
        // The relay publishes its tid first thing.
        let tid = RELAY_TID.load(Ordering::Acquire);
        if tid != 0 {
            break tid;
        }
        sys::futex_wait(&RELAY_TID, 0, None);
    });
    STARTING.unlock();
    result
}

/// The relay: takes each expiry of a relayed timer and queues it to its fiber.
extern "C" fn relay_main(_: *mut libc::c_void) -> *mut libc::c_void {
    RELAY_TID.store(sys::gettid() as u32, Ordering::Release);
    sys::futex_wake(&RELAY_TID, u32::MAX);
    loop {
        // SAFETY: all-zero is a valid siginfo_t.
        let mut info: libc::siginfo_t = unsafe { core::mem::zeroed() };
        // SAFETY: `info` is writable. Every signal is blocked here (a runtime thread),
        // so the kick signal waits pending until this call takes it.
        let r = unsafe { sys::rt_sigtimedwait(KICK_BIT, &mut info, None) };
        if r == KICK_SIGNAL as isize && info.si_code == libc::SI_TIMER {
            relay(&mut info);
        }
    }
}

/// Hands one expiry to the fiber its timer is aimed at, with the program's signal.
fn relay(info: &mut libc::siginfo_t) {
    let id = crate::runtime::signals::queued_signals::timer_id(info);
    // Deleted meanwhile: the expiry goes nowhere.
    let Some(t) = TIMERS.lock().get(&id).copied() else { return };
    // A fiber that ended: natively a signal for a thread that exited goes nowhere.
    let Some(target) = crate::runtime::fibers::registry::find_by_id(t.fiber) else { return };
    info.si_signo = t.sig;
    crate::signal::delivery::queue_to_fiber(&target, t.sig, info);
}

/// In a forked child: no timer is inherited and the relay does not exist.
///
/// # Safety
/// Only from the atfork child hook (one thread, nothing else running).
pub unsafe fn reset_in_forked_child() {
    // SAFETY: the child's one thread, before anything uses the map (this fn's # Safety).
    unsafe { TIMERS.reset_in_forked_child(BTreeMap::new()) };
    STARTING.reset_in_forked_child();
    RELAY_TID.store(0, Ordering::Relaxed);
}
