//! One owner of a descriptor's readiness (the idea of tokio's `ScheduledIo`): for each
//! descriptor we track, a [`ScheduledIo`] (in its `fdtable` slot) holds its kind, its
//! registration in the runtime's readiness sets, its readiness sequences and the
//! fibers that wait on it, and its methods choose how a fiber waits for it. The
//! wrappers in `io::ops` make their attempt and, on `EAGAIN`, ask
//! [`ScheduledIo::wait`]; the floors below are called with plain values: the poller
//! (`runtime::sleep::poller`, only the sets workers wait in) gets a set, an fd and an
//! `epoll_event` for its `epoll_ctl` and calls back up through its one dispatch hook
//! (`fdtable::dispatch`, then [`ScheduledIo::dispatch`]); the scheduler's direct wait
//! gets the fd and its poll events; parking gets the sequence's address.
//!
//! ```text
//!   ScheduledIo::wait(fd, dir, seq)          the strategy, in this order:
//!     1. direct: alone on the worker, the peer not on another CPU (io::peer_cpu):
//!        scheduler::prepare_direct_wait (spin), leave_epoll_set, DirectWaiter::wait
//!     2. parked: count_waiter, ensure_registered, then the direction's waiter slot
//!        (io::slot_park), or parking::park on the sequence when the slot is taken
//!     3. a plain thread, or an fd epoll refuses: the real poll (on the donor, if a fiber)
//!   ScheduledIo::dispatch(cookie, events)    an edge a poller harvested:
//!     sequence += 1, wake the slot's fiber and the lot's (if any) parked on it
//! ```
//!
//! `flags` bits:
//!
//! | bit | name          | meaning                                                       |
//! |-----|---------------|---------------------------------------------------------------|
//! | 0   | OWNED         | created through us: blocking calls wait by readiness          |
//! | 1   | USER_NONBLOCK | the program set `O_NONBLOCK` (then every call is one attempt)  |
//! | 2   | REGISTERED    | in the reactor's epoll set                                    |
//! | 3   | EPOLL_FD      | the program's own epoll instance (never made non-blocking)    |
//! | 4   | STREAM        | byte stream: a short read proves the receive queue was empty  |
//! | 5   | SOCKET        | a socket: `MSG_DONTWAIT` makes single calls non-blocking      |
//! | 6   | WATCH_WRITE   | registered for EPOLLOUT too (a writer had to wait once)       |
//! | 7   | REG_BUSY      | somebody is adding or removing it in the epoll set right now  |
//! | 8   | LOCAL_SOCKET  | an `AF_UNIX` socket (`io::peer_cpu`)                          |
//! | 9   | URGENT_SEEN   | the reactor reported `EPOLLPRI` for it once (sticky)          |
//!
//! `read_seq`/`write_seq` count readiness edges reported by the reactor; a waiter reads
//! the sequence *before* its attempt and parks only while it is unchanged, so an edge
//! between the attempt and the park is never lost. Their addresses are the parking
//! keys of the fd's readers and writers. The first fiber that waits in a direction
//! waits in that direction's [`WaiterSlot`] (`read_waiter`/`write_waiter`), without
//! the hashed lot's bucket lock; others meanwhile park in the lot on the sequence's
//! address (`io::waiter_slot`).
//!
//! # Registration
//!
//! With one shared set (under 4 workers) every fd is in set 0. With a set per worker
//! (`crate::runtime::sleep::poller`) an fd goes into the set of the worker whose fiber
//! first waits on it, and moves to the set of the worker a waiting fiber runs on now when
//! that fiber is its only waiter and that set holds at least two fds fewer (a
//! connection's thread was stolen by an idle worker: its readiness follows it, so the
//! next edge is harvested where it runs). Toward a fuller set it stays: a fiber moved
//! there by a lock's wake-up (the waker's lifo slot) goes home with its next wait.
//! (When every move followed the fiber, read_write's tail on many cores was far longer
//! at the same throughput: connections gathered on the workers where lock hand-offs had
//! taken their fibers; docs/RESULTS.md#poll-sets-per-worker.) An fd with
//! several waiters on different workers (a listening socket with many acceptors) stays
//! where it is: moving it back and forth would cost two `epoll_ctl` per wait, and its
//! edges wake all its waiters anyway.
//!
//! Registration is lazy (the first time a fiber would block on the fd), edge-triggered
//! for `IN|PRI|OUT|RDHUP`, with the cookie `fd | gen << 32` so that an event for a closed
//! and reused fd number is recognized as stale. Each event bumps the fd's `read_seq` /
//! `write_seq` and wakes every fiber parked on that key.
//!
//! The epoll set itself, the sleeping and polling of idle workers, are the core's
//! (`crate::runtime::sleep::poller`), and so is every `epoll_ctl` on it: this file
//! decides what goes into which set (the event and its cookie, a move as a delete and
//! an add) and asks the poller to add, modify or delete it, and turns the events a
//! poller harvests into wake-ups ([`ScheduledIo::dispatch`], through the core's
//! hooks). The registration lock and the hand-shake with direct waiters are
//! `epoll_membership`'s (model-checked).

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use libc::{c_int, pollfd};

use crate::base::stats::{bump, STATS};
use crate::base::sys::errno;
use crate::io::epoll_membership::{self, EpollSet};
use crate::io::peer_cpu::{self, Peer};
use crate::io::slot_park;
use crate::io::waiter_slot::WaiterSlot;
use crate::runtime::fibers::fiber;
use crate::runtime::scheduler::{self, DirectWait};
use crate::runtime::sleep::poller;
use crate::signal::delivery;
use crate::sync::parking::ParkResult;

crate::real_fns! {
    fn poll(fds: *mut pollfd, n: libc::nfds_t, timeout: c_int) -> c_int;
}

/// Fibers parked on descriptor readiness through the epoll set (sum of the fds'
/// `epoll_waiters`).
static IO_WAITERS: AtomicU32 = AtomicU32::new(0);

/// Which readiness a call waits for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Read,
    Write,
}

impl Dir {
    /// The descriptor's sequence for this direction: what its waiters park on.
    pub fn seq(self, st: &ScheduledIo) -> &AtomicU32 {
        match self {
            Dir::Read => &st.read_seq,
            Dir::Write => &st.write_seq,
        }
    }
    /// The descriptor's waiter slot for this direction.
    fn slot(self, st: &ScheduledIo) -> &WaiterSlot {
        match self {
            Dir::Read => &st.read_waiter,
            Dir::Write => &st.write_waiter,
        }
    }
    pub fn poll_events(self) -> i16 {
        match self {
            Dir::Read => libc::POLLIN,
            Dir::Write => libc::POLLOUT,
        }
    }
    /// SO_RCVTIMEO / SO_SNDTIMEO in ns (0: none).
    pub fn timeout_ns(self, st: &ScheduledIo) -> u64 {
        match self {
            Dir::Read => st.rcvtimeo_ns.load(Ordering::Relaxed),
            Dir::Write => st.sndtimeo_ns.load(Ordering::Relaxed),
        }
    }
}

/// How a [`ScheduledIo::wait`] ended.
pub enum Waited {
    Ready,
    TimedOut,
    Interrupted,
}

/// A fiber counted among the waiters on a descriptor through the epoll set
/// ([`ScheduledIo::count_waiter`]); counted out when dropped.
pub struct EpollWaiter<'a>(&'a ScheduledIo);

impl Drop for EpollWaiter<'_> {
    #[inline]
    fn drop(&mut self) {
        epoll_membership::count_waiter(&self.0.epoll_waiters, false);
        IO_WAITERS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Direct waits on a socket whose peer runs outside the process's CPU mask that are
/// declined before its CPU is asked again. Origin: one `getsockopt` in this many waits
/// no longer shows in a profile, and a peer that moved is seen within as many replies.
const PEER_RECHECK_AFTER: u32 = 64;

/// How many fibers wait for readiness through the epoll set now.
pub fn io_waiters() -> u32 {
    IO_WAITERS.load(Ordering::Relaxed)
}

// `ScheduledIo::flags`:
/// We saw the descriptor created (socket, pipe, eventfd, accept…): its waits are ours.
pub const OWNED: u32 = 1;
/// The program itself set O_NONBLOCK: its calls return EAGAIN as natively.
pub const USER_NONBLOCK: u32 = 2;
// REGISTERED (4), WATCH_WRITE (64) and REG_BUSY (128) belong to the epoll-set
// protocol, a model-checked file of their own.
pub use crate::io::epoll_membership::{REGISTERED, REG_BUSY, WATCH_WRITE};
/// The program's own epoll descriptor (its waits park on readiness of that fd).
pub const EPOLL_FD: u32 = 8;
/// A byte stream (SOCK_STREAM socket, pipe): a short read means the queue was empty.
pub const STREAM: u32 = 16;
/// A socket: per-call MSG_DONTWAIT makes its reads and writes non-blocking.
pub const SOCKET: u32 = 32;
/// An AF_UNIX socket: the kernel records no CPU for what comes in on it
/// (`io::peer_cpu`).
pub const LOCAL_SOCKET: u32 = 256;
/// The reactor once reported `EPOLLPRI` (urgent data) for the descriptor since it was
/// registered; until then a `poll` for `POLLPRI` cannot find it pending (registering
/// reports a readiness that came before), so an empty receive queue is all a wait for
/// `POLLIN | POLLPRI` needs to know (`ops::readiness::poll`).
pub const URGENT_SEEN: u32 = 512;

/// One descriptor's kind, registration, readiness and waiters (the module docs).
pub struct ScheduledIo {
    /// The descriptor's kind and its registration (the bits above), one word so that
    /// closing the number clears both at once ([`ScheduledIo::reset`]).
    pub flags: AtomicU32,
    /// Bumped whenever the fd number is closed or reused; part of the epoll cookie.
    pub gen: AtomicU32,
    pub read_seq: AtomicU32,
    pub write_seq: AtomicU32,
    /// The epoll events of the reactor's edge that last moved `read_seq`, stored before
    /// the move; 0 when something else moved it (a close, a direct wait): then nothing
    /// is known of the readiness and a waiter that woke must probe.
    pub read_events: AtomicU32,
    /// Direct waits left to decline without asking where the peer runs: set when the
    /// kernel last put the socket's peer on a CPU outside the process's mask, where no
    /// direct wait can be paired with it nor wake-up move the worker beside it
    /// ([`ScheduledIo::try_direct_wait`]). A hint, so Relaxed.
    peer_unreachable_for: AtomicU32,
    /// SO_RCVTIMEO / SO_SNDTIMEO in ns (0: none).
    pub rcvtimeo_ns: AtomicU64,
    pub sndtimeo_ns: AtomicU64,
    /// `1 << 32 | read_seq` when a read observed the receive queue empty at that
    /// readiness sequence (0: unknown). While `read_seq` has not moved, the next read
    /// would fail with EAGAIN, so a blocking read parks at once instead of trying.
    pub drained_at: AtomicU64,
    /// Fibers parked on this fd's readiness through the reactor (or about to): while
    /// non-zero the fd must stay in the epoll set ([`ScheduledIo::leave_epoll_set`]).
    pub epoll_waiters: AtomicU32,
    /// The readiness set (`runtime::sleep::poller`) the fd is registered in while `REGISTERED`:
    /// always 0 with one shared set; with a set per worker, the set of the worker whose
    /// fiber last registered or moved it (the module's Registration). Written under the
    /// registration lock (`REG_BUSY`).
    pub home_set: AtomicU32,
    /// The fiber waiting for readability, or writability, when only one does
    /// (`io::waiter_slot`).
    pub read_waiter: WaiterSlot,
    pub write_waiter: WaiterSlot,
}

impl ScheduledIo {
    pub(crate) const fn new() -> ScheduledIo {
        ScheduledIo {
            flags: AtomicU32::new(0),
            gen: AtomicU32::new(0),
            read_seq: AtomicU32::new(0),
            write_seq: AtomicU32::new(0),
            read_events: AtomicU32::new(0),
            peer_unreachable_for: AtomicU32::new(0),
            rcvtimeo_ns: AtomicU64::new(0),
            sndtimeo_ns: AtomicU64::new(0),
            drained_at: AtomicU64::new(0),
            epoll_waiters: AtomicU32::new(0),
            home_set: AtomicU32::new(0),
            read_waiter: WaiterSlot::new(),
            write_waiter: WaiterSlot::new(),
        }
    }

    #[inline]
    pub fn has(&self, bit: u32) -> bool {
        self.flags.load(Ordering::Acquire) & bit != 0
    }

    pub fn set_user_nonblock(&self, on: bool) {
        if on {
            self.flags.fetch_or(USER_NONBLOCK, Ordering::AcqRel);
        } else {
            self.flags.fetch_and(!USER_NONBLOCK, Ordering::AcqRel);
        }
    }

    /// Forgets everything about the descriptor (its number is being closed or
    /// replaced): returns the flags it had. The generation moves on, so that an event
    /// registered under the old one is recognized as stale ([`ScheduledIo::dispatch`]).
    pub(crate) fn reset(&self) -> u32 {
        let old = self.flags.swap(0, Ordering::AcqRel);
        self.gen.fetch_add(1, Ordering::AcqRel);
        self.rcvtimeo_ns.store(0, Ordering::Relaxed);
        self.sndtimeo_ns.store(0, Ordering::Relaxed);
        self.drained_at.store(0, Ordering::Relaxed);
        self.read_events.store(0, Ordering::Relaxed);
        self.peer_unreachable_for.store(0, Ordering::Relaxed);
        old
    }

    /// Waits until `fd`'s readiness in `dir` moves past `seq`, or `deadline`. A program
    /// signal handler that ran on the fiber since its blocking call began
    /// (`delivery::clear_interruption`) ends the wait with `Interrupted` as the kernel's
    /// EINTR would: always, or for a `restartable` call (signal(7): reads and writes
    /// without a socket timeout, accept, connect) only when the handler lacks
    /// `SA_RESTART` (with it the wait goes on: the call restarts).
    ///
    /// Whichever way the fiber waits, a `pthread_kill` ends it: in a direct wait the
    /// unpark writes the worker's eventfd and the kick runs the handler (or the park
    /// that follows delivers it); parked, the unpark resumes the fiber, which runs the
    /// handler on its way out of the switch, and the park, an interruptible one, returns.
    pub fn wait(&self, fd: c_int, dir: Dir, seq: u32, deadline: Option<u64>, restartable: bool) -> Waited {
        // Declined (None) for a plain thread too.
        if let Some(r) = self.try_direct_wait(fd, dir.poll_events(), deadline, restartable) {
            return r.map_or_else(|w| w, |_| Waited::Ready);
        }
        self.wait_parked(fd, dir, seq, deadline, restartable)
    }

    /// [`ScheduledIo::wait`] after a direct wait was declined (`poll` on one descriptor
    /// asks before its probe; asking twice counted the refusal twice).
    pub fn wait_parked(&self, fd: c_int, dir: Dir, seq: u32, deadline: Option<u64>, restartable: bool) -> Waited {
        if let Some(me) = fiber::current() {
            let waiting = self.count_waiter();
            if self.ensure_registered(fd, dir == Dir::Write).is_ok() {
                let r = slot_park::wait(dir.slot(self), me, dir.seq(self), seq, deadline);
                drop(waiting);
                // Blocking reads, writes, accept, connect and poll are cancellation points.
                crate::signal::cancel::testcancel();
                return match r {
                    ParkResult::TimedOut => Waited::TimedOut,
                    _ if delivery::interrupted_for_good(me, restartable) => Waited::Interrupted,
                    _ => Waited::Ready,
                };
            }
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
    /// (`scheduler::prepare_direct_wait`): `Some(Ok(revents))` when it is ready,
    /// `Some(Err(_))` when the wait timed out or a handler interrupted it (see
    /// [`ScheduledIo::wait`]), `None` when the caller must wait the ordinary way. Whatever
    /// ended the wait, the readiness sequences move on, since no reactor edge reports
    /// what happened meanwhile (a drained queue must not skip the next attempt). A
    /// cancellation point, as the parked wait is.
    pub fn try_direct_wait(
        &self,
        fd: c_int,
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
        if io_waiters() as usize >= crate::base::config::config().workers {
            return None;
        }
        // A peer last seen where this process may not run (a client pinned apart from
        // its server) is declined again without a `getsockopt` each time, and asked
        // about once every PEER_RECHECK_AFTER waits, in case it moved.
        let unreachable_for = self.peer_unreachable_for.load(Ordering::Relaxed);
        if unreachable_for != 0 {
            self.peer_unreachable_for.store(unreachable_for - 1, Ordering::Relaxed);
            bump(&STATS.direct_waits_declined_peer_elsewhere);
            return None;
        }
        let peer = if self.has(SOCKET) { peer_cpu::where_peer_runs(fd, self.has(LOCAL_SOCKET)) } else { Peer::Unknown };
        if let Peer::Elsewhere(cpu) = peer {
            bump(&STATS.direct_waits_declined_peer_elsewhere);
            // The fiber parks; if its worker then runs dry, it sleeps at once, and the
            // peer's next send wakes it where the kernel sees fit: beside the peer.
            if peer_cpu::kernel_may_pair_with(cpu) {
                scheduler::sleep_without_spin_next();
            } else if cpu.is_some() {
                self.peer_unreachable_for.store(PEER_RECHECK_AFTER, Ordering::Relaxed);
            }
            return None;
        }
        // A peer on this CPU cannot answer while the worker spins: block at once.
        let spin = peer != Peer::Here;
        // The fd leaves the epoll set between the spin and the block (unless a fiber
        // waits on it through the set), so that its edges do not wake idle workers.
        let outcome = match scheduler::prepare_direct_wait(fd, events, spin) {
            Ok(waiter) if self.leave_epoll_set(fd) => waiter.wait(fd, events, deadline),
            Ok(_) => DirectWait::Other,
            Err(outcome) => outcome,
        };
        let r = match outcome {
            DirectWait::Ready(revents) => Ok(revents),
            DirectWait::TimedOut => Err(Waited::TimedOut),
            DirectWait::Other if delivery::interrupted_for_good(me, restartable) => Err(Waited::Interrupted),
            DirectWait::Other => return None,
        };
        self.read_events.store(0, Ordering::Relaxed);
        self.read_seq.fetch_add(1, Ordering::AcqRel);
        self.write_seq.fetch_add(1, Ordering::AcqRel);
        crate::signal::cancel::testcancel();
        Some(r)
    }

    /// Whether a read found the receive queue empty at readiness sequence `seq` (and no
    /// edge came since): the next read would fail with EAGAIN.
    #[inline]
    pub fn known_empty(&self, seq: u32) -> bool {
        self.drained_at.load(Ordering::Acquire) == (1u64 << 32 | seq as u64)
    }

    /// After a plain read of `requested` bytes from a byte stream that returned `r`, with
    /// `seq` read before the call: EAGAIN or a short read proves the queue was empty.
    /// Leaves errno alone.
    #[inline]
    pub fn note_if_drained(&self, seq: u32, requested: usize, r: isize) {
        let would_block = || {
            let e = errno();
            e == libc::EAGAIN || e == libc::EWOULDBLOCK
        };
        if (r < 0 && would_block()) || (r > 0 && (r as usize) < requested) {
            self.drained_at.store(1u64 << 32 | seq as u64, Ordering::Release);
        }
    }

    /// Counts a fiber among the waiters on this fd through the epoll set until the
    /// returned guard drops. In before its registration check and park: see
    /// [`ScheduledIo::leave_epoll_set`].
    #[inline]
    pub fn count_waiter(&self) -> EpollWaiter<'_> {
        epoll_membership::count_waiter(&self.epoll_waiters, true);
        IO_WAITERS.fetch_add(1, Ordering::Relaxed);
        EpollWaiter(self)
    }

    /// Puts `fd` in the epoll set if it is not there yet, watching write readiness only
    /// once a writer has to wait (`for_write`). Err(errno) if epoll refuses it (e.g.
    /// EPERM for a regular file): the caller must wait some other way. Callers that park
    /// afterwards count themselves in ([`ScheduledIo::count_waiter`]) first, so that a
    /// direct waiter does not take the fd out under them. Adding reports a readiness
    /// that came before it, so a sequence read before this call misses no edge.
    ///
    /// Why not EPOLLOUT from the start: with it, every ACK that frees send-buffer space
    /// is an edge — an epoll callback, a ready-list entry and a dispatch — although
    /// request/response traffic never waits for buffer space. Echo benchmark, 1000
    /// connections: about a third of all events were such useless EPOLLOUT edges.
    /// Adding EPOLLOUT later with EPOLL_CTL_MOD makes the kernel re-check readiness at
    /// once, so an edge between the writer's EAGAIN and the MOD is not lost.
    pub fn ensure_registered(&self, fd: i32, for_write: bool) -> Result<(), i32> {
        let here = caller_set();
        // A move only where sets are per worker, the fd is in another one, the caller
        // (counted in `epoll_waiters` already) is its only waiter, and the caller's set
        // holds at least two fds fewer (`moves_toward_balance`). Relaxed looks: the
        // decision is re-made under the registration lock by `InTheSet::put`.
        let home = self.home_set.load(Ordering::Relaxed) as usize;
        let relocate = poller::per_worker()
            && self.flags.load(Ordering::Relaxed) & epoll_membership::REGISTERED != 0
            && home != here
            && self.epoll_waiters.load(Ordering::Relaxed) <= 1
            && moves_toward_balance(poller::fds_in(home), poller::fds_in(here));
        epoll_membership::ensure_registered_or_move(&self.flags, for_write, relocate, &InTheSet { fd, st: self, here, relocate })
    }

    /// Takes `fd` out of the epoll set for a direct wait, unless a fiber waits on it
    /// through the reactor. Returns whether it is out. The hand-shake with the waiters'
    /// [`ScheduledIo::count_waiter`] is `epoll_membership`'s (model-checked).
    pub fn leave_epoll_set(&self, fd: i32) -> bool {
        let here = caller_set();
        epoll_membership::leave_epoll_set(&self.flags, &self.epoll_waiters, &InTheSet { fd, st: self, here, relocate: false })
    }

    /// Removes `fd` from the epoll set (before the program closes it) and wakes its
    /// waiters so that they retry and see the error.
    pub fn forget(&self, fd: i32, was_registered: bool) {
        if was_registered {
            poller::delete_fd(self.home_set.load(Ordering::Relaxed) as usize, fd);
        }
        self.bump_and_wake(true, true, 0);
    }

    /// Moves the sequences and wakes their waiters; `read_events`: the epoll events
    /// behind a read edge (0: unknown), published before the sequence moves
    /// (`ScheduledIo::read_events`).
    fn bump_and_wake(&self, read: bool, write: bool, read_events: u32) {
        if read {
            self.read_events.store(read_events, Ordering::Relaxed);
            self.read_seq.fetch_add(1, Ordering::AcqRel);
            slot_park::wake(&self.read_waiter, &self.read_seq as *const _ as usize);
        }
        if write {
            self.write_seq.fetch_add(1, Ordering::AcqRel);
            slot_park::wake(&self.write_waiter, &self.write_seq as *const _ as usize);
        }
    }

    /// One event a poller harvested for this descriptor (`fdtable::dispatch` found it
    /// by the cookie's fd): bumps the sequence numbers and wakes the waiters. `cookie`
    /// is what [`ScheduledIo::event`] registered. Returns whether it was a live
    /// descriptor's event.
    pub fn dispatch(&self, cookie: u64, events: u32) -> bool {
        if self.gen.load(Ordering::Acquire) != (cookie >> 32) as u32 {
            return false; // stale: the fd was closed (and maybe reused) since registration
        }
        let ev = events as i32;
        let read = ev & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR | libc::EPOLLPRI) != 0;
        let write = ev & (libc::EPOLLOUT | libc::EPOLLHUP | libc::EPOLLERR) != 0;
        if ev & libc::EPOLLPRI != 0 && !self.has(URGENT_SEEN) {
            self.flags.fetch_or(URGENT_SEEN, Ordering::AcqRel);
        }
        self.bump_and_wake(read, write, events);
        true
    }

    /// The epoll event that registers `fd`: edge-triggered, write readiness only with
    /// `write`, the cookie `fd | gen << 32`.
    fn event(&self, fd: i32, write: bool) -> libc::epoll_event {
        let gen = self.gen.load(Ordering::Acquire);
        let out = if write { libc::EPOLLOUT } else { 0 };
        libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLPRI | out | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: fd as u32 as u64 | (gen as u64) << 32,
        }
    }
}

/// Whether a descriptor moves from a set holding `home_fds` to one holding `here_fds`:
/// only toward a set that holds at least two fewer, so that the move leaves the two no
/// more uneven than before and never invites the move back.
fn moves_toward_balance(home_fds: i32, here_fds: i32) -> bool {
    here_fds + 1 < home_fds
}

/// The readiness set of the worker running the calling fiber (0 for a plain thread).
fn caller_set() -> usize {
    scheduler::current_readiness_set().unwrap_or(0)
}

/// One fd and the readiness sets it is in or goes to, for [`epoll_membership`].
struct InTheSet<'a> {
    fd: i32,
    st: &'a ScheduledIo,
    /// The caller's set: where a new registration, or a move, puts the fd.
    here: usize,
    /// Move the fd from its home set to `here` if it is registered already.
    relocate: bool,
}

impl EpollSet for InTheSet<'_> {
    fn put(&self, already_in: bool, for_write: bool) -> Result<(), i32> {
        // We hold the registration lock: `home_set` is stable.
        let home = self.st.home_set.load(Ordering::Relaxed) as usize;
        let (fd, here) = (self.fd, self.here);
        // Registered where it stays: only write readiness is added (EPOLL_CTL_MOD).
        let stays = already_in && !(self.relocate && home != here);
        let event = self.st.event(fd, stays || for_write);
        if stays {
            return poller::modify_fd(home, fd, &event);
        }
        let r = if !already_in {
            poller::add_fd(here, fd, &event)
        } else if poller::epfd(here) < 0 {
            // No set to move to: the fd stays where it is.
            Err(libc::ENOSYS)
        } else {
            // A move: out of the old set, into the new one (the ADD reports a readiness
            // that is already there, so an edge between the two calls is not lost).
            poller::delete_fd(home, fd);
            bump(&STATS.fd_moves);
            poller::add_fd(here, fd, &event)
        };
        // Same fd number and open file description still registered from before a
        // close/dup dance: refresh the cookie.
        let r = match r {
            Err(libc::EEXIST) => poller::modify_fd(here, fd, &event),
            r => r,
        };
        if r.is_ok() {
            self.st.home_set.store(here as u32, Ordering::Relaxed);
        }
        r
    }

    fn remove(&self) {
        poller::delete_fd(self.st.home_set.load(Ordering::Relaxed) as usize, self.fd);
    }
}

/// The descriptor number in a cookie that [`ScheduledIo::event`] registered.
#[inline]
pub fn cookie_fd(cookie: u64) -> i32 {
    (cookie & 0xffff_ffff) as i32
}

#[cfg(test)]
mod tests {
    use super::moves_toward_balance;

    /// A descriptor follows its only waiter to another worker's set only where that set
    /// holds at least two fewer, so that a move never invites the move back and fibers
    /// that lock wake-ups gather on one worker do not gather their connections there.
    #[test]
    fn a_descriptor_moves_only_toward_the_emptier_set() {
        for (home, here, moves) in
            [(10, 8, true), (10, 9, false), (10, 10, false), (10, 12, false), (1, 0, false), (2, 0, true), (0, 0, false)]
        {
            assert_eq!(moves_toward_balance(home, here), moves, "home set holds {home}, the waiter's set {here}");
            if moves {
                assert!(!moves_toward_balance(here + 1, home - 1), "the move back after {home} -> {here}");
            }
        }
    }
}
