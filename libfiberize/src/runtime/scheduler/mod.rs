//! The worker pool: one OS thread per usable CPU, each running fibers to their next
//! switch, with work stealing.
//!
//! # Queues
//!
//! ```text
//!                 +-----------+    +-----------+
//!   plain threads | injector  |    | hand-off  |  donors (TLS-free, intrusive)
//!   the monitor ->| (global)  |    |  list     |<---------------------------
//!                 +-----+-----+    +-----+-----+
//!                       |  steal_batch   | drain
//!        +--------------v----------------v-------------------------------------------+
//!        | worker i:  urgent  |  lifo slot  |  local FIFO deque  |  coordinating FIFO  |
//!        +--------------------+-------------+--------------------+---------------------+
//!             ^ steal (not from an ACTIVE worker)   ^ steal (Stealer, both)
//!             +------------------ other workers ----+
//!
//!   find_work: urgent -> lifo slot (at most LIFO_STREAK_CAP in a row while the deque or
//!              the coordinating queue waits) -> coordinating or deque (4c : d) -> the
//!              other of the two -> hand-off list, injector -> steal from other
//!              workers; every GLOBAL_CHECK_INTERVAL-th dequeue the global queues first
//! ```
//!
//! [`policy`] tells `find_work`'s order and the wake side's placement rules side by
//! side, with why, and holds every number they use.
//!
//! The set of a worker's queues is written out once, in `WorkerShared`'s queue methods
//! (`has_queued`, `queue_lengths`, `move_queued_to`, `steal_into`): the idle check,
//! stealing, the monitor's release of a stuck worker's fibers, a retiring worker, the
//! dump and the turn rule all go through them.
//!
//! * A fiber woken by a fiber goes to the waker's worker **lifo slot** (the previous
//!   occupant moves to the local deque, where it is stealable; an idle worker is woken
//!   for it only when the deque then holds more than that one fiber, see `schedule`).
//!   A lock hand-off or a ping-pong then runs the wakee next on the same worker with no
//!   system call and no cache-line migration. Idle workers do not steal an active worker's lifo slot;
//!   instead the monitor moves the slot *and the local deque* to the injector when
//!   their owner made no progress (no switch) for a whole tick, so a busy waker delays
//!   its wakee by at most ~1 ms and never strands it (the remote-ready defect of
//!   Boost.Fiber, docs/DESIGN.md §2.3, cannot happen), and fibers queued behind a fiber that
//!   spins without switching reach other workers even when those never run dry.
//!   Slots of BLOCKED workers are stolen at once.
//! * A mutex waiter woken out of a convoy (parked ≥ 1 ms, others behind it) goes to the
//!   waker's worker **urgent queue**, run before the lifo slot, and the waker yields into
//!   the lifo slot (`wake::unpark_lock_waiter`); the queue is stolen as the slot is.
//! * A fiber that switches out runnable on its own worker (`sched_yield`, a preemption,
//!   the end of its turn) goes to the back of that worker's deque: round robin.
//! * A **coordinating** fiber (one that waited on a condition variable or a futex within
//!   its last 32 descriptor waits, `WaitNote::coordinates`: a transaction between two
//!   statements, holding locks others will wait for) goes to the **coordinating queue**
//!   where it would have gone to the deque: woken in scheduler context, preempted, or
//!   at its turn's end. A worker serves that queue and its deque in proportion 4c : d
//!   (`worker::pick_coordinating`), so such a fiber gets about four times the turns and neither
//!   queue starves. Designs rejected: MariaDB pool-of-threads' strict high-priority
//!   queue (read_write took the CPU from point_select in the mix), a fixed
//!   every-Nth-dequeue rule (the share then followed the queues' lengths), and the run
//!   order by CPU time this queue came out of (docs/RESULTS.md#share-policy,
//!   docs/RESULTS.md#run-order-by-cpu-time).
//! * Fibers woken in a worker's scheduler context (readiness it harvested, timers it
//!   fired) go to its deque; fibers woken by plain OS threads or the monitor go to the
//!   global injector; donors use the allocation-free hand-off list (see
//!   [`push_from_donor`]).
//!
//! # Files
//!
//! | file | what it holds |
//! |------|---------------|
//! | `mod.rs` | the `Runtime` and `WorkerShared` structures |
//! | [`policy`] | the scheduling policy: `find_work`'s order and the wake side's rules, why, the designs rejected, and every constant with its origin |
//! | [`start`] | starting the pool: the workers, the monitor, the poller, the hooks |
//! | [`wake`] | queueing a fiber (`unpark`, `schedule`, `yield_now`, `park_current`) and waking an idle worker for it: the sleep/wake protocol |
//! | [`worker`] | the worker loop: find work, steal, run a fiber to its next switch and requeue it, idle |
//! | [`direct_wait`] | a fiber alone on its worker waits for its descriptor in the kernel |
//! | [`monitor`] | the monitor thread: its loop over its policies, its doze |
//! | [`stuck`] | the monitor's watch over each worker's progress: stranded queues, blocked workers |
//! | [`blocked`] | a worker's kernel thread as the monitor reads it; marking a worker BLOCKED, bringing a spare in |
//! | [`task_files`] | a worker's `/proc/self/task/TID` files, kept open for the monitor |
//! | [`lifo`] | the lifo slot (one fiber, owned as a raw `Arc` pointer, swapped in and out) and the urgent queue's type |
//! | [`worker_role`] | a worker's role (ACTIVE, BLOCKED, SPARE) and its transitions |
//! | [`clock`] | the monitor's tick count (1 ms), what a tick tells each of its policies, and the convoy rule that reads a lock wait's age from it |
//! | [`quota`] | following the cgroup CPU quota while the program runs: the monitor reads it again once a second |
//! | [`turn`] | a fiber's turn: a fiber that keeps finding requests on its socket goes to the back after `policy::TURN_US` |
//! | [`turn_state`] | what a worker notes for the turn rule, and the pool's turn length now |
//!
use core::cell::UnsafeCell;
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_deque::{Injector, Steal, Stealer, Worker as Deque};

use crate::base::rawlock::RawOnce;
use crate::base::stats::{add, bump, STATS};
use crate::base::sys;
use crate::runtime::fibers::fiber::{self, Fiber, FiberRef, Life, Switch};
use crate::runtime::sleep::poller;
use crate::runtime::sleep::sleep_state::{IdleCounts, SleepWord};
use crate::runtime::sleep::timer;

mod blocked;
mod clock;
mod direct_wait;
mod lifo;
mod monitor;
pub mod policy;
mod quota;
mod start;
mod stuck;
mod task_files;
mod turn;
mod turn_state;
mod wake;
mod worker;
mod worker_role;

use worker_role::{Role, WorkerRole};

pub(crate) use blocked::{mark_blocked, thread_state, worker_sleeps_in_kernel, BlockedCall};
pub use clock::{monitor_ticks, parked_long};
pub use direct_wait::{prepare_direct_wait, sleep_without_spin_next, DirectWait, DirectWaiter};
pub use lifo::Padded;
pub use start::{pool_never_started, start};
pub use turn::note_stream_read;
pub use wake::{
    arc_from_ref, in_worker_context, park_current, push_from_donor, unpark, unpark_lock_waiter, unpark_many, yield_now,
};

/// One worker's shared state. Owner-hot fields (`lifo`, `running`, `progress`, the timer
/// heap) sit on lines of their own; the rest is read by others and rarely written.
#[repr(align(128))]
pub struct WorkerShared {
    pub index: usize,
    /// The worker's own local deque. Only the worker's OS thread touches it: the worker
    /// loop, or a fiber running on it (while the loop is suspended inside `resume`).
    local: UnsafeCell<Deque<FiberRef>>,
    stealer: Stealer<FiberRef>,
    /// Single-fiber slot, stolen only from workers that are not ACTIVE (`lifo.rs`).
    lifo: lifo::LifoSlot,
    sleep_word: SleepWord,
    tp: AtomicUsize,
    pub tid: AtomicU32,
    /// Id of the fiber running now (0: none), for the dump and the monitor.
    pub running: Padded<AtomicU64>,
    /// Bumped at every fiber switch; the monitor's sign of life.
    pub progress: Padded<AtomicU64>,
    /// Lock waiters whose waker gave them its worker (`wake::unpark_lock_waiter`): run
    /// before anything else; stolen, as the lifo slot, only from a worker that is not
    /// ACTIVE.
    urgent: lifo::SideQueue,
    /// Coordinating fibers (`WaitNote::coordinates`) woken in this worker's scheduler
    /// context or requeued at a turn's end or a preemption: picked against the deque by
    /// `worker::pick_coordinating`; stolen as the deque is.
    coordinating: lifo::SideQueue,
    /// The running fiber's turn (see [`turn`]): the `progress` value of the run it
    /// began in and when. Written only by fibers on the worker's own OS thread, so that
    /// a switch writes nothing here.
    turn: Padded<turn_state::Turn>,
    /// ACTIVE, BLOCKED or SPARE, moved only by the named transitions of [`worker_role`].
    pub(crate) role: WorkerRole,
    /// This worker sleeps in the reactor's epoll_wait (wake it through the reactor's
    /// eventfd, not the futex).
    polling: AtomicBool,
    /// The worker is blocked in a direct wait for its fiber's descriptor (see the
    /// module docs): wake it through `wake_fd`.
    direct: AtomicBool,
    /// The fiber that ran last declined a direct wait for a peer the kernel may move
    /// this worker beside: the next [`worker::idle`] sleeps without spinning
    /// ([`sleep_without_spin_next`]). Only the worker's own OS thread touches it.
    sleep_without_spin: AtomicBool,
    /// The worker's own eventfd for ending a direct wait (-1: none, no direct waits).
    wake_fd: AtomicI32,
    /// Its thread's `/proc` files, which the monitor reads ([`task_files::TaskFiles`]).
    task_files: task_files::TaskFiles,
    /// The readiness set this worker sleeps in and registers its fibers' descriptors in
    /// while ACTIVE (`poller::claim_set`; always 0 with one shared set). Written only by
    /// the worker itself, when it starts, rejoins or is activated as a spare.
    readiness_set: AtomicUsize,
    /// The worker's own signal mask (kernel set), restored after fibers with their own.
    base_sigmask: AtomicU64,
    /// Program signals deferred on this kernel thread (blocked here until the worker's
    /// next safe point; see `crate::signal::handlers`).
    deferred: AtomicU64,
    /// Timers armed by fibers that parked on this worker (see `crate::runtime::sleep::timer`).
    timers: Padded<timer::TimerHeap>,
    /// The monitor asks the kick handler to preempt the run whose `progress` value
    /// this is (0: no request; see `crate::runtime::preemption::preempt`).
    pub preempt_request: AtomicU64,
    /// For the report (`crate::base::sites`, only while it is on): where the worker's
    /// time went, sampled by the monitor at each tick (running a fiber, idle, neither);
    /// and the report entry of the blocking call the monitor caught it in, with the
    /// time it was caught.
    pub times: Padded<WorkerTimes>,
}

#[derive(Default)]
pub struct WorkerTimes {
    pub born_ns: AtomicU64,
    /// Set by the worker around its idle spin and sleep (only while the report is on).
    pub idle: AtomicBool,
    pub running_samples: AtomicU64,
    pub idle_samples: AtomicU64,
    pub runtime_samples: AtomicU64,
    pub blocked_entry: AtomicPtr<crate::base::sites::Entry>,
    pub blocked_since: AtomicU64,
}

impl WorkerShared {
    /// The readiness set this worker serves (see `readiness_set`).
    #[inline]
    pub(crate) fn readiness_set(&self) -> usize {
        self.readiness_set.load(Ordering::Relaxed)
    }

    /// Becomes an owner of a readiness set, its previous one if no set has fewer owners.
    fn claim_readiness_set(&self) {
        self.readiness_set.store(poller::claim_set(self.readiness_set()), Ordering::Relaxed);
    }

    /// The worker's own deque.
    ///
    /// # Safety
    /// Only the worker's own OS thread may call this (the worker loop, or a fiber
    /// running on it), and not from a signal handler that interrupted a use of it
    /// (the callers hold a `Shield` or run in the worker's scheduler context).
    #[inline]
    unsafe fn owner_local(&self) -> &Deque<FiberRef> {
        // SAFETY: the caller is the only thread that touches `local` (contract above).
        unsafe { &*self.local.get() }
    }
}

// SAFETY: `local` is only used from the owning OS thread (see the field's comment and
// `owner_local`); everything else is atomic or immutable.
unsafe impl Sync for WorkerShared {}
unsafe impl Send for WorkerShared {}

pub struct Runtime {
    /// All worker slots; `[0, started)` have a thread.
    workers: Box<[WorkerShared]>,
    started: AtomicUsize,
    /// Wanted number of ACTIVE workers (the configured workers), and how many are
    /// ACTIVE now.
    target: AtomicUsize,
    active: AtomicUsize,
    /// The CPUs the process may use (affinity mask, cgroup quota; the monitor follows a
    /// quota changed at run time: [`quota`]).
    cpus: AtomicUsize,
    injector: Injector<FiberRef>,
    /// How long a turn is now ([`turn`]; the monitor adapts it).
    turn_budget: turn_state::Budget,
    handoff_head: AtomicPtr<Fiber>,
    idle: IdleCounts,
    /// The word the monitor sleeps on between ticks, and whether it dozes: a worker
    /// that leaves a sleep while it dozes wakes it ([`monitor`], "Dozing").
    monitor_doze: crate::runtime::sleep::sleep_state::MonitorDoze,
    /// Signal mask of the thread that started the pool; workers adopt it, so fibers
    /// see the mask a native thread created at that point would have inherited.
    initial_sigmask: libc::sigset_t,
}

static RUNTIME: AtomicPtr<Runtime> = AtomicPtr::new(ptr::null_mut());

/// The runtime, if the pool was started.
#[inline]
pub fn try_runtime() -> Option<&'static Runtime> {
    let p = RUNTIME.load(Ordering::Acquire);
    // SAFETY: published once with Release, leaked, never freed.
    if p.is_null() {
        None
    } else {
        Some(unsafe { &*p })
    }
}

/// The runtime, which the caller knows was started (a fiber exists, or the pool's
/// start called it).
pub fn runtime() -> &'static Runtime {
    runtime_unchecked()
}

/// Starts one of the runtime's own OS threads with the real `pthread_create`, with all
/// asynchronous signals blocked: signals belong to the program's threads. Ends the
/// process if it cannot: for the threads the runtime cannot go without (the pool's
/// first workers and its monitor) and its optional observers, started when the
/// program's first `pthread_create` starts the pool or when a setting asks for them.
pub(crate) fn spawn_runtime_thread(f: extern "C" fn(*mut libc::c_void) -> *mut libc::c_void, arg: *mut libc::c_void) {
    if try_spawn_runtime_thread(f, arg).is_err() {
        crate::fatal(&["cannot create a worker thread"]);
    }
}

/// [`spawn_runtime_thread`] that reports a failure (`pthread_create`'s error number:
/// the group's `pids.max`, `RLIMIT_NPROC`, memory), for a thread the pool can do
/// without ([`blocked::bring_in_worker`], the timer relay of `thread::timers`). `arg`
/// must stay valid for as long as `f` uses it.
pub(crate) fn try_spawn_runtime_thread(
    f: extern "C" fn(*mut libc::c_void) -> *mut libc::c_void,
    arg: *mut libc::c_void,
) -> Result<(), libc::c_int> {
    // SAFETY: plain libc calls with valid out-parameters; the new thread receives `arg`,
    // which the caller keeps valid.
    unsafe {
        let mut all: libc::sigset_t = core::mem::zeroed();
        let mut old: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        crate::base::real::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let mut t: libc::pthread_t = 0;
        let r = crate::base::real::pthread_create(&mut t, ptr::null(), f, arg);
        crate::base::real::pthread_sigmask(libc::SIG_SETMASK, &old, ptr::null_mut());
        if r != 0 {
            return Err(r);
        }
        crate::base::real::pthread_detach(t);
    }
    Ok(())
}

impl Runtime {
    /// How many ACTIVE workers the pool wants now.
    pub fn target(&self) -> usize {
        self.target.load(Ordering::Relaxed)
    }

    /// The CPUs the process may use now (affinity mask, cgroup quota).
    #[inline]
    pub fn cpus(&self) -> usize {
        self.cpus.load(Ordering::Relaxed)
    }

    /// The worker slots that have a thread.
    pub fn workers(&self) -> &[WorkerShared] {
        &self.workers[..self.started.load(Ordering::Acquire).min(self.workers.len())]
    }

    /// Runnable fibers waiting in the global injector and every worker's queues; a
    /// snapshot (for the monitor).
    pub(super) fn runnable_fibers(&self) -> u64 {
        self.injector.len() as u64 + self.workers().iter().map(|w| w.queued_len() as u64).sum::<u64>()
    }

    /// Whether work waits that worker `me` (None: the monitor) could take: queued
    /// fibers anywhere, or `me`'s own due timers (another worker's timers are fired by
    /// their owner or the monitor; counting them made idle workers spin on work they
    /// cannot take).
    pub(crate) fn has_work(&self, me: Option<&WorkerShared>) -> bool {
        if !self.injector.is_empty() || !self.handoff_head.load(Ordering::SeqCst).is_null() {
            return true;
        }
        // A worker without timers (`next_deadline` MAX) reads no clock.
        if me.map(|w| w.timers.next_deadline()).is_some_and(|d| d != u64::MAX && d <= sys::now_ns()) {
            return true;
        }
        // A busy worker's lifo slot is its own to run (`WorkerShared::steal_into`).
        self.workers().iter().any(|w| w.has_queued(w.role.peek() != Role::Active, Ordering::SeqCst))
    }

    /// Forgets every worker's timers in a forked child.
    ///
    /// # Safety
    /// Only from the atfork child hook (one thread, nothing else running).
    pub unsafe fn reset_timers_in_forked_child(&self) {
        for w in self.workers() {
            // SAFETY: we are the atfork child hook (this fn's # Safety), which is each timer heap's
            // reset contract.
            unsafe { w.timers.reset_in_forked_child() };
        }
    }

    /// Fibers in the injector now (for the dump).
    pub fn injector_len(&self) -> usize {
        self.injector.len()
    }

    /// Timers armed on all workers (for the dump).
    pub fn pending_timers(&self) -> usize {
        self.workers().iter().map(|w| w.timers.pending()).sum()
    }
}

/// The runtime, known to be started (TLS-free).
#[inline]
fn runtime_unchecked() -> &'static Runtime {
    let p = RUNTIME.load(Ordering::Acquire);
    if p.is_null() {
        crate::fatal(&["runtime used before start"]);
    }
    // SAFETY: published once, leaked.
    unsafe { &*p }
}

impl WorkerShared {
    /// `active`, `blocked` or `spare` (for the dump).
    pub fn state_name(&self) -> &'static str {
        match self.role.peek() {
            Role::Active if self.direct.load(Ordering::Relaxed) => "direct-wait",
            Role::Active => "active",
            Role::Blocked => "blocked",
            Role::Spare => "spare",
        }
    }

    // ---- The worker's queues: every list of them is here, and only here. ----

    /// Whether a fiber waits in this worker's deque, urgent or coordinating queue, or
    /// (`with_lifo`) in its lifo slot; `order` is the lifo slot's load (SeqCst where the
    /// caller is one side of the sleep/wake Dekker pair). A snapshot.
    #[inline]
    pub(crate) fn has_queued(&self, with_lifo: bool, order: Ordering) -> bool {
        !self.stealer.is_empty()
            || !self.urgent.stealer.is_empty()
            || !self.coordinating.stealer.is_empty()
            || (with_lifo && self.lifo.is_occupied(order))
    }

    /// Whether fibers wait in any of this worker's queues; a snapshot. For a fiber on
    /// this worker deciding whether a spin could pay (`crate::sync::mutex::spinning_pays`):
    /// a lock holder may be among them.
    #[inline]
    pub fn has_queued_fibers(&self) -> bool {
        self.has_queued(true, Ordering::Relaxed)
    }

    /// Each of this worker's queues by name, with the fibers in it (for the dump; a
    /// snapshot that may be stale at once).
    pub fn queue_lengths(&self) -> [(&'static str, usize); 4] {
        [
            ("deque", self.stealer.len()),
            ("urgent", self.urgent.stealer.len()),
            ("coordinating", self.coordinating.stealer.len()),
            ("lifo", usize::from(self.lifo.is_occupied(Ordering::Relaxed))),
        ]
    }

    /// Fibers that wait in this worker's queues; a snapshot.
    pub fn queued_len(&self) -> usize {
        self.queue_lengths().iter().map(|&(_, n)| n).sum()
    }

    /// Fibers in this worker's deque `local` and its coordinating queue: the two that a
    /// fiber requeued or woken here goes to, and that other workers steal from. A
    /// snapshot; the surplus that tells idle workers, and the lifo cap, count these.
    fn local_queued(&self, local: &Deque<FiberRef>) -> usize {
        local.len() + self.coordinating.stealer.len()
    }

    /// Queues runnable `f` at the back of its class's queue: the coordinating queue if
    /// it coordinates (`WaitNote::coordinates`), else the deque `local`.
    ///
    /// # Safety
    /// As [`WorkerShared::owner_local`] (`local` is what it returned).
    unsafe fn push_local(&self, local: &Deque<FiberRef>, f: FiberRef) {
        if f.wait.coordinates() {
            // SAFETY: forwarded from this fn's contract.
            unsafe { self.coordinating.push(f) };
        } else {
            local.push(f);
        }
    }

    /// Moves every fiber queued on this worker to `to`, through the stealers and the
    /// slot's swap (so any thread may call it: a retiring worker, or the monitor for a
    /// stuck one). Returns how many it moved.
    fn move_queued_to(&self, to: &Injector<FiberRef>) -> usize {
        let mut moved = 0;
        if let Some(f) = self.lifo.take() {
            to.push(f);
            moved += 1;
        }
        for queue in [&self.urgent.stealer, &self.coordinating.stealer, &self.stealer] {
            while let Some(f) = retry_steal(|| queue.steal()) {
                to.push(f);
                moved += 1;
            }
        }
        moved
    }

    /// One fiber for another worker to run, the rest of a batch into its deque `local`.
    /// The lifo slot and the urgent queue of an ACTIVE worker are left alone: its owner
    /// runs them as soon as the waker switches out, and the waker of an urgent one has
    /// already yielded (stealing them would split a ping-pong pair across cores, or move
    /// a lock's hand-offs from core to core). A worker that is not ACTIVE has them taken;
    /// an owner that made no progress for a tick has them moved by the monitor.
    fn steal_into(&self, local: &Deque<FiberRef>) -> Option<FiberRef> {
        if let Some(f) = retry_steal(|| self.stealer.steal_batch_and_pop(local)) {
            return Some(f);
        }
        if let Some(f) = retry_steal(|| self.coordinating.stealer.steal()) {
            return Some(f);
        }
        if self.role.peek() == Role::Active {
            return None;
        }
        if let Some(f) = retry_steal(|| self.urgent.stealer.steal()) {
            return Some(f);
        }
        if self.lifo.is_occupied(Ordering::Relaxed) {
            return self.lifo.take();
        }
        None
    }

    /// Whether this worker is ACTIVE and runs a fiber on the CPU (not in a direct wait).
    pub(crate) fn runs_fiber_on_cpu(&self) -> bool {
        self.role.get() == Role::Active && self.running.load(Ordering::Relaxed) != 0 && !self.direct.load(Ordering::Relaxed)
    }

    /// Program signals deferred on this worker's kernel thread, not yet unblocked.
    pub fn deferred_signals(&self) -> u64 {
        self.deferred.load(Ordering::Relaxed)
    }
}

/// Runs a steal until it does not ask to be retried.
#[inline]
fn retry_steal(mut steal: impl FnMut() -> Steal<FiberRef>) -> Option<FiberRef> {
    loop {
        match steal() {
            Steal::Success(f) => return Some(f),
            Steal::Empty => return None,
            Steal::Retry => continue,
        }
    }
}

/// The worker that runs fiber `f` now (None: it runs on none). Exact when `f` is the
/// caller (its worker wrote it before resuming it, on this OS thread); a hint from
/// any other thread (`fiber_state::RunningOn`).
#[inline]
pub fn worker_of(f: &Fiber) -> Option<&'static WorkerShared> {
    let w = f.running_on.worker() as *const WorkerShared;
    // SAFETY: a non-zero `RunningOn::worker` is the address of an element of the
    // runtime's worker array (`run_fiber` stores `w`), which is leaked: never freed.
    (!w.is_null()).then(|| unsafe { &*w })
}

/// The readiness set of the worker running the calling fiber (None for a plain thread).
#[inline]
pub fn current_readiness_set() -> Option<usize> {
    fiber::current().and_then(worker_of).map(WorkerShared::readiness_set)
}

/// The signal mask of the worker that runs fiber `f` (None if it runs on none).
pub fn worker_base_sigmask(f: &Fiber) -> Option<u64> {
    worker_of(f).map(|w| w.base_sigmask.load(Ordering::Relaxed))
}

/// Notes that a program signal was deferred (and is blocked) on kernel thread `tid`;
/// if that is a worker, its next safe point unblocks it. Async-signal-safe.
pub fn note_deferred_signal(tid: u32, bit: u64) {
    let Some(rt) = try_runtime() else { return };
    if let Some(w) = rt.workers().iter().find(|w| w.tid.load(Ordering::Relaxed) == tid) {
        w.deferred.fetch_or(bit, Ordering::Relaxed);
    }
}
