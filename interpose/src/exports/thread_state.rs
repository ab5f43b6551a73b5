//! Functions that act on the calling thread's kernel state: for a fiber, its donor's
//! (the thread whose id it has), never the worker's (`fiberize_rt::thread::kernel_state`).
//! `prctl`'s name and clear-child-tid options and `pthread_setname_np`/`getname_np` on
//! the caller itself run on the donor; `sched_*` with pid 0 name the donor;
//! `sigaltstack` keeps a record per fiber.
//!
//! ABI note (`prctl`): C declares `int prctl(int option, ...)`; the option's arguments are
//! integers or pointers, passed in the registers of a non-variadic call with five
//! parameters, as for `syscall` (see `super::syscall`).

use libc::{c_char, c_int, c_ulong, size_t};

use fiberize_rt::runtime::fibers::switch::run_on_donor;
use fiberize_rt::thread::kernel_state;

use crate::gate::set_errno;

mod real {
    use super::*;
    fiberize_rt::real_fns! {
        fn prctl(option: c_int, a2: c_ulong, a3: c_ulong, a4: c_ulong, a5: c_ulong) -> c_int;
        fn sigaltstack(ss: *const libc::stack_t, old: *mut libc::stack_t) -> c_int;
        fn pthread_setname_np(t: libc::pthread_t, name: *const c_char) -> c_int;
        fn pthread_getname_np(t: libc::pthread_t, buf: *mut c_char, len: size_t) -> c_int;
        fn sched_setscheduler(pid: libc::pid_t, policy: c_int, p: *const libc::sched_param) -> c_int;
        fn sched_getscheduler(pid: libc::pid_t) -> c_int;
        fn sched_setparam(pid: libc::pid_t, p: *const libc::sched_param) -> c_int;
        fn sched_getparam(pid: libc::pid_t, p: *mut libc::sched_param) -> c_int;
    }
}

/// # Safety
/// As glibc's `prctl` for `option`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn prctl(option: c_int, a2: c_ulong, a3: c_ulong, a4: c_ulong, a5: c_ulong) -> c_int {
    if crate::gate::enabled() && kernel_state::prctl_on_donor(option) {
        // SAFETY: the program's arguments for `option` (prctl's contract), on the fiber's donor.
        return run_on_donor(|| unsafe { real::prctl(option, a2, a3, a4, a5) });
    }
    // SAFETY: the program's arguments for `option` (prctl's contract), forwarded unchanged.
    unsafe { real::prctl(option, a2, a3, a4, a5) }
}

/// # Safety
/// As glibc's `sigaltstack`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sigaltstack(ss: *const libc::stack_t, old: *mut libc::stack_t) -> c_int {
    if crate::gate::enabled() {
        // SAFETY: `ss` and `old` are null or valid stack_t pointers (sigaltstack's contract).
        match unsafe { kernel_state::sigaltstack(ss, old) } {
            Some(Ok(())) => return 0,
            Some(Err(e)) => {
                set_errno(e);
                return -1;
            }
            None => {}
        }
    }
    // SAFETY: a plain thread: the program's pointers, null or valid as glibc requires.
    unsafe { real::sigaltstack(ss, old) }
}

/// # Safety
/// As glibc's `pthread_setname_np`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_setname_np(t: libc::pthread_t, name: *const c_char) -> c_int {
    if crate::gate::enabled() && kernel_state::names_own_thread(t) {
        // SAFETY: `name` is a NUL-terminated string (the function's contract); on the donor,
        // `t` is the running thread, which glibc names with prctl.
        return run_on_donor(|| unsafe { real::pthread_setname_np(t, name) });
    }
    // SAFETY: `t` is a live thread and `name` a string (the function's contract).
    unsafe { real::pthread_setname_np(t, name) }
}

/// # Safety
/// As glibc's `pthread_getname_np`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_getname_np(t: libc::pthread_t, buf: *mut c_char, len: size_t) -> c_int {
    if crate::gate::enabled() && kernel_state::names_own_thread(t) {
        // SAFETY: `buf` is writable for `len` bytes (the function's contract); on the donor.
        return run_on_donor(|| unsafe { real::pthread_getname_np(t, buf, len) });
    }
    // SAFETY: `t` is a live thread and `buf` writable for `len` bytes (the function's contract).
    unsafe { real::pthread_getname_np(t, buf, len) }
}

/// `sched_setscheduler(0, …)` from a fiber sets its donor's policy (the thread its id
/// names), not the shared worker's; it takes effect where the fiber runs on its donor.
///
/// # Safety
/// As glibc's `sched_setscheduler`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sched_setscheduler(pid: libc::pid_t, policy: c_int, p: *const libc::sched_param) -> c_int {
    // SAFETY: `p` points to a sched_param (the function's contract); only the pid may change.
    unsafe { real::sched_setscheduler(pid_of(pid), policy, p) }
}

/// See [`sched_setscheduler`].
///
/// # Safety
/// No preconditions.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sched_getscheduler(pid: libc::pid_t) -> c_int {
    // SAFETY: no pointers.
    unsafe { real::sched_getscheduler(pid_of(pid)) }
}

/// See [`sched_setscheduler`].
///
/// # Safety
/// As glibc's `sched_setparam`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sched_setparam(pid: libc::pid_t, p: *const libc::sched_param) -> c_int {
    // SAFETY: `p` points to a sched_param (the function's contract).
    unsafe { real::sched_setparam(pid_of(pid), p) }
}

/// See [`sched_setscheduler`].
///
/// # Safety
/// As glibc's `sched_getparam`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sched_getparam(pid: libc::pid_t, p: *mut libc::sched_param) -> c_int {
    // SAFETY: `p` is writable for a sched_param (the function's contract).
    unsafe { real::sched_getparam(pid_of(pid), p) }
}

fn pid_of(pid: libc::pid_t) -> libc::pid_t {
    if crate::gate::enabled() {
        kernel_state::sched_pid(pid)
    } else {
        pid
    }
}
