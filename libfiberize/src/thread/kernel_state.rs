//! System calls that act on "the calling thread": for a fiber that is its donor, the
//! kernel thread whose id the fiber has ([`super::tid`]), never the worker that runs it.
//!
//! A fiber's calls run on a worker that other fibers share, so a call that names the
//! caller implicitly (no id, or an id of 0) would read or change the worker's kernel
//! state: `set_tid_address` would return the worker's id and move the worker's
//! clear-child-tid word, `prctl(PR_SET_NAME)` would rename the worker. Each such call
//! gets what the thread would get natively:
//!
//! | call (also through `syscall`) | from a fiber |
//! |---|---|
//! | `set_tid_address`, `prctl(PR_GET_TID_ADDRESS)`, `set_robust_list`, `prctl(PR_SET_NAME/PR_GET_NAME)`, `pthread_setname_np`/`pthread_getname_np` on itself | [`Route::OnDonor`]: runs on the donor, so the kernel acts on the fiber's own thread, whose exit is the fiber's |
//! | `get_robust_list`, `sched_{set,get}{affinity,scheduler,param,attr}` with pid 0, `setpriority`/`getpriority(PRIO_PROCESS, 0)` | [`Route::Kernel`] with the 0 replaced by the donor's tid |
//! | `rseq` | `ENOSYS` (see below) |
//! | `sigaltstack` | the fiber's own record ([`crate::runtime::signals::altstack`]) |
//! | `gettid`, `tgkill`/`tkill`, `rt_tgsigqueueinfo` | as the functions ([`super::tid`]) |
//!
//! **rseq.** The kernel keeps one rseq area per kernel thread and restarts a critical
//! section when *that thread* is preempted or migrated. A fiber moves between workers,
//! and several fibers share a worker: registered on the worker, the kernel would write
//! the worker's CPU into one fiber's area while others run (and after that fiber's
//! memory is freed); registered on the donor, which sleeps while the fiber runs, it
//! would never restart the fiber's critical sections. Neither is safe, so a fiber's
//! `rseq` fails with `ENOSYS`, as on a kernel without rseq: glibc, tcmalloc and librseq
//! all take that to mean "use the fallback". It matches what the launcher already
//! asks of glibc (`glibc.pthread.rseq=0`: no registration for any thread).

use libc::{c_int, c_long};

use crate::runtime::fibers::fiber::{self, Fiber};

/// What to do with a call that may name the calling thread.
pub enum Route {
    /// The kernel, with these arguments (the program's, or with the caller's 0 replaced
    /// by the fiber's donor's tid).
    Kernel([c_long; 6]),
    /// Run the call on the calling fiber's donor ([`crate::runtime::fibers::switch::run_on_donor`]).
    OnDonor,
    /// Answered here: the result, or an error number for `errno`.
    Done(Result<c_long, c_int>),
}

/// The calling fiber's donor's tid, if the caller is a fiber that has one.
fn donor_of_caller() -> Option<(&'static Fiber, c_long)> {
    let f = fiber::current()?;
    let tid = f.identity.donor_tid();
    (tid != 0).then_some((f, tid as c_long))
}

/// The route of `syscall(nr, a[0], …, a[5])`.
///
/// # Safety
/// The arguments must be what system call `nr` takes (`syscall`'s contract): for
/// `sigaltstack`, null or valid `stack_t` pointers; for `rt_tgsigqueueinfo`, a null or
/// valid `siginfo_t` pointer.
pub unsafe fn syscall_route(nr: c_long, a: [c_long; 6]) -> Route {
    match nr {
        libc::SYS_gettid => return Route::Done(Ok(super::tid::gettid() as c_long)),
        libc::SYS_tgkill | libc::SYS_tkill => {
            let sent = if nr == libc::SYS_tgkill {
                super::tid::signal_thread(Some(a[0] as libc::pid_t), a[1] as libc::pid_t, a[2] as c_int)
            } else {
                super::tid::signal_thread(None, a[0] as libc::pid_t, a[1] as c_int)
            };
            return match sent {
                Some(0) => Route::Done(Ok(0)),
                Some(e) => Route::Done(Err(e)),
                None => Route::Kernel(a),
            };
        }
        libc::SYS_rt_tgsigqueueinfo => {
            // SAFETY: the fourth argument is null or a siginfo (this fn's contract).
            let sent = unsafe {
                super::tid::queue_to_thread(
                    a[0] as libc::pid_t,
                    a[1] as libc::pid_t,
                    a[2] as c_int,
                    a[3] as *const libc::siginfo_t,
                )
            };
            return match sent {
                Some(0) => Route::Done(Ok(0)),
                Some(e) => Route::Done(Err(e)),
                None => Route::Kernel(a),
            };
        }
        _ => {}
    }
    let mut k = a;
    match nr {
        libc::SYS_set_tid_address | libc::SYS_set_robust_list if donor_of_caller().is_some() => Route::OnDonor,
        libc::SYS_prctl if prctl_on_donor(a[0] as c_int) => Route::OnDonor,
        libc::SYS_get_robust_list
        | libc::SYS_sched_setaffinity
        | libc::SYS_sched_getaffinity
        | libc::SYS_sched_setscheduler
        | libc::SYS_sched_getscheduler
        | libc::SYS_sched_setparam
        | libc::SYS_sched_getparam
        | libc::SYS_sched_setattr
        | libc::SYS_sched_getattr => {
            k[0] = sched_pid(a[0] as libc::pid_t) as c_long;
            Route::Kernel(k)
        }
        libc::SYS_setpriority | libc::SYS_getpriority => {
            k[1] = super::pthread::priority_target(a[0] as c_int, a[1] as libc::id_t) as c_long;
            Route::Kernel(k)
        }
        libc::SYS_rseq if donor_of_caller().is_some() => Route::Done(Err(libc::ENOSYS)),
        // SAFETY: the caller passes null or valid stack_t pointers (this fn's contract).
        libc::SYS_sigaltstack => match unsafe { sigaltstack(a[0] as *const libc::stack_t, a[1] as *mut libc::stack_t) } {
            Some(r) => Route::Done(r.map(|()| 0)),
            None => Route::Kernel(a),
        },
        _ => Route::Kernel(a),
    }
}

/// Whether `prctl(option, …)` must run on the caller's donor: a fiber reading or
/// changing its thread's name or clear-child-tid word.
pub fn prctl_on_donor(option: c_int) -> bool {
    matches!(option, libc::PR_SET_NAME | libc::PR_GET_NAME | libc::PR_GET_TID_ADDRESS) && donor_of_caller().is_some()
}

/// Whether `pthread_setname_np`/`pthread_getname_np` on `t` must run on the caller's
/// donor: `t` is the calling fiber itself, which glibc names with `prctl` on the
/// kernel thread that runs the call.
pub fn names_own_thread(t: libc::pthread_t) -> bool {
    // SAFETY: pthread_self has no preconditions.
    donor_of_caller().is_some() && t == unsafe { libc::pthread_self() }
}

/// The pid that a `sched_*` function given `pid` must pass to the kernel: for a fiber,
/// 0 (the caller) is its donor.
pub fn sched_pid(pid: libc::pid_t) -> libc::pid_t {
    match donor_of_caller() {
        Some((_, donor)) if pid == 0 => donor as libc::pid_t,
        _ => pid,
    }
}

/// The calling fiber's `sigaltstack(ss, old)`, or None for a plain thread (the kernel's).
///
/// # Safety
/// `ss` and `old` are null or valid for a `stack_t` (sigaltstack's contract).
pub unsafe fn sigaltstack(ss: *const libc::stack_t, old: *mut libc::stack_t) -> Option<Result<(), c_int>> {
    let f = fiber::current()?;
    // SAFETY: as this fn's contract.
    Some(unsafe { fiber_sigaltstack(f, ss, old) })
}

/// # Safety
/// As [`sigaltstack`].
unsafe fn fiber_sigaltstack(f: &Fiber, ss: *const libc::stack_t, old: *mut libc::stack_t) -> Result<(), c_int> {
    // SAFETY: null or a valid stack_t (the caller's contract).
    let new = unsafe { ss.as_ref() };
    let prev = f.altstack.exchange(new, crate::base::arch::stack_pointer())?;
    if !old.is_null() {
        // SAFETY: a valid, writable stack_t (the caller's contract).
        unsafe { old.write(prev) };
    }
    Ok(())
}
