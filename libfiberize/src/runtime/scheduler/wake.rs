//! Queueing a fiber and waking an idle worker for it.
//!
//! # Sleep / wake protocol (no lost wake-ups)
//!
//! An idle worker first spins for a while (`SPIN_ROUNDS`), then announces itself
//! (timers are per worker, `crate::runtime::sleep::timer`: it sleeps at most until its own next one):
//! `SleepWord::announce` and `IdleCounts` (SeqCst, `crate::runtime::sleep::sleep_state`, where
//! each fence says what it pairs with), re-checks every queue, and only
//! then sleeps: in the reactor's `epoll_wait` (so that I/O readiness wakes it
//! directly, see crate::io::scheduled_io), or on a futex on `sleep_word` where there is no
//! reactor. A producer publishes its fiber and asks `IdleCounts::wake_needed` (a SeqCst
//! fence, then the sleeper count); if somebody sleeps and nobody spins, it moves one
//! `SleepWord` SLEEPING→NOTIFIED (`try_notify`) and wakes it (eventfd write or futex wake; the eventfd wakes some
//! epoll sleeper, which need not be the one marked). The two SeqCst sequences form a
//! Dekker pair: either the sleeper's re-check sees the fiber, or the producer sees the
//! sleeper. Placing a fiber in a lifo slot does not notify (the waker's worker will
//! run it next); the monitor thread, which ticks every millisecond, wakes a sleeper
//! if work waits anywhere, so a busy waker cannot strand its wakee.
//!

use super::*;
use crate::runtime::fibers::queue_delay::Source;
use crate::runtime::sleep::park_state::UnparkAction;

impl Runtime {
    /// Wakes one sleeping worker if any sleeps and none is already looking for work.
    /// TLS-free: donors call it after handing their fiber over.
    #[inline]
    pub(super) fn notify(&self) {
        if !self.idle.wake_needed() {
            return;
        }
        self.wake_one_sleeper();
    }

    #[cold]
    pub(super) fn wake_one_sleeper(&self) {
        self.wake_sleepers(1);
    }

    /// Wakes up to `n` sleeping workers (at least one if any sleeps), in one pass over
    /// the pool: a broadcast that queued many fibers at once tells the idle workers
    /// once, not once per fiber (see [`unpark_many`]). Returns how many it woke.
    #[cold]
    fn wake_sleepers(&self, n: usize) -> usize {
        let mut polling_set = None;
        let mut woken = 0;
        // Ordinary sleepers first: a direct waiter woken for other work gives up a wait
        // that costs nothing to keep (its fiber then parks the ordinary way).
        for direct_pass in [false, true] {
            for w in self.workers().iter() {
                if w.direct.load(Ordering::SeqCst) != direct_pass {
                    continue;
                }
                if w.sleep_word.try_notify() {
                    if w.direct.load(Ordering::SeqCst) {
                        sys::eventfd_signal(w.wake_fd.load(Ordering::Relaxed));
                    } else if w.polling.load(Ordering::SeqCst) {
                        poller::wake_set(w.readiness_set());
                    } else {
                        sys::futex_wake(w.sleep_word.futex_word(), 1);
                    }
                    woken += 1;
                    if woken >= n {
                        return woken;
                    }
                    continue;
                }
                if w.polling.load(Ordering::SeqCst) {
                    polling_set = Some(w.readiness_set());
                }
            }
        }
        // The eventfd wakes *some* epoll sleeper, not necessarily the one it was
        // written for: a worker can stay asleep marked NOTIFIED while another drained
        // its wake-up. Nobody is SLEEPING but someone sleeps in epoll: wake it.
        if woken == 0 {
            if let Some(set) = polling_set {
                poller::wake_set(set);
            }
        }
        woken
    }

    /// Pushes onto the donor hand-off list (Treiber stack of `Arc::into_raw` pointers).
    pub(super) fn push_handoff(&self, f: *const Fiber) {
        let f = f as *mut Fiber;
        let mut head = self.handoff_head.load(Ordering::Relaxed);
        loop {
            // SAFETY: `f` is a live fiber owned by this list until drained.
            unsafe { (*f).set_handoff_next(head) };
            match self.handoff_head.compare_exchange_weak(head, f, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => break,
                Err(h) => head = h,
            }
        }
    }

    /// Takes the whole hand-off list, pushing all but one fiber to `local`.
    pub(super) fn drain_handoff(&self, local: &Deque<FiberRef>) -> Option<FiberRef> {
        if self.handoff_head.load(Ordering::Relaxed).is_null() {
            return None;
        }
        let mut p = self.handoff_head.swap(ptr::null_mut(), Ordering::Acquire);
        let mut first = None;
        while !p.is_null() {
            // SAFETY: every pointer on the list came from Arc::into_raw in
            // push_from_donor, and the swap gave us exclusive ownership of the list.
            let f = unsafe { Arc::from_raw(p) };
            p = f.handoff_next();
            if first.is_none() {
                first = Some(f);
            } else {
                local.push(f);
            }
        }
        first
    }
}

/// Queues a fiber whose donor just set it up or got it back. **TLS-free** (no
/// allocation, no errno, no thread_local): the fiber may start running on a worker —
/// with the donor's TLS block — the instant it is published.
pub fn push_from_donor(f: FiberRef) {
    f.mark_queued(Source::Donor);
    let rt = runtime_unchecked();
    rt.push_handoff(Arc::into_raw(f));
    rt.notify();
}

/// Makes a parked (or about-to-park) fiber runnable. Callable from anywhere: fibers,
/// plain threads, timers. See the park protocol in [`crate::runtime::sleep::park_state`].
pub fn unpark(f: &FiberRef) {
    if unpark_quietly(f) {
        runtime_unchecked().notify();
    }
}

/// [`unpark`] for the waiter a mutex's contended unlock woke while others still queue
/// behind it and after it waited long ([`super::parked_long`]: a convoy), called by the
/// unlocker once the lock is free.
///
/// The mutex admits one wake-up in flight (`crate::sync::lock_word`): every parked
/// waiter waits until this one runs, so its wake-up latency is the drain rate of the
/// whole queue. The kernel runs a thread woken by `FUTEX_WAKE` soon (it slept: EEVDF
/// gives it lag), while a fiber woken here waited behind whatever its worker ran next,
/// and that worker itself for a kernel time slice: with many workers on few CPUs
/// MariaDB's mutexes drained only a few dozen hand-offs a second, and a parked waiter
/// holding an InnoDB latch's shared side held up every writer behind it
/// (docs/RESULTS.md#convoy-yield). So a fiber unlocker
/// gives the wakee its worker, which has the CPU now: the wakee goes to the worker's
/// urgent queue (run before anything else, and left to this worker as the lifo slot
/// is) and the unlocker yields, to run again right after it (the lifo slot). A program's
/// own lock gets the same at a `FUTEX_WAKE` of one waiter by a fiber that waited on that
/// word itself (`crate::sync::parking::unpark_one_handing_off`). Elsewhere
/// (a plain thread, a donor, a shield, a condition wait releasing its mutex: it parks at
/// once) it is an ordinary [`unpark`].
pub fn unpark_lock_waiter(f: &FiberRef) {
    let Some(cur) = fiber::current() else {
        return unpark(f);
    };
    let Some(w) = super::worker_of(cur) else {
        return unpark(f);
    };
    if crate::base::shield::depth() != 0 || cur.unlocking_to_park.get() {
        return unpark(f);
    }
    unpark_then(f, |f| {
        bump(&STATS.lock_wakes_yielded);
        {
            let _shield = crate::base::shield::Shield::new();
            note_wake_locality(f, w);
            f.mark_queued(Source::FiberWake);
            // SAFETY: `w` runs the caller, so we are on w's OS thread, shielded.
            unsafe { w.urgent.push(f.clone()) };
        }
        // SAFETY: we are this fiber (`cur`), on its stack, outside any shield.
        unsafe { cur.suspend(Switch::YieldToWakee) };
        false
    });
}

/// [`unpark`] for every fiber of a broadcast (a futex wake of many, a condition
/// broadcast): the fibers are queued first and the idle workers told once at the end,
/// up to one per queued fiber and no more than there are CPUs. Told once per fiber, a
/// wake-up of thousands of InnoDB readers (`ssux_lock_impl::rd_wait`, which every
/// reader leaving it repeats) scanned every worker once per reader, and the readers sat
/// seconds in the wake-up while holding their latch
/// (docs/RESULTS.md#broadcast-wakeups).
pub fn unpark_many(fibers: &mut dyn Iterator<Item = FiberRef>) {
    let mut wanted = 0;
    for f in fibers {
        wanted += usize::from(unpark_quietly(&f));
    }
    if wanted > 0 {
        let rt = runtime_unchecked();
        if rt.idle.wake_needed() {
            rt.wake_sleepers(wanted.min(rt.cpus()));
        }
    }
}

/// [`unpark`] without telling the idle workers; whether they should be told.
fn unpark_quietly(f: &FiberRef) -> bool {
    unpark_then(f, |f| schedule(f.clone()))
}

/// The park-state transition of an unpark: a fiber that must run again is made
/// runnable and handed to `queue`, whose answer (tell the idle workers?) is returned.
fn unpark_then(f: &FiberRef, queue: impl FnOnce(&FiberRef) -> bool) -> bool {
    match f.park_state.unpark() {
        UnparkAction::Schedule => {
            bump(&STATS.unparks);
            f.set_life(Life::Runnable);
            queue(f)
        }
        UnparkAction::Notified => {
            // A fiber in a direct wait is "running" on a worker blocked in the
            // kernel: end the wait so that it sees the notification. `unpark` fenced
            // after its CAS: a Dekker pair with direct_wait's publish-then-check (model:
            // direct_wait_and_unpark_form_a_dekker_pair).
            if let Some(fd) = f.direct_wake.fd() {
                sys::eventfd_signal(fd);
            }
            false
        }
        UnparkAction::Nothing => false,
    }
}

/// Queues a runnable fiber: into the current worker's lifo slot when called by a fiber,
/// into the worker's deque in a worker's scheduler context, else into the injector
/// ([`wake_place`]). Whether an idle worker should be told (the caller does).
fn schedule(f: FiberRef) -> bool {
    // The lifo slot and the local deque are not reentrant: a program signal handler
    // that interrupted this and called sem_post would lose a fiber (crate::signal::handlers).
    let _shield = crate::base::shield::Shield::new();
    let rt = runtime_unchecked();
    // `cur` is the caller, so its worker is the one whose OS thread we are on.
    match wake_place(fiber::current().and_then(super::worker_of), worker_context) {
        Place::Lifo(w) => {
            note_wake_locality(&f, w);
            w.turn.note_fiber_wake();
            f.mark_queued(Source::FiberWake);
            let Some(old) = w.lifo.replace(f) else { return false };
            // SAFETY: `w` runs the caller, so we are on w's OS thread, and shielded:
            // `local` is ours to use, as `owner_local` requires.
            let local = unsafe { w.owner_local() };
            // The displaced fiber keeps its class: a coordinating one goes to the
            // coordinating queue, not the deque where it would lose its weight
            // (docs/RESULTS.md#coordinating-keeps-class).
            // SAFETY: as `local` above.
            unsafe { w.push_local(local, old) };
            // Tell an idle worker only about a surplus (in either queue a thief steals
            // from): a single displaced fiber runs here right after the wakee (a
            // signal/wait hand-off pair); waking a thief for it spreads
            // producer/consumer pairs over every CPU, each lock then crossing cores
            // (docs/RESULTS.md#lifo-slot-and-requeue). Spinning workers still steal it,
            // and the monitor moves it if this worker stops switching.
            w.local_queued(local) > 1
        }
        Place::Deque(w) => {
            // Scheduler context of a worker (timers, reactor dispatch): queue locally; the
            // worker looks for work right after. Others are told only about a surplus
            // in either queue a worker steals from (its deque, its coordinating queue).
            // SAFETY: WORKER is set only on w's own OS thread, in scheduler context.
            let local = unsafe { w.owner_local() };
            let surplus = w.local_queued(local) != 0;
            note_wake_locality(&f, w);
            f.mark_queued(Source::WorkerWake);
            // SAFETY: as `local` above.
            unsafe { w.push_local(local, f) };
            surplus
        }
        Place::Injector => {
            f.mark_queued(Source::ForeignWake);
            rt.injector.push(f);
            true
        }
    }
}

/// Where a wake-up queues its fiber, with the worker it queues on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place<W> {
    /// The waker's worker's lifo slot: the wakee runs next there.
    Lifo(W),
    /// The back of the worker's own deque.
    Deque(W),
    /// The global injector.
    Injector,
}

/// Where [`schedule`] queues a fiber woken by a fiber running on a worker
/// (`fiber_worker`, that worker), or in a worker's scheduler context (`context_worker`,
/// asked only when no fiber wakes: readiness the worker harvested, a timer it fired),
/// or by anyone else (a plain thread, the monitor).
#[inline]
fn wake_place<W>(fiber_worker: Option<W>, context_worker: impl FnOnce() -> Option<W>) -> Place<W> {
    match fiber_worker {
        Some(w) => Place::Lifo(w),
        None => context_worker().map_or(Place::Injector, Place::Deque),
    }
}

/// Counts a wake-up queued on worker `w` for a fiber that last ran on another worker
/// (`running_on` still names that one while the fiber is parked).
#[inline]
fn note_wake_locality(f: &Fiber, w: &WorkerShared) {
    let last = f.running_on.worker();
    if last != 0 && last != w as *const WorkerShared as usize {
        bump(&STATS.cross_worker_wakes);
    }
}

/// The worker whose scheduler loop runs on this OS thread. Read only in scheduler
/// context, where the thread pointer is the worker's own (in fiber context it is the
/// donor's, whose copy is null). One of the runtime's initial-exec thread words.
pub(super) const WORKER: crate::base::thread_words::ThreadWord = crate::base::thread_words::WORKER;

#[inline]
fn worker_context() -> Option<&'static WorkerShared> {
    let w = WORKER.get() as *const WorkerShared;
    // SAFETY: set by worker_main to its leaked WorkerShared.
    if w.is_null() {
        None
    } else {
        Some(unsafe { &*w })
    }
}

/// Whether the caller runs in a worker's scheduler context (not in a fiber, not on
/// another thread). Async-signal-safe (a TLS read).
pub fn in_worker_context() -> bool {
    worker_context().is_some()
}

/// `sched_yield` for a fiber: back of the local queue.
pub fn yield_now() {
    if let Some(f) = fiber::current() {
        bump(&STATS.yields);
        // SAFETY: we are this fiber.
        unsafe { f.suspend(Switch::Yield) };
    }
}

/// Parks the calling fiber until [`unpark`] (or a stale notification) wakes it, or until
/// the CLOCK_MONOTONIC `deadline` passes. May return spuriously: callers re-check
/// their condition in a loop.
///
/// Inlined into its callers, as are the wait loop and the descriptor slot's wait above
/// it: each frame live across the switch is one the resumed fiber reloads, and those
/// lines are cold when many fibers take turns (docs/RESULTS.md#fiber-hot-lines). What
/// returns before the switch ([`prepare_park`]) stays a call.
#[inline(always)]
pub fn park_current(f: &Fiber, deadline: Option<u64>) {
    if f.park_state.take_notification() {
        // A wake-up already arrived. It may have come from pthread_kill, whose signal
        // is delivered on the way out of a switch; there is none here, so deliver it
        // now (the caller may park again at once, e.g. in a mutex wait).
        if f.signals.held() != 0 {
            (crate::runtime::fibers::hooks::get().deliver_signals)(f);
        }
        return;
    }
    prepare_park(f, deadline);
    // SAFETY: we are this fiber, on its stack.
    unsafe { f.suspend(Switch::Park) };
}

/// What a park does before its switch: arms the timer that ends it at `deadline` and
/// counts it. A call of its own, so that its frame is gone before the switch; also the
/// one function per park that `bench-mysql/count.sh` can count (`park_current` has none).
#[inline(never)]
fn prepare_park(f: &Fiber, deadline: Option<u64>) {
    if let Some(d) = deadline {
        let gen = f.next_park_gen();
        // SAFETY: `f` is the current fiber, kept alive by its donor; the timer holds its
        // own strong reference.
        let me = unsafe { arc_from_ref(f) };
        let Some(w) = super::worker_of(f) else {
            crate::fatal(&["a fiber parked with a deadline outside a worker"]);
        };
        w.timers.add(d, me, gen);
    }
    bump(&STATS.parks);
}

/// A new strong reference to a fiber known to be alive.
///
/// # Safety
/// `f` must live inside an `Arc<Fiber>` with at least one strong reference.
pub unsafe fn arc_from_ref(f: &Fiber) -> FiberRef {
    let p = f as *const Fiber;
    // SAFETY: caller guarantees `p` came from an Arc that is alive.
    unsafe {
        Arc::increment_strong_count(p);
        Arc::from_raw(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_up_queues_by_who_wakes() {
        for (by_fiber, in_worker, place) in [
            (Some(1u8), None, Place::Lifo(1)),
            (Some(1), Some(2), Place::Lifo(1)),
            (None, Some(2), Place::Deque(2)),
            (None, None, Place::Injector),
        ] {
            let mut asked = false;
            let got = wake_place(by_fiber, || {
                asked = true;
                in_worker
            });
            assert_eq!(got, place, "by a fiber {by_fiber:?}, in a worker {in_worker:?}");
            // The worker context is looked up only where no fiber woke.
            assert_eq!(asked, by_fiber.is_none());
        }
    }
}
