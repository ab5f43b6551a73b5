//! Per-fiber signal masks.
//!
//! A signal mask belongs to a kernel thread, and fibers share workers. A fiber that
//! changes its mask gets its own (`Fiber::signals`, `SignalState::set_mask`), which the
//! worker installs before resuming it and replaces by its own afterwards
//! (`scheduler::run_fiber`); fibers that never touch their mask cost nothing. A new
//! fiber starts with its creator's mask, as a new thread does (`thread::pthread::create`).
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
//! which waits beside the held bit (`runtime::queued_signals`, which has the protocol):
//! the fiber raises the signal with `rt_tgsigqueueinfo` to its own kernel thread, so
//! the handler gets `SI_QUEUE` or `SI_TIMER` and `si_value` as natively, and each
//! queued instance of a real-time signal in turn; `sigtimedwait` returns that siginfo.

use libc::{c_int, sigset_t};

use crate::base::stats::{bump, STATS};
use crate::base::sys;
use crate::runtime::fiber::{Fiber, FiberRef, Life};
use crate::runtime::kick::{KICK_BIT, KICK_SIGNAL};
use crate::runtime::queued_signals::{self, Instances, Queued};

fn to_kernel(set: &sigset_t) -> u64 {
    // SAFETY: glibc's sigset_t starts with the kernel's 64-bit mask (x86_64).
    unsafe { *(set as *const sigset_t as *const u64) }
}

fn from_kernel(mask: u64, out: &mut sigset_t) {
    // SAFETY: `out` is a valid sigset_t of 128 bytes; we clear it and set the first 64 bits.
    unsafe {
        libc::sigemptyset(out);
        *(out as *mut sigset_t as *mut u64) = mask;
    }
}

/// `pthread_sigmask` for a fiber. Returns the error number (0 on success).
///
/// # Safety
/// `set` and `old` are null or valid sigsets, as for `pthread_sigmask`.
pub unsafe fn fiber_sigmask(f: &Fiber, how: c_int, set: *const sigset_t, old: *mut sigset_t) -> c_int {
    let cur = f.signals.own_mask().unwrap_or_else(sys::sigmask_get);
    // SAFETY: `old` is null or a valid out-parameter (caller's contract).
    if let Some(o) = unsafe { old.as_mut() } {
        from_kernel(cur, o);
    }
    // SAFETY: `set` is null or a valid sigset (caller's contract).
    let Some(set) = (unsafe { set.as_ref() }) else { return 0 };
    let s = to_kernel(set);
    let new = match how {
        libc::SIG_BLOCK => cur | s,
        libc::SIG_UNBLOCK => cur & !s,
        libc::SIG_SETMASK => s,
        _ => return libc::EINVAL,
    };
    // The kernel never blocks SIGKILL and SIGSTOP.
    let new = new & !((1u64 << (libc::SIGKILL - 1)) | (1u64 << (libc::SIGSTOP - 1)));
    f.signals.set_mask(new);
    sys::sigmask_set(new & !KICK_BIT);
    // Signals of the process handed to this fiber that it now blocks go back to the
    // process (the fiber's side of the pair in `hand_process_signal`).
    give_back_to_process(f, new);
    // Unblocking may release signals that were sent to this fiber meanwhile.
    if f.signals.held() != 0 {
        deliver_pending(f);
    }
    0
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

fn effective_mask(f: &Fiber) -> u64 {
    f.signals.own_mask().unwrap_or_else(sys::sigmask_get)
}

fn tgkill_self(sig: c_int) -> c_int {
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

/// Delivers the fiber's pending signals that its mask lets through, on the current
/// kernel thread. Called by the fiber itself (on its way out of a switch, in the kick
/// handler, when it unblocks them).
///
/// The handler must run *on the fiber* before its interrupted wait looks at
/// [`interrupted_for_good`], as natively the handler runs before the interrupted call
/// returns. So a signal is raised only where its handler runs at once: not in a
/// shielded stretch (a kick can land in one), where the trampoline would defer it on
/// this kernel thread and the fiber could leave the thread before the handler ran; the
/// handler would then run on whatever the thread runs next, and the fiber's wait would
/// end with no handler run for it (`recv ... handled=0`), or not end at all. There the
/// signals stay held and are raised when the shield is left
/// ([`shield::postpone_held_signals`](crate::base::shield::postpone_held_signals)).
///
/// The trampoline marks the interruption when the program's handler has run, with its
/// SA_RESTART; a signal the program ignores interrupts nothing, as natively. Only a
/// handler that bypassed the trampoline (installed with the raw system call) is
/// marked here, as restartable.
pub fn deliver_pending(f: &Fiber) {
    let deliverable = f.signals.held() & !effective_mask(f);
    if deliverable == 0 {
        return;
    }
    if crate::base::shield::depth() != 0 {
        crate::base::shield::set_deliver_held(deliver_held_of_current);
        crate::base::shield::postpone_held_signals();
        return;
    }
    for bit in (0..64).filter(|b| deliverable & (1u64 << b) != 0) {
        let m = 1u64 << bit;
        // A real-time signal queued several times is held again after each instance
        // (`queued_signals::take`): each is raised in turn, as the kernel delivers every
        // queued instance, while the fiber's mask lets it through.
        while f.signals.take(m) {
            let sig = bit + 1;
            if crate::signal::handlers::has_unwrapped_handler(sig) {
                f.interruption.mark(true);
            }
            queued_signals::send_taken(f, sig, sys::gettid(), Instances::Oldest);
            if f.signals.held() & m == 0 || effective_mask(f) & m != 0 {
                break;
            }
        }
    }
}

/// [`deliver_pending`] for the current fiber, if any: the shield's exit calls it.
fn deliver_held_of_current() {
    if let Some(f) = crate::runtime::fiber::current() {
        if f.signals.held() != 0 {
            deliver_pending(f);
        }
    }
}

/// A program handler ran on the calling thread (the trampoline says so): if that is a
/// fiber, its current or next wait counts as interrupted, as the kernel interrupts the
/// thread's system call. Async-signal-safe (a TLS read and atomics).
pub fn note_handler_ran(sa_restart: bool) {
    if let Some(f) = crate::runtime::fiber::current() {
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
pub fn kill_fiber(target: &crate::runtime::fiber::FiberRef, sig: c_int) -> c_int {
    if !(0..=64).contains(&sig) {
        return libc::EINVAL;
    }
    if sig == 0 {
        return 0;
    }
    if let Some(me) = crate::runtime::fiber::current() {
        if core::ptr::eq(me, &**target) {
            return raise_in_fiber(me, sig);
        }
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
    if target.signals.take(1u64 << (sig - 1)) {
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
    crate::runtime::kick::kick(target);
    interrupt_donor_wait(target);
}

/// `pthread_sigqueue`, `rt_tgsigqueueinfo` or a relayed timer (`crate::thread::timers`)
/// on fiber `target`: as [`kill_fiber`], and the signal keeps the sender's siginfo
/// `info` (`SI_QUEUE` and its `si_value`, a timer's `SI_TIMER`), which the fiber's
/// handler or `sigtimedwait` gets (`runtime::queued_signals`). Returns the error number
/// (`EAGAIN`: too many queued, as the kernel's limit on queued signals).
pub fn queue_to_fiber(target: &FiberRef, sig: c_int, info: &libc::siginfo_t) -> c_int {
    if !(0..=64).contains(&sig) {
        return libc::EINVAL;
    }
    if sig == 0 {
        return 0;
    }
    let is_me = crate::runtime::fiber::current().is_some_and(|me| core::ptr::eq(me, &**target));
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

/// A fiber that takes signal `sig` now: not a plain thread, its mask lets `sig` through.
/// A running one first.
pub(crate) fn accepting_fiber(sig: c_int) -> Option<FiberRef> {
    let bit = 1u64 << (sig - 1);
    let accepts = |f: &Fiber| {
        !f.signals.is_plain_thread() && !matches!(f.life(), Life::Starting | Life::Finished) && intended_mask(f) & bit == 0
    };
    crate::runtime::registry::find(|f| accepts(f) && f.life() == Life::Running)
        .or_else(|| crate::runtime::registry::find(accepts))
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
    let Some(target) = accepting_fiber(sig) else { return false };
    hand_process_signal(&target, sig);
    true
}

/// Hands `sig`, taken from the process, to fiber `target`, chosen because it took
/// `sig` then, as `pthread_kill` would. The fiber may have blocked `sig`, ended or left
/// for its donor meanwhile: natively the signal would then have stayed the process's
/// for another thread to take, so it goes back to the process.
///
/// The race with the fiber's new mask is a Dekker pair: this side holds the signal,
/// then (SeqCst fence) reads the mask; the fiber sets its mask, then (SeqCst fence)
/// looks for held signals of the process that it blocks ([`fiber_sigmask`]). At least
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
        // The taken bit also stood for the signals queued to the thread (merged with it).
        queued_signals::hold_again_if_queued(f, bit + 1);
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

// ---------------------------------------------------------------------------------
// sigwait and friends for fibers
// ---------------------------------------------------------------------------------

/// `sigtimedwait` (and `sigwaitinfo`, `sigwait`) for a fiber: `timeout_ns` relative
/// (`None`: no limit). Waits on the donor, in the kernel, for the signals of `set` *and*
/// the kick signal: a signal `pthread_kill` holds for this fiber is taken too (sigwait
/// consumes a pending blocked signal, and a held one is pending for the fiber), and
/// `pthread_cancel` acts (sigwait is a cancellation point; glibc's own would wait where
/// our cancellation cannot reach). Their senders kick the donor when it waits
/// ([`interrupt_donor_wait`]; the protocol is `runtime::sleep_state::DonorWait`): the
/// wait wakes only for them, for its own signals and for its timeout, as a native
/// `sigwait` does. glibc's internal signals are never waited for. The kick signal is
/// the library's (`sigaction` refuses it), so a program that waits for it here cannot
/// tell its own from a kick: such a wait looks again and goes on.
/// Returns the signal number, or -errno (EAGAIN on timeout, EINVAL).
///
/// # Safety
/// `info` is null or points to a writable `siginfo_t`, as for glibc's `sigtimedwait`.
pub unsafe fn fiber_sigtimedwait(f: &Fiber, set: &sigset_t, info: *mut libc::siginfo_t, timeout_ns: Option<u64>) -> c_int {
    const CANCELLED: isize = isize::MIN;
    let set = to_kernel(set) & !sys::GLIBC_INTERNAL_SIGNALS;
    let deadline = timeout_ns.map(|t| sys::now_ns().saturating_add(t));
    crate::signal::cancel::testcancel();
    // The whole wait runs on the donor; it comes back to the fiber only with a result.
    let r = crate::runtime::fiber::run_on_donor(|| {
        let r = loop {
            f.donor_wait.begin();
            if let Some(sig) = take_held(f, set) {
                // The sender's siginfo if it queued one (the next instance stays held).
                let queued = queued_signals::take(f, sig, true);
                if !info.is_null() {
                    // SAFETY: the caller's siginfo out-parameter. Without a queued one: a
                    // thread-directed signal from this process, si_code SI_TKILL, as the
                    // kernel gives.
                    unsafe {
                        core::ptr::write_bytes(info, 0, 1);
                        (*info).si_signo = sig;
                        (*info).si_code = libc::SI_TKILL;
                        if let Some(q) = queued {
                            *info = q;
                        }
                    }
                }
                break sig as isize;
            }
            if f.cancel_pending() {
                break CANCELLED;
            }
            let left = deadline.map(|d| sys::ns_to_timespec(d.saturating_sub(sys::now_ns())));
            // SAFETY: the caller's info pointer (or null: its contract). The donor blocks
            // every signal, the kick included, so each of `set | KICK_BIT` that arrives
            // stays pending until this call takes it.
            let r = unsafe { sys::rt_sigtimedwait(set | KICK_BIT, info, left.as_ref()) };
            // A kick: a sender published a held signal or a cancellation request (or the
            // kick is a late one of an earlier wait); EINTR (SIGCONT after a stop) is
            // not an answer either.
            if r != KICK_SIGNAL as isize && r != -(libc::EINTR as isize) {
                break r;
            }
        };
        if f.donor_wait.end() {
            drain_kick();
        }
        r
    });
    if r == CANCELLED {
        crate::signal::cancel::testcancel();
    }
    r as c_int
}

/// After a sender kicked this donor's wait: takes the kick if it is pending still, so
/// that the next wait does not wake for it (best effort: a sender between its check and
/// its `tgkill` may send it later; that wait then looks once more and goes on).
#[cold]
fn drain_kick() {
    let now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: no siginfo is asked for; a zero timeout only polls.
    unsafe { sys::rt_sigtimedwait(KICK_BIT, core::ptr::null_mut(), Some(&now)) };
}

/// A sender published a held signal or a cancellation request for `target`: if the
/// fiber waits on its donor for it ([`fiber_sigtimedwait`]), kick the donor's kernel
/// thread, which blocks the kick signal and so finds it pending in its wait.
pub fn interrupt_donor_wait(target: &Fiber) {
    if target.donor_wait.interrupt_needed() {
        sys::tgkill(target.identity.donor_tid() as i32, KICK_SIGNAL);
    }
}

// ---------------------------------------------------------------------------------
// Descriptor waits on the donor, and the signal mask of ppoll, pselect, epoll_pwait
// ---------------------------------------------------------------------------------

/// A descriptor wait of fiber `f` (`poll`, `select`, `ppoll`, `pselect`, `epoll_pwait`
/// over what the reactor cannot park on) that runs on its donor and that
/// `pthread_kill` and `pthread_cancel` end, as they end a native wait. `wait(timeout,
/// mask)` is the real call with a relative `timeout` (`None`: none) and a signal mask
/// `mask` to install for the wait (`ppoll`'s and `pselect`'s own argument): the
/// donor's mask, every signal blocked, less the kick signal. It must be a fresh call
/// each time (restoring whatever a call that returned changed). Returns its result, or
/// -1 with `EINTR` when a signal is held for the fiber that its mask lets through (the
/// handler runs when the fiber is back on a worker, before the call returns, as
/// natively the handler runs before the interrupted call returns) or a cancellation
/// request came (the caller then acts on it).
///
/// The same protocol as [`fiber_sigtimedwait`] (`runtime::sleep_state::DonorWait`):
/// the senders publish, then kick the donor if it waits. The donor blocks the kick
/// signal everywhere but inside the wait, whose mask unblocks it atomically with the
/// start of the wait (that is what the mask argument of these calls is for), so a kick
/// that comes between the look and the call is pending when the call begins and ends
/// it at once: never lost. The kick handler runs on the donor then and does nothing
/// there (`fiber::current()` is none on a donor); the call returns `EINTR`, and the
/// loop looks again. A kick that comes after the call returned for its own reason
/// stays pending on the donor and is taken after the wait ([`drain_kick`]); one that
/// comes later still ends the next such wait once, harmlessly.
pub fn wait_on_donor(
    f: &Fiber,
    deadline: Option<u64>,
    mut wait: impl FnMut(Option<&libc::timespec>, &sigset_t) -> c_int,
) -> c_int {
    if interrupted_for_good(f, false) {
        // A handler ran on the fiber since the call began (the signal that a call's
        // own mask let through as it was installed, or a kick during the probe).
        sys::set_errno(libc::EINTR);
        return -1;
    }
    let r = crate::runtime::fiber::run_on_donor(|| {
        // SAFETY: an all-zero sigset_t is a valid (empty) set; `from_kernel` fills it.
        let mut mask: sigset_t = unsafe { core::mem::zeroed() };
        from_kernel(sys::sigmask_get() & !KICK_BIT, &mut mask);
        let r = loop {
            f.donor_wait.begin();
            if has_deliverable_held(f) || f.cancel_pending() {
                // On the donor, whose TCB (and so errno) is the fiber's.
                sys::set_errno(libc::EINTR);
                break -1;
            }
            let left = deadline.map(|d| sys::ns_to_timespec(d.saturating_sub(sys::now_ns())));
            let r = wait(left.as_ref(), &mask);
            // EINTR: the kick (the only signal the wait lets through), or a late one of
            // an earlier wait: look again.
            if !(r < 0 && sys::errno() == libc::EINTR) {
                break r;
            }
        };
        let e = sys::errno();
        if f.donor_wait.end() {
            drain_kick();
        }
        sys::set_errno(e);
        r
    });
    crate::signal::cancel::testcancel();
    r
}

/// Installs `mask`, the signal mask a `ppoll`, `pselect` or `epoll_pwait` call of fiber
/// `f` gives for its wait, as the fiber's own mask, and returns the mask to put back
/// with [`restore_call_mask`] when the call returns. Natively the kernel installs the
/// call's mask and waits in one step, and puts the thread's mask back on the way out:
/// a signal the call's mask lets through interrupts the wait and its handler runs with
/// that mask in effect, even if the thread's own mask blocks it; one it blocks stays
/// pending. For a fiber the mask is the fiber's for the duration of the call, so that
/// every wait the call makes (a direct wait or a park on a worker, where the kernel
/// mask is the fiber's, or [`wait_on_donor`], which looks at the fiber's mask) lets
/// through what the call's mask lets through. A signal held for the fiber that the
/// call's mask unblocks is raised here, at once: its handler runs on the fiber and
/// marks the call interrupted, as the kernel delivers such a pending signal when the
/// call begins.
pub fn install_call_mask(f: &Fiber, mask: &sigset_t) -> u64 {
    let before = intended_mask(f);
    // SAFETY: `mask` is a valid sigset; no old set is asked for.
    unsafe { fiber_sigmask(f, libc::SIG_SETMASK, mask, core::ptr::null_mut()) };
    before
}

/// Puts back the fiber's mask that [`install_call_mask`] replaced. A signal held for
/// the fiber meanwhile that the mask put back lets through is delivered now (natively
/// after the call's return); errno, the call's answer, is kept.
pub fn restore_call_mask(f: &Fiber, before: u64) {
    let e = sys::errno();
    let mut set: sigset_t = {
        // SAFETY: an all-zero sigset_t is a valid (empty) set.
        unsafe { core::mem::zeroed() }
    };
    from_kernel(before, &mut set);
    // SAFETY: `set` is a valid sigset; no old set is asked for.
    unsafe { fiber_sigmask(f, libc::SIG_SETMASK, &set, core::ptr::null_mut()) };
    sys::set_errno(e);
}

/// Whether a signal is held for fiber `f` that `mask` (a call's signal mask) lets
/// through: a `ppoll` or `pselect` that would not wait still returns `EINTR` for it.
pub fn holds_signal_outside(f: &Fiber, mask: &sigset_t) -> bool {
    f.signals.held() & !to_kernel(mask) != 0
}

/// Takes one signal of `set` that `pthread_kill` holds for fiber `f`.
fn take_held(f: &Fiber, set: u64) -> Option<c_int> {
    loop {
        let held = f.signals.held() & set;
        if held == 0 {
            return None;
        }
        let bit = 1u64 << held.trailing_zeros();
        if f.signals.take(bit) {
            return Some(bit.trailing_zeros() as c_int + 1);
        }
    }
}
