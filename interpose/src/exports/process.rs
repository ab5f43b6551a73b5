//! `vfork`, and the library's constructor (which registers the fork hooks early).
//!
//! `vfork`'s child runs on the parent's stack and returns from `vfork` into the
//! caller's frame, and the caller's later calls overwrite whatever lay below it; so
//! the return address must not be kept on the stack across the system call (the child
//! could overwrite it before the parent returns). Like glibc's own, ours is a few
//! instructions of assembly that keep it in a register, which the kernel preserves per
//! task. Around the system call it marks the calling TCB as borrowed by the child
//! (`fiberize_rt::lifecycle::vfork_enter`/`vfork_leave`): the child shares our memory
//! and must not touch the runtime's tables (see `fiberize_rt::lifecycle`).

// vfork():
//   pop  rdi               return address, out of the child's reach
//   push rdi / sub rsp, 8  (aligned call) vfork_enter(): mark the TCB
//   syscall vfork          the parent sleeps until the child exec'd or exited
//   push rdi               both: the return address back in place
//   child (rax == 0):      ret
//   parent:                vfork_leave(rax) -> pid, or -1 with errno; ret
/// # Safety
/// As glibc's `vfork`: the child may only call `_exit` or an `exec` function (and, in
/// practice, the async-signal-safe calls spawning code makes before them).
#[cfg_attr(not(test), no_mangle)]
#[unsafe(naked)]
pub unsafe extern "C" fn vfork() -> libc::pid_t {
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
        enter = sym fiberize_rt::lifecycle::vfork_enter,
        leave = sym fiberize_rt::lifecycle::vfork_leave,
        sys_vfork = const libc::SYS_vfork,
    )
}

/// glibc's other name for `vfork`.
///
/// # Safety
/// As `vfork`.
#[cfg_attr(not(test), no_mangle)]
#[unsafe(naked)]
pub unsafe extern "C" fn __vfork() -> libc::pid_t {
    core::arch::naked_asm!("jmp {vfork}", vfork = sym vfork)
}

/// Runs when the library is loaded: registers the fork hooks before the program can
/// register its own (so that ours run last in the prepare phase and first in the child).
extern "C" fn on_load() {
    fiberize_rt::lifecycle::install_fork_hooks();
}

#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;
