//! Signals held for fibers: sent to one (`pthread_kill`, queued), or sent to the process
//! and handed to one. A fiber's own mask, and the raising of what it holds, is
//! [`crate::signal::mask`]'s.
//!
//! # Thread-directed signals
//!
//! `pthread_kill(t, sig)` on a fiber's `pthread_t` would reach its donor, which blocks
//! every signal while the fiber lives. Instead the signal is recorded in the fiber's
//! `Fiber::signals` (held), the fiber is unparked, and when it next runs (on return from any
//! switch, `Fiber::suspend`) it sends the signal to the kernel thread it runs on with
//! `tgkill`: the kernel then runs the handler right there, with the fiber's TLS and
//! stack, as it would on the fiber's own thread. A signal the fiber's mask blocks stays
//! pending in the fiber until the mask lets it through. Waits that the kernel would
//! interrupt (sleeps, futex waits) then return `EINTR`; a fiber that is running when
//! the signal is sent gets it at its next switch. `raise` from a fiber is delivered at
//! once on the current kernel thread.
//!
//! # Queued signals
//!
//! `pthread_sigqueue`, `rt_tgsigqueueinfo` to a fiber's tid and a timer aimed at it
//! (`thread::timers`) take the same path ([`queue_to_fiber`]) with the sender's siginfo,
//! which waits beside the held bit (`runtime::signals::queued_signals`, which has the protocol):
//! the fiber raises the signal with `rt_tgsigqueueinfo` to its own kernel thread, so
//! the handler gets `SI_QUEUE` or `SI_TIMER` and `si_value` as natively, and each
//! queued instance of a real-time signal in turn; `sigtimedwait` returns that siginfo.

use libc::{c_int, sigset_t};

use crate::base::stats::{bump, STATS};
use crate::base::sys;
use crate::runtime::fibers::fiber::{Fiber, FiberRef, Life};
use crate::runtime::preemption::kick::KICK_SIGNAL;
use crate::runtime::signals::queued_signals::{self, Instances, Queued};

pub(crate) fn to_kernel(set: &sigset_t) -> u64 {
    // SAFETY: glibc's sigset_t starts with the kernel's 64-bit mask (x86_64).
    unsafe { *(set as *const sigset_t as *const u64) }
}

pub(crate) fn from_kernel(mask: u64, out: &mut sigset_t) {
    // SAFETY: `out` is a valid sigset_t of 128 bytes; we clear it and set the first 64 bits.
    unsafe {
        libc::sigemptyset(out);
        *(out as *mut sigset_t as *mut u64) = mask;
    }
}

/// Adds the signals held for fiber `f` (sent to it while its mask blocked them) to a
/// `sigpending` result.
pub fn add_held_signals(f: &Fiber, set: &mut sigset_t) {
    let held = f.signals.held();
    if held != 0 {
        let k = to_kernel(set) | held;
        from_kernel(k, set);
    }
}

/// The kernel mask fiber `f` is meant to run under: its own, or (for a fiber that never
/// set one) that of the worker running it. Unlike [`effective_mask`] this does not read
/// the current kernel mask, which a deferral or a handler may have changed.
pub fn intended_mask(f: &Fiber) -> u64 {
    f.signals.own_mask().unwrap_or_else(|| crate::runtime::scheduler::worker_base_sigmask(f).unwrap_or(0))
}

pub(crate) fn effective_mask(f: &Fiber) -> u64 {
    f.signals.own_mask().unwrap_or_else(sys::sigmask_get)
}

pub(crate) fn tgkill_self(sig: c_int) -> c_int {
    let r = sys::tgkill(sys::gettid(), sig);
    if r < 0 {
        -r as c_int
    } else {
        0
    }
}

/// Whether a signal is held for fiber `f` (sent while it could not take it, e.g. on its
/// donor, which blocks every signal) that the fiber's own mask lets through: a wait the
/// fiber makes on its donor ends, so that the signal is delivered and interrupts it.
pub fn has_deliverable_held(f: &Fiber) -> bool {
    f.signals.held() & !intended_mask(f) != 0
}

/// A program handler ran on the calling thread (the trampoline says so): if that is a
/// fiber, its current or next wait counts as interrupted, as the kernel interrupts the
/// thread's system call. Async-signal-safe (a TLS read and atomics).
pub fn note_handler_ran(sa_restart: bool) {
    if let Some(f) = crate::runtime::fibers::fiber::current() {
        f.interruption.mark(sa_restart);
    }
}

/// Forgets handlers that ran before a wait begins (they did not interrupt it).
pub fn clear_interruption(f: &Fiber) {
    f.interruption.clear();
}

/// Whether a handler ran on `f` since [`clear_interruption`], and if so whether the
/// interrupted call is restarted: `restartable` (the kernel restarts it under
/// SA_RESTART, see signal(7)) and every such handler had SA_RESTART.
pub fn interrupted_for_good(f: &Fiber, restartable: bool) -> bool {
    match f.interruption.take() {
        None => false,
        Some(no_restart) => !restartable || no_restart,
    }
}

/// `pthread_kill` on a fiber. Returns the error number.
pub fn kill_fiber(target: &crate::runtime::fibers::fiber::FiberRef, sig: c_int) -> c_int {
    if !(0..=64).contains(&sig) {
        return libc::EINVAL;
    }
    if sig == 0 {
        return 0;
    }
    if let Some(me) = crate::runtime::fibers::fiber::current() {
        if core::ptr::eq(me, &**target) {
            return raise_in_fiber(me, sig);
        }
    }
    if send_to_open_donor(target, sig) {
        return 0;
    }
    target.signals.hold(sig);
    if let Some(r) = send_to_plain_thread(target, sig) {
        return r;
    }
    wake_for_signal(target);
    0
}

/// After `sig` was held for `target`: if the fiber went to its donor for good, the
/// kernel delivers to the donor's thread (held first, then the flag: see
/// `SignalState`; the fiber on its way takes and raises what it finds held, so whoever
/// takes the signal sends it). Returns the error number then, None for a fiber.
fn send_to_plain_thread(target: &FiberRef, sig: c_int) -> Option<c_int> {
    if !target.signals.is_plain_thread() {
        return None;
    }
    if target.signals.take_sent_to_thread(1u64 << (sig - 1)) {
        let r = queued_signals::send_taken(target, sig, target.identity.donor_tid() as i32, Instances::All);
        if r < 0 {
            return Some(-r as c_int);
        }
    }
    Some(0)
}

/// A signal was held for fiber `target`: it runs (or ends its donor wait) to take it.
fn wake_for_signal(target: &FiberRef) {
    crate::runtime::scheduler::unpark(target);
    crate::runtime::preemption::kick::kick(target);
    interrupt_donor_wait(target);
}

/// `pthread_sigqueue`, `rt_tgsigqueueinfo` or a relayed timer (`crate::thread::timers`)
/// on fiber `target`: as [`kill_fiber`], and the signal keeps the sender's siginfo
/// `info` (`SI_QUEUE` and its `si_value`, a timer's `SI_TIMER`), which the fiber's
/// handler or `sigtimedwait` gets (`runtime::signals::queued_signals`). Returns the error number
/// (`EAGAIN`: too many queued, as the kernel's limit on queued signals).
pub fn queue_to_fiber(target: &FiberRef, sig: c_int, info: &libc::siginfo_t) -> c_int {
    if !(0..=64).contains(&sig) {
        return libc::EINVAL;
    }
    if sig == 0 {
        return 0;
    }
    let is_me = crate::runtime::fibers::fiber::current().is_some_and(|me| core::ptr::eq(me, &**target));
    if is_me && effective_mask(target) & (1u64 << (sig - 1)) == 0 {
        // To itself, not blocked: delivered before the call returns, here.
        return match sys::rt_tgsigqueueinfo(sys::gettid(), sig, info) {
            r if r < 0 => -r as c_int,
            _ => 0,
        };
    }
    match queued_signals::hold(target, sig, info) {
        Err(e) => return e,
        Ok(Queued::Merged) => return 0,
        Ok(Queued::Held) => {}
    }
    if let Some(r) = send_to_plain_thread(target, sig) {
        return r;
    }
    if !is_me {
        wake_for_signal(target);
    }
    0
}

// ---------------------------------------------------------------------------------
// Signals sent to the process, handed to a fiber (crate::signal::process)
// ---------------------------------------------------------------------------------

/// A fiber that takes signal `sig` now, as the kernel picks a thread for a signal of
/// the process: not a plain thread, its mask lets `sig` through, and it can run the
/// handler now ([`runs_handler_now`]). A running one first.
pub(crate) fn accepting_fiber(sig: c_int) -> Option<FiberRef> {
    let bit = 1u64 << (sig - 1);
    let accepts = |f: &Fiber| {
        !f.signals.is_plain_thread() && runs_handler_now(f.life(), f.donor_wait.is_interruptible()) && intended_mask(f) & bit == 0
    };
    crate::runtime::fibers::registry::find(|f| accepts(f) && f.life() == Life::Running)
        .or_else(|| crate::runtime::fibers::registry::find(accepts))
}

/// Whether a fiber in state `life` runs a handler for a signal held for it now: on a
/// worker (running, queued, or parked in a wait that an unpark ends), or on its donor
/// in a wait that the kick ends (`sigwait`, [`wait_on_donor`]: `interruptible_wait`).
/// Not a fiber on its donor in any other call: nothing ends that call
/// (`waitpid`, `flock`, a process-shared semaphore…), and the kernel gives the donor
/// the signals its fiber accepts itself while it waits (`crate::signal::on_donor`).
/// Not a fiber that is starting or finished.
fn runs_handler_now(life: Life, interruptible_wait: bool) -> bool {
    match life {
        Life::Running | Life::Runnable | Life::Parked => true,
        Life::OnDonor => interruptible_wait,
        Life::Starting | Life::Finished => false,
    }
}

/// Whether `info` describes a signal sent to the process (`kill`, `sigqueue`, a timer,
/// the kernel), not to one thread (`tgkill`, `pthread_kill`, a fiber's held signal).
///
/// # Safety
/// `info` is null or the kernel's siginfo of the delivery being handled.
pub unsafe fn process_directed(info: *const libc::siginfo_t) -> bool {
    // SAFETY: null or the kernel's siginfo (this fn's # Safety).
    unsafe { info.as_ref() }.is_some_and(|i| i.si_code != libc::SI_TKILL)
}

/// The trampoline in a worker's scheduler context (at its safe point; `crate::signal::process` has the protocol) got
/// `sig`, sent to the process: hands it to a fiber that accepts it, as `pthread_kill`
/// would. False when none does (the caller runs the handler where it is).
pub fn route_from_worker(sig: c_int) -> bool {
    if let Some(target) = accepting_fiber(sig) {
        hand_process_signal(&target, sig);
        return true;
    }
    let bit = 1u64 << (sig - 1);
    crate::runtime::fibers::registry::find(|f| f.life() == Life::OnDonor && f.donor.signals.takes(bit))
        .is_some_and(|target| send_to_open_donor(&target, sig))
}

/// Sends `sig` to fiber `target`'s donor thread if the donor takes it now, during a
/// blocking call of the fiber (`crate::signal::on_donor`): the handler runs there and
/// ends or restarts the call, as on the fiber's own thread natively. False if it does
/// not (the caller holds the signal for the fiber, or looks elsewhere).
pub(crate) fn send_to_open_donor(target: &Fiber, sig: c_int) -> bool {
    if !target.donor.signals.enter(1u64 << (sig - 1)) {
        return false;
    }
    sys::tgkill(target.identity.donor_tid() as i32, sig);
    target.donor.signals.leave();
    true
}

/// Hands `sig`, taken from the process, to fiber `target`, chosen because it took
/// `sig` then, as `pthread_kill` would. The fiber may have blocked `sig`, ended or left
/// for its donor meanwhile: natively the signal would then have stayed the process's
/// for another thread to take, so it goes back to the process.
///
/// The race with the fiber's new mask is a Dekker pair: this side holds the signal,
/// then (SeqCst fence) reads the mask; the fiber sets its mask, then (SeqCst fence)
/// looks for held signals of the process that it blocks (`mask::fiber_sigmask`). At least
/// one of the two sees the other's write, and `take` lets exactly one give it back.
pub(crate) fn hand_process_signal(target: &FiberRef, sig: c_int) {
    let bit = 1u64 << (sig - 1);
    target.signals.hold_from_process(sig);
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    let gone = target.signals.is_plain_thread() || target.life() == Life::Finished;
    if gone || intended_mask(target) & bit != 0 {
        give_back_to_process(target, if gone { u64::MAX } else { bit });
        return;
    }
    bump(&STATS.signals_to_fibers);
    wake_for_signal(target);
}

/// Gives the signals of `set` that were sent to the process and are still held for
/// fiber `f` back to the process: the kernel gives each to a thread that does not
/// block it (a worker's, whose trampoline hands it on to a fiber), or keeps it pending
/// for the process, where the monitor looks (`crate::signal::process`).
///
/// The fiber's side of the pair in [`hand_process_signal`]: called after the fiber's
/// new mask or its end is published; the fence orders that before the look.
pub fn give_back_to_process(f: &Fiber, set: u64) {
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    let back = f.signals.take_from_process(set);
    for bit in (0..64).filter(|b| back & (1u64 << b) != 0) {
        sys::kill(bit + 1);
    }
}

/// `raise` in a fiber: delivered now on this kernel thread (or kept pending if the
/// fiber's mask blocks it).
pub fn raise_in_fiber(f: &Fiber, sig: c_int) -> c_int {
    if !(1..=64).contains(&sig) {
        return libc::EINVAL;
    }
    if effective_mask(f) & (1u64 << (sig - 1)) != 0 {
        f.signals.hold(sig);
        return 0;
    }
    tgkill_self(sig)
}

/// A sender published a held signal or a cancellation request for `target`: if the
/// fiber waits on its donor for it ([`fiber_sigtimedwait`]), kick the donor's kernel
/// thread, which blocks the kick signal and so finds it pending in its wait.
pub fn interrupt_donor_wait(target: &Fiber) {
    if target.donor_wait.interrupt_needed() {
        sys::tgkill(target.identity.donor_tid() as i32, KICK_SIGNAL);
    }
}
