//! Switching a fiber out: to whoever resumed it, with what the upper layers do when it
//! comes back ([`Fiber::suspend`]); to its donor for one call ([`run_on_donor`]); to its
//! donor for good ([`become_plain_thread`], [`current_or_demote`]).
//!
//! Kept above [`crate::runtime::fibers::fiber`], which has the bare switch
//! (`Fiber::switch_out`): these paths call into the hooks table and the queued
//! signals, which name `Fiber` themselves.

use crate::base::stats::{bump, STATS};
use crate::runtime::fibers::fiber::{current, set_on_donor, Fiber, Switch};
use crate::runtime::fibers::hooks;
use crate::runtime::signals::queued_signals;

impl Fiber {
    /// Switches from the fiber to whoever resumed it; when it is back, runs the
    /// handlers of the signals held for it and acts on an asynchronous cancel request
    /// (through [`hooks`]).
    ///
    /// # Safety
    /// Must be called by this fiber, on its own stack.
    #[inline]
    pub unsafe fn suspend(&self, why: Switch) {
        // SAFETY: the caller's contract.
        unsafe { self.switch_out(why) };
        // Not on the donor, which blocks every signal: a signal raised there would stay
        // pending on it, lost to the fiber. Held signals wait for the fiber's return to a
        // worker (the donor's waits end early for them), or go to the kernel at once
        // when it became a plain thread (`become_plain_thread`).
        if why != Switch::RunOnDonor && self.signals.held() != 0 {
            (hooks::get().deliver_signals)(self);
        }
        if why == Switch::Yield && self.cancel.is_asynchronous() {
            (hooks::get().act_on_async_cancel)(self);
        }
    }
}

/// Runs `f` on the calling fiber's donor OS thread, so that `f` may block in the
/// kernel without blocking a worker. For a plain thread, runs `f` directly.
pub fn run_on_donor<R>(f: impl FnOnce() -> R) -> R {
    let Some(fiber) = current() else { return f() };
    bump(&STATS.donor_handoffs);
    // SAFETY: we are this fiber, on its stack.
    unsafe { fiber.suspend(Switch::RunOnDonor) };
    // Now on the donor OS thread (FS unchanged: it is the donor's own TCB).
    set_on_donor(true);
    let r = f();
    set_on_donor(false);
    // SAFETY: as above; the donor's resume() returns and it queues us in the pool.
    unsafe { fiber.suspend(Switch::BackToPool) };
    r
}

/// The calling fiber, after handing it to its donor for good if the monitor found it
/// blocking its worker too often (then None: the caller is a plain thread now). Called
/// at the entry of blocking operations, where the fiber holds no runtime lock and is
/// in no wait queue.
#[inline]
pub fn current_or_demote() -> Option<&'static Fiber> {
    let f = current()?;
    if f.demotion.is_due() {
        demote(f);
        return None;
    }
    Some(f)
}

#[cold]
fn demote(f: &Fiber) {
    bump(&STATS.fibers_demoted);
    if crate::base::sites::on() {
        let routine = f.identity.start_routine();
        if let Some(e) = crate::base::sites::entry(crate::base::sites::Kind::Demoted, routine, || routine) {
            e.add(0);
        }
    }
    become_plain_thread();
    (hooks::get().demoted)(f);
}

/// Moves the calling fiber to its donor for good and returns there: from now on the
/// caller is a plain OS thread (used by `pthread_exit`). Returns false for a caller
/// that is not a fiber (it already is a plain thread).
///
/// Signals: the donor blocks every signal while its fiber lives; a plain thread takes
/// them from the kernel under its own mask. So the fiber's mask goes with it (read on
/// the worker, whose mask stands in for a fiber without its own), and
/// signals for it go to the donor's kernel thread from the moment it is marked a plain
/// thread (`signal::delivery::kill_fiber`); those held before are raised there (queued
/// ones with their siginfo, `queued_signals`) once the mask is installed: the kernel runs the handlers it lets through and keeps the
/// others pending, as it does for any thread (docs/DESIGN.md §2.12).
pub fn become_plain_thread() -> bool {
    let Some(fiber) = current() else { return false };
    bump(&STATS.donor_handoffs);
    let mask = fiber.signals.own_mask().unwrap_or_else(crate::base::sys::sigmask_get);
    fiber.signals.mark_plain_thread();
    // SAFETY: we are this fiber, on its stack.
    unsafe { fiber.suspend(Switch::RunOnDonor) };
    set_on_donor(true);
    fiber.altstack.hand_to_kernel();
    crate::base::sys::sigmask_set(mask & !crate::base::sys::GLIBC_INTERNAL_SIGNALS);
    let (to_thread, to_process) = fiber.signals.take_all();
    for bit in (0..64).filter(|b| to_thread & (1u64 << b) != 0) {
        queued_signals::send_all_here(fiber, bit + 1);
    }
    // Signals of the process that were handed to the fiber go back to the process,
    // which gives them to a thread that takes them: this one, if its mask lets them in.
    for bit in (0..64).filter(|b| to_process & (1u64 << b) != 0) {
        crate::base::sys::kill(bit + 1);
    }
    true
}
