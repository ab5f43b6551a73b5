//! The donor's sleep, resumable in a forked child: a donor waits for its fiber in a
//! small assembly routine that publishes its stack pointer and callee-saved registers
//! first, so that a forked child (which has only the forking thread) can resume the
//! donor's frames as its one plain thread (see [`super::pthread`], "Fork").

use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::base::sys;
use crate::runtime::fibers::fiber::{self, Fiber, Switch};
use crate::runtime::fibers::fiber_state::DonorHandoff;

/// What [`donor_sleep`] returns in the copy of the donor that a forked child resumed.
pub(super) const WOKEN_IN_FORKED_CHILD: usize = crate::base::arch::DONOR_WOKEN_IN_FORKED_CHILD;

// fiberize_donor_sleep(word: *const u32, expected: u32, sp_slot: *mut usize) -> usize
//   Saves every callee-saved register, publishes the stack pointer in *sp_slot, waits
//   with FUTEX_WAIT_PRIVATE while *word == expected, clears *sp_slot and returns 0.
// fiberize_donor_wake_in_child(sp: usize) -> !
//   Loads such a published stack pointer and returns 1 from that donor_sleep.
// Both are assembly, one per architecture, in `crate::base::arch`.

extern "C" {
    fn fiberize_donor_sleep(word: *const AtomicU32, expected: u32, sp_slot: *const AtomicUsize) -> usize;
    fn fiberize_donor_wake_in_child(sp: usize) -> !;
}

/// The donor's futex wait for a hand-off, resumable in a forked child. Returns
/// [`WOKEN_IN_FORKED_CHILD`] there, 0 after an ordinary wake-up (or a spurious one).
///
/// # Safety
/// `handoff` is the calling donor's own fiber's; only a donor calls this.
pub(super) unsafe fn donor_sleep(handoff: &DonorHandoff) -> usize {
    let (word, idle, sp_slot) = handoff.sleep_words();
    // SAFETY: `word` and `sp_slot` are references, valid for the whole call; the routine
    // preserves every register the ABI asks a callee to preserve, and only this donor
    // publishes in `sp_slot` (caller's contract).
    unsafe { fiberize_donor_sleep(word, idle, sp_slot) }
}

/// The forking fiber's signal mask, as the child's thread had it at the fork.
static FORK_CHILD_MASK: AtomicU64 = AtomicU64::new(0);

/// Atfork prepare, on the forking fiber (running on a worker): waits until its donor
/// sleeps in [`donor_sleep`] with its registers published. The donor is at most a few
/// hundred instructions away from it (it just handed the fiber to the pool), and
/// nothing can wake it while the fiber runs elsewhere.
pub fn wait_for_donor_asleep(f: &Fiber) {
    while f.donor.sleeping_sp() == 0 {
        sys::sched_yield_raw();
    }
}

/// Atfork child, on the forking fiber (running on the worker's copy): continue as a
/// plain thread on the donor's frames (module docs, "Fork"). Returns on the donor.
pub fn move_to_donor_in_forked_child(f: &Fiber) {
    FORK_CHILD_MASK.store(sys::sigmask_get(), Ordering::Relaxed);
    // SAFETY: we are this fiber, on its stack; the worker side hands us to
    // `resume_donor_in_forked_child`, which resumes us on the donor's copy.
    unsafe { f.suspend(Switch::RunOnDonor) };
    fiber::set_on_donor(true);
}

/// The worker side of [`move_to_donor_in_forked_child`]: abandons the worker's frames
/// and continues in the donor's copy, which resumes `f`. Never returns.
pub fn resume_donor_in_forked_child(f: &Fiber) -> ! {
    let sp = f.donor.sleeping_sp();
    if sp == 0 {
        crate::fatal(&["forked child: the forking fiber's donor was not asleep"]);
    }
    sys::sigmask_set(FORK_CHILD_MASK.load(Ordering::Relaxed));
    // SAFETY: the donor's TCB is the child's one glibc thread; from here on no worker
    // TLS is used. `sp` was published by the donor's donor_sleep, whose frames (and
    // those above them) are intact in the child's copy of the donor's stack.
    unsafe {
        sys::set_thread_pointer(f.identity.tp());
        fiberize_donor_wake_in_child(sp)
    }
}
