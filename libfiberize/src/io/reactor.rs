//! The reactor: the fds fibers wait on, in the runtime's readiness sets.
//!
//! With one shared set (under 4 workers) every fd is in set 0. With a set per worker
//! (`crate::runtime::sleep::poller`) an fd goes into the set of the worker whose fiber first
//! waits on it, and moves to the set of the worker a waiting fiber runs on now when
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
//! (`crate::runtime::sleep::poller`), and so is every `epoll_ctl` on it: this module decides
//! what goes into which set (the event and its cookie) and asks the poller to add,
//! modify, delete or move it, and turns the events a poller harvests into wake-ups
//! ([`dispatch`], through the core's hooks).
use core::sync::atomic::{AtomicU32, Ordering};

use crate::io::epoll_membership::{self, EpollSet};
use crate::io::fdtable::{self, FdState};
use crate::runtime::sleep::poller;
use crate::sync::parking;

/// Fibers parked on descriptor readiness through the epoll set (sum of the fds'
/// `epoll_waiters`).
static IO_WAITERS: AtomicU32 = AtomicU32::new(0);

/// Puts `fd` in the epoll set if it is not there yet, watching write readiness only
/// once a writer has to wait (`for_write`). Err(errno) if epoll refuses it (e.g.
/// EPERM for a regular file): the caller must wait some other way. Callers that park
/// afterwards count themselves in `FdState::epoll_waiters` first, so that a direct
/// waiter does not take the fd out under them ([`leave_epoll_set`]). Adding reports a
/// readiness that came before it, so a sequence read before this call misses no edge.
///
/// Why not EPOLLOUT from the start: with it, every ACK that frees send-buffer space
/// is an edge — an epoll callback, a ready-list entry and a dispatch — although
/// request/response traffic never waits for buffer space. Echo benchmark, 1000
/// connections: about a third of all events were such useless EPOLLOUT edges.
/// Adding EPOLLOUT later with EPOLL_CTL_MOD makes the kernel re-check readiness at
/// once, so an edge between the writer's EAGAIN and the MOD is not lost.
pub fn ensure_registered(fd: i32, st: &FdState, for_write: bool) -> Result<(), i32> {
    let here = caller_set();
    // A move only where sets are per worker, the fd is in another one, the caller
    // (counted in `epoll_waiters` already) is its only waiter, and the caller's set holds
    // at least two fds fewer (`moves_toward_balance`). Relaxed looks: the
    // decision is re-made under the registration lock by `InTheSet::put`.
    let home = st.home_set.load(Ordering::Relaxed) as usize;
    let relocate = poller::per_worker()
        && st.flags.load(Ordering::Relaxed) & epoll_membership::REGISTERED != 0
        && home != here
        && st.epoll_waiters.load(Ordering::Relaxed) <= 1
        && moves_toward_balance(poller::fds_in(home), poller::fds_in(here));
    epoll_membership::ensure_registered_or_move(&st.flags, for_write, relocate, &InTheSet { fd, st, here, relocate })
}

/// Whether a descriptor moves from a set holding `home_fds` to one holding `here_fds`:
/// only toward a set that holds at least two fewer, so that the move leaves the two no
/// more uneven than before and never invites the move back.
fn moves_toward_balance(home_fds: i32, here_fds: i32) -> bool {
    here_fds + 1 < home_fds
}

/// The readiness set of the worker running the calling fiber (0 for a plain thread).
fn caller_set() -> usize {
    crate::runtime::scheduler::current_readiness_set().unwrap_or(0)
}

/// Takes `fd` out of the epoll set for a direct wait (`scheduler::direct_wait`), unless
/// a fiber waits on it through the reactor. Returns whether it is out. The hand-shake
/// with the waiters' [`count_waiter`] is `epoll_membership`'s (model-checked).
pub fn leave_epoll_set(fd: i32, st: &FdState) -> bool {
    let here = caller_set();
    epoll_membership::leave_epoll_set(&st.flags, &st.epoll_waiters, &InTheSet { fd, st, here, relocate: false })
}

/// One fd and the readiness sets it is in or goes to, for [`epoll_membership`].
struct InTheSet<'a> {
    fd: i32,
    st: &'a FdState,
    /// The caller's set: where a new registration, or a move, puts the fd.
    here: usize,
    /// Move the fd from its home set to `here` if it is registered already.
    relocate: bool,
}

impl EpollSet for InTheSet<'_> {
    fn put(&self, already_in: bool, for_write: bool) -> Result<(), i32> {
        // We hold the registration lock: `home_set` is stable.
        let home = self.st.home_set.load(Ordering::Relaxed) as usize;
        if already_in && !(self.relocate && home != self.here) {
            return poller::modify_fd(home, self.fd, &event_for(self.fd, self.st, true));
        }
        let event = event_for(self.fd, self.st, for_write);
        let r = if already_in {
            poller::move_fd(home, self.here, self.fd, &event)
        } else {
            poller::add_fd(self.here, self.fd, &event)
        };
        let r = match r {
            // Same fd number and open file description still registered from
            // before a close/dup dance: refresh the cookie.
            Err(libc::EEXIST) => poller::modify_fd(self.here, self.fd, &event_for(self.fd, self.st, for_write)),
            r => r,
        };
        if r.is_ok() {
            self.st.home_set.store(self.here as u32, Ordering::Relaxed);
        }
        r
    }

    fn remove(&self) {
        poller::delete_fd(self.st.home_set.load(Ordering::Relaxed) as usize, self.fd);
    }
}

fn event_for(fd: i32, st: &FdState, write: bool) -> libc::epoll_event {
    let gen = st.gen.load(Ordering::Acquire);
    let out = if write { libc::EPOLLOUT } else { 0 };
    libc::epoll_event {
        events: (libc::EPOLLIN | libc::EPOLLPRI | out | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
        u64: fd as u32 as u64 | (gen as u64) << 32,
    }
}

/// Removes `fd` from the epoll set (before the program closes it) and wakes its
/// waiters so that they retry and see the error.
pub fn forget(fd: i32, was_registered: bool, st: &FdState) {
    if was_registered {
        poller::delete_fd(st.home_set.load(Ordering::Relaxed) as usize, fd);
    }
    bump_and_wake(st, true, true, 0);
}

/// Moves the sequences and wakes their waiters; `read_events`: the epoll events behind
/// a read edge (0: unknown), published before the sequence moves (`FdState::read_events`).
fn bump_and_wake(st: &FdState, read: bool, write: bool, read_events: u32) {
    if read {
        st.read_events.store(read_events, Ordering::Relaxed);
        st.read_seq.fetch_add(1, Ordering::AcqRel);
        parking::unpark_some_quick(&st.read_seq as *const _ as usize, u32::MAX, usize::MAX);
    }
    if write {
        st.write_seq.fetch_add(1, Ordering::AcqRel);
        parking::unpark_some_quick(&st.write_seq as *const _ as usize, u32::MAX, usize::MAX);
    }
}

/// Counts a fiber in (`true`) or out of the waiters on `st` through the epoll set.
/// In before its registration check and park: see [`leave_epoll_set`].
pub fn count_waiter(st: &FdState, coming: bool) {
    epoll_membership::count_waiter(&st.epoll_waiters, coming);
    if coming {
        IO_WAITERS.fetch_add(1, Ordering::Relaxed);
    } else {
        IO_WAITERS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How many fibers wait for readiness through the epoll set now.
pub fn io_waiters() -> u32 {
    IO_WAITERS.load(Ordering::Relaxed)
}

/// One event a poller harvested (`runtime::sleep::poller::poll`, through the core's hooks):
/// bumps the fd's sequence numbers and wakes its waiters. `cookie` is what
/// [`event_for`] registered. Returns whether it was a live descriptor's event.
pub fn dispatch(cookie: u64, events: u32) -> bool {
    let fd = (cookie & 0xffff_ffff) as i32;
    let gen = (cookie >> 32) as u32;
    let Some(st) = fdtable::lookup(fd) else { return false };
    if st.gen.load(Ordering::Acquire) != gen {
        return false; // stale: the fd was closed (and maybe reused) since registration
    }
    let ev = events as i32;
    let read = ev & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR | libc::EPOLLPRI) != 0;
    let write = ev & (libc::EPOLLOUT | libc::EPOLLHUP | libc::EPOLLERR) != 0;
    if ev & libc::EPOLLPRI != 0 && !st.has(fdtable::URGENT_SEEN) {
        st.flags.fetch_or(fdtable::URGENT_SEEN, Ordering::AcqRel);
    }
    bump_and_wake(st, read, write, events);
    true
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
