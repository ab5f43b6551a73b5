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
use core::sync::atomic::{fence, AtomicU32, Ordering};

use crate::base::sys::{self, syscall6};
use crate::io::fdtable::{self, FdState, REGISTERED, REG_BUSY, WATCH_WRITE};
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
    let want = REGISTERED | if for_write { WATCH_WRITE } else { 0 };
    let Some(f) = lock_registration(st, |f| f & want == want) else { return Ok(()) };
    let ep = crate::runtime::poller::epfd();
    let r = if ep < 0 {
        Err(libc::ENOSYS)
    } else if f & REGISTERED != 0 {
        ctl(ep, libc::EPOLL_CTL_MOD, fd, st, true)
    } else {
        match ctl(ep, libc::EPOLL_CTL_ADD, fd, st, for_write) {
            // Same fd number and open file description still registered from before a
            // close/dup dance: refresh the cookie.
            Err(libc::EEXIST) => ctl(ep, libc::EPOLL_CTL_MOD, fd, st, for_write),
            r => r,
        }
    };
    let gained = if r.is_ok() { want } else { 0 };
    st.flags.fetch_update(Ordering::SeqCst, Ordering::Relaxed, |x| Some((x | gained) & !REG_BUSY)).ok();
    r
}

/// Takes `fd` out of the epoll set for a direct wait (`scheduler::direct_wait`), unless
/// a fiber waits on it through the reactor. Returns whether it is out.
///
/// Pairs with the waiters' "count myself in `epoll_waiters`, then look at the flags"
/// (both SeqCst): either we see their count and leave the fd in, or they see
/// `REG_BUSY` (or the cleared `REGISTERED`) and add it again after our DEL.
pub fn leave_epoll_set(fd: i32, st: &FdState) -> bool {
    if st.epoll_waiters.load(Ordering::SeqCst) != 0 {
        return false;
    }
    let Some(f) = lock_registration(st, |f| f & REGISTERED == 0) else { return true };
    fence(Ordering::SeqCst); // REG_BUSY taken, then the count: the other side
    let out = if st.epoll_waiters.load(Ordering::SeqCst) != 0 {
        false
    } else {
        // SAFETY: plain epoll_ctl; a failure (fd already gone) leaves nothing registered.
        unsafe {
            syscall6(
                libc::SYS_epoll_ctl as usize,
                crate::runtime::poller::epfd() as usize,
                libc::EPOLL_CTL_DEL as usize,
                fd as usize,
                0,
                0,
                0,
            )
        };
        true
    };
    let dropped = if out { REGISTERED | WATCH_WRITE } else { 0 };
    debug_assert!(f & REGISTERED != 0);
    st.flags.fetch_and(!(dropped | REG_BUSY), Ordering::SeqCst);
    out
}

/// Takes `REG_BUSY` and returns the flags it was taken from, or `None` without taking
/// it when `done(flags)` says there is nothing to change. Waits while another thread
/// holds it (for one epoll_ctl).
fn lock_registration(st: &FdState, done: impl Fn(u32) -> bool) -> Option<u32> {
    let mut spins = 0u32;
    loop {
        let f = st.flags.load(Ordering::SeqCst);
        if f & REG_BUSY != 0 {
            spins += 1;
            if spins < 64 {
                sys::cpu_relax()
            } else {
                sys::sched_yield_raw()
            }
            continue;
        }
        if done(f) {
            return None;
        }
        if st.flags.compare_exchange(f, f | REG_BUSY, Ordering::SeqCst, Ordering::Relaxed).is_ok() {
            return Some(f);
        }
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
    if coming {
        st.epoll_waiters.fetch_add(1, Ordering::SeqCst);
        IO_WAITERS.fetch_add(1, Ordering::Relaxed);
        // Count, then look at the flags (in ensure_registered): one side of the Dekker
        // pair with leave_epoll_set (model: loom_protocols.rs).
        fence(Ordering::SeqCst);
    } else {
        st.epoll_waiters.fetch_sub(1, Ordering::SeqCst);
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
