//! The readiness sets that idle workers sleep in: the core's way to wait for "new work
//! or I/O readiness or the next timer" in one system call.
//!
//! A readiness set is an epoll instance holding an eventfd ([`wake_set`] makes a
//! sleeper look for work) and the descriptors fibers wait on, which the I/O layer
//! registers (`crate::io::scheduled_io`). What an event means is the I/O layer's business:
//! [`poll`] hands each one to `hooks().dispatch_readiness` ([`crate::runtime::fibers::hooks`]).
//!
//! # One set for all, or one per worker (`FIBERIZE_TUNE=poll_per_worker`)
//!
//! ```text
//!   shared (under 4 workers)              per worker (4 workers or more)
//!
//!   worker 0 ─┐                           worker 0 ── set 0: its fibers' fds + eventfd 0
//!   worker 1 ─┼─ epoll_wait ── set 0      worker 1 ── set 1: its fibers' fds + eventfd 1
//!   worker 2 ─┘   (every fd, one eventfd) worker 2 ── set 2: ...
//! ```
//!
//! **Shared**: every idle worker sleeps in the one set. The kernel queues epoll waiters
//! exclusively, so one readiness edge wakes one idle worker, which dispatches the
//! events it harvested and runs the woken fibers itself. Any number of workers may sleep
//! there at once: when one has just woken and runs a fiber, the next edge wakes another
//! idle worker instead of waiting for a busy one. (With a single poller, two
//! connections could end up served by one worker while the other slept on its futex:
//! docs/RESULTS.md#epoll-sleepers.) The price, on many cores: every `epoll_wait` and
//! every socket's wake callback take the same kernel lock, and a fiber woken by
//! readiness runs on whichever worker harvested the edge, so a connection wanders
//! between cores. Its advantage on few workers: one set
//! is one queue for all of them, and a worker that the kernel preempts (CPUs shared
//! with a client) strands nothing; with a set per worker, what waits in that worker's
//! set waits for it, or for another worker's poll of stale sets (`scheduler::policy::PER_WORKER_SETS_FROM`
//! has the origin).
//!
//! **Per worker** (the way MariaDB's pool-of-threads keeps a connection in one thread
//! group): there are as many sets as workers at the start (at most `MAX_SETS`), and
//! each ACTIVE worker serves one ([`claim_set`]): worker *i* starts on set *i*; a
//! worker the monitor declares blocked gives its set up, and the spare brought in for
//! it takes that one; a worker that comes back to a full pool retires without one.
//! A descriptor goes into the set of the worker whose fiber first waits on it, and
//! moves to another worker's set when the only fiber waiting on it now runs there and
//! that set holds at least two descriptors fewer (`crate::io::scheduled_io`): so a
//! connection's readiness is harvested by the worker its fiber last ran on, which
//! queues the fiber locally and runs it on the same core, and fibers that lock
//! wake-ups gather on one worker do not take their connections with them. A worker
//! sleeps only in its own set and is woken only through its own eventfd, when it has
//! work. A busy worker polls its own set between fibers once it is `STALE_NS` old; an
//! idle worker that spins polls the other sets that are that stale (their owner runs
//! one long fiber); the monitor polls every set that is a tick old. So readiness for a
//! busy worker is taken by another only when that worker does not get to it: stealing
//! balances a real backlog, not every edge.
//!
//! A worker whose only fiber waits for one descriptor may instead block in `ppoll` on
//! that descriptor (`scheduler::direct_wait`); the descriptor then leaves its set
//! (`FdState::leave_epoll_set` in `crate::io::scheduled_io`), and one direct waiter at a time per set
//! also polls the set's epoll fd itself ([`start_watching`]) so that readiness there
//! still wakes somebody.
//!
//! Non-blocking polls of one set are serialized by its `polling_now` flag (two at once
//! would only split the events).
//!
//! Every `epoll_ctl` on the sets is made here: the I/O layer asks [`add_fd`],
//! [`modify_fd`] and [`delete_fd`] with a set's index, the fd and the event it wants
//! (what the event's cookie means, and which set a descriptor belongs in, stay the I/O
//! layer's business: `crate::io::scheduled_io`).

use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::base::stats::{add, bump, STATS};
use crate::base::sys;

/// Most readiness sets. Origin: the largest machine measured has 16 CPUs; 64 covers
/// four times that, and workers beyond it share sets (modulo), which only costs the
/// locality the sets exist for.
const MAX_SETS: usize = 64;

/// One epoll instance with its wake-up eventfd.
struct ReadinessSet {
    epfd: AtomicI32,
    wake_fd: AtomicI32,
    /// A non-blocking poll of this set is in progress.
    polling_now: AtomicBool,
    /// A direct waiter (scheduler::direct_wait) watches this set's readiness in its
    /// ppoll, so that fibers parked through the set are not left to the monitor's
    /// once-a-millisecond poll while every worker of the set waits directly. One at a
    /// time: an edge would wake every watcher.
    watcher: AtomicBool,
    /// Workers blocked in epoll_wait on this set right now.
    sleepers: AtomicU32,
    last_poll_ns: AtomicU64,
    /// Descriptors registered in this set (successful ADDs less successful DELs; a
    /// heuristic, see [`fds_in`]).
    fds: AtomicI32,
    /// ACTIVE workers that sleep in and serve this set ([`claim_set`]).
    owners: AtomicU32,
}

impl ReadinessSet {
    const fn new() -> ReadinessSet {
        ReadinessSet {
            epfd: AtomicI32::new(-1),
            wake_fd: AtomicI32::new(-1),
            polling_now: AtomicBool::new(false),
            watcher: AtomicBool::new(false),
            sleepers: AtomicU32::new(0),
            last_poll_ns: AtomicU64::new(0),
            fds: AtomicI32::new(0),
            owners: AtomicU32::new(0),
        }
    }
}

static SETS: [ReadinessSet; MAX_SETS] = [const { ReadinessSet::new() }; MAX_SETS];
/// Sets in use: 1 (shared) or the number of workers (per worker), 0 before [`init`]
/// and in a forked child.
static NUM_SETS: AtomicUsize = AtomicUsize::new(0);

/// Events taken per `epoll_wait`. Origin: a round number; more ready fds than this are
/// simply returned by the next call (the sets are edge-triggered, nothing is lost).
const MAX_EVENTS: usize = 256;
/// The `epoll_event.u64` of a set's wake-up eventfd (fd cookies never reach it).
const WAKE_COOKIE: u64 = u64::MAX;

/// Whether a pool of `workers` gets a readiness set per worker by default: from
/// `scheduler::policy::PER_WORKER_SETS_FROM` workers, unless
/// `FIBERIZE_TUNE=poll_per_worker` says otherwise.
pub fn per_worker_by_default(workers: usize) -> bool {
    workers >= crate::runtime::scheduler::policy::PER_WORKER_SETS_FROM
}

/// Creates the readiness sets: one shared by all `workers`, or one per worker
/// (`per_worker`). Called once when the pool starts.
pub fn init(workers: usize, per_worker: bool) {
    let n = if per_worker { workers.clamp(1, MAX_SETS) } else { 1 };
    for set in &SETS[..n] {
        // The program's close/close_range/closefrom leave them open, and its `dup2`
        // onto their numbers moves them (base::own_fds); out of the way of the numbers
        // the program gets next, as natively (`own_fds::eventfd_new_out_of_the_way`).
        let ep = crate::base::own_fds::epoll_new_out_of_the_way();
        if ep < 0 {
            crate::fatal(&["epoll_create1 failed"]);
        }
        let ev = crate::base::own_fds::eventfd_new_out_of_the_way();
        if ev < 0 {
            crate::fatal(&["eventfd failed"]);
        }
        let e = libc::epoll_event { events: libc::EPOLLIN as u32, u64: WAKE_COOKIE };
        sys::epoll_ctl(ep, libc::EPOLL_CTL_ADD, ev, Some(&e));
        set.wake_fd.store(ev, Ordering::Release);
        set.epfd.store(ep, Ordering::Release);
        crate::base::own_fds::hold_eventfd(&set.wake_fd);
        crate::base::own_fds::hold(&set.epfd);
    }
    NUM_SETS.store(n, Ordering::Release);
}

/// In a forked child: let go of the parent's sets. The child's descriptor of a set
/// names the very same epoll instance, so an `EPOLL_CTL_DEL` there (when the child
/// closes an inherited socket or pipe) would take the fd out of the *parent's* set and
/// strand the parent's waiters. The child has no fibers, so it needs no reactor.
pub fn detach_in_forked_child() {
    let n = NUM_SETS.swap(0, Ordering::AcqRel);
    for set in &SETS[..n] {
        let ep = set.epfd.swap(-1, Ordering::AcqRel);
        if ep >= 0 {
            // Our own descriptor (the child's copy); the parent's stays.
            crate::base::own_fds::close(ep);
        }
    }
}

/// The set an ACTIVE worker is to serve: the one with the fewest ACTIVE owners,
/// `prefer` (the worker's own, `index % sets` at the start, or the one it served before
/// it blocked) among those. Counts the caller as an owner until [`release_set`].
///
/// Sets belong to active worker slots, not to worker indexes: a worker the monitor
/// declares blocked gives its set up, and the spare brought in for it takes that
/// set, the one left without an owner. (With the set fixed by index, a spare shared the
/// set of the worker with its index modulo the number of sets, and when the blocked
/// worker came back to a full pool and retired, its set was served by nobody but the
/// monitor's once-a-millisecond poll while another set had two sleepers.)
/// Two claims at once may pick the same set; the monitor's poll of stale sets covers
/// the one left over until the next claim.
pub fn claim_set(prefer: usize) -> usize {
    let n = NUM_SETS.load(Ordering::Acquire);
    if n <= 1 {
        SETS[0].owners.fetch_add(1, Ordering::Relaxed);
        return 0;
    }
    let prefer = prefer % n;
    let owners = |s: usize| SETS[s].owners.load(Ordering::Relaxed);
    let fewest = (0..n).min_by_key(|&s| owners(s)).unwrap_or(prefer);
    let set = if owners(prefer) <= owners(fewest) { prefer } else { fewest };
    SETS[set].owners.fetch_add(1, Ordering::Relaxed);
    set
}

/// The caller no longer serves `set` (it retires, or the monitor declared it blocked).
pub fn release_set(set: usize) {
    if let Some(s) = SETS.get(set) {
        let _ = s.owners.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |o| o.checked_sub(1));
    }
}

/// The epoll fd of set `set` (-1 before the pool started, or in a forked child).
#[inline]
pub fn epfd(set: usize) -> i32 {
    SETS.get(set).map_or(-1, |s| s.epfd.load(Ordering::Acquire))
}

/// Whether the reactor exists (idle workers can sleep in epoll_wait).
#[inline]
pub fn available() -> bool {
    NUM_SETS.load(Ordering::Acquire) > 0 && epfd(0) >= 0
}

/// Whether each worker has a set of its own.
#[inline]
pub fn per_worker() -> bool {
    NUM_SETS.load(Ordering::Relaxed) > 1
}

/// How many descriptors set `set` holds, as far as its ADDs and DELs tell (the kernel
/// also drops an fd whose last reference closes behind the reactor's back, so this may
/// drift a little high; it only steers where descriptors move, `crate::io::scheduled_io`).
#[inline]
pub fn fds_in(set: usize) -> i32 {
    SETS.get(set).map_or(0, |s| s.fds.load(Ordering::Relaxed))
}

/// `epoll_ctl(op)` of `fd` on set `set`: Err(errno), ENOSYS when the set does not
/// exist (before the pool started, or in a forked child).
#[inline]
fn ctl(set: usize, op: i32, fd: i32, event: &libc::epoll_event) -> Result<(), i32> {
    let ep = epfd(set);
    if ep < 0 {
        return Err(libc::ENOSYS);
    }
    match sys::epoll_ctl(ep, op, fd, Some(event)) {
        r if r < 0 => Err(-r as i32),
        _ => {
            if op == libc::EPOLL_CTL_ADD {
                SETS[set].fds.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        }
    }
}

/// Puts `fd` in set `set` (EPOLL_CTL_ADD) with `event`. Err(errno), ENOSYS without
/// the set; an ADD reports a readiness that is already there.
#[inline]
pub fn add_fd(set: usize, fd: i32, event: &libc::epoll_event) -> Result<(), i32> {
    ctl(set, libc::EPOLL_CTL_ADD, fd, event)
}

/// Changes what `fd` in set `set` is watched for (EPOLL_CTL_MOD; the kernel re-checks
/// readiness at once). Err(errno), ENOSYS without the set.
#[inline]
pub fn modify_fd(set: usize, fd: i32, event: &libc::epoll_event) -> Result<(), i32> {
    ctl(set, libc::EPOLL_CTL_MOD, fd, event)
}

/// Takes `fd` out of set `set` (EPOLL_CTL_DEL). A failure (the fd or the set already
/// gone) leaves nothing registered, so there is nothing to report.
#[inline]
pub fn delete_fd(set: usize, fd: i32) {
    let ep = epfd(set);
    if ep >= 0 && sys::epoll_ctl(ep, libc::EPOLL_CTL_DEL, fd, None) == 0 {
        SETS[set].fds.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Sleeps in epoll_wait on `set` until an event, a [`wake_set`] or `deadline`, then
/// calls `awake` and only then dispatches what it harvested. For idle workers; any
/// number may sleep here at once.
///
/// `awake` is where the worker stops counting as asleep. Dispatching wakes fibers, and a
/// wake-up that queues a surplus tells a sleeping worker: while the dispatcher still
/// counted as one, it chose itself, wrote its own eventfd, and its next `epoll_wait`
/// returned at once for nothing (docs/RESULTS.md#self-notify).
pub fn sleep_in_epoll(set: usize, deadline: Option<u64>, awake: impl FnOnce()) -> usize {
    let s = &SETS[set];
    s.sleepers.fetch_add(1, Ordering::SeqCst);
    poll_then(set, deadline, || {
        s.sleepers.fetch_sub(1, Ordering::SeqCst);
        awake();
    })
}

/// Makes the caller the direct waiter that watches `set`, if there is none: returns
/// the epoll fd to add to its ppoll set. Release with [`stop_watching`].
pub fn start_watching(set: usize) -> Option<i32> {
    let ep = epfd(set);
    let w = &SETS[set].watcher;
    (ep >= 0 && !w.load(Ordering::Relaxed) && !w.swap(true, Ordering::AcqRel)).then_some(ep)
}

pub fn stop_watching(set: usize) {
    SETS[set].watcher.store(false, Ordering::Release);
}

/// Polls `set` without waiting unless another thread polls it right now. Returns how
/// many fd events it dispatched.
pub fn try_poll_now(set: usize) -> usize {
    let s = &SETS[set];
    if epfd(set) < 0 || s.polling_now.load(Ordering::Relaxed) || s.polling_now.swap(true, Ordering::AcqRel) {
        return 0;
    }
    let n = poll(set, Some(0));
    s.polling_now.store(false, Ordering::Release);
    n
}

/// Interrupts a worker blocked in epoll_wait on `set`.
pub fn wake_set(set: usize) {
    let fd = SETS.get(set).map_or(-1, |s| s.wake_fd.load(Ordering::Acquire));
    if fd >= 0 {
        sys::eventfd_signal(fd);
    }
}

/// Waits for events on `set` until `deadline` (None: forever, Some(0): don't wait) and
/// dispatches them. Returns how many fd events.
pub fn poll(set: usize, deadline: Option<u64>) -> usize {
    poll_then(set, deadline, || {})
}

/// [`poll`], calling `harvested` once `epoll_wait` returned, before anything is dispatched.
fn poll_then(set: usize, deadline: Option<u64>, harvested: impl FnOnce()) -> usize {
    let s = &SETS[set];
    let ep = s.epfd.load(Ordering::Acquire);
    // Not zeroed: the kernel writes the first `n` entries and only those are read. Zeroing
    // all of them wrote MAX_EVENTS * 12 bytes (dozens of cache lines) per poll.
    let mut events = [core::mem::MaybeUninit::<libc::epoll_event>::uninit(); MAX_EVENTS];
    let timeout_ms = match deadline {
        Some(0) => 0,
        d => crate::base::time::ms_until(d) as isize,
    };
    // SAFETY: `events` is a writable array of MAX_EVENTS entries (`MaybeUninit<T>` has
    // `T`'s layout).
    let n = unsafe { sys::epoll_wait(ep, events.as_mut_ptr().cast(), MAX_EVENTS, timeout_ms as i32) };
    harvested();
    s.last_poll_ns.store(sys::now_ns(), Ordering::Relaxed);
    bump(&STATS.epoll_waits);
    if n <= 0 {
        return 0;
    }
    add(&STATS.epoll_events, n as u64);
    let mut count = 0;
    for e in &events[..(n as usize).min(MAX_EVENTS)] {
        // SAFETY: the kernel wrote the first `n` entries (`n <= MAX_EVENTS`).
        let e = unsafe { e.assume_init_ref() };
        let cookie = e.u64;
        if cookie == WAKE_COOKIE {
            sys::eventfd_drain(s.wake_fd.load(Ordering::Relaxed));
            continue;
        }
        if (crate::runtime::fibers::hooks::get().dispatch_readiness)(cookie, e.events) {
            count += 1;
        }
    }
    count
}

/// Polls `set` without waiting if nobody did for `max_age_ns`, nobody is polling it now
/// and no worker sleeps in its epoll_wait (the kernel wakes that one for any event).
/// Returns how many fd events it dispatched.
#[inline]
pub fn poll_if_stale(set: usize, max_age_ns: u64) -> usize {
    let Some(s) = SETS.get(set) else { return 0 };
    if s.epfd.load(Ordering::Relaxed) < 0 || s.polling_now.load(Ordering::Relaxed) || s.sleepers.load(Ordering::Relaxed) != 0 {
        return 0;
    }
    if sys::now_ns().saturating_sub(s.last_poll_ns.load(Ordering::Relaxed)) < max_age_ns {
        return 0;
    }
    try_poll_now(set)
}

/// [`poll_if_stale`] for every set that `wanted` accepts (the monitor's look at sets
/// whose owners may not get to them). Returns how many fd events it dispatched.
pub fn poll_stale_sets_where(max_age_ns: u64, wanted: impl Fn(usize) -> bool) -> usize {
    let n = NUM_SETS.load(Ordering::Acquire);
    (0..n).filter(|&s| wanted(s)).map(|s| poll_if_stale(s, max_age_ns)).sum()
}

/// [`poll_if_stale`] for every set but `except` (the caller's own, polled separately;
/// `usize::MAX`: none). Returns how many fd events it dispatched.
pub fn poll_others_if_stale(except: usize, max_age_ns: u64) -> usize {
    let n = NUM_SETS.load(Ordering::Acquire);
    (0..n).filter(|&s| s != except).map(|s| poll_if_stale(s, max_age_ns)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets go to active worker slots: a claim takes the set with the fewest owners,
    /// the preferred one among equals, and a released set is the next one claimed.
    #[test]
    fn a_claim_takes_the_set_with_the_fewest_owners() {
        // The test process has no pool: pretend four sets exist (claims only count).
        NUM_SETS.store(4, Ordering::Release);
        for s in 0..4 {
            assert_eq!(claim_set(s), s, "the preferred set while all have as many owners");
        }
        release_set(2); // worker 2 blocked
        assert_eq!(claim_set(5), 2, "the spare brought in takes the set given up");
        assert_eq!(claim_set(1), 1, "its own set, as all have one owner again (set 1 now two)");
        release_set(3);
        assert_eq!(claim_set(1), 3, "the set nobody serves before its own with two owners");
        release_set(7); // no such set: nothing
        for s in 0..4 {
            release_set(s);
            release_set(s);
        }
        assert!(SETS[..4].iter().all(|s| s.owners.load(Ordering::Relaxed) == 0), "never below zero");
        NUM_SETS.store(0, Ordering::Release);
    }
}
