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
//! | `mod.rs` | the real functions, and the shared machinery: [`needs_loop`] (does this fd need our loop), the try-then-park retry loop ([`blocking`], [`blocking_sized`]), the wait itself ([`wait`]: park through the reactor, wait in the kernel when alone on the worker, or block in the real `poll` on the donor), and the drained-queue memory ([`known_empty`]) |
//! | [`transfer`] | `read`, `write`, their vector and socket forms, `accept4`, `connect` |
//! | [`readiness`] | `poll`, `ppoll`, `select`, `pselect`, `epoll_pwait` |
//! | [`lifecycle`] | creating, duplicating and closing descriptors, `fcntl`, `ioctl`, `setsockopt`, `fsync` |

use core::sync::atomic::{AtomicU32, Ordering};

use libc::{c_int, c_void, nfds_t, pollfd, size_t, sockaddr, socklen_t, ssize_t};

use crate::base::stats::{bump, STATS};
use crate::base::sys;
use crate::base::sys::{errno, set_errno};
use crate::io::fdtable::{self, FdState, EPOLL_FD, LOCAL_SOCKET, OWNED, REGISTERED, SOCKET, STREAM, USER_NONBLOCK};
use crate::io::peer_cpu::{self, Peer};
use crate::io::reactor;
use crate::runtime::fibers::fiber::{self, WaitKind};
use crate::runtime::scheduler::{self, DirectWait};
use crate::signal::{delivery, donor_waits};
use crate::sync::parking::{self, ParkResult};

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

/// A blocking call begins (before its first attempt): a program signal handler that
/// ran on the calling fiber before did not interrupt it; one that runs from here on
/// does, wherever the call is when it runs (its attempt, the way to a park, the wait),
/// as natively the thread would have been blocked in the kernel all that time. Each
/// [`wait`] of the call (and [`try_direct_wait`]) looks at what ran since.
#[inline]
fn begin_blocking_call() {
    if let Some(me) = fiber::current() {
        delivery::clear_interruption(me);
    }
}

/// Waits until `fd`'s readiness in `dir` moves past `seq`, or `deadline`. A program
/// signal handler that ran on the fiber since [`begin_blocking_call`] ends the wait
/// with `Interrupted` as the kernel's EINTR would: always, or for a `restartable` call
/// (signal(7): reads and writes without a socket timeout, accept, connect) only when
/// the handler lacks `SA_RESTART` (with it the wait goes on: the call restarts).
///
/// Whichever way the fiber waits, a `pthread_kill` ends it: in a direct wait the
/// unpark writes the worker's eventfd and the kick runs the handler (or the park that
/// follows delivers it); parked, the unpark resumes the fiber, which runs the handler
/// on its way out of the switch, and the park, an interruptible one, returns.
fn wait(fd: c_int, st: &FdState, dir: Dir, seq: u32, deadline: Option<u64>, restartable: bool) -> Waited {
    if let Some(me) = fiber::current() {
        if let Some(r) = try_direct_wait(fd, st, dir.poll_events(), deadline, restartable) {
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
    let ms = crate::base::time::ms_until(deadline);
    let mut p = pollfd { fd, events: dir.poll_events(), revents: 0 };
    // SAFETY: one valid pollfd.
    let r = crate::signal::on_donor::run_on_donor_taking_signals(|| unsafe { poll(&mut p, 1, ms) });
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
fn try_direct_wait(
    fd: c_int,
    st: &FdState,
    events: i16,
    deadline: Option<u64>,
    restartable: bool,
) -> Option<Result<i16, Waited>> {
    let me = fiber::current()?;
    // A handler that ran since the call began (e.g. while it made its attempt).
    if delivery::interrupted_for_good(me, restartable) {
        crate::signal::cancel::testcancel();
        return Some(Err(Waited::Interrupted));
    }
    // Only while few fibers wait through the reactor: with many connections a worker
    // that runs dry gets work again within microseconds, and taking fds in and out of
    // the epoll set would only cost system calls. (A precaution: the first measurement
    // that seemed to show the loss, MariaDB at 64 and 1024 connections, did not survive
    // swapping the two servers' roles.)
    if reactor::io_waiters() as usize >= crate::base::config::config().workers {
        return None;
    }
    let peer = if st.has(SOCKET) { peer_cpu::where_peer_runs(fd, st.has(LOCAL_SOCKET)) } else { Peer::Unknown };
    if let Peer::Elsewhere(cpu) = peer {
        bump(&STATS.direct_waits_declined_peer_elsewhere);
        // The fiber parks; if its worker then runs dry, it sleeps at once, and the
        // peer's next send wakes it where the kernel sees fit: beside the peer.
        if peer_cpu::kernel_may_pair_with(cpu) {
            scheduler::sleep_without_spin_next();
        }
        return None;
    }
    // A peer on this CPU cannot answer while the worker spins: block at once.
    let spin = peer != Peer::Here;
    let r = match scheduler::direct_wait(fd, events, deadline, spin, || reactor::leave_epoll_set(fd, st)) {
        DirectWait::Ready(revents) => Ok(revents),
        DirectWait::TimedOut => Err(Waited::TimedOut),
        DirectWait::Other if delivery::interrupted_for_good(me, restartable) => Err(Waited::Interrupted),
        DirectWait::Other => return None,
    };
    st.read_events.store(0, Ordering::Relaxed);
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
    begin_blocking_call();
    loop {
        let seq = dir.seq(st).load(Ordering::Acquire);
        if !(track && known_empty(st, seq)) {
            let r = attempt();
            if track {
                note_if_drained(st, seq, requested, r);
                if r > 0 {
                    // Between two requests of a server: the fiber's turn may end here.
                    scheduler::note_stream_read();
                }
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
    if r > 0 {
        scheduler::note_stream_read();
    }
    r
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
