//! aarch64: `svc #0`, `TPIDR_EL0` as the thread pointer (TLS variant I), the AAPCS64
//! callee-saved registers. See the module docs of [`super`].

use core::arch::asm;

/// Executes `svc #0` with six integer arguments, returning the raw kernel result
/// (`-errno` on failure). Never touches `errno`.
///
/// # Safety
/// The caller must uphold the contract of system call `nr` for these arguments.
#[inline]
pub(in crate::base) unsafe fn syscall6(nr: usize, a1: usize, a2: usize, a3: usize, a4: usize, a5: usize, a6: usize) -> isize {
    let ret: isize;
    // SAFETY: the aarch64 Linux system call ABI: number in x8, arguments in x0-x5,
    // result in x0; the kernel preserves every other register. The caller vouches for
    // the call.
    unsafe {
        asm!("svc #0",
            in("x8") nr,
            inlateout("x0") a1 as isize => ret,
            in("x1") a2, in("x2") a3, in("x3") a4, in("x4") a5, in("x5") a6,
            options(nostack));
    }
    ret
}

/// The thread pointer of the current OS thread (or fiber): `TPIDR_EL0`, the address
/// of glibc's `tcbhead_t` (`pthread_self()` is `sizeof(struct pthread)` below it).
#[inline]
pub fn thread_pointer() -> usize {
    let tp: usize;
    // SAFETY: reading TPIDR_EL0 has no side effects. Not `pure`: a fiber switch changes
    // it between two reads in the same function.
    unsafe { asm!("mrs {}, tpidr_el0", out(reg) tp, options(nomem, nostack, preserves_flags)) };
    tp
}

// The runtime's thread words (`crate::base::thread_words`): one block in the static TLS
// of every thread, reached the initial-exec way, `TPIDR_EL0` plus the offset from the
// GOT (no `__tls_get_addr`). The block itself is defined in `super`.

/// The offset of the thread words from the thread pointer, from their GOT entry (the
/// dynamic linker wrote it once, before any code of ours ran).
#[inline(always)]
fn thread_words_offset() -> usize {
    let off: usize;
    // SAFETY: reads the GOT entry of a TLS symbol defined above; the entry never changes
    // after relocation, hence `pure`.
    unsafe {
        asm!("adrp {o}, :gottprel:fiberize_thread_words",
            "ldr {o}, [{o}, #:gottprel_lo12:fiberize_thread_words]", o = out(reg) off,
            options(nostack, pure, readonly, preserves_flags))
    };
    off
}

/// Reads thread word `index` (< [`super::THREAD_WORDS`]) of the TCB `TPIDR_EL0` points
/// at now.
#[inline(always)]
pub fn load_thread_word(index: usize) -> usize {
    let addr = thread_pointer().wrapping_add(thread_words_offset() + index * 8);
    // SAFETY: the thread pointer is a live glibc TCB whose static TLS holds the block
    // (loaded at start, or with initial-exec's surplus); `index` is in the block.
    unsafe { core::ptr::read_volatile(addr as *const usize) }
}

/// Writes thread word `index` of the TCB `TPIDR_EL0` points at now.
#[inline(always)]
pub fn store_thread_word(index: usize, value: usize) {
    let addr = thread_pointer().wrapping_add(thread_words_offset() + index * 8);
    // SAFETY: as in `load_thread_word`; only the OS thread running this TCB touches it.
    unsafe { core::ptr::write_volatile(addr as *mut usize, value) }
}

/// Nothing to decide: `TPIDR_EL0` is always writable from user space.
pub fn detect_thread_pointer_method() {}

/// Points `TPIDR_EL0` at another TCB: from now on every TLS access (errno,
/// `pthread_self`, malloc's tcache, every `thread_local`) of this OS thread reaches
/// `tp`'s block.
///
/// # Safety
/// `tp` must be the thread pointer of a live glibc thread whose TLS no other OS thread
/// uses until the thread pointer is switched away again. The caller must not touch TLS
/// it obtained before the switch (addresses of thread_locals are cached by compilers).
#[inline(always)]
pub unsafe fn set_thread_pointer(tp: usize) {
    // SAFETY: the caller guarantees `tp` is a valid TCB for exclusive use; the write
    // clobbers memory as far as the compiler is concerned (TLS moves).
    unsafe { asm!("msr tpidr_el0, {}", in(reg) tp, options(nostack, preserves_flags)) };
}

/// The current stack pointer.
#[inline(always)]
pub fn stack_pointer() -> usize {
    let sp: usize;
    // SAFETY: reads the stack pointer; no memory access, no flags changed.
    unsafe { asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags)) };
    sp
}

/// The interrupted instruction's address in a signal handler's context.
#[inline]
pub fn interrupted_pc(uc: &libc::ucontext_t) -> usize {
    uc.uc_mcontext.pc as usize
}

/// glibc's `TLS_TCB_SIZE` on aarch64: `tcbhead_t` (dtv, private), which the static
/// TLS blocks follow.
const TCB_SIZE: usize = 16;

/// The offset of `addr` above the thread pointer `tp`, if it lies in the static TLS
/// blocks that follow the TCB. `static_size` (from `_dl_get_tls_static_info`) also
/// counts `struct pthread` below the thread pointer, so the bound is a little loose.
#[inline]
pub fn static_tls_offset(addr: usize, tp: usize, static_size: usize) -> Option<usize> {
    let off = addr.checked_sub(tp)?;
    (off >= TCB_SIZE && off < static_size).then_some(off)
}

/// The address at offset `off` (from [`static_tls_offset`]) in the block of `tp`.
#[inline]
pub fn static_tls_addr(tp: usize, off: usize) -> usize {
    tp + off
}

/// Whether `size` bytes at offset `off` stay in the static block.
#[inline]
pub fn static_tls_range_fits(off: usize, size: usize, static_size: usize) -> bool {
    off.checked_add(size).is_some_and(|end| end <= static_size)
}

/// How many bytes before a return address [`is_call_before`] looks at.
pub const CALL_LOOKBACK: usize = 4;

/// Whether the instruction word `b` that ends at a return address is a call: `bl`
/// (`100101` and a 26-bit offset) or `blr Xn` (`0xd63f0000 | n << 5`).
#[inline]
pub fn is_call_before(b: &[u8]) -> bool {
    let insn = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    insn & 0xfc00_0000 == 0x9400_0000 || insn & 0xffff_fc1f == 0xd63f_0000
}

/// The runtime's kick signal (`crate::runtime::preemption::kick`): SIGRTMAX - 2. qemu-user, which
/// runs aarch64 programs on other machines (the project's tests, multi-architecture
/// container builds), has no host signal left for the guest's two highest real-time
/// signals: sending 63 or 64 fails there with EINVAL, and the kick would never arrive.
pub const KICK_SIGNAL: libc::c_int = 62;

/// `io_pgetevents` (not in the libc crate for aarch64 glibc; the generic table's 292).
pub const SYS_IO_PGETEVENTS: libc::c_long = 292;

/// aarch64 has no `vfork` system call: `clone(CLONE_VM | CLONE_VFORK | SIGCHLD)`, as
/// glibc's own `vfork` makes.
pub const VFORK_SYSCALL: usize = libc::SYS_clone as usize;
/// The `clone` flags of `vfork`.
pub const VFORK_CLONE_FLAGS: usize = (libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD) as usize;

/// The body of the library's `vfork` (`interpose`'s `exports/process.rs` explains why
/// it is assembly): `$enter()` before the system call, `$leave(result)` in the parent.
/// The return address lives in x30, which the kernel keeps per task; x29/x30 are
/// stored on the stack only around the two calls, outside the child's lifetime.
///
/// ```text
///   stp x29, x30 / bl enter / ldp   enter(): mark the TCB
///   clone(CLONE_VM|CLONE_VFORK|SIGCHLD, sp)   the parent sleeps until the child exec'd or exited
///   child (x0 == 0):      ret
///   parent:               stp x29, x30 / leave(x0) -> pid, or -1 with errno / ldp; ret
/// ```
#[macro_export]
macro_rules! vfork_naked_asm {
    ($enter:path, $leave:path) => {
        core::arch::naked_asm!(
            "stp x29, x30, [sp, #-16]!",
            "mov x29, sp",
            "bl {enter}",
            "ldp x29, x30, [sp], #16",
            "mov x0, #{flags}",
            "mov x1, sp",
            "mov x2, xzr",
            "mov x3, xzr",
            "mov x4, xzr",
            "mov x8, #{sys_clone}",
            "svc #0",
            "cbz x0, 2f",
            "stp x29, x30, [sp, #-16]!",
            "mov x29, sp",
            "bl {leave}",
            "ldp x29, x30, [sp], #16",
            "2:",
            "ret",
            enter = sym $enter,
            leave = sym $leave,
            flags = const $crate::base::arch::VFORK_CLONE_FLAGS,
            sys_clone = const $crate::base::arch::VFORK_SYSCALL,
        )
    };
}

/// The body of a naked function that only jumps to `$target`.
#[macro_export]
macro_rules! tail_call_naked_asm {
    ($target:path) => {
        core::arch::naked_asm!("b {target}", target = sym $target)
    };
}

// fiberize_donor_sleep(word: *const u32, expected: u32, sp_slot: *mut usize) -> usize
//   Saves x19-x28, x29, x30, d8-d15 and FPCR (everything AAPCS64 makes callee-saved,
//   plus the floating-point control register, as x86_64 saves MXCSR) in a 176-byte
//   frame, publishes the stack pointer in *sp_slot, waits with FUTEX_WAIT_PRIVATE (no
//   timeout) while *word == expected, clears *sp_slot and returns 0. The kernel
//   preserves every register but x0 across `svc`, so x10 keeps sp_slot.
// fiberize_donor_wake_in_child(sp: usize) -> !
//   Loads such a published stack pointer and returns 1 from that donor_sleep.
//
//   frame (sp = published value)
//   +0 x29 x30 | +16 x19 x20 | +32 x21 x22 | +48 x23 x24 | +64 x25 x26 | +80 x27 x28
//   +96 d8 d9 | +112 d10 d11 | +128 d12 d13 | +144 d14 d15 | +160 FPCR | +168 unused
core::arch::global_asm!(
    ".pushsection .text.fiberize_donor_sleep,\"ax\",@progbits",
    ".p2align 4",
    ".globl fiberize_donor_sleep",
    ".hidden fiberize_donor_sleep",
    ".type fiberize_donor_sleep,@function",
    "fiberize_donor_sleep:",
    ".cfi_startproc",
    "sub sp, sp, #176",
    ".cfi_def_cfa_offset 176",
    "stp x29, x30, [sp, #0]",
    ".cfi_offset x29, -176",
    ".cfi_offset x30, -168",
    "stp x19, x20, [sp, #16]",
    ".cfi_offset x19, -160",
    ".cfi_offset x20, -152",
    "stp x21, x22, [sp, #32]",
    ".cfi_offset x21, -144",
    ".cfi_offset x22, -136",
    "stp x23, x24, [sp, #48]",
    ".cfi_offset x23, -128",
    ".cfi_offset x24, -120",
    "stp x25, x26, [sp, #64]",
    ".cfi_offset x25, -112",
    ".cfi_offset x26, -104",
    "stp x27, x28, [sp, #80]",
    ".cfi_offset x27, -96",
    ".cfi_offset x28, -88",
    "stp d8, d9, [sp, #96]",
    "stp d10, d11, [sp, #112]",
    "stp d12, d13, [sp, #128]",
    "stp d14, d15, [sp, #144]",
    "mrs x9, fpcr",
    "str x9, [sp, #160]",
    "mov x10, x2",
    "mov x9, sp",
    "str x9, [x10]",
    "mov w2, w1",
    "mov x1, #{futex_wait_private}",
    "mov x3, xzr",
    "mov x8, #{sys_futex}",
    "svc #0",
    "str xzr, [x10]",
    "mov x0, xzr",
    ".Lfiberize_donor_sleep_return:",
    "ldr x9, [sp, #160]",
    "msr fpcr, x9",
    "ldp d14, d15, [sp, #144]",
    "ldp d12, d13, [sp, #128]",
    "ldp d10, d11, [sp, #112]",
    "ldp d8, d9, [sp, #96]",
    "ldp x27, x28, [sp, #80]",
    "ldp x25, x26, [sp, #64]",
    "ldp x23, x24, [sp, #48]",
    "ldp x21, x22, [sp, #32]",
    "ldp x19, x20, [sp, #16]",
    "ldp x29, x30, [sp, #0]",
    "add sp, sp, #176",
    ".cfi_def_cfa_offset 0",
    "ret",
    ".cfi_endproc",
    ".size fiberize_donor_sleep, . - fiberize_donor_sleep",
    ".p2align 4",
    ".globl fiberize_donor_wake_in_child",
    ".hidden fiberize_donor_wake_in_child",
    ".type fiberize_donor_wake_in_child,@function",
    "fiberize_donor_wake_in_child:",
    "mov sp, x0",
    "mov x0, #{woken}",
    "b .Lfiberize_donor_sleep_return",
    ".size fiberize_donor_wake_in_child, . - fiberize_donor_wake_in_child",
    ".popsection",
    futex_wait_private = const libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
    sys_futex = const libc::SYS_futex,
    woken = const super::DONOR_WOKEN_IN_FORKED_CHILD,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_recognized_before_a_return_address() {
        let call = |insn: u32| is_call_before(&insn.to_le_bytes());
        assert!(call(0x9400_0010), "bl +0x40");
        assert!(call(0x97ff_fff0), "bl -0x40");
        assert!(call(0xd63f_0100), "blr x8");
        assert!(!call(0xd65f_03c0), "ret");
        assert!(!call(0x1400_0010), "b +0x40");
        assert!(!call(0xd61f_0100), "br x8");
    }
}
