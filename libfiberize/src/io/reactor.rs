//! The reactor: one epoll set for every fd a fiber waits on.
//!
//! Registration is lazy (the first time a fiber would block on the fd), edge-triggered
//! for `IN|PRI|OUT|RDHUP`, with the cookie `fd | gen << 32` so that an event for a closed
//! and reused fd number is recognized as stale. Each event bumps the fd's `read_seq` /
//! `write_seq` and wakes every fiber parked on that key.
//!
//! # Who waits in epoll_wait
//!
//! Every idle worker sleeps in `epoll_wait` ([`sleep_in_epoll`]) instead of on a futex,
//! with the next timer deadline as timeout. The kernel queues epoll waiters
//! exclusively, so one readiness edge wakes one idle worker, which dispatches the
//! events it harvested and runs the woken fibers itself — the wake-up costs what a
//! blocked thread's wake-up costs natively, with no extra thread hop. Any number of
//! workers may sleep there at once: when one has just woken and runs a fiber, the next
//! edge wakes another idle worker instead of waiting for a busy one. (With a single
//! poller, two connections could end up served by one worker while the other slept on
//! its futex: MariaDB at 2 connections ran at half speed for seconds at a time.)
//! To wake a sleeping worker for new work, `wake_poller` writes to an eventfd that is
//! in the same epoll set (level-triggered: it wakes some epoll sleeper, which drains
//! it and looks for work).
//!
//! A worker whose only fiber waits for one descriptor may instead block in `ppoll` on
//! that descriptor (`scheduler::direct_wait`); the descriptor then leaves this set
//! ([`leave_epoll_set`]), and one such direct waiter at a time also polls the epoll
//! fd itself ([`start_watching`]) so that readiness here still wakes somebody.
//!
//! When no worker sleeps in epoll (all busy), workers poll without waiting between
//! fibers ([`poll_if_stale`]) and the monitor does every tick, so readiness is still
//! noticed within `STALE_NS` (busy) or one monitor tick. The non-blocking polls are
//! serialized by the `POLLER` flag (two of them at once would only split the events).

use core::sync::atomic::{fence, AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};

use crate::io::fdtable::{self, FdState, REGISTERED, REG_BUSY, WATCH_WRITE};
use crate::parking;
use crate::sys::{self, syscall6};

static EPFD: AtomicI32 = AtomicI32::new(-1);
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);
static POLLER: AtomicBool = AtomicBool::new(false);
/// A direct waiter (scheduler::direct_wait) watches the epoll set's readiness in its
/// ppoll, so that fibers parked through the reactor are not left to the monitor's
/// once-a-millisecond poll while every idle worker waits directly. One at a time: an
/// edge would wake every watcher.
static WATCHER: AtomicBool = AtomicBool::new(false);
/// Fibers parked on descriptor readiness through the epoll set (sum of the fds'
/// `epoll_waiters`).
static IO_WAITERS: AtomicU32 = AtomicU32::new(0);
/// Workers blocked in epoll_wait right now.
static SLEEPERS: AtomicU32 = AtomicU32::new(0);
static LAST_POLL_NS: AtomicU64 = AtomicU64::new(0);

/// How old the last poll may get before a busy worker polls between fibers. Origin:
/// well under a network round trip on loopback (~20–50 µs under load is typical),
/// and rare enough that a non-blocking epoll_wait (~0.3 µs) stays below 1 % of a
/// worker's time.
pub const STALE_NS: u64 = 50_000;
const MAX_EVENTS: usize = 256;
const WAKE_COOKIE: u64 = u64::MAX;

/// Creates the epoll set and its wake-up eventfd. Called once when the pool starts.
pub fn init() {
    // SAFETY: plain system calls with constant arguments.
    unsafe {
        let ep = syscall6(libc::SYS_epoll_create1 as usize, libc::EPOLL_CLOEXEC as usize, 0, 0, 0, 0, 0);
        if ep < 0 {
            crate::fatal(&["epoll_create1 failed"]);
        }
        let ev = sys::eventfd_new();
        if ev < 0 {
            crate::fatal(&["eventfd failed"]);
        }
        let mut e = libc::epoll_event { events: libc::EPOLLIN as u32, u64: WAKE_COOKIE };
        syscall6(
            libc::SYS_epoll_ctl as usize,
            ep as usize,
            libc::EPOLL_CTL_ADD as usize,
            ev as usize,
            &mut e as *mut libc::epoll_event as usize,
            0,
            0,
        );
        WAKE_FD.store(ev, Ordering::Release);
        EPFD.store(ep as i32, Ordering::Release);
    }
}

/// In a forked child: let go of the parent's epoll set. The child's descriptor of it
/// names the very same epoll instance, so an `EPOLL_CTL_DEL` there (when the child
/// closes an inherited socket or pipe) would take the fd out of the *parent's* set and
/// strand the parent's waiters. The child has no fibers, so it needs no reactor.
pub fn detach_in_forked_child() {
    let ep = EPFD.swap(-1, Ordering::AcqRel);
    if ep >= 0 {
        // SAFETY: closes our own descriptor (the child's copy); the parent's stays.
        unsafe { syscall6(libc::SYS_close as usize, ep as usize, 0, 0, 0, 0, 0) };
    }
}

#[inline]
fn epfd() -> i32 {
    EPFD.load(Ordering::Acquire)
}

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
    let ep = epfd();
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
        unsafe { syscall6(libc::SYS_epoll_ctl as usize, epfd() as usize, libc::EPOLL_CTL_DEL as usize, fd as usize, 0, 0, 0) };
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
        let ep = epfd();
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

/// Whether the reactor exists (idle workers can sleep in epoll_wait).
#[inline]
pub fn available() -> bool {
    epfd() >= 0
}

/// Sleeps in epoll_wait until an event, a `wake_poller` or `deadline`, and dispatches
/// what it harvested. For idle workers; any number may sleep here at once.
pub fn sleep_in_epoll(deadline: Option<u64>) -> usize {
    SLEEPERS.fetch_add(1, Ordering::SeqCst);
    let n = poll(deadline);
    SLEEPERS.fetch_sub(1, Ordering::SeqCst);
    n
}

/// Makes the caller the direct waiter that watches the epoll set, if there is none:
/// returns the epoll fd to add to its ppoll set. Release with [`stop_watching`].
pub fn start_watching() -> Option<i32> {
    let ep = epfd();
    (ep >= 0 && !WATCHER.load(Ordering::Relaxed) && !WATCHER.swap(true, Ordering::AcqRel)).then_some(ep)
}

pub fn stop_watching() {
    WATCHER.store(false, Ordering::Release);
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

/// Tries to become the (non-blocking) poller.
#[inline]
pub fn try_acquire_poller() -> bool {
    epfd() >= 0
        && !POLLER.load(Ordering::Relaxed)
        && POLLER.compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed).is_ok()
}

#[inline]
pub fn release_poller() {
    POLLER.store(false, Ordering::Release);
}

/// Interrupts a poller blocked in epoll_wait.
pub fn wake_poller() {
    let fd = WAKE_FD.load(Ordering::Acquire);
    if fd >= 0 {
        sys::eventfd_signal(fd);
    }
}

/// Waits for events until `deadline`
/// (None: forever, Some(0): don't wait) and dispatches them. Returns how many fd events.
pub fn poll(deadline: Option<u64>) -> usize {
    let ep = epfd();
    let mut events: [libc::epoll_event; MAX_EVENTS] = [libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS];
    let timeout_ms: isize = match deadline {
        None => -1,
        Some(0) => 0,
        Some(d) => {
            let now = sys::now_ns();
            if d <= now {
                0
            } else {
                (d - now).div_ceil(1_000_000).min(i32::MAX as u64) as isize
            }
        }
    };
    // SAFETY: `events` is a writable array of MAX_EVENTS entries.
    let n = unsafe {
        syscall6(libc::SYS_epoll_wait as usize, ep as usize, events.as_mut_ptr() as usize, MAX_EVENTS, timeout_ms as usize, 0, 0)
    };
    LAST_POLL_NS.store(sys::now_ns(), Ordering::Relaxed);
    if n <= 0 {
        return 0;
    }
    let mut count = 0;
    for e in &events[..n as usize] {
        let cookie = e.u64;
        if cookie == WAKE_COOKIE {
            sys::eventfd_drain(WAKE_FD.load(Ordering::Relaxed));
            continue;
        }
        let fd = (cookie & 0xffff_ffff) as i32;
        let gen = (cookie >> 32) as u32;
        let Some(st) = fdtable::lookup(fd) else { continue };
        if st.gen.load(Ordering::Acquire) != gen {
            continue; // stale: the fd was closed (and maybe reused) since registration
        }
        let ev = e.events as i32;
        let read = ev & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR | libc::EPOLLPRI) != 0;
        let write = ev & (libc::EPOLLOUT | libc::EPOLLHUP | libc::EPOLLERR) != 0;
        bump_and_wake(st, read, write);
        count += 1;
    }
    count
}

/// Polls without waiting if nobody did for `max_age_ns`, nobody is polling now and no
/// idle worker sleeps in epoll_wait (the kernel wakes that one for any event).
#[inline]
pub fn poll_if_stale(max_age_ns: u64) {
    if epfd() < 0 || POLLER.load(Ordering::Relaxed) || SLEEPERS.load(Ordering::Relaxed) != 0 {
        return;
    }
    let last = LAST_POLL_NS.load(Ordering::Relaxed);
    if sys::now_ns().saturating_sub(last) < max_age_ns {
        return;
    }
    if try_acquire_poller() {
        poll(Some(0));
        release_poller();
    }
}
