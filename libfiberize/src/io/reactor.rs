//! The reactor: one epoll set for every fd a fiber waits on.
//!
//! Registration is lazy (the first time a fiber would block on the fd), edge-triggered
//! for `IN|PRI|OUT|RDHUP`, with the cookie `fd | gen << 32` so that an event for a closed
//! and reused fd number is recognized as stale. Each event bumps the fd's `read_seq` /
//! `write_seq` and wakes every fiber parked on that key.
//!
//! The epoll set itself, the sleeping and polling of idle workers, are the core's
//! (`crate::runtime::poller`); this module registers descriptors in that set and turns
//! the events a poller harvests into wake-ups ([`dispatch`], through the core's hooks).
use core::sync::atomic::{AtomicU32, Ordering};

use crate::base::sys::syscall6;
use crate::io::epoll_membership::{self, EpollSet};
use crate::io::fdtable::{self, FdState};
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
    epoll_membership::ensure_registered(&st.flags, for_write, &InTheSet { fd, st })
}

/// Takes `fd` out of the epoll set for a direct wait (`scheduler::direct_wait`), unless
/// a fiber waits on it through the reactor. Returns whether it is out. The hand-shake
/// with the waiters' [`count_waiter`] is `epoll_membership`'s (model-checked).
pub fn leave_epoll_set(fd: i32, st: &FdState) -> bool {
    epoll_membership::leave_epoll_set(&st.flags, &st.epoll_waiters, &InTheSet { fd, st })
}

/// One fd in the runtime's epoll set, for [`epoll_membership`].
struct InTheSet<'a> {
    fd: i32,
    st: &'a FdState,
}

impl EpollSet for InTheSet<'_> {
    fn put(&self, already_in: bool, for_write: bool) -> Result<(), i32> {
        let ep = crate::runtime::poller::epfd();
        if ep < 0 {
            Err(libc::ENOSYS)
        } else if already_in {
            ctl(ep, libc::EPOLL_CTL_MOD, self.fd, self.st, true)
        } else {
            match ctl(ep, libc::EPOLL_CTL_ADD, self.fd, self.st, for_write) {
                // Same fd number and open file description still registered from
                // before a close/dup dance: refresh the cookie.
                Err(libc::EEXIST) => ctl(ep, libc::EPOLL_CTL_MOD, self.fd, self.st, for_write),
                r => r,
            }
        }
    }

    fn remove(&self) {
        // SAFETY: plain epoll_ctl; a failure (fd already gone) leaves nothing registered.
        unsafe {
            syscall6(
                libc::SYS_epoll_ctl as usize,
                crate::runtime::poller::epfd() as usize,
                libc::EPOLL_CTL_DEL as usize,
                self.fd as usize,
                0,
                0,
                0,
            )
        };
    }
}

fn ctl(ep: i32, op: i32, fd: i32, st: &FdState, write: bool) -> Result<(), i32> {
    let mut e = event_for(fd, st, write);
    // SAFETY: valid epoll fd and event pointer.
    let r = unsafe {
        syscall6(
            libc::SYS_epoll_ctl as usize,
            ep as usize,
            op as usize,
            fd as usize,
            &mut e as *mut libc::epoll_event as usize,
            0,
            0,
        )
    };
    if r < 0 {
        Err(-r as i32)
    } else {
        Ok(())
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
        let ep = crate::runtime::poller::epfd();
        if ep >= 0 {
            // SAFETY: plain epoll_ctl; a failure (fd already gone) is harmless.
            unsafe { syscall6(libc::SYS_epoll_ctl as usize, ep as usize, libc::EPOLL_CTL_DEL as usize, fd as usize, 0, 0, 0) };
        }
    }
    bump_and_wake(st, true, true);
}

fn bump_and_wake(st: &FdState, read: bool, write: bool) {
    if read {
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

/// One event a poller harvested (`runtime::poller::poll`, through the core's hooks):
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
    bump_and_wake(st, read, write);
    true
}
