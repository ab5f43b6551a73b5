//! x86_64: the `syscall` instruction, FS base as the thread pointer (TLS variant II),
//! the SysV callee-saved registers. See the module docs of [`super`].

use core::arch::asm;
use core::sync::atomic::{AtomicU8, Ordering};

/// Executes `syscall` with six integer arguments, returning the raw kernel result
/// (`-errno` on failure). Never touches `errno`.
///
/// # Safety
/// The caller must uphold the contract of system call `nr` for these arguments.
#[inline]
pub(in crate::base) unsafe fn syscall6(nr: usize, a1: usize, a2: usize, a3: usize, a4: usize, a5: usize, a6: usize) -> isize {
    let ret: isize;
    // SAFETY: the x86_64 Linux system call ABI: number in rax, arguments in rdi, rsi,
    // rdx, r10, r8, r9; the kernel clobbers rcx and r11. The caller vouches for the call.
    unsafe {
        asm!("syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a1, in("rsi") a2, in("rdx") a3, in("r10") a4, in("r8") a5, in("r9") a6,
            lateout("rcx") _, lateout("r11") _,
            options(nostack));
    }
    ret
}

/// The thread pointer of the current OS thread (or fiber): glibc keeps the TCB's own
/// address in its first word (`tcbhead_t.tcb`), so `fs:0` is the FS base itself.
#[inline]
pub fn thread_pointer() -> usize {
    let tp: usize;
    // SAFETY: on x86_64 glibc, FS always points at a valid TCB whose first word is
    // its own address.
    unsafe { asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, readonly, preserves_flags)) };
    tp
}

// The runtime's thread words (`crate::base::thread_words`): one block in the static TLS
// of every thread, reached the initial-exec way, `fs:[offset]` with the offset from the
// GOT (no `__tls_get_addr`). The block itself is defined in `super`.

/// The offset of the thread words from the thread pointer, from their GOT entry (the
/// dynamic linker wrote it once, before any code of ours ran).
#[inline(always)]
fn thread_words_offset() -> usize {
    let off: usize;
    // SAFETY: reads the GOT entry of a TLS symbol defined above; the entry never changes
    // after relocation, hence `pure`.
    unsafe {
        asm!("mov {}, qword ptr [rip + fiberize_thread_words@GOTTPOFF]", out(reg) off,
            options(nostack, pure, readonly, preserves_flags))
    };
    off
}

/// Reads thread word `index` (< [`super::THREAD_WORDS`]) of the TCB FS points at now.
#[inline(always)]
pub fn load_thread_word(index: usize) -> usize {
    let v: usize;
    // SAFETY: FS always points at a live glibc TCB, whose static TLS holds the block
    // (the library's TLS is static: it is loaded at start, or with initial-exec's
    // surplus); `index` is in the block (callers pass the constants of `thread_words`).
    // Not `pure`: a fiber switch changes FS between two reads in one function.
    unsafe {
        asm!("mov {v}, qword ptr fs:[{off}]", v = lateout(reg) v, off = in(reg) thread_words_offset() + index * 8,
            options(nostack, readonly, preserves_flags))
    };
    v
}

/// Writes thread word `index` of the TCB FS points at now.
#[inline(always)]
pub fn store_thread_word(index: usize, value: usize) {
    // SAFETY: as in `load_thread_word`; the word belongs to this TCB, which only the OS
    // thread running it (or the fiber on it) touches.
    unsafe {
        asm!("mov qword ptr fs:[{off}], {v}", v = in(reg) value, off = in(reg) thread_words_offset() + index * 8,
            options(nostack, preserves_flags))
    };
}

// `FSBASE_METHOD`: how this process writes the FS base register.
/// Not decided yet (`detect_thread_pointer_method` runs before the first switch).
const FSBASE_UNKNOWN: u8 = 0;
/// `wrfsbase` (the kernel enabled FSGSBASE): a few cycles.
const FSBASE_INSTRUCTION: u8 = 1;
/// `arch_prctl(ARCH_SET_FS)`: a system call per switch.
const FSBASE_SYSCALL: u8 = 2;
static FSBASE_METHOD: AtomicU8 = AtomicU8::new(FSBASE_UNKNOWN);

/// Decides once whether the kernel lets user space run `WRFSBASE`
/// (`getauxval(AT_HWCAP2) & HWCAP2_FSGSBASE`, bit 1). Must run before the first
/// switch; [`crate::runtime::scheduler`] calls it while starting the pool.
pub fn detect_thread_pointer_method() {
    // SAFETY: getauxval has no preconditions.
    let hwcap2 = unsafe { libc::getauxval(libc::AT_HWCAP2) };
    let m = if hwcap2 & 2 != 0 { FSBASE_INSTRUCTION } else { FSBASE_SYSCALL };
    FSBASE_METHOD.store(m, Ordering::Relaxed);
}

/// Points FS at another TCB: from now on every TLS access (errno, `pthread_self`,
/// malloc's tcache, every `thread_local`) of this OS thread reaches `tp`'s block.
///
/// # Safety
/// `tp` must be the thread pointer of a live glibc thread whose TLS no other OS thread
/// uses until FS is switched away again. The caller must not touch TLS it obtained
/// before the switch (addresses of thread_locals are cached by compilers).
#[inline(always)]
pub unsafe fn set_thread_pointer(tp: usize) {
    if FSBASE_METHOD.load(Ordering::Relaxed) == FSBASE_INSTRUCTION {
        // SAFETY: the kernel enabled FSGSBASE (checked in detect_thread_pointer_method); the
        // caller guarantees `tp` is a valid TCB for exclusive use.
        unsafe { asm!("wrfsbase {}", in(reg) tp, options(nostack, preserves_flags)) };
    } else {
        const ARCH_SET_FS: usize = 0x1002;
        // SAFETY: as above; arch_prctl(ARCH_SET_FS) is the slow equivalent.
        unsafe { syscall6(libc::SYS_arch_prctl as usize, ARCH_SET_FS, tp, 0, 0, 0, 0) };
    }
}

/// The current stack pointer.
#[inline(always)]
pub fn stack_pointer() -> usize {
    let sp: usize;
    // SAFETY: reads the stack pointer; no memory access, no flags changed.
    unsafe { asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags)) };
    sp
}

/// The interrupted instruction's address in a signal handler's context.
#[inline]
pub fn interrupted_pc(uc: &libc::ucontext_t) -> usize {
    uc.uc_mcontext.gregs[libc::REG_RIP as usize] as usize
}

/// The offset of `addr` below the thread pointer `tp`, if it lies in the static TLS
/// block of `static_size` bytes (TCB included) that ends at the TCB.
#[inline]
pub fn static_tls_offset(addr: usize, tp: usize, static_size: usize) -> Option<usize> {
    let off = tp.checked_sub(addr)?;
    (off > 0 && off <= static_size).then_some(off)
}

/// The address at offset `off` (from [`static_tls_offset`]) in the block of `tp`.
#[inline]
pub fn static_tls_addr(tp: usize, off: usize) -> usize {
    tp - off
}

/// Whether `size` bytes at offset `off` stay in the static block (end before the TCB).
#[inline]
pub fn static_tls_range_fits(off: usize, size: usize, _static_size: usize) -> bool {
    off >= size
}

/// How many bytes before a return address [`is_call_before`] looks at.
pub const CALL_LOOKBACK: usize = 7;

/// Whether the [`CALL_LOOKBACK`] bytes `b` that end at a return address end with a
/// call: `e8` with a 32-bit displacement, or an indirect `ff /2` of 2, 3, 6 or 7 bytes.
#[inline]
pub fn is_call_before(b: &[u8]) -> bool {
    let indirect = |at: usize| b[at] == 0xff && (b[at + 1] >> 3) & 7 == 2;
    b[2] == 0xe8 || indirect(5) || indirect(4) || indirect(1) || indirect(0)
}

/// The runtime's kick signal (`crate::runtime::preemption::kick`): SIGRTMAX.
pub const KICK_SIGNAL: libc::c_int = 64;

/// `io_pgetevents` (not in the libc crate for x86_64 glibc).
pub const SYS_IO_PGETEVENTS: libc::c_long = 333;

/// The system call of `vfork` ([`crate::vfork_naked_asm`]).
pub const VFORK_SYSCALL: usize = libc::SYS_vfork as usize;

/// The body of the library's `vfork` (`interpose`'s `exports/process.rs` explains why
/// it is assembly): `$enter()` before the system call, `$leave(result)` in the parent.
///
/// ```text
///   pop  rdi               return address, out of the child's reach
///   push rdi / sub rsp, 8  (aligned call) enter(): mark the TCB
///   syscall vfork          the parent sleeps until the child exec'd or exited
///   push rdi               both: the return address back in place
///   child (rax == 0):      ret
///   parent:                leave(rax) -> pid, or -1 with errno; ret
/// ```
#[macro_export]
macro_rules! vfork_naked_asm {
    ($enter:path, $leave:path) => {
        core::arch::naked_asm!(
            "pop rdi",
            "push rdi",
            "sub rsp, 8",
            "call {enter}",
            "add rsp, 8",
            "pop rdi",
            "mov eax, {sys_vfork}",
            "syscall",
            "push rdi",
            "test rax, rax",
            "jz 2f",
            "push rax",
            "mov rdi, rax",
            "call {leave}",
            "add rsp, 8",
            "2:",
            "ret",
            enter = sym $enter,
            leave = sym $leave,
            sys_vfork = const $crate::base::arch::VFORK_SYSCALL,
        )
    };
}

/// The body of a naked function that only jumps to `$target`.
#[macro_export]
macro_rules! tail_call_naked_asm {
    ($target:path) => {
        core::arch::naked_asm!("jmp {target}", target = sym $target)
    };
}

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
    woken = const super::DONOR_WOKEN_IN_FORKED_CHILD,
);
