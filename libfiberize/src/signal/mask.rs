//! A fiber's own signal mask (`pthread_sigmask`, [`fiber_sigmask`]) and the raising of
//! the signals held for it that the mask lets through ([`deliver_pending`]): at its
//! return from a switch (`crate::runtime::fibers::hooks`), at the shield's exit, and when it
//! unblocks them.
//!
//! A signal mask belongs to a kernel thread, and fibers share workers. A fiber that
//! changes its mask gets its own (`Fiber::signals`, `SignalState::set_mask`), which the
//! worker installs before resuming it and replaces by its own afterwards
//! (`scheduler::run_fiber`); fibers that never touch their mask cost nothing. A new
//! fiber starts with its creator's mask, as a new thread does (`thread::pthread::create`).
//!
//! Above [`crate::signal::delivery`], which holds and routes the signals, and
//! [`crate::signal::handlers`], which says whether a handler bypasses the trampoline.

use libc::{c_int, sigset_t};

use crate::base::sys;
use crate::runtime::fibers::fiber::Fiber;
use crate::runtime::preemption::kick::KICK_BIT;
use crate::runtime::signals::queued_signals::{self, Instances};
use crate::signal::delivery::{effective_mask, from_kernel, give_back_to_process, tgkill_self, to_kernel};

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

/// Delivers the fiber's pending signals that its mask lets through, on the current
/// kernel thread. Called by the fiber itself (on its way out of a switch, in the kick
/// handler, when it unblocks them).
///
/// The handler must run *on the fiber* before its interrupted wait looks at
/// [`interrupted_for_good`](crate::signal::delivery::interrupted_for_good), as natively the handler runs before the interrupted call
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
        let sig = bit + 1;
        // Sent to the thread: a real-time signal queued several times is held again
        // after each instance (`queued_signals::take`), each raised in turn with its
        // siginfo, as the kernel delivers every queued instance, while the fiber's mask
        // lets it through.
        while f.signals.take_sent_to_thread(m) {
            mark_if_unwrapped(f, sig);
            queued_signals::send_taken(f, sig, sys::gettid(), Instances::Oldest);
            if effective_mask(f) & m != 0 {
                break;
            }
        }
        // Sent to the process too: a second signal, as the kernel delivers one pending
        // for the thread and one pending for the process.
        if effective_mask(f) & m == 0 && f.signals.take_sent_to_process(m) {
            mark_if_unwrapped(f, sig);
            tgkill_self(sig);
        }
    }
}

/// A handler that bypassed the trampoline (installed with the raw system call) does not
/// mark the interruption itself: marked here, as restartable, before `sig` is raised.
fn mark_if_unwrapped(f: &Fiber, sig: c_int) {
    if crate::signal::handlers::has_unwrapped_handler(sig) {
        f.interruption.mark(true);
    }
}

/// [`deliver_pending`] for the current fiber, if any: the shield's exit calls it.
fn deliver_held_of_current() {
    if let Some(f) = crate::runtime::fibers::fiber::current() {
        if f.signals.held() != 0 {
            deliver_pending(f);
        }
    }
}
