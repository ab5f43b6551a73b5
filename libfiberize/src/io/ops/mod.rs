//! The blocking-call wrappers behind the I/O exports.
//!
//! Every wrapper follows glibc's contract for its call (return value, `errno`) and the
//! program's own view of `O_NONBLOCK`:
//!
//! * fd not tracked (regular file, inherited descriptor): the real call, as is;
//! * tracked, and the program set `O_NONBLOCK` (or passed `MSG_DONTWAIT`): the real
//!   call, as is;
//! * tracked and blocking: a non-blocking attempt (`MSG_DONTWAIT` for sockets, a
//!   zero-timeout `poll` before the call otherwise, and where that finds the fd not
//!   ready the call itself with `RWF_NOWAIT`, so that a descriptor that cannot do the
//!   call gets the kernel's error, not a wait for a readiness that never comes: see
//!   `transfer::kernel_refusal`); on `EAGAIN` wait for the fd's
//!   readiness to change (fiber: park through the reactor; plain thread: the real
//!   `poll`) and try again, honouring `SO_RCVTIMEO`/`SO_SNDTIMEO` (`EAGAIN` on expiry,
//!   as the kernel reports it). A blocking send on a stream socket sends everything
//!   before it returns, as the kernel's does.
//!
//! Calls we cannot drive by readiness (`poll`/`select` over several fds, `fsync`) run on
//! the fiber's donor thread (`switch::run_on_donor`) after a non-blocking probe.
//!
//! # Files
//!
//! | file | what it holds |
//! |------|---------------|
//! | `mod.rs` | the real functions, and the shared machinery: [`needs_loop`] (does this fd need our loop), the try-then-park retry loop ([`blocking`], [`blocking_sized`]) around the descriptor's wait (`ScheduledIo::wait`: park through the reactor, wait in the kernel when alone on the worker, or block in the real `poll` on the donor), and the drained-queue memory (`ScheduledIo::known_empty`) |
//! | [`transfer`] | `read`, `write`, their vector and socket forms, `accept4`, `connect` |
//! | [`readiness`] | `poll`, `ppoll`, `select`, `pselect`, `epoll_pwait` |
//! | [`lifecycle`] | creating, duplicating and closing descriptors, `fcntl`, `ioctl`, `setsockopt`, `fsync` |

use core::sync::atomic::Ordering;

use libc::{c_int, c_void, nfds_t, pollfd, size_t, sockaddr, socklen_t, ssize_t};

use crate::base::stats::{bump, STATS};
use crate::base::sys;
use crate::base::sys::{errno, set_errno};
use crate::io::fdtable::{self, FdState, EPOLL_FD, LOCAL_SOCKET, OWNED, REGISTERED, SOCKET, STREAM, USER_NONBLOCK};
pub use crate::io::scheduled_io::{poll, Dir, ScheduledIo, Waited};
use crate::runtime::fibers::fiber;
use crate::runtime::scheduler;
use crate::signal::{delivery, donor_waits};

pub mod lifecycle;
pub mod readiness;
pub mod transfer;

crate::real_fns! {
    fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t;
    fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t;
    fn readv(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t;
    fn writev(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t;
    fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t;
    fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t;
    fn recvfrom(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int, a: *mut sockaddr, l: *mut socklen_t) -> ssize_t;
    fn sendto(fd: c_int, buf: *const c_void, n: size_t, flags: c_int, a: *const sockaddr, l: socklen_t) -> ssize_t;
    fn recvmsg(fd: c_int, m: *mut libc::msghdr, flags: c_int) -> ssize_t;
    fn sendmsg(fd: c_int, m: *const libc::msghdr, flags: c_int) -> ssize_t;
    fn accept4(fd: c_int, a: *mut sockaddr, l: *mut socklen_t, flags: c_int) -> c_int;
    fn connect(fd: c_int, a: *const sockaddr, l: socklen_t) -> c_int;
    fn ppoll(fds: *mut pollfd, n: nfds_t, ts: *const libc::timespec, mask: *const libc::sigset_t) -> c_int;
    fn select(n: c_int, r: *mut libc::fd_set, w: *mut libc::fd_set, e: *mut libc::fd_set, t: *mut libc::timeval) -> c_int;
    fn pselect(n: c_int, r: *mut libc::fd_set, w: *mut libc::fd_set, e: *mut libc::fd_set, t: *const libc::timespec, m: *const libc::sigset_t) -> c_int;
    fn epoll_wait(ep: c_int, ev: *mut libc::epoll_event, max: c_int, timeout: c_int) -> c_int;
    fn epoll_pwait(ep: c_int, ev: *mut libc::epoll_event, max: c_int, timeout: c_int, m: *const libc::sigset_t) -> c_int;
    fn socket(d: c_int, t: c_int, p: c_int) -> c_int;
    fn socketpair(d: c_int, t: c_int, p: c_int, sv: *mut c_int) -> c_int;
    fn pipe2(fds: *mut c_int, flags: c_int) -> c_int;
    fn eventfd(init: libc::c_uint, flags: c_int) -> c_int;
    fn epoll_create1(flags: c_int) -> c_int;
    fn dup(fd: c_int) -> c_int;
    fn dup3(a: c_int, b: c_int, flags: c_int) -> c_int;
    fn dup2(a: c_int, b: c_int) -> c_int;
    fn close(fd: c_int) -> c_int;
    fn close_range(first: libc::c_uint, last: libc::c_uint, flags: c_int) -> c_int;
    fn closefrom(low: c_int) -> ();
    fn fclose(f: *mut libc::FILE) -> c_int;
    fn fcntl(fd: c_int, cmd: c_int, arg: libc::c_long) -> c_int;
    fn ioctl(fd: c_int, req: libc::c_ulong, arg: libc::c_long) -> c_int;
    fn setsockopt(fd: c_int, level: c_int, name: c_int, v: *const c_void, l: socklen_t) -> c_int;
    fn getsockopt(fd: c_int, level: c_int, name: c_int, v: *mut c_void, l: *mut socklen_t) -> c_int;
    fn fsync(fd: c_int) -> c_int;
    fn fdatasync(fd: c_int) -> c_int;
    fn pread64(fd: c_int, buf: *mut c_void, n: size_t, off: libc::off64_t) -> ssize_t;
    fn pwrite64(fd: c_int, buf: *const c_void, n: size_t, off: libc::off64_t) -> ssize_t;
}

/// A read or write of an untracked descriptor (a regular file, mostly) that a fiber
/// runs on its worker and that took longer than this is a "slow inline file I/O" in
/// the report (`FIBERIZE_REPORT`). Origin: a page-cache hit takes microseconds; a
/// millisecond is a disk read, during which the worker's other fibers wait.
const SLOW_FILE_IO_NS: u64 = 1_000_000;

/// Runs `call`; with the report on, notes it by the program's call site when a fiber
/// ran it on its worker for longer than [`SLOW_FILE_IO_NS`].
#[inline]
pub(super) fn noting_slow_file_io(call: impl FnOnce() -> ssize_t) -> ssize_t {
    if !crate::base::sites::on() || !fiber::is_fiber() {
        return call();
    }
    // The report's 1 ms clock: a call that sees it move by more than a tick took over
    // a millisecond, or crossed two tick boundaries (the clock is coarse; see sites).
    let t0 = crate::base::sites::now();
    let r = call();
    let took = crate::base::sites::now().saturating_sub(t0);
    if took > SLOW_FILE_IO_NS {
        let site = crate::base::sites::program_call_site();
        if let Some(e) = crate::base::sites::entry(crate::base::sites::Kind::SlowFileIo, site, || site) {
            e.add(took);
        }
    }
    r
}

#[inline]
fn would_block() -> bool {
    let e = errno();
    e == libc::EAGAIN || e == libc::EWOULDBLOCK
}

/// A blocking call begins (before its first attempt): a program signal handler that
/// ran on the calling fiber before did not interrupt it; one that runs from here on
/// does, wherever the call is when it runs (its attempt, the way to a park, the wait),
/// as natively the thread would have been blocked in the kernel all that time. Each
/// wait of the call (`ScheduledIo::wait`, `ScheduledIo::try_direct_wait`) looks at what ran
/// since.
#[inline]
fn begin_blocking_call() {
    if let Some(me) = fiber::current() {
        delivery::clear_interruption(me);
    }
}

/// The retry loop of a blocking call on an owned fd.
fn blocking(fd: c_int, st: &ScheduledIo, dir: Dir, attempt: impl FnMut() -> isize) -> isize {
    blocking_sized(fd, st, dir, 0, attempt)
}

/// [`blocking`] for a read of `requested` bytes (0: unknown). On a byte stream, a
/// short read or an EAGAIN proves the queue empty at the sequence read before the
/// attempt; until the reactor reports a new edge, the next read skips the doomed
/// attempt and parks directly. (An edge that raced with the attempt only makes the
/// sequence move on, which costs one attempt, never a lost wake-up.)
#[inline]
fn blocking_sized(fd: c_int, st: &ScheduledIo, dir: Dir, requested: usize, mut attempt: impl FnMut() -> isize) -> isize {
    let t = dir.timeout_ns(st);
    let deadline = if t > 0 { Some(sys::now_ns().saturating_add(t)) } else { None };
    let track = dir == Dir::Read && requested > 0 && st.has(STREAM) && fiber::current().is_some();
    begin_blocking_call();
    loop {
        let seq = dir.seq(st).load(Ordering::Acquire);
        if !(track && st.known_empty(seq)) {
            let r = attempt();
            if track {
                st.note_if_drained(seq, requested, r);
                if r > 0 {
                    // Between two requests of a server: the fiber's turn may end here.
                    scheduler::note_stream_read();
                }
            }
            if r >= 0 || !would_block() {
                return r;
            }
        }
        match st.wait(fd, dir, seq, deadline, t == 0) {
            Waited::Ready => {}
            Waited::TimedOut => {
                set_errno(libc::EAGAIN);
                return -1;
            }
            Waited::Interrupted => {
                set_errno(libc::EINTR);
                return -1;
            }
        }
    }
}

/// A read the program made non-blocking itself (`MSG_DONTWAIT`, `O_NONBLOCK`), as is;
/// on a stream socket we track, read by a fiber, an empty queue is remembered so that
/// the `poll` that typically follows (libmariadb: recv with MSG_DONTWAIT, EAGAIN, poll,
/// recv) parks at once instead of probing for data that is not there.
///
/// `attempt` is glibc's call, for plain threads and descriptors we do not track;
/// `fiber_attempt` the same call as a raw system call, for a fiber on a stream we track.
/// glibc's socket calls are cancellation points, and wrap the system call in turning
/// asynchronous cancellation on and off; a fiber's cancellation is the library's and
/// never glibc's (`crate::signal::cancel`), so for a fiber that wrapper guards nothing,
/// and a non-blocking call never waits (its cost: docs/RESULTS.md#client-wait-anatomy).
#[inline]
fn nonblocking_read(
    fd: c_int,
    requested: usize,
    attempt: impl FnOnce() -> isize,
    fiber_attempt: impl FnOnce() -> isize,
) -> isize {
    let Some(st) = fiber_on_tracked_stream(fd).filter(|_| requested > 0) else {
        return attempt();
    };
    let seq = st.read_seq.load(Ordering::Acquire);
    let r = fiber_attempt();
    st.note_if_drained(seq, requested, r);
    if r > 0 {
        scheduler::note_stream_read();
    }
    r
}

/// `fd`'s state if it is a stream we track and the caller a fiber: its non-blocking
/// calls go to the kernel without glibc's cancellation wrapper ([`nonblocking_read`]).
#[inline]
fn fiber_on_tracked_stream(fd: c_int) -> Option<&'static FdState> {
    fdtable::owned(fd).filter(|st| st.has(STREAM) && fiber::current().is_some())
}

/// The owned, blocking-in-the-program's-view state of `fd`, if the calling fiber needs our
/// loop (None for a plain thread: see below).
#[inline]
fn needs_loop(fd: c_int) -> Option<&'static FdState> {
    let st = fdtable::lookup(fd)?;
    // A plain thread (the main thread, a demoted fiber) makes the program's own call:
    // the kernel blocks it, restarts the call after an `SA_RESTART` handler, applies
    // the socket timeouts, exactly as natively. (Its wait in `poll` used to turn every
    // handler, the library's own dump signal included, into EINTR.)
    crate::runtime::fibers::switch::current_or_demote()?;
    let f = st.flags.load(Ordering::Acquire);
    if f & OWNED == 0 || f & (USER_NONBLOCK | EPOLL_FD) != 0 {
        return None;
    }
    Some(st)
}
