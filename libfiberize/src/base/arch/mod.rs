//! Everything that depends on the processor architecture, behind one switch: this
//! module re-exports [`x86_64`] or [`aarch64`] (the way corosensei keeps its `arch/`
//! modules), and no other file of the runtime names a register, an instruction or an
//! architecture's system call number. Each architecture module provides:
//!
//! | item                              | what it is                                         |
//! |-----------------------------------|----------------------------------------------------|
//! | `syscall6` (for `base/` only)     | the raw system call instruction, six arguments     |
//! | [`thread_pointer`]                | the glibc thread pointer (FS base / `TPIDR_EL0`)   |
//! | [`set_thread_pointer`]            | the TLS switch of a fiber switch                   |
//! | [`detect_thread_pointer_method`]  | chooses how to write it, once, before the first switch |
//! | [`stack_pointer`]                 | the current stack pointer                          |
//! | [`interrupted_pc`]                | the program counter in a signal handler's `ucontext_t` |
//! | [`static_tls_offset`], [`static_tls_addr`] | where static TLS lies relative to the thread pointer |
//! | `fiberize_donor_sleep`, `fiberize_donor_wake_in_child` | the donor's resumable futex sleep (assembly) |
//! | [`vfork_naked_asm!`](crate::vfork_naked_asm), [`tail_call_naked_asm!`](crate::tail_call_naked_asm) | `vfork`'s body |
//! | [`VFORK_SYSCALL`]                 | the system call `vfork` makes                       |
//! | [`is_call_before`], [`CALL_LOOKBACK`] | whether a code address follows a call (the report's call sites) |
//! | [`KICK_SIGNAL`]                   | the runtime's kick signal (SIGRTMAX; SIGRTMAX-2 on aarch64, for qemu-user) |
//! | [`SYS_IO_PGETEVENTS`]             | a system call number the `libc` crate lacks         |
//! | [`load_thread_word`], [`store_thread_word`] | the runtime's initial-exec TLS words ([`crate::base::thread_words`]) |
//!
//! System calls that one architecture lacks (aarch64 has no `poll`, `epoll_wait`,
//! `open`, `fork` …) are replaced inside their wrappers in [`crate::base::sys`], with
//! the numbers from the `libc` crate.
//!
//! # The context switch
//!
//! The stack switch itself is corosensei's (`corosensei::arch`, which has both
//! architectures): it saves the callee-saved registers on the old stack, stores the
//! stack pointer, and loads the other one.
//!
//! ```text
//!   x86_64 (SysV)                         aarch64 (AAPCS64)
//!   callee-saved: rbx rbp r12-r15,        callee-saved: x19-x28, x29 (fp), x30 (lr),
//!     MXCSR and x87 control word            d8-d15 (low halves of v8-v15), FPCR
//!   stack pointer: rsp                    stack pointer: sp (16-byte aligned always)
//!   return address: on the stack          return address: in x30
//!
//!   suspended fiber's stack (grows down)
//!   +---------------------------+
//!   | program frames            |
//!   | Fiber::suspend            |
//!   | [callee-saved registers]  |  <- saved stack pointer (corosensei)
//!   +---------------------------+
//! ```
//!
//! # The thread pointer
//!
//! The switch that makes a fiber's program code see its own thread (errno,
//! `pthread_self`, every `__thread`) is the thread pointer's, which corosensei does not
//! touch: `run_fiber` sets it to the fiber's donor TCB before resuming the fiber and
//! back to the worker's own afterwards ([`set_thread_pointer`]).
//!
//! ```text
//!   x86_64: TLS variant II, FS base             aarch64: TLS variant I, TPIDR_EL0
//!
//!   lower addresses                             lower addresses
//!   +----------------------+                    +----------------------+
//!   | static TLS blocks    |  tp - off          | struct pthread       |  tp - sizeof
//!   +----------------------+                    +----------------------+
//!   | struct pthread (TCB) |  <- FS base = tp   | tcbhead_t: dtv, priv |  <- TPIDR_EL0 = tp
//!   |   .tcb = tp (self)   |     = pthread_self |   (16 bytes)         |
//!   +----------------------+                    +----------------------+
//!                                               | static TLS blocks    |  tp + 16 + off
//!   higher addresses                            +----------------------+
//! ```
//!
//! On x86_64 `pthread_self()` equals the thread pointer; on aarch64 it lies
//! `sizeof(struct pthread)` below it. The runtime only uses the thread pointer as an
//! opaque per-thread identity and as the value to switch to, never as a `pthread_t`.
//! Writing FS base takes `WRFSBASE` when the kernel allows it, else
//! `arch_prctl(ARCH_SET_FS)`; `TPIDR_EL0` is an ordinary user-writable register
//! (`msr tpidr_el0`). Neither is part of the signal frame, so `rt_sigreturn` after a
//! preemption leaves the value `run_fiber` set.

#[cfg(target_arch = "aarch64")]
mod aarch64;
#[cfg(target_arch = "aarch64")]
pub use aarch64::*;
#[cfg(target_arch = "x86_64")]
mod x86_64;
#[cfg(target_arch = "x86_64")]
pub use x86_64::*;

/// How many words the runtime's initial-exec TLS block holds
/// ([`crate::base::thread_words`] names each).
pub const THREAD_WORDS: usize = 8;

// The block of thread words, in `.tbss` (zero in every new thread), one cache line,
// defined in assembly so that its access model is ours to choose: a Rust
// `thread_local!` in a shared object is general-dynamic. Each architecture module reads
// it initial-exec (`load_thread_word`). `%` is the section-type prefix both
// assemblers accept.
core::arch::global_asm!(
    ".pushsection .tbss.fiberize_thread_words,\"awT\",%nobits",
    ".globl fiberize_thread_words",
    ".hidden fiberize_thread_words",
    ".type fiberize_thread_words,%object",
    ".p2align 6",
    "fiberize_thread_words:",
    ".zero {bytes}",
    ".size fiberize_thread_words, {bytes}",
    ".popsection",
    bytes = const THREAD_WORDS * 8,
);

/// What `fiberize_donor_sleep` returns in the copy of the donor that a forked child
/// resumed (with `fiberize_donor_wake_in_child`).
pub const DONOR_WOKEN_IN_FORKED_CHILD: usize = 1;
