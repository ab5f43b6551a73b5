//! The worker loop.
//!
//! Each worker runs `worker_main`: at its safe point it takes deferred signals and
//! fires its own timers, then finds work (its urgent queue, its lifo slot, its deque,
//! the hand-off list, the injector, other workers), runs that fiber to its next
//! switch, and goes idle (spin, then sleep in the poller or on its futex) when there
//! is none. A fiber that switches out runnable (a yield, a preemption, the end of its
//! turn) goes to the back of its worker's deque ([`requeue_notifies`]).

use super::policy::{
    COORDINATING_WEIGHT, GLOBAL_CHECK_INTERVAL, LIFO_STREAK_CAP, PAUSES_PER_ROUND, POLL_CHECK_INTERVAL, SPIN_PAUSE_PART,
    SPIN_PROBE_EVERY, SPIN_ROUNDS, STALE_NS,
};
use super::*;
use crate::runtime::fibers::queue_delay::Source;

// ---------------------------------------------------------------------------------
// Worker loop
// ---------------------------------------------------------------------------------

pub(super) extern "C" fn worker_main(arg: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: `arg` points into the leaked runtime's worker array (spawn_runtime_thread).
    let w: &'static WorkerShared = unsafe { &*(arg as *const WorkerShared) };
    let rt = runtime_unchecked();
    w.tp.store(sys::thread_pointer(), Ordering::Relaxed);
    w.tid.store(sys::gettid() as u32, Ordering::Relaxed);
    w.times.born_ns.store(sys::now_ns(), Ordering::Relaxed);
    if w.wake_fd.load(Ordering::Relaxed) < 0 {
        // A spare's (the first workers' are made by `start::start_pool`).
        w.wake_fd.store(crate::base::own_fds::eventfd_new_out_of_the_way(), Ordering::Release);
        crate::base::own_fds::hold_eventfd(&w.wake_fd);
    }
    wake::WORKER.set(w as *const WorkerShared as usize);
    w.readiness_set.store(poller::claim_set(w.index), Ordering::Relaxed);
    // Workers run program code, so they take the program's signals (a handler then runs
    // with the interrupted fiber's TLS, as it would on that thread natively), under the
    // mask the program's threads would have inherited.
    // SAFETY: a valid sigset pointer into the leaked runtime.
    unsafe { crate::base::real::pthread_sigmask(libc::SIG_SETMASK, &rt.initial_sigmask, ptr::null_mut()) };
    let base = sys::sigmask_get() & !crate::runtime::preemption::kick::KICK_BIT;
    sys::sigmask_set(base);
    w.base_sigmask.store(base, Ordering::Relaxed);
    // Scheduler context is shielded from program signal handlers except at the safe
    // point at the top of the loop (crate::signal::handlers).
    crate::base::shield::set_depth(1);
    let mut tick: u32 = 0;
    let mut lifo_streak: u32 = 0;
    loop {
        crate::base::shield::worker_safe_point(&w.deferred, base);
        tick = tick.wrapping_add(1);
        w.timers.fire_due(unpark);
        match find_work(rt, w, tick, &mut lifo_streak) {
            Some(f) => {
                run_fiber(w, f);
                if w.role.get() != Role::Active {
                    rejoin_or_retire(rt, w);
                }
            }
            None if retire_if_surplus(rt, w) => {}
            None if crate::base::sites::on() => {
                w.times.idle.store(true, Ordering::Relaxed);
                idle(rt, w);
                w.times.idle.store(false, Ordering::Relaxed);
            }
            None => idle(rt, w),
        }
    }
}

/// After a blocked call returned: become ACTIVE again if the pool is short, else retire
/// as a spare until the monitor needs us.
#[cold]
fn rejoin_or_retire(rt: &Runtime, w: &WorkerShared) {
    let caught = w.times.blocked_entry.swap(ptr::null_mut(), Ordering::Relaxed);
    if !caught.is_null() {
        // SAFETY: entries of the report's table are statics, never freed.
        let since = w.times.blocked_since.load(Ordering::Relaxed);
        unsafe { &*caught }.add_time(crate::base::sites::now().saturating_sub(since));
    }
    if !w.role.come_back() {
        return;
    }
    if rt.active.fetch_add(1, Ordering::AcqRel) < rt.target() {
        // The pool was short: keep working, on the set that has the fewest owners
        // (the monitor gave ours up when it declared us blocked).
        w.claim_readiness_set();
        return;
    }
    rt.active.fetch_sub(1, Ordering::AcqRel);
    sleep_as_spare(rt, w);
}

/// Before an idle worker sleeps: if the pool has more ACTIVE workers than it wants,
/// this one retires. Nothing runs on it now, so the argument of
/// `WorkerRole::retire` holds. False if it stays.
pub(super) fn retire_if_surplus(rt: &Runtime, w: &WorkerShared) -> bool {
    let mut active = rt.active.load(Ordering::Relaxed);
    loop {
        if active <= rt.target() || w.role.get() != Role::Active {
            return false;
        }
        match rt.active.compare_exchange_weak(active, active - 1, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => break,
            Err(now) => active = now,
        }
    }
    poller::release_set(w.readiness_set());
    sleep_as_spare(rt, w);
    true
}

/// Retires `w` (ACTIVE, running nothing, already taken off `active`) and parks it as
/// a spare until the monitor needs it again.
#[cold]
fn sleep_as_spare(rt: &Runtime, w: &WorkerShared) {
    // Retire: hand everything queued here to the others.
    w.move_queued_to(&rt.injector);
    w.role.retire();
    rt.notify();
    bump(&STATS.workers_retired);
    while w.role.get() == Role::Spare {
        w.role.sleep_while_spare();
        crate::base::shield::worker_safe_point(&w.deferred, w.base_sigmask.load(Ordering::Relaxed));
    }
    // Activated for a worker that blocked: serve the set it gave up.
    w.claim_readiness_set();
}

/// Finds the next fiber to run. `lifo_streak` counts the fibers run in a row from the
/// lifo slot while the local deque waited (see `LIFO_STREAK_CAP`).
fn find_work(rt: &Runtime, w: &WorkerShared, tick: u32, lifo_streak: &mut u32) -> Option<FiberRef> {
    // SAFETY: we are w's OS thread, in its scheduler context.
    let local = unsafe { w.owner_local() };
    // Readiness that waits while every worker is busy: harvested here, between two
    // fibers, once the set is `STALE_NS` old, its fibers go to this worker's own deque.
    // (Every 61st dequeue only, the monitor's 1 ms poll got there first and most runs
    // were its foreign wakes through the global injector: docs/RESULTS.md#reactor-polling.)
    // Every `POLL_CHECK_INTERVAL`th dequeue, so that a switch-heavy program pays the clock
    // read of the staleness check a quarter of the time.
    if tick.is_multiple_of(POLL_CHECK_INTERVAL) {
        poller::poll_if_stale(w.readiness_set(), STALE_NS);
    }
    // A lock's woken waiter that its waker gave this worker to (wake::unpark_lock_waiter).
    // SAFETY: we are w's OS thread, in its scheduler context.
    if let Some(f) = unsafe { w.urgent.pop() } {
        return Some(f);
    }
    if tick.is_multiple_of(GLOBAL_CHECK_INTERVAL) {
        if let Some(f) = steal_global(rt, local) {
            *lifo_streak = 0;
            return Some(f);
        }
    }
    // The lifo cap holds while fibers wait in the deque or the coordinating queue.
    if *lifo_streak < LIFO_STREAK_CAP || w.local_queued(local) == 0 {
        if let Some(f) = w.lifo.take() {
            *lifo_streak += 1;
            return Some(f);
        }
    } else if let Some(f) = w.lifo.take() {
        // Fibers that keep waking each other (a lock handed round a group) would hold
        // the worker forever: the wakee goes behind what waits in the queues (in its
        // class's queue, as a displaced lifo occupant, wake::schedule).
        bump(&STATS.lifo_capped);
        // SAFETY: we are w's OS thread, in its scheduler context.
        unsafe { w.push_local(local, f) };
    }
    *lifo_streak = 0;
    if pick_coordinating(w.coordinating.stealer.len(), local.len(), tick) {
        // SAFETY: we are w's OS thread, in its scheduler context.
        if let Some(f) = unsafe { w.coordinating.pop() } {
            return Some(f);
        }
    }
    if let Some(f) = local.pop() {
        return Some(f);
    }
    // SAFETY: as above.
    if let Some(f) = unsafe { w.coordinating.pop() } {
        return Some(f);
    }
    if let Some(f) = steal_global(rt, local) {
        return Some(f);
    }
    steal_from_others(rt, w, local)
}

/// Whether a worker's next fiber comes from its coordinating queue (`coordinating`
/// fibers wait there) rather than its deque (`deque`), for the `dequeue`-th dequeue:
/// with probability wc / (wc + d), w = [`COORDINATING_WEIGHT`], so a coordinating fiber
/// gets about w times the turns of one in the deque, and neither queue starves the
/// other. MariaDB pool-of-threads gives connections inside a transaction a
/// high-priority queue for the same reason: each statement of a transaction holds row
/// locks and a read view that the other connections pay for (InnoDB's `rw_trx_hash`
/// walk) until it commits. The draw is a Weyl sequence of the dequeue count
/// (frac(n·φ), evenly spread), not a random number.
#[inline]
fn pick_coordinating(coordinating: usize, deque: usize, dequeue: u32) -> bool {
    if coordinating == 0 {
        return false;
    }
    if deque == 0 {
        return true;
    }
    let weighted = COORDINATING_WEIGHT * coordinating as u64;
    let draw = u64::from(dequeue.wrapping_mul(0x9E37_79B9)); // 2^32 / φ
    (draw * (weighted + deque as u64)) >> 32 < weighted
}

fn steal_global(rt: &Runtime, local: &Deque<FiberRef>) -> Option<FiberRef> {
    if let Some(f) = rt.drain_handoff(local) {
        return Some(f);
    }
    retry_steal(|| rt.injector.steal_batch_and_pop(local))
}

fn steal_from_others(rt: &Runtime, w: &WorkerShared, local: &Deque<FiberRef>) -> Option<FiberRef> {
    let all = rt.workers();
    let n = all.len();
    let f = (1..n).find_map(|k| all[(w.index + k) % n].steal_into(local))?;
    bump(&STATS.steals);
    Some(f)
}

/// Runs `f` until its next switch and acts on the reason.
pub(super) fn run_fiber(w: &WorkerShared, f: FiberRef) {
    let own_tp = w.tp.load(Ordering::Relaxed);
    let me = w as *const WorkerShared as usize;
    // `running_on` keeps the worker of the previous run while the fiber is parked or
    // queued (it is cleared only when the fiber leaves the pool): a different one is a
    // migration, its caches left behind (the locality counters).
    let previous = f.running_on.worker();
    let migrated = previous != me && previous != 0;
    if migrated {
        bump(&STATS.migrations);
    }
    crate::runtime::fibers::queue_delay::record(f.take_queued(), migrated);
    f.running_on.enter(me, own_tp);
    f.set_life(Life::Running);
    w.running.store(f.id(), Ordering::Relaxed);
    w.progress.fetch_add(1, Ordering::Relaxed);
    let fiber_tp = f.identity.tp();
    // SAFETY: we dequeued `f`, so we are its only runner (park protocol / queues hand
    // out each fiber once). Between the two FS writes no code touches TLS: resume()
    // is corosensei's register switch, which uses none. `swap_registered`: we are f's
    // runner, f is suspended around the resume, and both thread pointers are of live
    // threads (f's donor sleeps while f lives; we are the worker).
    // Per-fiber signal masks (see `crate::signal::delivery`): install the fiber's before the
    // switch, and put the worker's own back afterwards if the fiber has (or, during
    // this run, acquired) a mask of its own.
    //
    // The masks change while FS is the fiber's: a program signal that the new mask
    // lets through at once then finds the fiber's shield (it is suspended inside
    // one) and is deferred to the fiber, which takes it when it leaves the shield
    // right after the switch — not to the worker's scheduler context, where it
    // would be deferred again at every such switch (crate::signal::handlers).
    //
    // Every fiber has a mask (its creator's, from `thread::create`); only one that
    // differs from the worker's costs the two system calls.
    //
    // A signal deferred in this scheduler context since the safe point is blocked on
    // the kernel thread until the next safe point, which a fiber that never switches
    // (a spin on `pthread_cond_signal`, which preemption refuses: library code) keeps
    // away for good: the mask is installed then too, and the fiber takes the signal
    // as above (a lost signal under load: docs/RESULTS.md#signal-fixes).
    let base = w.base_sigmask.load(Ordering::Relaxed);
    let own_mask =
        |f: &Fiber| f.signals.own_mask().map(|m| m & !crate::runtime::preemption::kick::KICK_BIT).filter(|&m| m != base);
    let result = unsafe {
        let co = f.coroutine_mut();
        // WTLS registrations (crate::runtime::fibers::wtls): the worker's values in, the
        // fiber's own aside; swapped back below whatever the fiber did (and ends an
        // `addr_of` pin). One load and branch for a fiber without any.
        crate::runtime::fibers::wtls::swap_registered(&f, fiber_tp, own_tp);
        sys::set_thread_pointer(fiber_tp);
        // Read after the FS switch: a signal deferred from here on is the fiber's
        // (its shield exit unblocks it on this thread); one deferred before is noted
        // in the worker's word by then.
        let install = own_mask(&f).or_else(|| (w.deferred.load(Ordering::Relaxed) != 0).then_some(base));
        if let Some(m) = install {
            sys::sigmask_set(m);
        }
        let r = co.resume(());
        if install.is_some() || own_mask(&f).is_some() {
            sys::sigmask_set(base);
        }
        sys::set_thread_pointer(own_tp);
        crate::runtime::fibers::wtls::swap_registered(&f, fiber_tp, own_tp);
        r
    };
    w.running.store(0, Ordering::Relaxed);
    w.progress.fetch_add(1, Ordering::Relaxed);
    bump(&STATS.switches);
    // SAFETY: we are w's OS thread, back in its scheduler context.
    let local = unsafe { w.owner_local() };
    match result {
        corosensei::CoroutineResult::Yield(Switch::Yield) => {
            // Round robin: the back of the deque.
            requeue_on_worker(w, local, f, Source::Yield);
        }
        corosensei::CoroutineResult::Yield(Switch::Park) => {
            f.set_life(Life::Parked);
            if !f.park_state.park_after_switch() {
                // Notified while it was still switching out: run it again.
                f.set_life(Life::Runnable);
                f.mark_queued(Source::Yield);
                local.push(f);
            }
        }
        corosensei::CoroutineResult::Yield(Switch::RunOnDonor) => {
            f.set_life(Life::OnDonor);
            f.running_on.leave();
            if crate::base::config::in_forked_child() {
                // The fiber forked and is the child's thread now (thread.rs, "Fork").
                (crate::runtime::fibers::hooks::get().resume_donor_in_forked_child)(&f);
            }
            f.donor.run_on_donor();
        }
        corosensei::CoroutineResult::Yield(Switch::Preempt) => {
            // Suspended inside the kick handler (crate::runtime::preemption::preempt), whose mask this
            // thread still has; behind the fibers that waited here.
            sys::sigmask_set(base);
            requeue_on_worker(w, local, f, Source::Preempt);
        }
        corosensei::CoroutineResult::Yield(Switch::YieldToWakee) => {
            // It woke a lock waiter, queued in `urgent` to run first: it runs next after
            // that one (wake::unpark_lock_waiter).
            f.mark_queued(Source::Yield);
            if let Some(old) = w.lifo.replace(f) {
                // The displaced fiber keeps its class, as in wake::schedule.
                // SAFETY: we are w's OS thread, back in its scheduler context.
                unsafe { w.push_local(local, old) };
            }
        }
        corosensei::CoroutineResult::Yield(Switch::EndTurn) => {
            // Its turn is spent (turn.rs): as a preempted fiber.
            requeue_on_worker(w, local, f, Source::EndTurn);
        }
        corosensei::CoroutineResult::Yield(Switch::BackToPool) => {
            crate::fatal(&["fiber asked to return to the pool while on a worker"]);
        }
        corosensei::CoroutineResult::Return(v) => {
            f.set_life(Life::Finished);
            (crate::runtime::fibers::hooks::get().fiber_ended)(&f);
            f.running_on.leave();
            f.donor.finish(v);
        }
    }
}

/// Queues a fiber that switched out runnable on its own worker (a yield, a
/// preemption, the end of its turn) at the back of that worker's deque `local` (a
/// coordinating fiber's preemption or turn end: its coordinating queue): no migration,
/// no trip behind every runnable fiber of the pool (the injector, where turn ends and
/// preemptions once went: docs/RESULTS.md#lifo-slot-and-requeue). Idle workers are told
/// about a surplus ([`requeue_notifies`]).
///
/// One exception: with nothing queued on this worker (deque and coordinating queue)
/// and fibers in the injector, the fiber goes behind them. After `STRANDED_TICKS`
/// without a switch the monitor moves this worker's queue to the injector, just as the
/// slice ends; pushed to the empty deque, the preempted fiber would run again at once,
/// ahead of every fiber that had waited behind it (spinners handing a baton round,
/// `sync_spin_handoff`, made no round).
fn requeue_on_worker(w: &WorkerShared, local: &Deque<FiberRef>, f: FiberRef, source: Source) {
    f.set_life(Life::Runnable);
    f.mark_queued(source);
    let rt = runtime_unchecked();
    if behind_the_injector(w.local_queued(local), rt.injector.is_empty()) {
        rt.injector.push(f);
        rt.notify();
        return;
    }
    if source == Source::Yield {
        // A yield is a round robin among this worker's fibers, whatever their class.
        local.push(f);
    } else {
        // SAFETY: we are w's OS thread, in its scheduler context (after the switch).
        unsafe { w.push_local(local, f) };
    }
    if requeue_notifies(source, w.local_queued(local)) {
        // Others may take what waits here while this worker runs the next.
        rt.notify();
    }
}

/// Whether a fiber requeued on its own worker goes to the injector instead of its own
/// queues: only when nothing is queued there (`local_queued`, the deque and the
/// coordinating queue together) and the injector is not empty ([`requeue_on_worker`]).
/// A fiber waiting in the coordinating queue runs before the requeued one anyway.
fn behind_the_injector(local_queued: usize, injector_empty: bool) -> bool {
    local_queued == 0 && !injector_empty
}

/// Whether a fiber requeued by [`requeue_on_worker`] for `source`, leaving `queued`
/// fibers in the deque and the coordinating queue together, should wake an idle
/// worker: only a preempted fiber or a spent turn, and only when more than that one
/// waits. A yield is a round robin among this worker's fibers (a spin-wait's
/// `sched_yield` must not wake a thief for every round), and a single fiber runs here
/// next anyway.
fn requeue_notifies(source: Source, queued: usize) -> bool {
    matches!(source, Source::Preempt | Source::EndTurn) && queued > 1
}

/// Spins before sleeping, while some other worker is busy running fibers: only it can
/// hand us work within a spin's time. With everyone idle, work comes from the kernel
/// (I/O, timers, other processes), and spinning would only take the CPU away from the
/// process that is about to answer us (Go's rule for spinning Ms is similar). Every
/// round looks at the queues, every `SPIN_PROBE_EVERY`th calls `probe` (readiness is work too: a
/// reply that arrives while we spin must not wait for the spin to end). Returns
/// whether work or readiness turned up.
pub(super) fn spin_for_work(rt: &Runtime, w: &WorkerShared, mut probe: impl FnMut() -> bool) -> bool {
    let others_idle = rt.idle.sleeping() + rt.idle.spinning();
    let active = rt.active.load(Ordering::Relaxed);
    // No spinning while the pool has more ACTIVE workers than CPUs (spares, or
    // FIBERIZE_WORKERS above the CPUs): a spinning worker then holds a CPU that a
    // worker with work, or the holder of a lock others wait for, needs. With 128
    // workers on 2 CPUs, 2 000 fibers queued on one mutex drained at ~6 hand-offs a
    // second, each waiting for its worker's turn behind the spinners.
    let rounds = if others_idle + 1 < active && active <= rt.cpus() { SPIN_ROUNDS } else { 0 };
    rt.idle.start_spinning();
    let mut found = false;
    for round in 0..rounds {
        if rt.has_work(Some(w)) || (round % SPIN_PROBE_EVERY == 0 && probe()) {
            found = true;
            break;
        }
        if round < SPIN_ROUNDS / SPIN_PAUSE_PART {
            for _ in 0..PAUSES_PER_ROUND {
                sys::cpu_relax();
            }
        } else {
            // Later rounds give the CPU to any other runnable thread (another process
            // on this machine, e.g. the client of a server we run): a spinning worker
            // must not starve the work it is waiting for.
            sys::sched_yield_raw();
        }
    }
    rt.idle.stop_spinning();
    found
}

fn idle(rt: &Runtime, w: &WorkerShared) {
    let own_set = w.readiness_set();
    // With a set per worker, a spinning worker also takes readiness that waits in a
    // busy worker's set longer than a busy worker's own between-fiber poll would let it
    // (that owner runs one long fiber): the backlog it balances is real.
    let polled_something =
        || poller::try_poll_now(own_set) > 0 || (poller::per_worker() && poller::poll_others_if_stale(own_set, STALE_NS) > 0);
    // After a wait declined for a peer on another CPU: no spin (direct_wait.rs,
    // "Pairs form at wake-ups"). Only this thread touches the flag.
    let unspun = w.sleep_without_spin.swap(false, Ordering::Relaxed);
    if unspun {
        bump(&STATS.idle_spins_skipped);
    } else if spin_for_work(rt, w, polled_something) {
        return;
    }

    w.sleep_word.announce(&rt.idle);
    let mut notified = None;
    if !rt.has_work(Some(w)) {
        bump(&STATS.worker_sleeps);
        let d = w.timers.next_deadline();
        let deadline = if d == u64::MAX { None } else { Some(d) };
        if poller::available() {
            // Sleep in epoll_wait (any number of idle workers do, see crate::io::scheduled_io).
            // `polling` is published before the re-check of `sleep_word`, and a
            // notifier CASes `sleep_word` before it reads `polling` (all SeqCst): it
            // either sees us polling and writes the eventfd, or we see its NOTIFIED
            // and do not wait.
            w.polling.store(true, Ordering::SeqCst);
            if w.sleep_word.still_sleeping() {
                // Awake before the harvest is dispatched: a surplus it queues here must
                // tell another sleeper, not this worker (`sleep_in_epoll`).
                // (`sleep_in_epoll` calls it whenever `epoll_wait` returned.)
                poller::sleep_in_epoll(own_set, deadline, || {
                    w.polling.store(false, Ordering::SeqCst);
                    notified = Some(w.sleep_word.wake(&rt.idle));
                });
            } else {
                w.polling.store(false, Ordering::SeqCst);
            }
        } else {
            sys::futex_wait(w.sleep_word.futex_word(), SleepWord::SLEEPING, deadline);
        }
    }
    if notified.unwrap_or_else(|| w.sleep_word.wake(&rt.idle)) {
        bump(&STATS.worker_wakeups);
    }
    rt.wake_monitor_if_dozing();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pick between the coordinating queue and the deque: never from an empty
    /// coordinating queue, always with an empty deque, and otherwise in proportion
    /// 4c : d over consecutive dequeues.
    #[test]
    fn coordinating_fibers_get_four_times_the_turns_of_the_deque() {
        for tick in 0..64 {
            assert!(!pick_coordinating(0, 0, tick));
            assert!(!pick_coordinating(0, 5, tick));
            assert!(pick_coordinating(3, 0, tick));
        }
        // (coordinating, deque, share of picks from the coordinating queue in percent)
        for (c, d, percent) in [(1, 4, 50), (1, 2, 67), (1, 1, 80), (2, 1, 89), (1, 8, 33), (10, 100, 29)] {
            let picks = (0..10_000u32).filter(|&t| pick_coordinating(c, d, t)).count();
            let expected = 10_000 * percent / 100;
            assert!(picks.abs_diff(expected) <= 60, "c={c} d={d}: {picks} of 10000, wanted ~{expected}");
        }
    }

    /// Which requeued fibers wake an idle worker, by the reason they switched out and
    /// the deque's length after the push.
    #[test]
    fn a_requeue_wakes_a_thief_only_for_a_surplus_of_cut_runs() {
        let table = [
            (Source::Yield, 1, false),
            (Source::Yield, 5, false),
            (Source::Preempt, 1, false),
            (Source::Preempt, 2, true),
            (Source::EndTurn, 1, false),
            (Source::EndTurn, 9, true),
        ];
        for (source, queued, notify) in table {
            assert_eq!(requeue_notifies(source, queued), notify, "{source:?} with {queued} queued");
        }
    }

    #[test]
    fn a_requeue_goes_behind_the_injector_only_when_nothing_waits_locally() {
        for (local_queued, injector_empty, injector) in [(0, true, false), (0, false, true), (1, false, false), (3, true, false)]
        {
            assert_eq!(
                behind_the_injector(local_queued, injector_empty),
                injector,
                "{local_queued} queued locally, injector empty {injector_empty}"
            );
        }
    }
}
