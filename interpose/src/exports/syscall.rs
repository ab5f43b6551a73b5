//! `syscall(2)`: futex operations on process-private memory are emulated (see
//! `fiberize_rt::sync::futex` and `futex_shared`); `mmap`, `munmap`, `mremap`, `shmat`
//! and `shmdt` tell `futex_shared` that mappings changed; calls that name the calling
//! thread (`SYS_gettid`, `SYS_tgkill`, `SYS_set_tid_address`, `SYS_sched_*` with 0,
//! `SYS_prctl`'s name options, `SYS_rseq`, `SYS_sigaltstack`, …) act on a fiber's own
//! thread, its donor, never on the worker (`fiberize_rt::thread::kernel_state`);
//! `close`, `close_range`, `dup2` and `dup3` keep the fd
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
use fiberize_rt::thread::kernel_state::{self, Route};

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
    let [a1, a2, a3, a4, a5, a6] = if crate::gate::enabled() {
        // SAFETY: the program's arguments of system call `nr` (syscall's contract).
        match unsafe { kernel_state::syscall_route(nr, [a1, a2, a3, a4, a5, a6]) } {
            Route::Kernel(args) => args,
            // SAFETY: as below, on the fiber's donor: the kernel thread the call names.
            Route::OnDonor => {
                return fiberize_rt::runtime::fibers::switch::run_on_donor(|| unsafe {
                    real::syscall(nr, a1, a2, a3, a4, a5, a6)
                })
            }
            Route::Done(Ok(r)) => return r,
            Route::Done(Err(e)) => {
                crate::gate::set_errno(e);
                return -1;
            }
        }
    } else {
        [a1, a2, a3, a4, a5, a6]
    };
    if fiberize_rt::io::offload::long_syscall(nr) && crate::gate::fiber().is_some() {
        // SAFETY: the program passes the arguments system call `nr` takes (syscall's contract), and
        // the real `syscall` forwards them from the donor thread, which owns this fiber's TLS (e.g.
        // InnoDB's syscall(__NR_io_getevents) with --innodb-linux-aio=aio).
        return fiberize_rt::signal::on_donor::run_on_donor_taking_signals(|| unsafe {
            real::syscall(nr, a1, a2, a3, a4, a5, a6)
        });
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
