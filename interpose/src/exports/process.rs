//! `vfork`, and the library's constructor (which registers the fork hooks early).
//!
//! `vfork`'s child runs on the parent's stack and returns from `vfork` into the
//! caller's frame, and the caller's later calls overwrite whatever lay below it; so
//! the return address must not be kept on the stack across the system call (the child
//! could overwrite it before the parent returns). Like glibc's own, ours is a few
//! instructions of assembly that keep it in a register, which the kernel preserves per
//! task. Around the system call it marks the calling TCB as borrowed by the child
//! (`fiberize_rt::thread::process::vfork_enter`/`vfork_leave`): the child shares our memory
//! and must not touch the runtime's tables (see `fiberize_rt::thread::process`).

// The assembly, one per architecture, is `fiberize_rt::vfork_naked_asm!` (in
// `fiberize_rt::base::arch`, with a diagram of each).
/// # Safety
/// As glibc's `vfork`: the child may only call `_exit` or an `exec` function (and, in
/// practice, the async-signal-safe calls spawning code makes before them).
#[cfg_attr(not(test), no_mangle)]
#[unsafe(naked)]
pub unsafe extern "C" fn vfork() -> libc::pid_t {
    fiberize_rt::vfork_naked_asm!(fiberize_rt::thread::process::vfork_enter, fiberize_rt::thread::process::vfork_leave)
}

/// glibc's other name for `vfork`.
///
/// # Safety
/// As `vfork`.
#[cfg_attr(not(test), no_mangle)]
#[unsafe(naked)]
pub unsafe extern "C" fn __vfork() -> libc::pid_t {
    fiberize_rt::tail_call_naked_asm!(vfork)
}

/// Runs when the library is loaded: registers the fork hooks before the program can
/// register its own (so that ours run last in the prepare phase and first in the child).
#[cfg_attr(test, allow(dead_code))]
extern "C" fn on_load() {
    fiberize_rt::thread::process::install_fork_hooks();
}

#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;

mod real {
    use libc::{c_int, c_void, pid_t};
    fiberize_rt::real_fns! {
        fn clone(f: *mut c_void, stack: *mut c_void, flags: c_int, arg: *mut c_void, ptid: *mut pid_t, tls: *mut c_void, ctid: *mut pid_t) -> c_int;
    }
}

/// `clone(fn, stack, flags, arg, ...)` through libc. A `CLONE_VM | CLONE_VFORK` child
/// without a TLS of its own is a vfork child on a stack of its own: it borrows the
/// caller's TCB while the caller sleeps, so the TCB is marked as `vfork` marks it.
/// (A `CLONE_VM` child without `CLONE_VFORK` runs beside its parent on the same TCB,
/// which cannot be marked; its `sigaction` is still recognized by its pid.)
///
/// The variadic tail (`ptid`, `tls`, `ctid`) is taken as fixed arguments: on x86_64
/// the first two arrive in registers and the third on the stack either way, and glibc
/// reads each only when a flag asks for it (see the ABI note in `syscall.rs`).
///
/// # Safety
/// As glibc's `clone`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn clone(
    f: *mut libc::c_void,
    stack: *mut libc::c_void,
    flags: libc::c_int,
    arg: *mut libc::c_void,
    ptid: *mut libc::pid_t,
    tls: *mut libc::c_void,
    ctid: *mut libc::pid_t,
) -> libc::c_int {
    let borrows_tcb =
        flags & libc::CLONE_VM != 0 && flags & libc::CLONE_VFORK != 0 && flags & (libc::CLONE_THREAD | libc::CLONE_SETTLS) == 0;
    if borrows_tcb {
        fiberize_rt::thread::process::vfork_enter();
    }
    // SAFETY: `f`, `stack`, `flags`, `arg`, `ptid`, `tls`, `ctid` are as clone(2)'s glibc
    // wrapper requires of the program; glibc's clone gets them unchanged.
    let r = unsafe { real::clone(f, stack, flags, arg, ptid, tls, ctid) };
    if borrows_tcb {
        // The child exec'd or exited (CLONE_VFORK): the TCB is ours again.
        fiberize_rt::runtime::fibers::fiber::set_vfork_child(false);
    }
    r
}
