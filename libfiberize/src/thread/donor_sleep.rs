//! The donor's sleep, resumable in a forked child: a donor waits for its fiber in a
//! small assembly routine that publishes its stack pointer and callee-saved registers
//! first, so that a forked child (which has only the forking thread) can resume the
//! donor's frames as its one plain thread (see [`super::pthread`], "Fork").

use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::base::sys;
use crate::runtime::fiber::{self, Fiber, Switch};
use crate::runtime::fiber_state::DonorHandoff;

/// What [`donor_sleep`] returns in the copy of the donor that a forked child resumed.
pub(super) const WOKEN_IN_FORKED_CHILD: usize = 1;

// fiberize_donor_sleep(word: *const u32, expected: u32, sp_slot: *mut usize) -> usize
//   Saves rbp, rbx, r12-r15, MXCSR and the x87 control word (everything the SysV ABI
//   makes callee-saved) on the stack, publishes the stack pointer in *sp_slot, waits
//   with FUTEX_WAIT_PRIVATE (no timeout) while *word == expected, clears *sp_slot and
//   returns 0.
// fiberize_donor_wake_in_child(sp: usize) -> !
//   Loads such a published stack pointer and returns 1 from that donor_sleep.
core::arch::global_asm!(
    ".pushsection .text.fiberize_donor_sleep,\"ax\",@progbits",
    ".p2align 4",
    ".globl fiberize_donor_sleep",
    ".hidden fiberize_donor_sleep",
    ".type fiberize_donor_sleep,@function",
    "fiberize_donor_sleep:",
    ".cfi_startproc",
    "push rbp",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_rel_offset rbp, 0",
    "push rbx",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_rel_offset rbx, 0",
    "push r12",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_rel_offset r12, 0",
    "push r13",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_rel_offset r13, 0",
    "push r14",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_rel_offset r14, 0",
    "push r15",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_rel_offset r15, 0",
    "sub rsp, 8",
    ".cfi_adjust_cfa_offset 8",
    "stmxcsr [rsp]",
    "fnstcw [rsp + 4]",
    "mov r8, rdx",
    "mov [r8], rsp",
    "mov edx, esi",
    "mov esi, {futex_wait_private}",
    "xor r10d, r10d",
    "mov eax, {sys_futex}",
    "syscall",
    "mov qword ptr [r8], 0",
    "xor eax, eax",
    ".Lfiberize_donor_sleep_return:",
    "ldmxcsr [rsp]",
    "fldcw [rsp + 4]",
    "add rsp, 8",
    ".cfi_adjust_cfa_offset -8",
    "pop r15",
    ".cfi_adjust_cfa_offset -8",
    "pop r14",
    ".cfi_adjust_cfa_offset -8",
    "pop r13",
    ".cfi_adjust_cfa_offset -8",
    "pop r12",
    ".cfi_adjust_cfa_offset -8",
    "pop rbx",
    ".cfi_adjust_cfa_offset -8",
    "pop rbp",
    ".cfi_adjust_cfa_offset -8",
    "ret",
    ".cfi_endproc",
    ".size fiberize_donor_sleep, . - fiberize_donor_sleep",
    ".p2align 4",
    ".globl fiberize_donor_wake_in_child",
    ".hidden fiberize_donor_wake_in_child",
    ".type fiberize_donor_wake_in_child,@function",
    "fiberize_donor_wake_in_child:",
    "mov rsp, rdi",
    "mov eax, {woken}",
    "jmp .Lfiberize_donor_sleep_return",
    ".size fiberize_donor_wake_in_child, . - fiberize_donor_wake_in_child",
    ".popsection",
    futex_wait_private = const libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
    sys_futex = const libc::SYS_futex,
    woken = const WOKEN_IN_FORKED_CHILD,
);

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
