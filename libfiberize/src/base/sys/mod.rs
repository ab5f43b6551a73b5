//! Raw system interface used by the runtime's own hot and delicate paths.
//!
//! Two rules shape this module:
//!
//! * **No exports.** `libfiberize.so` shadows `syscall`, `nanosleep`, `sched_yield`, …;
//!   the runtime must never reach those by name. Everything here is an inline system call
//!   instruction, a libc function we do not shadow (`clock_gettime`, `getauxval`), or
//!   the vDSO's `getcpu` (`vdso.rs`).
//! * **No TLS.** A donor thread that has just handed its fiber back to the pool shares
//!   its TLS block with that fiber, which may already run on a worker. The donor's code
//!   from that point on may only use these functions: they touch neither `errno` nor any
//!   `thread_local`, and they never allocate. Errors come back as `-errno` values.
//!   (The runtime's own descriptors are made and closed by `base::own_fds`, with the
//!   raw calls here: that takes a lock, shielded, and a donor never makes them.)
//!
//! The system call instruction, the thread pointer and everything else that depends on
//! the processor come from [`crate::base::arch`]; a call that one architecture lacks
//! (aarch64 has no `poll` or `epoll_wait`) is replaced inside its wrapper here.
//!
//! Every system call the runtime makes has one wrapper here, named after the call;
//! the instruction itself ([`crate::base::arch`]'s `syscall6`) is visible only inside
//! `base/` (`base/arch` makes `arch_prctl` itself), so a new call gets a wrapper here.
//! The thin wrappers return the kernel's result (`-errno` on failure) and are
//! `#[inline]`: a call costs what the bare instruction did.

use core::sync::atomic::AtomicU32;

use crate::base::arch::syscall6;

mod thin;
mod vdso;
pub use crate::base::arch::{detect_thread_pointer_method, set_thread_pointer, thread_pointer};
pub use thin::*;
pub use vdso::getcpu;

// The kernel's futex operation codes, from `libc` (the one definition the runtime uses).
const FUTEX_WAKE: usize = libc::FUTEX_WAKE as usize;
const FUTEX_WAIT_BITSET: usize = libc::FUTEX_WAIT_BITSET as usize;
const FUTEX_PRIVATE_FLAG: usize = libc::FUTEX_PRIVATE_FLAG as usize;
const FUTEX_BITSET_MATCH_ANY: usize = libc::FUTEX_BITSET_MATCH_ANY as u32 as usize;

/// Blocks the calling OS thread while `*word == expected`, at most until the absolute
/// CLOCK_MONOTONIC time `deadline_ns` (`None`: no limit). Returns the raw result:
/// 0, `-EAGAIN`, `-ETIMEDOUT` or `-EINTR`. Spurious returns are possible: callers loop.
#[inline]
pub fn futex_wait(word: &AtomicU32, expected: u32, deadline_ns: Option<u64>) -> isize {
    // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline (FUTEX_CLOCK_REALTIME
    // is not set); a null one means "no limit", as for FUTEX_WAIT.
    let deadline = deadline_ns.map(ns_to_timespec);
    let timeout = deadline.as_ref().map_or(0, |ts| ts as *const libc::timespec as usize);
    // SAFETY: `word` is a valid, aligned u32 for the duration of the call; `timeout` is
    // null or points at `deadline`, which lives across the call.
    unsafe {
        syscall6(
            libc::SYS_futex as usize,
            word.as_ptr() as usize,
            FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG,
            expected as usize,
            timeout,
            0,
            FUTEX_BITSET_MATCH_ANY,
        )
    }
}

/// Wakes up to `count` OS threads blocked in [`futex_wait`] on `word`.
///
/// Takes a raw pointer because the word may belong to a stack frame that is being
/// torn down by its woken owner: a wake on an address nobody waits on is harmless.
#[inline]
pub fn futex_wake(word: *const AtomicU32, count: u32) -> isize {
    // SAFETY: FUTEX_WAKE only uses the address as a key; it does not dereference it
    // beyond checking that the page is mapped, and reports EFAULT otherwise.
    unsafe { syscall6(libc::SYS_futex as usize, word as usize, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, count as usize, 0, 0, 0) }
}

/// The program's futex operation `op` on `uaddr` (and `uaddr2`), passed to the kernel
/// as it stands: `val2` is the count the two-word operations read in the timeout's
/// place. Returns the kernel's result (`-errno` on failure).
///
/// # Safety
/// As the `futex` system call for `op`: the words must be valid futex words or the
/// kernel answers `EFAULT`; only non-blocking operations may be passed.
#[inline]
pub unsafe fn futex_op(uaddr: usize, op: libc::c_int, val: u32, val2: usize, uaddr2: usize, val3: u32) -> isize {
    // SAFETY: the caller's futex arguments (this function's contract).
    unsafe { syscall6(libc::SYS_futex as usize, uaddr, op as u32 as usize, val as usize, val2, uaddr2, val3 as usize) }
}

/// The current CLOCK_MONOTONIC time in nanoseconds.
#[inline]
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// The current time of `clock` in nanoseconds (0 if the clock is invalid).
#[inline]
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out-pointer. clock_gettime is not shadowed by us and
    // goes through the vDSO; it only writes errno for an invalid clock, which our
    // callers never pass on the TLS-free paths.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    timespec_to_ns(&ts)
}

/// CPU time (ns) that thread `tid` of this process has run, exact to now for a thread
/// on a CPU at this instant (the kernel brings its count up to date, which a read of
/// its schedstat does not); None if there is no such thread. The clock id is the
/// kernel's per-thread scheduler clock (`MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`).
pub fn thread_cpu_ns(tid: u32) -> Option<u64> {
    const CPUCLOCK_PERTHREAD_SCHED: libc::clockid_t = 4 | 2;
    // A clockid_t is an int: tids are below 2^22 (PID_MAX_LIMIT), so the shift fits.
    let clock = (!(tid as libc::clockid_t) << 3) | CPUCLOCK_PERTHREAD_SCHED;
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out-pointer; the raw system call reports a bad clock (a
    // thread that is gone) as its return value, without errno.
    let r = unsafe {
        syscall6(libc::SYS_clock_gettime as usize, clock as isize as usize, &mut ts as *mut libc::timespec as usize, 0, 0, 0, 0)
    };
    (r == 0).then(|| timespec_to_ns(&ts))
}

/// Converts a (valid, non-negative) timespec to nanoseconds, saturating.
#[inline]
pub fn timespec_to_ns(ts: &libc::timespec) -> u64 {
    (ts.tv_sec.max(0) as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec.max(0) as u64)
}

#[inline]
pub fn ns_to_timespec(ns: u64) -> libc::timespec {
    libc::timespec { tv_sec: (ns / 1_000_000_000) as libc::time_t, tv_nsec: (ns % 1_000_000_000) as libc::c_long }
}

/// The kernel thread id of the calling OS thread (not cached by glibc).
#[inline]
pub fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { syscall6(libc::SYS_gettid as usize, 0, 0, 0, 0, 0, 0) as i32 }
}

/// Writes all of `bytes` to stderr with raw `write` calls (no errno, no locks).
pub fn write_stderr(bytes: &[u8]) {
    let mut done = 0;
    while done < bytes.len() {
        let r = write(2, &bytes[done..]);
        if r == -(libc::EINTR as isize) {
            continue;
        }
        if r <= 0 {
            return;
        }
        done += r as usize;
    }
}

/// Spin-wait hint for short busy loops.
#[inline(always)]
pub fn cpu_relax() {
    core::hint::spin_loop();
}

/// glibc's internal signals as kernel mask bits: SIGCANCEL (32) and SIGSETXID (33,
/// which `setuid` from another thread waits for every thread to take). glibc never
/// lets a program block or wait for them.
pub const GLIBC_INTERNAL_SIGNALS: u64 = (1 << 31) | (1 << 32);

/// The calling OS thread's signal mask, as the kernel's 64-bit set.
pub fn sigmask_get() -> u64 {
    let mut old: u64 = 0;
    // SAFETY: rt_sigprocmask with a null new set only writes `old` (8 bytes).
    unsafe { syscall6(libc::SYS_rt_sigprocmask as usize, libc::SIG_BLOCK as usize, 0, &mut old as *mut u64 as usize, 8, 0, 0) };
    old
}

/// Sets the calling OS thread's signal mask (SIGKILL/SIGSTOP are ignored by the kernel).
pub fn sigmask_set(mask: u64) {
    // SAFETY: rt_sigprocmask reads 8 bytes from `mask`.
    unsafe { syscall6(libc::SYS_rt_sigprocmask as usize, libc::SIG_SETMASK as usize, &mask as *const u64 as usize, 0, 8, 0, 0) };
}

/// The signals pending for the calling OS thread or for its process, as the kernel's
/// 64-bit set (`rt_sigpending`: those the thread blocks; for a thread that blocks every
/// signal, all of them).
pub fn sigpending() -> u64 {
    let mut set: u64 = 0;
    // SAFETY: rt_sigpending writes 8 bytes to `set`.
    unsafe { syscall6(libc::SYS_rt_sigpending as usize, &mut set as *mut u64 as usize, 8, 0, 0, 0, 0) };
    set
}

/// Adds `bits` to the calling OS thread's signal mask.
pub fn sigmask_block(bits: u64) {
    // SAFETY: rt_sigprocmask reads 8 bytes from `bits`.
    unsafe { syscall6(libc::SYS_rt_sigprocmask as usize, libc::SIG_BLOCK as usize, &bits as *const u64 as usize, 0, 8, 0, 0) };
}

/// Removes `bits` from the calling OS thread's signal mask.
pub fn sigmask_unblock(bits: u64) {
    // SAFETY: rt_sigprocmask reads 8 bytes from `bits`.
    unsafe { syscall6(libc::SYS_rt_sigprocmask as usize, libc::SIG_UNBLOCK as usize, &bits as *const u64 as usize, 0, 8, 0, 0) };
}

/// The CPU the calling OS thread runs on, as the getcpu system call tells (glibc's
/// `sched_getcpu` reads the rseq area of the TCB, which for a fiber is its donor's):
/// [`getcpu`] asks the vDSO instead where it can (`vdso.rs`).
fn getcpu_syscall() -> i32 {
    let mut cpu: u32 = 0;
    // SAFETY: getcpu writes one u32; the node and cache pointers may be null.
    let r = unsafe { syscall6(libc::SYS_getcpu as usize, &mut cpu as *mut u32 as usize, 0, 0, 0, 0, 0) };
    if r < 0 {
        -1
    } else {
        cpu as i32
    }
}

/// `sched_yield` as a raw system call (our `sched_yield` export is for fibers).
#[inline]
pub fn sched_yield_raw() {
    // SAFETY: sched_yield has no arguments and cannot fail.
    unsafe { syscall6(libc::SYS_sched_yield as usize, 0, 0, 0, 0, 0, 0) };
}

/// Where the runtime's kept descriptors go (`base::own_fds`'s `move_out_of_the_way`):
/// [`LATE_FD_FLOOR`], or half the descriptor limit if that is lower.
pub fn late_fd_floor() -> i32 {
    nofile_soft_limit().map_or(LATE_FD_FLOOR, |limit| LATE_FD_FLOOR.min((limit / 2).min(i32::MAX as u64) as i32))
}

/// Where the runtime's kept descriptors go: above the numbers a program with a default
/// limit of 1024 descriptors uses first.
const LATE_FD_FLOOR: i32 = 512;

/// Adds 1 to an eventfd counter (makes it readable).
pub fn eventfd_signal(fd: i32) {
    crate::base::stats::bump(&crate::base::stats::STATS.eventfd_writes);
    // A failure (counter full) still leaves the eventfd readable, which is all a
    // signal means.
    write(fd, &1u64.to_ne_bytes());
}

/// Resets a non-blocking eventfd's counter (it stops being readable).
pub fn eventfd_drain(fd: i32) {
    // EAGAIN (already zero) is fine.
    read(fd, &mut [0u8; 8]);
}

/// `ppoll` without a signal mask change, until the CLOCK_MONOTONIC `deadline_ns`
/// (`u64::MAX`: no limit). Returns the kernel's result (negative errno on failure).
pub fn ppoll_until(fds: &mut [libc::pollfd], deadline_ns: u64) -> isize {
    let ts;
    let tsp = if deadline_ns == u64::MAX {
        core::ptr::null()
    } else {
        ts = ns_to_timespec(deadline_ns.saturating_sub(now_ns()));
        &ts as *const libc::timespec
    };
    // SAFETY: `fds` is a valid array of its length; `tsp` is null or a live timespec;
    // a null sigmask keeps the thread's mask.
    unsafe { syscall6(libc::SYS_ppoll as usize, fds.as_mut_ptr() as usize, fds.len(), tsp as usize, 0, 8, 0) }
}

/// `epoll_wait` by a raw system call (aarch64 has only `epoll_pwait`; a null signal
/// mask makes it the same call). The kernel's result (negative errno on failure).
///
/// # Safety
/// `events` must be writable for `max_events` entries.
#[inline]
pub unsafe fn epoll_wait(ep: i32, events: *mut libc::epoll_event, max_events: usize, timeout_ms: i32) -> isize {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller vouches for `events`.
    let r =
        unsafe { syscall6(libc::SYS_epoll_wait as usize, ep as usize, events as usize, max_events, timeout_ms as usize, 0, 0) };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: the caller vouches for `events`; a null sigmask keeps the thread's mask.
    let r =
        unsafe { syscall6(libc::SYS_epoll_pwait as usize, ep as usize, events as usize, max_events, timeout_ms as usize, 0, 8) };
    r
}

/// `poll` by a raw system call (aarch64 has only `ppoll`: the timeout becomes a
/// relative timespec, a negative one none). The kernel's result.
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> isize {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `fds` is a valid array of its length.
    let r = unsafe { syscall6(libc::SYS_poll as usize, fds.as_mut_ptr() as usize, fds.len(), timeout_ms as usize, 0, 0, 0) };
    #[cfg(target_arch = "aarch64")]
    let r = {
        let ts = ns_to_timespec(timeout_ms.max(0) as u64 * 1_000_000);
        let tsp = if timeout_ms < 0 { core::ptr::null() } else { &ts as *const libc::timespec };
        // SAFETY: `fds` is a valid array of its length; `tsp` is null or a live
        // timespec; a null sigmask keeps the thread's mask.
        unsafe { syscall6(libc::SYS_ppoll as usize, fds.as_mut_ptr() as usize, fds.len(), tsp as usize, 0, 8, 0) }
    };
    r
}

/// The calling thread's errno (a fiber's own: FS is its donor's TCB).
#[inline]
pub fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() }
}

#[inline]
pub fn set_errno(e: i32) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = e };
}
