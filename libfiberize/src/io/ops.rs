//! The blocking-call wrappers behind the I/O exports.
//!
//! Every wrapper follows glibc's contract for its call (return value, `errno`) and the
//! program's own view of `O_NONBLOCK`:
//!
//! * fd not tracked (regular file, inherited descriptor): the real call, as is;
//! * tracked, and the program set `O_NONBLOCK` (or passed `MSG_DONTWAIT`): the real
//!   call, as is;
//! * tracked and blocking: a non-blocking attempt (`MSG_DONTWAIT` for sockets, a
//!   zero-timeout `poll` before the call otherwise); on `EAGAIN` wait for the fd's
//!   readiness to change (fiber: park through the reactor; plain thread: the real
//!   `poll`) and try again, honouring `SO_RCVTIMEO`/`SO_SNDTIMEO` (`EAGAIN` on expiry,
//!   as the kernel reports it). A blocking send on a stream socket sends everything
//!   before it returns, as the kernel's does.
//!
//! Calls we cannot drive by readiness (`poll`/`select` over several fds, `fsync`) run on
//! the fiber's donor thread (`fiber::run_on_donor`) after a non-blocking probe.

use core::sync::atomic::{AtomicU32, Ordering};

use libc::{c_int, c_void, nfds_t, pollfd, size_t, sockaddr, socklen_t, ssize_t};

use crate::base::sys;
use crate::base::sys::{errno, set_errno};
use crate::io::fdtable::{self, FdState, EPOLL_FD, OWNED, REGISTERED, SOCKET, STREAM, USER_NONBLOCK};
use crate::io::reactor;
use crate::runtime::fiber::{self, WaitKind};
use crate::runtime::scheduler::{self, DirectWait};
use crate::signal::delivery;
use crate::sync::parking::{self, ParkResult};

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
    fn poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int;
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
    fn fcntl(fd: c_int, cmd: c_int, arg: libc::c_long) -> c_int;
    fn ioctl(fd: c_int, req: libc::c_ulong, arg: libc::c_long) -> c_int;
    fn setsockopt(fd: c_int, level: c_int, name: c_int, v: *const c_void, l: socklen_t) -> c_int;
    fn getsockopt(fd: c_int, level: c_int, name: c_int, v: *mut c_void, l: *mut socklen_t) -> c_int;
    fn fsync(fd: c_int) -> c_int;
    fn fdatasync(fd: c_int) -> c_int;
}

/// A read or write of an untracked descriptor (a regular file, mostly) that a fiber
/// runs on its worker and that took longer than this is a "slow inline file I/O" in
/// the report (`FIBERIZE_REPORT`). Origin: a page-cache hit takes microseconds; a
/// millisecond is a disk read, during which the worker's other fibers wait.
const SLOW_FILE_IO_NS: u64 = 1_000_000;

/// Runs `call`; with the report on, notes it by the program's call site when a fiber
/// ran it on its worker for longer than [`SLOW_FILE_IO_NS`].
#[inline]
fn noting_slow_file_io(call: impl FnOnce() -> ssize_t) -> ssize_t {
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

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Read,
    Write,
}

impl Dir {
    fn seq(self, st: &FdState) -> &AtomicU32 {
        match self {
            Dir::Read => &st.read_seq,
            Dir::Write => &st.write_seq,
        }
    }
    fn poll_events(self) -> i16 {
        match self {
            Dir::Read => libc::POLLIN,
            Dir::Write => libc::POLLOUT,
        }
    }
    fn timeout_ns(self, st: &FdState) -> u64 {
        match self {
            Dir::Read => st.rcvtimeo_ns.load(Ordering::Relaxed),
            Dir::Write => st.sndtimeo_ns.load(Ordering::Relaxed),
        }
    }
}

enum Waited {
    Ready,
    TimedOut,
    Interrupted,
}

/// Waits until `fd`'s readiness in `dir` moves past `seq`, or `deadline`. A program
/// signal handler that runs on the fiber meanwhile ends the wait with `Interrupted`
/// as the kernel's EINTR would: always, or for a `restartable` call (signal(7): reads
/// and writes without a socket timeout, accept, connect) only when the handler lacks
/// `SA_RESTART`.
fn wait(fd: c_int, st: &FdState, dir: Dir, seq: u32, deadline: Option<u64>, restartable: bool) -> Waited {
    if let Some(me) = fiber::current() {
        if let Some(r) = direct_wait(fd, st, dir.poll_events(), deadline, restartable) {
            return r.map_or_else(|w| w, |_| Waited::Ready);
        }
        let interrupted = || delivery::interrupted_for_good(me, restartable);
        reactor::count_waiter(st, true);
        if reactor::ensure_registered(fd, st, dir == Dir::Write).is_ok() {
            let word = dir.seq(st);
            let r = parking::park(
                word as *const AtomicU32 as usize,
                u32::MAX,
                WaitKind::Io,
                || word.load(Ordering::Acquire) == seq,
                || {},
                |_| {},
                deadline,
            );
            reactor::count_waiter(st, false);
            // Blocking reads, writes, accept, connect and poll are cancellation points.
            crate::signal::cancel::testcancel();
            return match r {
                ParkResult::TimedOut => Waited::TimedOut,
                _ if interrupted() => Waited::Interrupted,
                _ => Waited::Ready,
            };
        }
        reactor::count_waiter(st, false);
    }
    // A plain thread (or an fd epoll refuses): block in the real poll — on the donor
    // if we are a fiber, so that no worker blocks.
    let ms = match deadline {
        None => -1,
        Some(d) => {
            let now = sys::now_ns();
            if d <= now {
                0
            } else {
                (d - now).div_ceil(1_000_000).min(i32::MAX as u64) as c_int
            }
        }
    };
    let mut p = pollfd { fd, events: dir.poll_events(), revents: 0 };
    // SAFETY: one valid pollfd.
    let r = fiber::run_on_donor(|| unsafe { poll(&mut p, 1, ms) });
    match r {
        0 => Waited::TimedOut,
        r if r < 0 && errno() == libc::EINTR => Waited::Interrupted,
        _ => Waited::Ready,
    }
}

/// A fiber alone on its worker waits for `fd` in the kernel itself
/// (`scheduler::direct_wait`): `Some(Ok(revents))` when it is ready, `Some(Err(_))`
/// when the wait timed out or a handler interrupted it (see [`wait`]), `None` when the
/// caller must wait the ordinary way. Whatever ended the wait, the readiness sequences
/// move on, since no reactor edge reports what happened meanwhile (`known_empty` must
/// not skip the next attempt). A cancellation point, as the parked wait is.
fn direct_wait(fd: c_int, st: &FdState, events: i16, deadline: Option<u64>, restartable: bool) -> Option<Result<i16, Waited>> {
    let me = fiber::current()?;
    delivery::clear_interruption(me);
    // Only while few fibers wait through the reactor: with many connections a worker
    // that runs dry gets work again within microseconds, and taking fds in and out of
    // the epoll set would only cost system calls. (A precaution: the first measurement
    // that seemed to show the loss, MariaDB at 64 and 1024 connections, did not survive
    // swapping the two servers' roles.)
    if reactor::io_waiters() as usize >= crate::base::config::config().workers {
        return None;
    }
    let r = match scheduler::direct_wait(fd, events, deadline, || reactor::leave_epoll_set(fd, st)) {
        DirectWait::Ready(revents) => Ok(revents),
        DirectWait::TimedOut => Err(Waited::TimedOut),
        DirectWait::Other if delivery::interrupted_for_good(me, restartable) => Err(Waited::Interrupted),
        DirectWait::Other => return None,
    };
    st.read_seq.fetch_add(1, Ordering::AcqRel);
    st.write_seq.fetch_add(1, Ordering::AcqRel);
    crate::signal::cancel::testcancel();
    Some(r)
}

/// The retry loop of a blocking call on an owned fd.
fn blocking(fd: c_int, st: &FdState, dir: Dir, attempt: impl FnMut() -> isize) -> isize {
    blocking_sized(fd, st, dir, 0, attempt)
}

/// [`blocking`] for a read of `requested` bytes (0: unknown). On a byte stream, a
/// short read or an EAGAIN proves the queue empty at the sequence read before the
/// attempt; until the reactor reports a new edge, the next read skips the doomed
/// attempt and parks directly. (An edge that raced with the attempt only makes the
/// sequence move on, which costs one attempt, never a lost wake-up.)
fn blocking_sized(fd: c_int, st: &FdState, dir: Dir, requested: usize, mut attempt: impl FnMut() -> isize) -> isize {
    let t = dir.timeout_ns(st);
    let deadline = if t > 0 { Some(sys::now_ns().saturating_add(t)) } else { None };
    let track = dir == Dir::Read && requested > 0 && st.has(STREAM) && fiber::current().is_some();
    loop {
        let seq = dir.seq(st).load(Ordering::Acquire);
        if !(track && known_empty(st, seq)) {
            let r = attempt();
            if track {
                note_if_drained(st, seq, requested, r);
            }
            if r >= 0 || !would_block() {
                return r;
            }
        }
        match wait(fd, st, dir, seq, deadline, t == 0) {
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

/// Whether a read found the receive queue empty at readiness sequence `seq` (and no
/// edge came since): the next read would fail with EAGAIN.
#[inline]
fn known_empty(st: &FdState, seq: u32) -> bool {
    st.drained_at.load(Ordering::Acquire) == (1u64 << 32 | seq as u64)
}

/// After a plain read of `requested` bytes from a byte stream that returned `r`, with
/// `seq` read before the call: EAGAIN or a short read proves the queue was empty.
/// Leaves errno alone.
#[inline]
fn note_if_drained(st: &FdState, seq: u32, requested: usize, r: isize) {
    if (r < 0 && would_block()) || (r > 0 && (r as usize) < requested) {
        st.drained_at.store(1u64 << 32 | seq as u64, Ordering::Release);
    }
}

/// A read the program made non-blocking itself (`MSG_DONTWAIT`, `O_NONBLOCK`), as is;
/// on a stream socket we track, read by a fiber, an empty queue is remembered so that
/// the `poll` that typically follows (libmariadb: recv with MSG_DONTWAIT, EAGAIN, poll,
/// recv) parks at once instead of probing for data that is not there.
#[inline]
fn nonblocking_read(fd: c_int, requested: usize, attempt: impl FnOnce() -> isize) -> isize {
    let st = match fdtable::owned(fd) {
        Some(st) if requested > 0 && st.has(STREAM) && fiber::current().is_some() => st,
        _ => return attempt(),
    };
    let seq = st.read_seq.load(Ordering::Acquire);
    let r = attempt();
    note_if_drained(st, seq, requested, r);
    r
}

/// The owned, blocking-in-the-program's-view state of `fd`, if it needs our loop.
#[inline]
fn needs_loop(fd: c_int) -> Option<&'static FdState> {
    let st = fdtable::lookup(fd)?;
    fiber::current_or_demote();
    let f = st.flags.load(Ordering::Acquire);
    if f & OWNED == 0 || f & (USER_NONBLOCK | EPOLL_FD) != 0 {
        return None;
    }
    Some(st)
}

// ---- data transfer -------------------------------------------------------------

/// Whether `fd` is readable (or writable) right now, without waiting.
fn ready_now(fd: c_int, dir: Dir) -> bool {
    let mut p = pollfd { fd, events: dir.poll_events(), revents: 0 };
    // SAFETY: one valid pollfd, zero timeout.
    let r = unsafe { poll(&mut p, 1, 0) };
    // An error or hang-up counts as ready: the real call will report it.
    r != 0
}

/// A non-blocking attempt for a descriptor whose file status stays blocking: returns
/// -1/EAGAIN instead of blocking when `fd` is not ready.
fn probe_then(fd: c_int, dir: Dir, call: impl FnOnce() -> isize) -> isize {
    if !ready_now(fd, dir) {
        set_errno(libc::EAGAIN);
        return -1;
    }
    call()
}

/// The rest of `iov` after its first `done` bytes.
fn iov_tail(iov: &[libc::iovec], mut done: usize) -> Vec<libc::iovec> {
    let mut out = Vec::with_capacity(iov.len());
    for v in iov {
        if done >= v.iov_len {
            done -= v.iov_len;
            continue;
        }
        // SAFETY: stays inside the program's buffer (done < iov_len).
        out.push(libc::iovec {
            iov_base: unsafe { (v.iov_base as *mut u8).add(done) } as *mut c_void,
            iov_len: v.iov_len - done,
        });
        done = 0;
    }
    out
}

/// A blocking send on a stream socket queues everything before it returns (unless an
/// error or a signal stops it): keep sending the rest, waiting for room between.
fn send_all(fd: c_int, st: &FdState, total: usize, mut send_from: impl FnMut(usize) -> isize) -> isize {
    let t = Dir::Write.timeout_ns(st);
    let deadline = if t > 0 { Some(sys::now_ns().saturating_add(t)) } else { None };
    let mut done = 0usize;
    loop {
        let seq = st.write_seq.load(Ordering::Acquire);
        let r = send_from(done);
        if r >= 0 {
            done += r as usize;
            if done >= total || !st.has(STREAM) {
                return done as isize;
            }
            continue;
        }
        if !would_block() {
            return if done > 0 { done as isize } else { -1 };
        }
        match wait(fd, st, Dir::Write, seq, deadline, t == 0) {
            Waited::Ready => {}
            Waited::TimedOut if done > 0 => return done as isize,
            Waited::TimedOut => {
                set_errno(libc::EAGAIN);
                return -1;
            }
            Waited::Interrupted if done > 0 => return done as isize,
            Waited::Interrupted => {
                set_errno(libc::EINTR);
                return -1;
            }
        }
    }
}

pub mod api {
    use super::*;

    const DW: c_int = libc::MSG_DONTWAIT;

    /// # Safety
    /// As `read`.
    pub unsafe fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
        let Some(st) = needs_loop(fd) else {
            // SAFETY: forwarded contract.
            return super::noting_slow_file_io(|| unsafe { super::read(fd, buf, n) });
        };
        if st.has(SOCKET) {
            // SAFETY: read on a socket is recv with no flags.
            blocking_sized(fd, st, Dir::Read, n, || unsafe { super::recv(fd, buf, n, DW) as isize }) as ssize_t
        } else {
            // SAFETY: forwarded contract; only called when readable.
            blocking(fd, st, Dir::Read, || probe_then(fd, Dir::Read, || unsafe { super::read(fd, buf, n) as isize })) as ssize_t
        }
    }

    /// # Safety
    /// As `readv`.
    pub unsafe fn readv(fd: c_int, iov: *const libc::iovec, cnt: c_int) -> ssize_t {
        let Some(st) = needs_loop(fd) else {
            // SAFETY: forwarded contract.
            return unsafe { super::readv(fd, iov, cnt) };
        };
        if st.has(SOCKET) {
            // SAFETY: readv on a socket is recvmsg with these buffers and no flags.
            let mut m: libc::msghdr = unsafe { core::mem::zeroed() };
            m.msg_iov = iov as *mut libc::iovec;
            m.msg_iovlen = cnt.max(0) as _;
            // SAFETY: `m` describes the program's buffers.
            blocking(fd, st, Dir::Read, || unsafe { super::recvmsg(fd, &mut m, DW) as isize }) as ssize_t
        } else {
            // SAFETY: forwarded contract; only called when readable.
            blocking(fd, st, Dir::Read, || probe_then(fd, Dir::Read, || unsafe { super::readv(fd, iov, cnt) as isize }))
                as ssize_t
        }
    }

    /// # Safety
    /// As `recv`.
    pub unsafe fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
        match needs_loop(fd) {
            Some(st) if flags & DW == 0 && st.has(SOCKET) => {
                // Only plain reads prove emptiness (MSG_PEEK/WAITALL/OOB do not).
                let sized = if flags == 0 { n } else { 0 };
                // SAFETY: forwarded contract, made non-blocking for this call only.
                blocking_sized(fd, st, Dir::Read, sized, || unsafe { super::recv(fd, buf, n, flags | DW) as isize }) as ssize_t
            }
            // SAFETY: forwarded contract (one attempt, non-blocking or not ours).
            _ => {
                nonblocking_read(fd, if flags & !DW == 0 { n } else { 0 }, || unsafe { super::recv(fd, buf, n, flags) as isize })
                    as ssize_t
            }
        }
    }

    /// # Safety
    /// As `recvfrom`.
    pub unsafe fn recvfrom(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int, a: *mut sockaddr, l: *mut socklen_t) -> ssize_t {
        match needs_loop(fd) {
            Some(st) if flags & DW == 0 && st.has(SOCKET) => {
                let sized = if flags == 0 { n } else { 0 };
                // SAFETY: forwarded contract, non-blocking for this call only.
                blocking_sized(fd, st, Dir::Read, sized, || unsafe { super::recvfrom(fd, buf, n, flags | DW, a, l) as isize })
                    as ssize_t
            }
            // SAFETY: forwarded contract (one attempt, non-blocking or not ours).
            _ => nonblocking_read(fd, if flags & !DW == 0 { n } else { 0 }, || unsafe {
                super::recvfrom(fd, buf, n, flags, a, l) as isize
            }) as ssize_t,
        }
    }

    /// # Safety
    /// As `recvmsg`.
    pub unsafe fn recvmsg(fd: c_int, m: *mut libc::msghdr, flags: c_int) -> ssize_t {
        match needs_loop(fd) {
            Some(st) if flags & DW == 0 && st.has(SOCKET) => {
                // SAFETY: forwarded contract, non-blocking for this call only.
                blocking(fd, st, Dir::Read, || unsafe { super::recvmsg(fd, m, flags | DW) as isize }) as ssize_t
            }
            // SAFETY: forwarded contract.
            _ => unsafe { super::recvmsg(fd, m, flags) },
        }
    }

    /// # Safety
    /// As `write`.
    pub unsafe fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
        let Some(st) = needs_loop(fd) else {
            // SAFETY: forwarded contract.
            return super::noting_slow_file_io(|| unsafe { super::write(fd, buf, n) });
        };
        if st.has(SOCKET) {
            // write on a socket is send with no flags (SIGPIPE on EPIPE included).
            // SAFETY: the remainder of the program's buffer.
            send_all(fd, st, n, |done| unsafe {
                super::send(fd, (buf as *const u8).add(done) as *const c_void, n - done, DW) as isize
            }) as ssize_t
        } else {
            // SAFETY: forwarded contract; only called when writable.
            blocking(fd, st, Dir::Write, || probe_then(fd, Dir::Write, || unsafe { super::write(fd, buf, n) as isize }))
                as ssize_t
        }
    }

    /// # Safety
    /// As `writev`.
    pub unsafe fn writev(fd: c_int, iov: *const libc::iovec, cnt: c_int) -> ssize_t {
        let Some(st) = needs_loop(fd) else {
            // SAFETY: forwarded contract.
            return unsafe { super::writev(fd, iov, cnt) };
        };
        if st.has(SOCKET) && cnt > 0 && !iov.is_null() {
            // SAFETY: the program's iovec array of `cnt` entries.
            let all = unsafe { core::slice::from_raw_parts(iov, cnt as usize) };
            let total: usize = all.iter().map(|v| v.iov_len).sum();
            send_all(fd, st, total, |done| {
                let mut tail = iov_tail(all, done);
                // SAFETY: a zeroed msghdr is valid; it points at the remaining buffers.
                let mut m: libc::msghdr = unsafe { core::mem::zeroed() };
                m.msg_iov = tail.as_mut_ptr();
                m.msg_iovlen = tail.len() as _;
                // SAFETY: `m` describes live buffers.
                unsafe { super::sendmsg(fd, &m, DW) as isize }
            }) as ssize_t
        } else {
            // SAFETY: forwarded contract; only called when writable.
            blocking(fd, st, Dir::Write, || probe_then(fd, Dir::Write, || unsafe { super::writev(fd, iov, cnt) as isize }))
                as ssize_t
        }
    }

    /// # Safety
    /// As `send`.
    pub unsafe fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t {
        match needs_loop(fd) {
            Some(st) if flags & DW == 0 && st.has(SOCKET) => {
                // SAFETY: the remainder of the program's buffer.
                send_all(fd, st, n, |done| unsafe {
                    super::send(fd, (buf as *const u8).add(done) as *const c_void, n - done, flags | DW) as isize
                }) as ssize_t
            }
            // SAFETY: forwarded contract.
            _ => unsafe { super::send(fd, buf, n, flags) },
        }
    }

    /// # Safety
    /// As `sendto`.
    pub unsafe fn sendto(fd: c_int, buf: *const c_void, n: size_t, flags: c_int, a: *const sockaddr, l: socklen_t) -> ssize_t {
        match needs_loop(fd) {
            Some(st) if flags & DW == 0 && st.has(SOCKET) => {
                // SAFETY: the remainder of the program's buffer.
                send_all(fd, st, n, |done| unsafe {
                    super::sendto(fd, (buf as *const u8).add(done) as *const c_void, n - done, flags | DW, a, l) as isize
                }) as ssize_t
            }
            // SAFETY: forwarded contract.
            _ => unsafe { super::sendto(fd, buf, n, flags, a, l) },
        }
    }

    /// # Safety
    /// As `sendmsg`.
    pub unsafe fn sendmsg(fd: c_int, m: *const libc::msghdr, flags: c_int) -> ssize_t {
        match needs_loop(fd) {
            Some(st) if flags & DW == 0 && st.has(SOCKET) && !m.is_null() => {
                // SAFETY: the program's msghdr.
                let hdr = unsafe { *m };
                let all: &[libc::iovec] = if hdr.msg_iov.is_null() {
                    &[]
                } else {
                    // SAFETY: the program's iovec array.
                    unsafe { core::slice::from_raw_parts(hdr.msg_iov, hdr.msg_iovlen) }
                };
                let total: usize = all.iter().map(|v| v.iov_len).sum();
                send_all(fd, st, total, |done| {
                    let mut tail = iov_tail(all, done);
                    let mut h = hdr;
                    h.msg_iov = tail.as_mut_ptr();
                    h.msg_iovlen = tail.len() as _;
                    if done > 0 {
                        // Ancillary data went with the first part.
                        h.msg_control = core::ptr::null_mut();
                        h.msg_controllen = 0;
                    }
                    // SAFETY: `h` describes live buffers.
                    unsafe { super::sendmsg(fd, &h, flags | DW) as isize }
                }) as ssize_t
            }
            // SAFETY: forwarded contract.
            _ => unsafe { super::sendmsg(fd, m, flags) },
        }
    }

    /// `accept` / `accept4`: waits for a pending connection by readiness, then accepts.
    ///
    /// # Safety
    /// As `accept4`.
    pub unsafe fn accept4(fd: c_int, a: *mut sockaddr, l: *mut socklen_t, flags: c_int) -> c_int {
        // SAFETY (both calls): forwarded contract.
        let call = || unsafe { super::accept4(fd, a, l, flags) as isize };
        let r = match needs_loop(fd) {
            Some(st) => blocking(fd, st, Dir::Read, || probe_then(fd, Dir::Read, call)),
            None => call(),
        } as c_int;
        if r >= 0 {
            adopt_kind(r, flags & libc::SOCK_NONBLOCK != 0, is_stream_socket(r), true);
        }
        r
    }

    /// `connect` on a blocking socket: made non-blocking for the duration of this
    /// call only, then completion is awaited by readiness.
    ///
    /// # Safety
    /// As `connect`.
    pub unsafe fn connect(fd: c_int, a: *const sockaddr, l: socklen_t) -> c_int {
        let Some(st) = needs_loop(fd).filter(|s| s.has(SOCKET)) else {
            // SAFETY: forwarded contract.
            return unsafe { super::connect(fd, a, l) };
        };
        // SAFETY: plain fcntl calls on the program's socket.
        let fl = unsafe { fcntl(fd, libc::F_GETFL, 0) };
        if fl < 0 || fiber::current().is_none() {
            // SAFETY: forwarded contract.
            return unsafe { super::connect(fd, a, l) };
        }
        // SAFETY: as above.
        unsafe { fcntl(fd, libc::F_SETFL, (fl | libc::O_NONBLOCK) as libc::c_long) };
        let mut seq = st.write_seq.load(Ordering::Acquire);
        // SAFETY: forwarded contract.
        let r = unsafe { super::connect(fd, a, l) };
        let e = errno();
        // SAFETY: restores the program's flags.
        unsafe { fcntl(fd, libc::F_SETFL, fl as libc::c_long) };
        if r == 0 || e != libc::EINPROGRESS {
            set_errno(e);
            return r;
        }
        let t = st.sndtimeo_ns.load(Ordering::Relaxed);
        let deadline = if t > 0 { Some(sys::now_ns().saturating_add(t)) } else { None };
        loop {
            if ready_now(fd, Dir::Write) {
                break;
            }
            match wait(fd, st, Dir::Write, seq, deadline, t == 0) {
                Waited::Ready => seq = st.write_seq.load(Ordering::Acquire),
                Waited::TimedOut => {
                    set_errno(libc::EINPROGRESS);
                    return -1;
                }
                Waited::Interrupted => {
                    set_errno(libc::EINTR);
                    return -1;
                }
            }
        }
        let mut err: c_int = 0;
        let mut len = core::mem::size_of::<c_int>() as socklen_t;
        // SAFETY: valid out-parameters.
        unsafe { getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut err as *mut c_int as *mut c_void, &mut len) };
        if err != 0 {
            set_errno(err);
            return -1;
        }
        0
    }
}

// ---- readiness waits ------------------------------------------------------------

fn ms_deadline(timeout_ms: c_int) -> Option<u64> {
    if timeout_ms < 0 {
        None
    } else {
        Some(sys::now_ns().saturating_add(timeout_ms as u64 * 1_000_000))
    }
}

fn remaining_ms(deadline: Option<u64>) -> c_int {
    match deadline {
        None => -1,
        Some(d) => {
            let now = sys::now_ns();
            if d <= now {
                0
            } else {
                (d - now).div_ceil(1_000_000).min(i32::MAX as u64) as c_int
            }
        }
    }
}

/// How long one slice of a donor-run wait over several descriptors lasts before the
/// donor looks for a cancellation request (`poll` and `select` are cancellation points).
const DONOR_WAIT_SLICE_MS: c_int = (crate::signal::cancel::DONOR_WAIT_SLICE_NS / 1_000_000) as c_int;

/// Runs `wait_ms(timeout_ms)` on the fiber's donor in slices of at most
/// `DONOR_WAIT_SLICE_MS` until it returns non-zero, `deadline` passes, or the fiber is
/// asked to cancel (then acts on it). `wait_ms` must make each slice a fresh call
/// (restoring whatever a timed-out call changed).
fn wait_on_donor_in_slices(deadline: Option<u64>, mut wait_ms: impl FnMut(c_int) -> c_int) -> c_int {
    let Some(me) = fiber::current() else { return wait_ms(remaining_ms(deadline)) };
    let r = fiber::run_on_donor(|| loop {
        let left = remaining_ms(deadline);
        let slice = if (0..=DONOR_WAIT_SLICE_MS).contains(&left) { left } else { DONOR_WAIT_SLICE_MS };
        let r = wait_ms(slice);
        if r != 0 || slice == left || me.cancel_pending() {
            return r;
        }
    });
    crate::signal::cancel::testcancel();
    r
}

pub mod wait_api {
    use super::*;

    /// `poll` for a fiber: probe; one owned fd waiting one way parks on it; anything
    /// else runs on the donor.
    ///
    /// # Safety
    /// As `poll`.
    pub unsafe fn poll(fds: *mut pollfd, n: nfds_t, timeout_ms: c_int) -> c_int {
        if fiber::current().is_none() {
            // SAFETY: forwarded contract.
            return unsafe { super::poll(fds, n, timeout_ms) };
        }
        let deadline = ms_deadline(timeout_ms);
        if n == 1 && timeout_ms != 0 {
            // SAFETY: n == 1: one valid pollfd.
            let p = unsafe { &mut *fds };
            // POLLPRI (MariaDB's vio waits for POLLIN|POLLPRI) is reported through the
            // same read sequence: the reactor registers EPOLLPRI and bumps read_seq.
            let rd = libc::POLLIN | libc::POLLPRI | libc::POLLRDNORM;
            let ev = p.events & (rd | libc::POLLOUT | libc::POLLWRNORM);
            let dir = if ev != 0 && ev & !rd == 0 {
                Some(Dir::Read)
            } else if ev != 0 && ev & !(libc::POLLOUT | libc::POLLWRNORM) == 0 {
                Some(Dir::Write)
            } else {
                None
            };
            if let (Some(dir), Some(st)) = (dir, fdtable::owned(p.fd)) {
                // Alone on the worker: the kernel's poll itself, as natively (it reports
                // a present readiness at once, so no probe first).
                match direct_wait(p.fd, st, p.events, deadline, false) {
                    Some(Ok(revents)) => {
                        p.revents = revents;
                        return 1;
                    }
                    Some(Err(Waited::Interrupted)) => {
                        set_errno(libc::EINTR);
                        return -1;
                    }
                    Some(Err(_)) => {
                        p.revents = 0;
                        return 0;
                    }
                    None => {}
                }
                // Registered first, then the sequence, then the probe: an edge after the
                // probe moves the sequence, and registering reports a readiness that
                // came before it, so the park below cannot miss one.
                if reactor::ensure_registered(p.fd, st, dir == Dir::Write).is_ok() {
                    loop {
                        let seq = dir.seq(st).load(Ordering::Acquire);
                        // A read just found the queue empty at this sequence (e.g. the
                        // program's MSG_DONTWAIT recv before this poll): nothing to probe.
                        if !(dir == Dir::Read && p.events & libc::POLLPRI == 0 && known_empty(st, seq)) {
                            // SAFETY: as above.
                            let r = unsafe { super::poll(fds, 1, 0) };
                            if r != 0 {
                                return r;
                            }
                        }
                        match wait(p.fd, st, dir, seq, deadline, false) {
                            Waited::Ready => {}
                            Waited::TimedOut => {
                                p.revents = 0;
                                return 0;
                            }
                            Waited::Interrupted => {
                                set_errno(libc::EINTR);
                                return -1;
                            }
                        }
                    }
                }
            }
        }
        // SAFETY: forwarded contract (non-blocking probe).
        let r = unsafe { super::poll(fds, n, 0) };
        if r != 0 || timeout_ms == 0 {
            return r;
        }
        // SAFETY: forwarded contract; runs on the donor thread (poll leaves the
        // requested events alone, so every slice is the same call).
        wait_on_donor_in_slices(deadline, |ms| unsafe { super::poll(fds, n, ms) })
    }

    /// # Safety
    /// As `ppoll`.
    pub unsafe fn ppoll(fds: *mut pollfd, n: nfds_t, ts: *const libc::timespec, mask: *const libc::sigset_t) -> c_int {
        if fiber::current().is_none() {
            // SAFETY: forwarded contract.
            return unsafe { super::ppoll(fds, n, ts, mask) };
        }
        let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: forwarded contract (non-blocking probe).
        let r = unsafe { super::ppoll(fds, n, &zero, mask) };
        // SAFETY: `ts` is null or a valid timespec (caller).
        if r != 0 || unsafe { ts.as_ref() }.is_some_and(|t| t.tv_sec == 0 && t.tv_nsec == 0) {
            return r;
        }
        // SAFETY: forwarded contract; runs on the donor thread.
        fiber::run_on_donor(|| unsafe { super::ppoll(fds, n, ts, mask) })
    }

    /// `select`: probe (on copies of the sets), then run on the donor.
    ///
    /// # Safety
    /// As `select`.
    pub unsafe fn select(
        nfds: c_int,
        r: *mut libc::fd_set,
        w: *mut libc::fd_set,
        e: *mut libc::fd_set,
        t: *mut libc::timeval,
    ) -> c_int {
        if fiber::current().is_none() {
            // SAFETY: forwarded contract.
            return unsafe { super::select(nfds, r, w, e, t) };
        }
        // SAFETY: each set pointer is null or a valid fd_set (caller).
        let (sr, sw, se) = unsafe { (r.as_ref().copied(), w.as_ref().copied(), e.as_ref().copied()) };
        let mut zero = libc::timeval { tv_sec: 0, tv_usec: 0 };
        // SAFETY: forwarded contract (non-blocking probe).
        let n = unsafe { super::select(nfds, r, w, e, &mut zero) };
        // SAFETY: `t` is null or valid (caller).
        let immediate = unsafe { t.as_ref() }.is_some_and(|t| t.tv_sec == 0 && t.tv_usec == 0);
        if n != 0 || immediate {
            return n;
        }
        // SAFETY: `t` is null or valid (caller).
        let deadline = unsafe { t.as_ref() }
            .map(|t| sys::now_ns().saturating_add(t.tv_sec.max(0) as u64 * 1_000_000_000 + t.tv_usec.max(0) as u64 * 1000));
        // Each slice restores the sets a timed-out call cleared, then the real blocking
        // call on the donor.
        let n = wait_on_donor_in_slices(deadline, |ms| {
            let mut slice =
                libc::timeval { tv_sec: (ms / 1000) as libc::time_t, tv_usec: (ms % 1000) as libc::suseconds_t * 1000 };
            // SAFETY: the caller's sets (or null) and a live timeval.
            unsafe {
                if let Some(s) = sr {
                    *r = s;
                }
                if let Some(s) = sw {
                    *w = s;
                }
                if let Some(s) = se {
                    *e = s;
                }
                super::select(nfds, r, w, e, if ms < 0 { core::ptr::null_mut() } else { &mut slice })
            }
        });
        // Linux reports the time left in `t`.
        // SAFETY: as above.
        if let (Some(t), Some(d)) = (unsafe { t.as_mut() }, deadline) {
            let left = d.saturating_sub(sys::now_ns());
            *t = libc::timeval {
                tv_sec: (left / 1_000_000_000) as libc::time_t,
                tv_usec: (left % 1_000_000_000 / 1000) as libc::suseconds_t,
            };
        }
        n
    }

    /// # Safety
    /// As `pselect`.
    pub unsafe fn pselect(
        nfds: c_int,
        r: *mut libc::fd_set,
        w: *mut libc::fd_set,
        e: *mut libc::fd_set,
        t: *const libc::timespec,
        m: *const libc::sigset_t,
    ) -> c_int {
        // SAFETY: forwarded contract; on the donor for a fiber.
        fiber::run_on_donor(|| unsafe { super::pselect(nfds, r, w, e, t, m) })
    }

    /// `epoll_wait` on the program's own epoll fd: its readiness is itself pollable, so
    /// a fiber parks on it through our reactor.
    ///
    /// # Safety
    /// As `epoll_pwait` (`mask` null for `epoll_wait`).
    pub unsafe fn epoll_pwait(
        ep: c_int,
        ev: *mut libc::epoll_event,
        max: c_int,
        timeout_ms: c_int,
        mask: *const libc::sigset_t,
    ) -> c_int {
        let call = |ms: c_int| {
            // SAFETY: forwarded contract.
            unsafe {
                if mask.is_null() {
                    super::epoll_wait(ep, ev, max, ms)
                } else {
                    super::epoll_pwait(ep, ev, max, ms, mask)
                }
            }
        };
        if fiber::current().is_none() {
            return call(timeout_ms);
        }
        let r = call(0);
        if r != 0 || timeout_ms == 0 {
            return r;
        }
        let deadline = ms_deadline(timeout_ms);
        if let Some(st) = fdtable::owned(ep) {
            if reactor::ensure_registered(ep, st, false).is_ok() {
                loop {
                    let seq = st.read_seq.load(Ordering::Acquire);
                    let r = call(0);
                    if r != 0 {
                        return r;
                    }
                    match wait(ep, st, Dir::Read, seq, deadline, false) {
                        Waited::Ready => {}
                        Waited::TimedOut => return 0,
                        Waited::Interrupted => {
                            set_errno(libc::EINTR);
                            return -1;
                        }
                    }
                }
            }
        }
        fiber::run_on_donor(|| call(remaining_ms(deadline)))
    }
}

// ---- descriptor lifecycle ---------------------------------------------------------

/// Starts tracking a freshly created fd.
fn adopt_kind(fd: c_int, user_nonblock: bool, stream: bool, socket: bool) {
    if let Some(st) = fdtable::slot(fd) {
        fdtable::reset(fd);
        let f = OWNED
            | if user_nonblock { USER_NONBLOCK } else { 0 }
            | if stream { STREAM } else { 0 }
            | if socket { SOCKET } else { 0 };
        st.flags.store(f, Ordering::Release);
    }
}

/// Whether socket `fd` is SOCK_STREAM.
fn is_stream_socket(fd: c_int) -> bool {
    let mut ty: c_int = 0;
    let mut len = core::mem::size_of::<c_int>() as socklen_t;
    // SAFETY: valid out-parameters.
    let r = unsafe { getsockopt(fd, libc::SOL_SOCKET, libc::SO_TYPE, &mut ty as *mut c_int as *mut c_void, &mut len) };
    r == 0 && ty == libc::SOCK_STREAM
}

/// Forgets `fd` before it is closed or replaced.
fn release(fd: c_int) {
    if let Some(st) = fdtable::lookup(fd) {
        if let Some(old) = fdtable::reset(fd) {
            if old & OWNED != 0 {
                reactor::forget(fd, old & REGISTERED != 0, st);
            }
        }
    }
}

/// A duplicate shares the open file description, hence our O_NONBLOCK underneath.
fn copy_state(from: c_int, to: c_int) {
    if to < 0 || to == from {
        return;
    }
    if let Some(src) = fdtable::owned(from) {
        let f = src.flags.load(Ordering::Acquire) & (OWNED | USER_NONBLOCK | EPOLL_FD | STREAM | SOCKET);
        if let Some(dst) = fdtable::slot(to) {
            fdtable::reset(to);
            dst.rcvtimeo_ns.store(src.rcvtimeo_ns.load(Ordering::Relaxed), Ordering::Relaxed);
            dst.sndtimeo_ns.store(src.sndtimeo_ns.load(Ordering::Relaxed), Ordering::Relaxed);
            dst.flags.store(f, Ordering::Release);
        }
    }
}

pub mod fd_api {
    use super::*;

    /// # Safety
    /// As `socket`.
    pub unsafe fn socket(d: c_int, t: c_int, p: c_int) -> c_int {
        // SAFETY: forwarded contract.
        let fd = unsafe { super::socket(d, t, p) };
        if fd >= 0 {
            let ty = t & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
            adopt_kind(fd, t & libc::SOCK_NONBLOCK != 0, ty == libc::SOCK_STREAM, true);
        }
        fd
    }

    /// # Safety
    /// As `socketpair`.
    pub unsafe fn socketpair(d: c_int, t: c_int, p: c_int, sv: *mut c_int) -> c_int {
        // SAFETY: forwarded contract.
        let r = unsafe { super::socketpair(d, t, p, sv) };
        if r == 0 {
            // SAFETY: on success the kernel wrote two fds.
            unsafe {
                let stream = t & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) == libc::SOCK_STREAM;
                adopt_kind(*sv, t & libc::SOCK_NONBLOCK != 0, stream, true);
                adopt_kind(*sv.add(1), t & libc::SOCK_NONBLOCK != 0, stream, true);
            }
        }
        r
    }

    /// `pipe` (flags 0) and `pipe2`.
    ///
    /// # Safety
    /// As `pipe2`.
    pub unsafe fn pipe2(fds: *mut c_int, flags: c_int) -> c_int {
        // SAFETY: forwarded contract.
        let r = unsafe { super::pipe2(fds, flags) };
        if r == 0 {
            // SAFETY: on success the kernel wrote two fds.
            unsafe {
                // O_DIRECT makes a pipe packet-oriented: then a short read proves nothing.
                let stream = flags & libc::O_DIRECT == 0;
                adopt_kind(*fds, flags & libc::O_NONBLOCK != 0, stream, false);
                adopt_kind(*fds.add(1), flags & libc::O_NONBLOCK != 0, stream, false);
            }
        }
        r
    }

    /// # Safety
    /// As `eventfd`.
    pub unsafe fn eventfd(init: libc::c_uint, flags: c_int) -> c_int {
        // SAFETY: forwarded contract.
        let fd = unsafe { super::eventfd(init, flags) };
        if fd >= 0 {
            adopt_kind(fd, flags & libc::EFD_NONBLOCK != 0, false, false);
        }
        fd
    }

    /// `epoll_create1` (and `epoll_create`): the program's epoll fd, kept blocking.
    ///
    /// # Safety
    /// As `epoll_create1`.
    pub unsafe fn epoll_create1(flags: c_int) -> c_int {
        // SAFETY: forwarded contract.
        let fd = unsafe { super::epoll_create1(flags) };
        if fd >= 0 {
            if let Some(st) = fdtable::slot(fd) {
                fdtable::reset(fd);
                st.flags.store(OWNED | EPOLL_FD, Ordering::Release);
            }
        }
        fd
    }

    /// # Safety
    /// As `close`.
    pub unsafe fn close(fd: c_int) -> c_int {
        release(fd);
        // SAFETY: forwarded contract.
        unsafe { super::close(fd) }
    }

    /// # Safety
    /// As `dup`.
    pub unsafe fn dup(fd: c_int) -> c_int {
        // SAFETY: forwarded contract.
        let r = unsafe { super::dup(fd) };
        copy_state(fd, r);
        r
    }

    /// `dup2` (flags None) and `dup3`.
    ///
    /// # Safety
    /// As `dup3`.
    pub unsafe fn dup3(a: c_int, b: c_int, flags: Option<c_int>) -> c_int {
        if a != b {
            release(b);
        }
        // SAFETY: forwarded contract.
        let r = unsafe {
            match flags {
                None => super::dup2(a, b),
                Some(f) => super::dup3(a, b, f),
            }
        };
        if r >= 0 {
            copy_state(a, r);
        }
        r
    }

    /// `fcntl`: passes through, noting the program's `O_NONBLOCK` and duplicates.
    ///
    /// # Safety
    /// As `fcntl` (the variadic argument passed as a long).
    pub unsafe fn fcntl(fd: c_int, cmd: c_int, arg: libc::c_long) -> c_int {
        // SAFETY: forwarded contract.
        let r = unsafe { super::fcntl(fd, cmd, arg) };
        match cmd {
            libc::F_SETFL if r == 0 => {
                if let Some(st) = fdtable::owned(fd) {
                    st.set_user_nonblock(arg & libc::O_NONBLOCK as libc::c_long != 0);
                }
            }
            libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => copy_state(fd, r),
            _ => {}
        }
        r
    }

    /// `ioctl`: passes through, noting `FIONBIO`.
    ///
    /// # Safety
    /// As `ioctl` (the variadic argument passed as a long).
    pub unsafe fn ioctl(fd: c_int, req: libc::c_ulong, arg: libc::c_long) -> c_int {
        // SAFETY: forwarded contract.
        let r = unsafe { super::ioctl(fd, req, arg) };
        if r == 0 && req == libc::FIONBIO {
            if let Some(st) = fdtable::owned(fd) {
                // SAFETY: FIONBIO took a valid int pointer (the kernel accepted it).
                st.set_user_nonblock(unsafe { *(arg as *const c_int) } != 0);
            }
        }
        r
    }

    /// `setsockopt`: remembers SO_RCVTIMEO / SO_SNDTIMEO for our own waits.
    ///
    /// # Safety
    /// As `setsockopt`.
    pub unsafe fn setsockopt(fd: c_int, level: c_int, name: c_int, v: *const c_void, l: socklen_t) -> c_int {
        // SAFETY: forwarded contract.
        let r = unsafe { super::setsockopt(fd, level, name, v, l) };
        if r == 0
            && level == libc::SOL_SOCKET
            && (name == libc::SO_RCVTIMEO || name == libc::SO_SNDTIMEO)
            && l as usize >= core::mem::size_of::<libc::timeval>()
        {
            if let Some(st) = fdtable::owned(fd) {
                // SAFETY: the kernel accepted it as a timeval.
                let tv = unsafe { &*(v as *const libc::timeval) };
                let ns = (tv.tv_sec.max(0) as u64).saturating_mul(1_000_000_000).saturating_add(tv.tv_usec.max(0) as u64 * 1000);
                if name == libc::SO_RCVTIMEO { &st.rcvtimeo_ns } else { &st.sndtimeo_ns }.store(ns, Ordering::Relaxed);
            }
        }
        r
    }

    /// `fsync`/`fdatasync` for a fiber run on its donor (they can take milliseconds).
    ///
    /// # Safety
    /// As `fsync`.
    pub unsafe fn fsync(fd: c_int, data_only: bool) -> c_int {
        // SAFETY: forwarded contract.
        let call = || unsafe {
            if data_only {
                fdatasync(fd)
            } else {
                super::fsync(fd)
            }
        };
        if crate::base::config::config().sync_inline {
            return call();
        }
        fiber::run_on_donor(call)
    }
}
