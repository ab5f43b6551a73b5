//! Direct waits on one descriptor.
//!
//! # Direct waits: a fiber alone on its worker waits like a thread
//!
//! When a fiber must wait for one descriptor and its worker has nothing else to run,
//! parking it would make the worker sleep in the shared `epoll_wait`, and the reply
//! would wake *some* idle worker, often one whose CPU is idle, so every reply costs an
//! inter-processor interrupt and a CPU wake-up (docs/RESULTS.md#direct-wait-ppoll).
//! Instead a direct wait ([`prepare_direct_wait`], then [`DirectWaiter::wait`]) blocks
//! the worker in `ppoll` on that descriptor and on the worker's own eventfd, exactly as
//! the program's thread would block natively, so the kernel wakes this thread on the
//! waker's CPU as it does for native threads. Between the two halves the I/O layer
//! takes the descriptor out of the reactor's epoll set (else its edges would also wake
//! idle epoll sleepers), unless another fiber waits on it through the reactor
//! (`FdState::epoll_waiters`).
//!
//! ```text
//!   fiber F on worker W: recv -> EAGAIN -> wait(fd)
//!       W's lifo slot and local deque empty, no global work
//!       fd out of the epoll set (EPOLL_CTL_DEL once, if it was in)
//!       W announces itself SLEEPING (direct), re-checks all queues   <- Dekker, as idle()
//!       F.direct_wake := W.wake_fd, re-checks F.park_state          <- Dekker with unpark
//!       ppoll([fd, W.wake_fd], next timer deadline)
//!          fd ready        -> F continues, no switch at all
//!          wake_fd / timer / signal -> F parks the ordinary way (W runs the new work)
//! ```
//!
//! The I/O layer asks for a direct wait on a socket only while the socket's peer runs
//! on this worker's CPU (`io::peer_cpu`): a direct wait across CPUs binds each fiber to
//! the wrong worker for good, and every request and reply then crosses CPUs.
//!
//! # Spinning
//!
//! A direct wait spins first, as an idle worker does (`worker::spin_for_work`): a peer
//! on another CPU may answer within the spin, and a sleep and wake-up cost more than
//! that. Not when the kernel says the peer runs on this very CPU (TCP and UDP, where
//! `io::peer_cpu` knows): it cannot send while the worker holds the CPU, so the spin's
//! `pause` rounds are wasted and its `sched_yield` rounds are a detour through the
//! kernel's scheduler; the worker blocks in `ppoll` at once, and the kernel runs the
//! peer here, as it does for a native thread blocked in `recv` (the spin's cost:
//! docs/RESULTS.md#direct-wait-unspun). The stat `direct_waits_unspun` counts these
//! waits.
//!
//! # Pairs form at wake-ups: no spin after a declined wait
//!
//! A wait declined for a peer on another CPU parks the fiber, and its worker often runs
//! dry right after. It then sleeps without spinning ([`sleep_without_spin_next`],
//! stat `idle_spins_skipped`), where the kernel may move it beside the peer at all
//! (`io::peer_cpu::kernel_may_pair_with`: the peer's CPU is in the process's mask).
//! The peer's next send wakes it, and the kernel places a thread at its wake-up, by its
//! waker: the worker lands on the peer's CPU, the next wait there is `Here`, and the
//! pair stays. A spinning worker that finds the request itself is never woken, so
//! nothing ever moves it: traced slow runs were spent with both workers on one CPU and
//! both clients on the other, or both fibers on one worker, every fiber declining its
//! waits for a peer elsewhere, for the whole run (docs/RESULTS.md#sleep-without-spin).
//! Where the kernel may not move the worker (a server pinned apart from its clients),
//! the spin stays: it saves a wake-up, and no wake-up would pair anything.
//!
//! # What it costs in system calls
//!
//! The `ppoll` stands for the program's own `poll` (or its blocking `recv`'s sleep). Beyond
//! it, a direct wait on a TCP or UDP socket asks the kernel once where the peer runs
//! (`getsockopt(SO_INCOMING_CPU)`; the worker's own CPU comes from the vDSO's
//! `getcpu`, `base::sys`). The descriptor's `EPOLL_CTL_DEL` is made only when a parked
//! wait had put it in the set, and the next parked wait's `EPOLL_CTL_ADD` puts it back:
//! the pair comes where parked and direct waits on one descriptor alternate. Leaving it
//! in the set would save the pair but make each reply an edge there too, which wakes an
//! idle worker asleep in `epoll_wait`: the wake-up a direct wait exists to avoid
//! (docs/RESULTS.md#tpcc-client-syscalls).
//!
//! A direct waiter counts as sleeping: `wake_one_sleeper` prefers ordinary sleepers
//! and writes the eventfd of a direct one; `unpark` (cancellation, pthread_kill, a
//! stale wake) writes the eventfd named in the fiber; the monitor does not mistake a
//! direct waiter for a blocked worker.
//!

use super::*;

/// How a direct wait ended.
pub enum DirectWait {
    /// The descriptor is ready: these are its `revents`.
    Ready(i16),
    /// The caller's deadline passed.
    TimedOut,
    /// No direct wait happened, or it ended for another reason (work for the worker,
    /// a timer, an unpark, a signal): wait the ordinary way.
    Other,
}

/// A direct wait that may begin: the calling fiber is alone on its worker, and its
/// spin found nothing ([`prepare_direct_wait`]). The I/O layer takes the descriptor out
/// of the reactor's epoll set, then blocks with [`DirectWaiter::wait`].
pub struct DirectWaiter {
    f: &'static fiber::Fiber,
    w: &'static WorkerShared,
    wake_fd: i32,
}

/// The first half of a direct wait for `events` on `fd` (see the module docs): `Ok`
/// when the calling fiber is alone on its worker and may block in the kernel, `Err`
/// with how it ended otherwise (`Ready` when the spin found the descriptor ready,
/// `Other`: wait the ordinary way). `spin`: spin first, as an idle worker does; false
/// where the descriptor's peer runs on this CPU ("Spinning" in the module docs).
pub fn prepare_direct_wait(fd: i32, events: i16, spin: bool) -> Result<DirectWaiter, DirectWait> {
    let Some(f) = fiber::current() else { return Err(DirectWait::Other) };
    // `f` is the caller: its worker is the one whose OS thread we are on.
    let Some(w) = super::worker_of(f) else { return Err(DirectWait::Other) };
    let wake_fd = w.wake_fd.load(Ordering::Acquire);
    // SAFETY: as above.
    let local_empty = unsafe { w.owner_local() }.is_empty();
    let rt = runtime_unchecked();
    if wake_fd < 0 || !local_empty || w.lifo.is_occupied(Ordering::Relaxed) || rt.has_work(Some(w)) {
        return Err(DirectWait::Other);
    }
    // Spin first, as an idle worker would, watching this fd instead of the epoll set;
    // not for a peer on this CPU (module docs).
    let mut revents = 0;
    let became_ready = || {
        let mut p = [libc::pollfd { fd, events, revents: 0 }];
        sys::ppoll_until(&mut p, 0);
        revents = p[0].revents;
        revents != 0
    };
    if !spin {
        bump(&STATS.direct_waits_unspun);
    } else if worker::spin_for_work(rt, w, became_ready) {
        return Err(if revents != 0 { DirectWait::Ready(revents) } else { DirectWait::Other });
    }
    Ok(DirectWaiter { f, w, wake_fd })
}

impl DirectWaiter {
    /// The second half: blocks the worker in `ppoll` on `fd` (out of the epoll set
    /// now) and the worker's eventfd until `events`, work for the worker, the next
    /// timer or `deadline` (CLOCK_MONOTONIC ns).
    pub fn wait(self, fd: i32, events: i16, deadline: Option<u64>) -> DirectWait {
        let DirectWaiter { f, w, wake_fd } = self;
        let rt = runtime_unchecked();
        // Announce as an idle worker does (`idle`), then publish where unpark must write.
        w.direct.store(true, Ordering::SeqCst);
        w.sleep_word.announce(&rt.idle);
        f.direct_wake.publish(wake_fd);
        let mut outcome = DirectWait::Other;
        let own_set = w.readiness_set();
        let watched = poller::start_watching(own_set);
        let mut fds = [
            libc::pollfd { fd, events, revents: 0 },
            libc::pollfd { fd: wake_fd, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: watched.unwrap_or(-1), events: libc::POLLIN, revents: 0 },
        ];
        if !rt.has_work(Some(w)) && !f.park_state.is_notified_after_publishing() {
            bump(&STATS.direct_waits);
            let until = deadline.unwrap_or(u64::MAX).min(w.timers.next_deadline());
            // Readiness in the epoll set (another fiber's fd) ends the wait: the fiber
            // parks, and the worker, idle, harvests the events in epoll_wait.
            let n = if watched.is_some() { 3 } else { 2 };
            let r = sys::ppoll_until(&mut fds[..n], until);
            if fds[0].revents != 0 {
                outcome = DirectWait::Ready(fds[0].revents);
            } else if r == 0 && deadline.is_some_and(|d| sys::now_ns() >= d) {
                outcome = DirectWait::TimedOut;
            }
        }
        if watched.is_some() {
            poller::stop_watching(own_set);
        }
        f.direct_wake.withdraw();
        let notified = w.sleep_word.wake(&rt.idle);
        if notified {
            bump(&STATS.worker_wakeups);
        }
        rt.wake_monitor_if_dozing();

        w.direct.store(false, Ordering::SeqCst);
        // A wake-up written for us (now or by a notifier that raced with the end of the
        // wait) must not end the next direct wait at once; one written after this read
        // costs that next wait one ordinary park, nothing worse.
        if notified || fds[1].revents != 0 {
            sys::eventfd_drain(wake_fd);
        }
        outcome
    }
}

/// The calling fiber declined a direct wait for a peer on another CPU, and the kernel
/// may move its worker there: if the worker runs dry next, it sleeps without spinning
/// ("Pairs form at wake-ups" in the module docs). For the I/O layer, in fiber context.
pub fn sleep_without_spin_next() {
    let Some(f) = fiber::current() else { return };
    // `f` is the caller: its worker is the one whose OS thread we are on, the only
    // thread that touches the flag.
    if let Some(w) = super::worker_of(f) {
        w.sleep_without_spin.store(true, Ordering::Relaxed);
    }
}
