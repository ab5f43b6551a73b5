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
//! | `rt_tgsigqueueinfo(getpid(), tid, sig, info)` (through `syscall`), `pthread_sigqueue` on a fiber | the same, with the sender's siginfo kept ([`queue_to_thread`], [`sigqueue_fiber`]; `SI_QUEUE` and `si_value` reach the handler or `sigtimedwait`) |
//! | `timer_create` with `SIGEV_THREAD_ID` naming it | its expiries reach the fiber with the timer's siginfo (`crate::thread::timers`) |
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
use crate::runtime::fibers::fiber;

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
    // SAFETY: getpid has no arguments and cannot fail.
    if tgid.is_some_and(|g| g != unsafe { libc::getpid() }) {
        return None;
    }
    let target = fiber_of_tid(tid, sig)?;
    Some(crate::signal::delivery::kill_fiber(&target, sig))
}

/// The live fiber whose thread id is `tid`, when a signal for it goes to the fiber
/// rather than to the kernel (not glibc's internal signals, which only glibc sends).
pub fn fiber_of_tid(tid: libc::pid_t, sig: c_int) -> Option<crate::runtime::fibers::fiber::FiberRef> {
    if tid <= 0 || is_glibc_internal(sig) || !crate::base::config::fibers_allowed() {
        return None;
    }
    crate::runtime::fibers::registry::find_by_donor_tid(tid as u32)
}

/// glibc's internal signals (SIGCANCEL, SIGSETXID), which only glibc sends.
fn is_glibc_internal(sig: c_int) -> bool {
    (32..=33).contains(&sig)
}

/// `rt_tgsigqueueinfo(tgid, tid, sig, info)` when `tid` names a live fiber of this
/// process: delivered as [`signal_thread`] delivers, with the caller's siginfo. The
/// kernel's rules: a siginfo that claims to come from `kill`, `tgkill` or the kernel
/// (`si_code >= 0`, `SI_TKILL`) only to the caller's own thread (`EPERM`), a bad
/// pointer `EFAULT`. Returns the error number (0: sent), or None when the kernel should
/// have the call.
///
/// # Safety
/// `info` is null or points to a readable `siginfo_t` (or the call fails with EFAULT,
/// as the kernel's copy would: only null is caught here).
pub unsafe fn queue_to_thread(tgid: libc::pid_t, tid: libc::pid_t, sig: c_int, info: *const libc::siginfo_t) -> Option<c_int> {
    // SAFETY: getpid has no arguments and cannot fail.
    if tgid != unsafe { libc::getpid() } {
        return None;
    }
    let target = fiber_of_tid(tid, sig)?;
    // SAFETY: null or a readable siginfo (this fn's # Safety).
    let Some(info) = (unsafe { info.as_ref() }) else { return Some(libc::EFAULT) };
    if (info.si_code >= 0 || info.si_code == libc::SI_TKILL) && gettid() != tid {
        return Some(libc::EPERM);
    }
    Some(crate::signal::delivery::queue_to_fiber(&target, sig, info))
}

/// `pthread_sigqueue(t, sig, value)` on fiber `target`: the siginfo glibc builds
/// (`SI_QUEUE`, this process's pid, the caller's uid, `value`), queued to the fiber.
/// Returns the error number (`EINVAL` for glibc's internal signals, as glibc's).
pub fn sigqueue_fiber(target: &crate::runtime::fibers::fiber::FiberRef, sig: c_int, value: libc::sigval) -> c_int {
    if is_glibc_internal(sig) {
        return libc::EINVAL;
    }
    // SAFETY: all-zero is a valid siginfo_t.
    let mut info: libc::siginfo_t = unsafe { core::mem::zeroed() };
    info.si_signo = sig;
    info.si_code = libc::SI_QUEUE;
    // SAFETY: getpid and getuid have no arguments and cannot fail.
    let (pid, uid) = unsafe { (libc::getpid(), libc::getuid()) };
    crate::runtime::signals::queued_signals::set_sender(&mut info, pid, uid as c_int);
    crate::runtime::signals::queued_signals::set_value(&mut info, value);
    crate::signal::delivery::queue_to_fiber(target, sig, &info)
}
