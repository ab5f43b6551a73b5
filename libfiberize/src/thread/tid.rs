//! Thread ids: a fiber's is its donor's.
//!
//! Natively every thread has a kernel thread id of its own, unique among live threads,
//! which glibc also keeps in the thread's TCB (`struct pthread`'s `tid`, read by
//! `raise`, `pthread_kill`, robust mutexes). A fiber runs on a worker that other fibers
//! share, so the kernel's `gettid` answers with the worker's id; but the fiber's TCB is
//! its donor's, and the donor is the kernel thread that `pthread_create` made for it.
//! So the donor's id is the fiber's:
//!
//! | call                                     | for a fiber's tid                        |
//! |------------------------------------------|------------------------------------------|
//! | `gettid()`, `syscall(SYS_gettid)`        | the donor's tid ([`gettid`]); it appears in `/proc/self/task` and is unique among live threads, as natively |
//! | `tgkill(getpid(), tid, sig)`, `tkill(tid, sig)` (and through `syscall`) | as `pthread_kill` on the fiber ([`signal_thread`]): held for the fiber and delivered where it runs, on its stack and TLS |
//! | `sched_setaffinity`/`sched_getaffinity`, `setpriority`/`getpriority(PRIO_PROCESS)` | the kernel applies them to the donor, which is what the tid names; they take effect when the fiber's calls run on its donor (donor-run calls, a demoted fiber), never on the workers that other fibers share |
//!
//! The other calls that name the calling thread (`set_tid_address`, the robust list,
//! `sched_*` and the thread name with 0, `rseq`, `sigaltstack`) are routed by
//! [`super::kernel_state`].
//!
//! Plain threads (main, demoted fibers running on their donor, threads in forked
//! children) get the kernel's answer, which is already their own.

use libc::c_int;

use crate::base::sys;
use crate::runtime::fiber;

/// The caller's thread id as the program must see it: a fiber's donor's, else the
/// kernel's. Async-signal-safe (a TLS read and an atomic load).
pub fn gettid() -> i32 {
    match fiber::current().map(|f| f.identity.donor_tid()) {
        Some(tid) if tid != 0 => tid as i32,
        _ => sys::gettid(),
    }
}

/// `tgkill(tgid, tid, sig)` (`tgid` None: `tkill`) when `tid` names a live fiber of
/// this process: delivered as `pthread_kill` delivers to the fiber. Returns the error
/// number (0: sent), or None when the kernel should have the call (not a fiber's tid,
/// another process, or glibc's internal signals, which only glibc sends).
pub fn signal_thread(tgid: Option<libc::pid_t>, tid: libc::pid_t, sig: c_int) -> Option<c_int> {
    const SIGCANCEL: c_int = 32;
    const SIGSETXID: c_int = 33;
    if tid <= 0 || sig == SIGCANCEL || sig == SIGSETXID || !crate::base::config::fibers_allowed() {
        return None;
    }
    // SAFETY: getpid has no arguments and cannot fail.
    if tgid.is_some_and(|g| g != unsafe { libc::getpid() }) {
        return None;
    }
    let target = crate::runtime::registry::find_by_donor_tid(tid as u32)?;
    Some(crate::signal::delivery::kill_fiber(&target, sig))
}
