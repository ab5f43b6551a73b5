//! Waits a fiber makes on its donor that signals and cancellation end: `sigwait` and
//! its family ([`fiber_sigtimedwait`]), and the descriptor waits that the reactor cannot
//! park on ([`wait_on_donor`]), with the signal mask of `ppoll`, `pselect` and
//! `epoll_pwait` ([`install_call_mask`]). A sender holds a signal or a cancellation
//! request for the fiber, then kicks its donor if it waits
//! ([`interrupt_donor_wait`](crate::signal::delivery::interrupt_donor_wait); the
//! protocol is `runtime::sleep::sleep_state::DonorWait`).

use libc::{c_int, sigset_t};

use crate::base::sys;
use crate::runtime::fibers::fiber::Fiber;
use crate::runtime::preemption::kick::{KICK_BIT, KICK_SIGNAL};
use crate::runtime::signals::queued_signals;
use crate::signal::delivery::{from_kernel, has_deliverable_held, intended_mask, interrupted_for_good, to_kernel};
use crate::signal::mask::fiber_sigmask;

// ---------------------------------------------------------------------------------
// sigwait and friends for fibers
// ---------------------------------------------------------------------------------

/// `sigtimedwait` (and `sigwaitinfo`, `sigwait`) for a fiber: `timeout_ns` relative
/// (`None`: no limit). Waits on the donor, in the kernel, for the signals of `set` *and*
/// the kick signal: a signal `pthread_kill` holds for this fiber is taken too (sigwait
/// consumes a pending blocked signal, and a held one is pending for the fiber), and
/// `pthread_cancel` acts (sigwait is a cancellation point; glibc's own would wait where
/// our cancellation cannot reach). Their senders kick the donor when it waits
/// ([`interrupt_donor_wait`]; the protocol is `runtime::sleep::sleep_state::DonorWait`): the
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
    let r = crate::runtime::fibers::switch::run_on_donor(|| {
        let r = loop {
            f.donor_wait.begin();
            if let Some((sig, sent_to_thread)) = take_held(f, set) {
                // The sender's siginfo if it queued one (the next instance stays held).
                let queued = if sent_to_thread { queued_signals::take(f, sig, true) } else { None };
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
            if has_deliverable_held(f) {
                // A signal outside `set` that the fiber's mask lets through: natively its
                // handler runs and the wait ends with EINTR. The handler runs when the
                // fiber is back on a worker, before this call returns.
                break -(libc::EINTR as isize);
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
/// The same protocol as [`fiber_sigtimedwait`] (`runtime::sleep::sleep_state::DonorWait`):
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
    let r = crate::runtime::fibers::switch::run_on_donor(|| {
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

/// Takes one signal of `set` held for fiber `f`, the thread's first: the signal, and
/// whether it was sent to the thread (a queued siginfo may go with it).
fn take_held(f: &Fiber, set: u64) -> Option<(c_int, bool)> {
    loop {
        let held = f.signals.held() & set;
        if held == 0 {
            return None;
        }
        let bit = 1u64 << held.trailing_zeros();
        let sig = bit.trailing_zeros() as c_int + 1;
        if f.signals.take_sent_to_thread(bit) {
            return Some((sig, true));
        }
        if f.signals.take_sent_to_process(bit) {
            return Some((sig, false));
        }
    }
}
