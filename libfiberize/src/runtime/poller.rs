//! The epoll set that idle workers sleep in: the core's way to wait for "new work or
//! I/O readiness or the next timer" in one system call.
//!
//! The set holds an eventfd ([`wake_poller`] makes a sleeper look for work) and every
//! descriptor a fiber waits on, which the I/O layer registers (`crate::io::reactor`).
//! What an event means is the I/O layer's business: [`poll`] hands each one to
//! `hooks().dispatch_readiness` ([`crate::runtime::hooks`]).
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

use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};

use crate::base::sys::{self, syscall6};

static EPFD: AtomicI32 = AtomicI32::new(-1);
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);
static POLLER: AtomicBool = AtomicBool::new(false);
/// A direct waiter (scheduler::direct_wait) watches the epoll set's readiness in its
/// ppoll, so that fibers parked through the reactor are not left to the monitor's
/// once-a-millisecond poll while every idle worker waits directly. One at a time: an
/// edge would wake every watcher.
static WATCHER: AtomicBool = AtomicBool::new(false);
/// Workers blocked in epoll_wait right now.
static SLEEPERS: AtomicU32 = AtomicU32::new(0);
static LAST_POLL_NS: AtomicU64 = AtomicU64::new(0);

/// How old the last poll may get before a busy worker polls between fibers. Origin:
/// well under a network round trip on loopback (~20–50 µs under load is typical),
/// and rare enough that a non-blocking epoll_wait (~0.3 µs) stays below 1 % of a
/// worker's time.
pub const STALE_NS: u64 = 50_000;
/// Events taken per `epoll_wait`. Origin: a round number; more ready fds than this are
/// simply returned by the next call (the set is edge-triggered, nothing is lost).
const MAX_EVENTS: usize = 256;
/// The `epoll_event.u64` of the wake-up eventfd (fd cookies never reach it).
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

/// The epoll set (-1 before the pool started, or in a forked child).
#[inline]
pub fn epfd() -> i32 {
    EPFD.load(Ordering::Acquire)
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
    let timeout_ms = match deadline {
        Some(0) => 0,
        d => crate::base::time::ms_until(d) as isize,
    };
    // SAFETY: `events` is a writable array of MAX_EVENTS entries.
    let n = unsafe { sys::epoll_wait(ep, events.as_mut_ptr(), MAX_EVENTS, timeout_ms as i32) };
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
        if (crate::runtime::hooks::get().dispatch_readiness)(cookie, e.events) {
            count += 1;
        }
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
