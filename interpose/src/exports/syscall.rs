//! `syscall(2)`: futex operations on process-private memory are emulated (see
//! `fiberize_rt::sync::futex` and `futex_shared`); `mmap`, `munmap`, `mremap`, `shmat`
//! and `shmdt` tell `futex_shared` that mappings changed;
//! `SYS_gettid`, `SYS_tgkill` and `SYS_tkill` see a fiber's own tid (its donor's, see
//! `fiberize_rt::thread::tid`); `close`, `close_range`, `dup2` and `dup3` keep the fd
//! table true as the functions do (`fiberize_rt::io::ops::lifecycle::fd_syscall`);
//! everything else goes to glibc's `syscall` unchanged.
//!
//! ABI note: C declares `long syscall(long number, ...)`, and stable Rust cannot define
//! a C-variadic function. On x86_64 the System V calling convention passes the first
//! six integer arguments of a variadic call in rdi, rsi, rdx, rcx, r8, r9 and the rest
//! on the stack, exactly as for a non-variadic function with seven `long` parameters
//! (`%al`, the vector-register count, only matters to callees that use `va_arg` on
//! floating-point values; system call arguments are all integers). So this
//! seven-`c_long` definition receives what any caller passes, and the forwarding call
//! to glibc's `syscall` (assembly that reads the same registers) passes it on intact.

use libc::{c_int, c_long, timespec};

use fiberize_rt::io::ops::lifecycle;
use fiberize_rt::sync::{futex, futex_shared};

mod real {
    use super::*;
    fiberize_rt::real_fns! {
        fn syscall(nr: c_long, a1: c_long, a2: c_long, a3: c_long, a4: c_long, a5: c_long, a6: c_long) -> c_long;
    }
}

/// # Safety
/// As glibc's `syscall` for system call `nr`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn syscall(nr: c_long, a1: c_long, a2: c_long, a3: c_long, a4: c_long, a5: c_long, a6: c_long) -> c_long {
    if nr == libc::SYS_futex && crate::gate::enabled() && futex::emulated(a1 as usize, a2 as c_int, a5 as usize) {
        // SAFETY: the program's futex arguments, with the kernel's contract.
        let r =
            unsafe { futex::futex(a1 as *const u32, a2 as c_int, a3 as u32, a4 as *const timespec, a5 as *const u32, a6 as u32) };
        return match r {
            Ok(v) => v as c_long,
            Err(e) => {
                crate::gate::set_errno(e);
                -1
            }
        };
    }
    if let Some(r) = thread_id_syscall(nr, a1, a2, a3) {
        return r;
    }
    if fiberize_rt::io::offload::long_syscall(nr) && crate::gate::fiber().is_some() {
        // SAFETY: the program passes the arguments system call `nr` takes (syscall's contract), and
        // the real `syscall` forwards them from the donor thread, which owns this fiber's TLS (e.g.
        // InnoDB's syscall(__NR_io_getevents) with --innodb-linux-aio=aio).
        return fiberize_rt::runtime::fiber::run_on_donor(|| unsafe { real::syscall(nr, a1, a2, a3, a4, a5, a6) });
    }
    if super::io::enabled() {
        // SAFETY: the program's arguments of system call `nr` (syscall's contract), forwarded
        // unchanged but for the first three, which `fd_syscall` may narrow (close_range's range
        // and flags).
        if let Some(r) = unsafe { lifecycle::fd_syscall(nr, a1, a2, a3, |a1, a2, a3| real::syscall(nr, a1, a2, a3, a4, a5, a6)) }
        {
            return r;
        }
    }
    // SAFETY: the program passes the arguments system call `nr` takes (syscall's contract),
    // which the real `syscall` forwards unchanged.
    let r = unsafe { real::syscall(nr, a1, a2, a3, a4, a5, a6) };
    if r != -1 {
        futex_shared::after_syscall(nr, a1, a2, a4);
    }
    r
}

/// `gettid`, `tgkill` and `tkill` name a fiber by its donor's tid, as the exports of
/// the same name do (`fiberize_rt::thread::tid`); None: not one of those, or not a
/// fiber's business (the kernel answers).
fn thread_id_syscall(nr: c_long, a1: c_long, a2: c_long, a3: c_long) -> Option<c_long> {
    if !crate::gate::enabled() {
        return None;
    }
    let sent = match nr {
        libc::SYS_gettid => return Some(fiberize_rt::thread::tid::gettid() as c_long),
        libc::SYS_tgkill => fiberize_rt::thread::tid::signal_thread(Some(a1 as libc::pid_t), a2 as libc::pid_t, a3 as c_int),
        libc::SYS_tkill => fiberize_rt::thread::tid::signal_thread(None, a1 as libc::pid_t, a2 as c_int),
        _ => None,
    }?;
    if sent != 0 {
        crate::gate::set_errno(sent);
        return Some(-1);
    }
    Some(0)
}
