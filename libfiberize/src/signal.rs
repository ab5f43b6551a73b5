//! Per-fiber signal masks.
//!
//! A signal mask belongs to a kernel thread, and fibers share workers. A fiber that
//! changes its mask gets its own (`Fiber::sigmask`), which the worker installs before
//! resuming it and replaces by its own afterwards (`scheduler::run_fiber`); fibers that
//! never touch their mask cost nothing. A new fiber starts with the worker's mask,
//! which is the mask of the thread that started the pool.

use core::sync::atomic::Ordering;

use libc::{c_int, sigset_t};

use crate::fiber::Fiber;
use crate::sys;

fn to_kernel(set: &sigset_t) -> u64 {
    // SAFETY: glibc's sigset_t starts with the kernel's 64-bit mask (x86_64).
    unsafe { *(set as *const sigset_t as *const u64) }
}

fn from_kernel(mask: u64, out: &mut sigset_t) {
    // SAFETY: `out` is a valid sigset_t of 128 bytes; we clear it and set the first 64 bits.
    unsafe {
        libc::sigemptyset(out);
        *(out as *mut sigset_t as *mut u64) = mask;
    }
}

/// `pthread_sigmask` for a fiber. Returns the error number (0 on success).
pub fn fiber_sigmask(f: &Fiber, how: c_int, set: *const sigset_t, old: *mut sigset_t) -> c_int {
    let cur = if f.has_sigmask.load(Ordering::Acquire) { f.sigmask.load(Ordering::Relaxed) } else { sys::sigmask_get() };
    // SAFETY: `old` is null or a valid out-parameter (caller's contract).
    if let Some(o) = unsafe { old.as_mut() } {
        from_kernel(cur, o);
    }
    // SAFETY: `set` is null or a valid sigset (caller's contract).
    let Some(set) = (unsafe { set.as_ref() }) else { return 0 };
    let s = to_kernel(set);
    let new = match how {
        libc::SIG_BLOCK => cur | s,
        libc::SIG_UNBLOCK => cur & !s,
        libc::SIG_SETMASK => s,
        _ => return libc::EINVAL,
    };
    // The kernel never blocks SIGKILL and SIGSTOP.
    let new = new & !((1u64 << (libc::SIGKILL - 1)) | (1u64 << (libc::SIGSTOP - 1)));
    f.sigmask.store(new, Ordering::Relaxed);
    f.has_sigmask.store(true, Ordering::Release);
    sys::sigmask_set(new);
    0
}
