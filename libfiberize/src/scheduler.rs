//! The worker pool: one OS thread per usable CPU, each running fibers to their next
//! switch, with work stealing.
//!
//! # Queues
//!
//! ```text
//!                 +-----------+    +-----------+
//!   plain threads | injector  |    | hand-off  |  donors (TLS-free, intrusive)
//!   timers ------>| (global)  |    |  list     |<---------------------------
//!                 +-----+-----+    +-----+-----+
//!                       |  steal_batch   | drain
//!        +--------------v----------------v--------------+
//!        | worker i:  lifo slot  |  local FIFO deque     | <- fibers woken by fibers
//!        +-----------------------+-----------------------+    running on worker i
//!              ^ steal (swap)          ^ steal (Stealer)
//!              +------ other workers --+
//! ```
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
//! * `sched_yield` re-queues at the back of the local FIFO deque: round robin.
//! * Fibers woken by plain OS threads or timers go to the global injector; donors use
//!   the allocation-free hand-off list (see [`push_from_donor`]).
//!
//! # Sleep / wake protocol (no lost wake-ups)
//!
//! An idle worker first spins for a while (`SPIN_ROUNDS`), then announces itself
//! (timers are per worker, `crate::timer`: it sleeps at most until its own next one):
//! `sleep_word = SLEEPING; num_sleeping += 1` (SeqCst), re-checks every queue, and only
//! then sleeps: in the reactor's `epoll_wait` (so that I/O readiness wakes it
//! directly, see crate::io::reactor), or on a futex on `sleep_word` where there is no
//! reactor. A producer publishes its fiber, issues a SeqCst fence and reads
//! `num_sleeping`; if somebody sleeps and nobody spins, it moves one `sleep_word`
//! SLEEPING→NOTIFIED and wakes it (eventfd write or futex wake; the eventfd wakes some
//! epoll sleeper, which need not be the one marked). The two SeqCst sequences form a
//! Dekker pair: either the sleeper's re-check sees the fiber, or the producer sees the
//! sleeper. Placing a fiber in a lifo slot does not notify (the waker's worker will
//! run it next); the monitor thread, which ticks every millisecond, wakes a sleeper
//! if work waits anywhere, so a busy waker cannot strand its wakee.
//!
//! # Direct waits: a fiber alone on its worker waits like a thread
//!
//! When a fiber must wait for one descriptor and its worker has nothing else to run,
//! parking it would make the worker sleep in the shared `epoll_wait`, and the reply
//! would wake *some* idle worker — on this 2-vCPU VM usually one whose CPU is idle, so
//! every reply costs an inter-processor interrupt and a vCPU wake-up (measured: MariaDB
//! point selects at 2 connections, preloaded server and client, 18.5k interrupts/s and
//! 31k transactions/s against 1.6k/s and 90k natively). Instead [`direct_wait`] blocks
//! the worker in `ppoll` on that descriptor and on the worker's own eventfd, exactly
//! as the program's thread would block natively, so the kernel wakes this thread on
//! the waker's CPU as it does for native threads. The descriptor first leaves the
//! reactor's epoll set (else its edges would also wake idle epoll sleepers), unless
//! another fiber waits on it through the reactor (`FdState::epoll_waiters`).
//!
//! ```text
//!   fiber F on worker W: recv -> EAGAIN -> wait(fd)
//!       W's lifo slot and local deque empty, no global work
//!       fd out of the epoll set (EPOLL_CTL_DEL once, if it was in)
//!       W announces itself SLEEPING (direct), re-checks all queues   <- Dekker, as idle()
//!       F.direct_wake_fd = W.wake_fd, re-checks F.park_state         <- Dekker with unpark
//!       ppoll([fd, W.wake_fd], next timer deadline)
//!          fd ready        -> F continues, no switch at all
//!          wake_fd / timer / signal -> F parks the ordinary way (W runs the new work)
//! ```
//!
//! A direct waiter counts as sleeping: `wake_one_sleeper` prefers ordinary sleepers
//! and writes the eventfd of a direct one; `unpark` (cancellation, pthread_kill, a
//! stale wake) writes the eventfd named in the fiber; the monitor does not mistake a
//! direct waiter for a blocked worker.
//!
//! # Blocked workers and spares (docs/DESIGN.md §2.11)
//!
//! A fiber may block its worker in a call we do not intercept. The monitor watches
//! every active worker's `progress` counter (bumped at each fiber switch); a worker
//! that is running a fiber and made no progress for `STUCK_TICKS` ticks, and whose
//! kernel thread sleeps (`/proc/self/task/TID/stat` state S or D, so a CPU-bound
//! fiber is not mistaken for a blocked one) and also used less than a quarter of the
//! CPU since the previous look (`schedstat`, so that a short kernel wait inside glibc
//! or a page fault is not mistaken either: `BLOCKED_CPU_SHARE`), is marked BLOCKED and a spare worker is
//! activated (or started) so that the number of active workers stays at the target.
//! The spare steals the blocked worker's queued fibers like any idle worker. When the
//! blocked call returns and the fiber switches out, the old worker sees BLOCKED and
//! either becomes active again (if the pool is short) or retires: it moves what its
//! queues hold to the injector and sleeps as a spare.
//!
//! | `WorkerShared::state` | meaning                                               |
//! |-----------------------|-------------------------------------------------------|
//! | ACTIVE                | counts toward the target; runs, spins or sleeps       |
//! | BLOCKED               | stuck in a foreign call; replaced, not counted        |
//! | SPARE                 | retired; sleeps on `spare_word` until activated       |

use core::cell::UnsafeCell;
use core::ptr;
use core::sync::atomic::{fence, AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_deque::{Injector, Steal, Stealer, Worker as Deque};

use crate::fiber::{self, Fiber, FiberRef, Life, Switch, DONOR_FINISH, DONOR_RUN, PARK_NOTIFIED, PARK_PARKED, PARK_RUNNING};
use crate::io::reactor;
use crate::rawlock::RawOnce;
use crate::stats::{bump, STATS};
use crate::{sys, timer};

/// Idle rounds before a worker sleeps (`FIBERIZE_SPIN` overrides): the first quarter
/// a few hundred ns of `pause` each, the rest `sched_yield`s, a non-blocking epoll poll
/// every fourth round. Origin: measured on the 2-vCPU machine with MariaDB point
/// selects at 2 connections (warm servers, transactions/s, native server ~96–104k),
/// after idle workers began to sleep in epoll_wait: preloaded server 8 rounds 70–95k,
/// 16: 92–103k, 32: 50–97k, 256: 62–91k; preloaded sysbench client against a native
/// server (native client ~105k): 0 rounds 39k, 8: 87k, 16: 80–88k, 32: 75k, 256: 45k.
/// A long spin takes the CPU from the process that is about to answer (the other end
/// of the connection, on the same small machine); no spin pays a sleeping worker's
/// wake-up for every reply.
pub const SPIN_ROUNDS: u32 = 16;
/// Every this many dequeues a worker looks at the global queues first, so that a busy
/// local deque cannot starve the injector (the constant Go uses).
const GLOBAL_CHECK_INTERVAL: u32 = 61;
/// Monitor period.
const MONITOR_TICK_NS: u64 = 1_000_000;

const AWAKE: u32 = 0;
const SLEEPING: u32 = 1;
const NOTIFIED: u32 = 2;

const W_ACTIVE: u32 = 1;
const W_BLOCKED: u32 = 2;
const W_SPARE: u32 = 3;
/// Monitor ticks without progress before a sleeping worker counts as blocked.
/// Origin: two ticks (2–3 ms) is far longer than any switch-free stretch of a fiber
/// that only calls intercepted functions, and short enough that a blocked worker
/// costs the others little latency (Go's sysmon retakes a P after 20 µs–10 ms).
const STUCK_TICKS: u32 = 2;
/// Longest gap between two looks at a running (not sleeping) worker's kernel state, in
/// ticks: a fiber that computes and then blocks is noticed within this plus STUCK_TICKS.
const MAX_RECHECK_TICKS: u32 = 16;
/// Extra worker slots available as spares beyond the target.
const MAX_SPARES: usize = 256;

/// A value alone on its cache line(s): a field that its owner writes on every switch
/// must not share a line with fields that idle workers read while they look for work
/// (`has_work` walks every worker), or each look costs the busy owner a miss. Origin:
/// 128 bytes covers the adjacent-line prefetcher of x86_64 server parts.
#[repr(align(128))]
pub struct Padded<T>(pub T);

impl<T> core::ops::Deref for Padded<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}

/// One worker's shared state. Owner-hot fields (`lifo`, `running`, `progress`, the timer
/// heap) sit on lines of their own; the rest is read by others and rarely written.
#[repr(align(128))]
pub struct WorkerShared {
    pub index: usize,
    /// The worker's own local deque. Only the worker's OS thread touches it: the worker
    /// loop, or a fiber running on it (while the loop is suspended inside `resume`).
    local: UnsafeCell<Deque<FiberRef>>,
    stealer: Stealer<FiberRef>,
    /// Stealable single-fiber slot holding an `Arc<Fiber>` from `Arc::into_raw`.
    lifo: Padded<AtomicPtr<Fiber>>,
    sleep_word: AtomicU32,
    tp: AtomicUsize,
    pub tid: AtomicU32,
    /// Id of the fiber running now (0: none), for the dump and the monitor.
    pub running: Padded<AtomicU64>,
    /// Bumped at every fiber switch; the monitor's sign of life.
    pub progress: Padded<AtomicU64>,
    /// ACTIVE, BLOCKED or SPARE (see the module docs).
    pub state: AtomicU32,
    /// A SPARE worker sleeps on this word until the monitor activates it.
    spare_word: AtomicU32,
    /// This worker sleeps in the reactor's epoll_wait (wake it through the reactor's
    /// eventfd, not the futex).
    polling: AtomicBool,
    /// The worker is blocked in a direct wait for its fiber's descriptor (see the
    /// module docs): wake it through `wake_fd`.
    direct: AtomicBool,
    /// The worker's own eventfd for ending a direct wait (-1: none, no direct waits).
    wake_fd: AtomicI32,
    /// The worker's own signal mask (kernel set), restored after fibers with their own.
    base_sigmask: AtomicU64,
    /// Program signals deferred on this kernel thread (blocked here until the worker's
    /// next safe point; see `crate::handlers`).
    deferred: AtomicU64,
    /// Timers armed by fibers that parked on this worker (see `crate::timer`).
    timers: Padded<timer::TimerHeap>,
    /// The monitor asks the kick handler to preempt the run whose `progress` value
    /// this is (0: no request; see `crate::preempt`).
    pub preempt_request: AtomicU64,
}

// SAFETY: `local` is only used from the owning OS thread (see the field's comment);
// everything else is atomic or immutable.
unsafe impl Sync for WorkerShared {}
unsafe impl Send for WorkerShared {}

pub struct Runtime {
    /// All worker slots; `[0, started)` have a thread.
    workers: Box<[WorkerShared]>,
    started: AtomicUsize,
    /// Wanted number of ACTIVE workers, and how many are ACTIVE now.
    pub target: usize,
    active: AtomicUsize,
    injector: Injector<FiberRef>,
    handoff_head: AtomicPtr<Fiber>,
    num_sleeping: AtomicUsize,
    num_spinning: AtomicUsize,
    /// The monitor sleeps on this word between ticks. It stays 0: nothing wakes the
    /// monitor early since the dump moved to its own thread (crate::dump).
    monitor_word: AtomicU32,
    /// Signal mask of the thread that started the pool; workers adopt it, so fibers
    /// see the mask a native thread created at that point would have inherited.
    initial_sigmask: libc::sigset_t,
}

static RUNTIME: AtomicPtr<Runtime> = AtomicPtr::new(ptr::null_mut());
static START: RawOnce = RawOnce::new();

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

/// The runtime, starting the worker pool on first use.
pub fn runtime() -> &'static Runtime {
    if let Some(rt) = try_runtime() {
        return rt;
    }
    START.call_once(start_pool);
    try_runtime().unwrap_or_else(|| crate::fatal(&["runtime failed to start"]))
}

crate::real_fns! {
    fn pthread_create(t: *mut libc::pthread_t, a: *const libc::pthread_attr_t,
        f: extern "C" fn(*mut libc::c_void) -> *mut libc::c_void, arg: *mut libc::c_void) -> libc::c_int;
    fn pthread_detach(t: libc::pthread_t) -> libc::c_int;
    fn pthread_sigmask(how: libc::c_int, set: *const libc::sigset_t, old: *mut libc::sigset_t) -> libc::c_int;
}

fn start_pool() {
    sys::detect_fsbase_method();
    let cfg = crate::config::config();
    let n = cfg.workers;
    // SAFETY: querying the mask into a valid out-parameter.
    let initial_sigmask = unsafe {
        let mut m: libc::sigset_t = core::mem::zeroed();
        pthread_sigmask(libc::SIG_SETMASK, ptr::null(), &mut m);
        m
    };
    let slots = n + MAX_SPARES;
    let mut workers = Vec::with_capacity(slots);
    for index in 0..slots {
        let local = Deque::new_fifo();
        let stealer = local.stealer();
        workers.push(WorkerShared {
            index,
            local: UnsafeCell::new(local),
            stealer,
            lifo: Padded(AtomicPtr::new(ptr::null_mut())),
            sleep_word: AtomicU32::new(AWAKE),
            tp: AtomicUsize::new(0),
            tid: AtomicU32::new(0),
            running: Padded(AtomicU64::new(0)),
            progress: Padded(AtomicU64::new(0)),
            state: AtomicU32::new(W_ACTIVE),
            spare_word: AtomicU32::new(0),
            polling: AtomicBool::new(false),
            direct: AtomicBool::new(false),
            wake_fd: AtomicI32::new(-1),
            base_sigmask: AtomicU64::new(0),
            deferred: AtomicU64::new(0),
            timers: Padded(timer::TimerHeap::new()),
            preempt_request: AtomicU64::new(0),
        });
    }
    let rt = Box::leak(Box::new(Runtime {
        workers: workers.into_boxed_slice(),
        started: AtomicUsize::new(n),
        target: n,
        active: AtomicUsize::new(n),
        injector: Injector::new(),
        handoff_head: AtomicPtr::new(ptr::null_mut()),
        num_sleeping: AtomicUsize::new(0),
        num_spinning: AtomicUsize::new(0),
        monitor_word: AtomicU32::new(0),
        initial_sigmask,
    }));
    crate::io::reactor::init();
    crate::preempt::init();
    RUNTIME.store(rt, Ordering::Release);
    for i in 0..n {
        spawn_runtime_thread(worker_main, &rt.workers[i] as *const WorkerShared as *mut libc::c_void);
    }
    spawn_runtime_thread(monitor_main, ptr::null_mut());
    crate::lifecycle::after_pool_started();
}

/// Starts one of the runtime's own OS threads with the real `pthread_create`, with all
/// asynchronous signals blocked: signals belong to the program's threads.
pub(crate) fn spawn_runtime_thread(f: extern "C" fn(*mut libc::c_void) -> *mut libc::c_void, arg: *mut libc::c_void) {
    // SAFETY: plain libc calls with valid out-parameters; the new thread receives `arg`,
    // which points into the leaked runtime.
    unsafe {
        let mut all: libc::sigset_t = core::mem::zeroed();
        let mut old: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let mut t: libc::pthread_t = 0;
        let r = pthread_create(&mut t, ptr::null(), f, arg);
        pthread_sigmask(libc::SIG_SETMASK, &old, ptr::null_mut());
        if r != 0 {
            crate::fatal(&["cannot create a worker thread"]);
        }
        pthread_detach(t);
    }
}

impl Runtime {
    /// The worker slots that have a thread.
    pub fn workers(&self) -> &[WorkerShared] {
        &self.workers[..self.started.load(Ordering::Acquire).min(self.workers.len())]
    }

    /// Whether work waits that worker `me` (None: the monitor) could take: queued
    /// fibers anywhere, or `me`'s own due timers (another worker's timers are fired by
    /// their owner or the monitor; counting them made idle workers spin on work they
    /// cannot take).
    pub(crate) fn has_work(&self, me: Option<&WorkerShared>) -> bool {
        if !self.injector.is_empty() || !self.handoff_head.load(Ordering::SeqCst).is_null() {
            return true;
        }
        if me.is_some_and(|w| w.timers.next_deadline() <= sys::now_ns()) {
            return true;
        }
        self.workers().iter().any(|w| {
            !w.stealer.is_empty() || (w.state.load(Ordering::Relaxed) != W_ACTIVE && !w.lifo.load(Ordering::SeqCst).is_null())
        })
    }

    /// Forgets every worker's timers in a forked child.
    ///
    /// # Safety
    /// Only from the atfork child hook (one thread, nothing else running).
    pub unsafe fn reset_timers_in_forked_child(&self) {
        for w in self.workers() {
            // SAFETY: forwarded contract.
            unsafe { w.timers.reset_in_forked_child() };
        }
    }

    /// Timers armed on all workers (for the dump).
    pub fn pending_timers(&self) -> usize {
        self.workers().iter().map(|w| w.timers.pending()).sum()
    }

    /// Wakes one sleeping worker if any sleeps and none is already looking for work.
    /// TLS-free: donors call it after handing their fiber over.
    #[inline]
    fn notify(&self) {
        fence(Ordering::SeqCst);
        if self.num_sleeping.load(Ordering::SeqCst) == 0 || self.num_spinning.load(Ordering::SeqCst) > 0 {
            return;
        }
        self.wake_one_sleeper();
    }

    #[cold]
    fn wake_one_sleeper(&self) {
        let mut someone_polls = false;
        // Ordinary sleepers first: a direct waiter woken for other work gives up a wait
        // that costs nothing to keep (its fiber then parks the ordinary way).
        for direct_pass in [false, true] {
            for w in self.workers().iter() {
                if w.direct.load(Ordering::SeqCst) != direct_pass {
                    continue;
                }
                if w.sleep_word.compare_exchange(SLEEPING, NOTIFIED, Ordering::SeqCst, Ordering::Relaxed).is_ok() {
                    if w.direct.load(Ordering::SeqCst) {
                        sys::eventfd_signal(w.wake_fd.load(Ordering::Relaxed));
                    } else if w.polling.load(Ordering::SeqCst) {
                        reactor::wake_poller();
                    } else {
                        sys::futex_wake(&w.sleep_word, 1);
                    }
                    return;
                }
                someone_polls |= w.polling.load(Ordering::SeqCst);
            }
        }
        // The eventfd wakes *some* epoll sleeper, not necessarily the one it was
        // written for: a worker can stay asleep marked NOTIFIED while another drained
        // its wake-up. Nobody is SLEEPING but someone sleeps in epoll: wake it.
        if someone_polls {
            reactor::wake_poller();
        }
    }

    /// Pushes onto the donor hand-off list (Treiber stack of `Arc::into_raw` pointers).
    fn push_handoff(&self, f: *const Fiber) {
        let f = f as *mut Fiber;
        let mut head = self.handoff_head.load(Ordering::Relaxed);
        loop {
            // SAFETY: `f` is a live fiber owned by this list until drained.
            unsafe { (*f).handoff_next.store(head, Ordering::Relaxed) };
            match self.handoff_head.compare_exchange_weak(head, f, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => break,
                Err(h) => head = h,
            }
        }
    }

    /// Takes the whole hand-off list, pushing all but one fiber to `local`.
    fn drain_handoff(&self, local: &Deque<FiberRef>) -> Option<FiberRef> {
        if self.handoff_head.load(Ordering::Relaxed).is_null() {
            return None;
        }
        let mut p = self.handoff_head.swap(ptr::null_mut(), Ordering::Acquire);
        let mut first = None;
        while !p.is_null() {
            // SAFETY: every pointer on the list came from Arc::into_raw in
            // push_from_donor, and the swap gave us exclusive ownership of the list.
            let f = unsafe { Arc::from_raw(p) };
            p = f.handoff_next.load(Ordering::Relaxed);
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
    let rt = runtime_unchecked();
    rt.push_handoff(Arc::into_raw(f));
    rt.notify();
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

/// Makes a parked (or about-to-park) fiber runnable. Callable from anywhere: fibers,
/// plain threads, timers. See the park protocol in [`crate::fiber`].
pub fn unpark(f: &FiberRef) {
    let mut s = f.park_state.load(Ordering::Acquire);
    loop {
        match s {
            PARK_PARKED => match f.park_state.compare_exchange(PARK_PARKED, PARK_RUNNING, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    bump(&STATS.unparks);
                    f.set_life(Life::Runnable);
                    schedule(f.clone());
                    return;
                }
                Err(x) => s = x,
            },
            PARK_RUNNING => match f.park_state.compare_exchange(PARK_RUNNING, PARK_NOTIFIED, Ordering::SeqCst, Ordering::Acquire)
            {
                Ok(_) => {
                    // A fiber in a direct wait is "running" on a worker blocked in the
                    // kernel: end the wait so that it sees the notification. The fence
                    // pairs with direct_wait's publish-then-check (a Dekker pair, no lost
                    // wake-up; model: loom_protocols.rs).
                    fence(Ordering::SeqCst);
                    let fd = f.direct_wake_fd.load(Ordering::SeqCst);
                    if fd >= 0 {
                        sys::eventfd_signal(fd);
                    }
                    return;
                }
                Err(x) => s = x,
            },
            _ => return, // already NOTIFIED
        }
    }
}

/// Queues a runnable fiber: into the current worker's lifo slot when called by a fiber,
/// else into the injector.
fn schedule(f: FiberRef) {
    // The lifo slot and the local deque are not reentrant: a program signal handler
    // that interrupted this and called sem_post would lose a fiber (crate::handlers).
    let _shield = crate::handlers::Shield::new();
    let rt = runtime_unchecked();
    if let Some(cur) = fiber::current() {
        let w = cur.worker.load(Ordering::Relaxed) as *const WorkerShared;
        if !w.is_null() {
            // SAFETY: `worker` points at the WorkerShared that is running `cur`, i.e.
            // the one whose OS thread we are on; so `local` is ours to use.
            let w = unsafe { &*w };
            let old = w.lifo.swap(Arc::into_raw(f) as *mut Fiber, Ordering::AcqRel);
            if !old.is_null() {
                // SAFETY: slot entries come from Arc::into_raw.
                let old = unsafe { Arc::from_raw(old) };
                // SAFETY: see above: we are on w's OS thread.
                let local = unsafe { &*w.local.get() };
                local.push(old);
                // Tell an idle worker only about a surplus: a single displaced fiber
                // runs here right after the wakee (a signal/wait hand-off pair); waking
                // a thief for it spread producer/consumer pairs over every CPU, each
                // lock then crossing cores (issue 10: prodcons on 4–16 CPUs 3.3x ->
                // 4.4x of native without this notify). Spinning workers still steal
                // it, and the monitor moves it if this worker stops switching.
                if local.len() > 1 {
                    rt.notify();
                }
            }
            return;
        }
    }
    if let Some(w) = worker_context() {
        // Scheduler context of a worker (timers, reactor dispatch): queue locally; the
        // worker looks for work right after. Others are told only about a surplus.
        // SAFETY: WORKER is set only on w's own OS thread, in scheduler context.
        let local = unsafe { &*w.local.get() };
        let surplus = !local.is_empty();
        local.push(f);
        if surplus {
            rt.notify();
        }
        return;
    }
    rt.injector.push(f);
    rt.notify();
}

thread_local! {
    /// The worker whose scheduler loop runs on this OS thread. Read only in scheduler
    /// context, where FS is the worker's own (in fiber context FS is the donor's and
    /// this reads the donor's copy, which is null).
    static WORKER: core::cell::Cell<*const WorkerShared> = const { core::cell::Cell::new(ptr::null()) };
}

#[inline]
fn worker_context() -> Option<&'static WorkerShared> {
    let w = WORKER.with(|c| c.get());
    // SAFETY: set by worker_main to its leaked WorkerShared.
    if w.is_null() {
        None
    } else {
        Some(unsafe { &*w })
    }
}

/// `sched_yield` for a fiber: back of the local queue.
pub fn yield_now() {
    if let Some(f) = fiber::current() {
        bump(&STATS.yields);
        // SAFETY: we are this fiber.
        unsafe { f.suspend(Switch::Yield) };
    }
}

/// How a [`direct_wait`] ended.
pub enum DirectWait {
    /// The descriptor is ready: these are its `revents`.
    Ready(i16),
    /// The caller's deadline passed.
    TimedOut,
    /// No direct wait happened, or it ended for another reason (work for the worker,
    /// a timer, an unpark, a signal): wait the ordinary way.
    Other,
}

/// Waits for `events` on `fd` directly in the kernel when the calling fiber is alone on
/// its worker (see the module docs). `leave_epoll` takes the descriptor out of the
/// reactor's epoll set and says whether it is out. `deadline` is CLOCK_MONOTONIC ns.
pub fn direct_wait(fd: i32, events: i16, deadline: Option<u64>, leave_epoll: impl FnOnce() -> bool) -> DirectWait {
    if !crate::config::config().direct_wait {
        return DirectWait::Other;
    }
    let Some(f) = fiber::current() else { return DirectWait::Other };
    let w = f.worker.load(Ordering::Relaxed) as *const WorkerShared;
    if w.is_null() {
        return DirectWait::Other;
    }
    // SAFETY: `worker` points at the WorkerShared running `f`, i.e. the one whose OS
    // thread we are on, so `local` is ours to read.
    let w = unsafe { &*w };
    let wake_fd = w.wake_fd.load(Ordering::Acquire);
    // SAFETY: as above.
    let local_empty = unsafe { (*w.local.get()).is_empty() };
    let rt = runtime_unchecked();
    if wake_fd < 0 || !local_empty || !w.lifo.load(Ordering::Relaxed).is_null() || rt.has_work(Some(w)) {
        return DirectWait::Other;
    }
    // Spin first, as an idle worker would, watching this fd instead of the epoll set.
    let mut revents = 0;
    let became_ready = || {
        let mut p = [libc::pollfd { fd, events, revents: 0 }];
        sys::ppoll_until(&mut p, 0);
        revents = p[0].revents;
        revents != 0
    };
    if spin_for_work(rt, w, became_ready) {
        return if revents != 0 { DirectWait::Ready(revents) } else { DirectWait::Other };
    }
    if !leave_epoll() {
        return DirectWait::Other;
    }

    // Announce as an idle worker does (`idle`), then publish where unpark must write.
    w.direct.store(true, Ordering::SeqCst);
    w.sleep_word.store(SLEEPING, Ordering::SeqCst);
    rt.num_sleeping.fetch_add(1, Ordering::SeqCst);
    f.direct_wake_fd.store(wake_fd, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    let mut outcome = DirectWait::Other;
    let watched = reactor::start_watching();
    let mut fds = [
        libc::pollfd { fd, events, revents: 0 },
        libc::pollfd { fd: wake_fd, events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: watched.unwrap_or(-1), events: libc::POLLIN, revents: 0 },
    ];
    if !rt.has_work(Some(w)) && f.park_state.load(Ordering::SeqCst) != PARK_NOTIFIED {
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
        reactor::stop_watching();
    }
    f.direct_wake_fd.store(-1, Ordering::SeqCst);
    let notified = w.sleep_word.swap(AWAKE, Ordering::SeqCst) == NOTIFIED;
    if notified {
        bump(&STATS.worker_wakeups);
    }
    rt.num_sleeping.fetch_sub(1, Ordering::SeqCst);
    w.direct.store(false, Ordering::SeqCst);
    // A wake-up written for us (now or by a notifier that raced with the end of the
    // wait) must not end the next direct wait at once; one written after this read
    // costs that next wait one ordinary park, nothing worse.
    if notified || fds[1].revents != 0 {
        sys::eventfd_drain(wake_fd);
    }
    outcome
}

/// Parks the calling fiber until [`unpark`] (or a stale notification) wakes it, or until
/// the CLOCK_MONOTONIC `deadline` passes. May return spuriously: callers re-check
/// their condition in a loop.
pub fn park_current(f: &Fiber, deadline: Option<u64>) {
    if f.park_state.compare_exchange(PARK_NOTIFIED, PARK_RUNNING, Ordering::AcqRel, Ordering::Acquire).is_ok() {
        // A wake-up already arrived. It may have come from pthread_kill, whose signal
        // is delivered on the way out of a switch; there is none here, so deliver it
        // now (the caller may park again at once, e.g. in a mutex wait).
        if f.pending_signals.load(Ordering::Acquire) != 0 {
            crate::signal::deliver_pending(f);
        }
        return;
    }
    if let Some(d) = deadline {
        let gen = f.park_gen.fetch_add(1, Ordering::Relaxed) + 1;
        // SAFETY: `f` is the current fiber, kept alive by its donor; the timer holds
        // its own strong reference.
        let me = unsafe { arc_from_ref(f) };
        let w = f.worker.load(Ordering::Relaxed) as *const WorkerShared;
        if w.is_null() {
            crate::fatal(&["a fiber parked with a deadline outside a worker"]);
        }
        // SAFETY: `worker` points into the leaked runtime's worker array.
        unsafe { (*w).timers.add(d, me, gen) };
    }
    bump(&STATS.parks);
    // SAFETY: we are this fiber, on its stack.
    unsafe { f.suspend(Switch::Park) };
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

// ---------------------------------------------------------------------------------
// Worker loop
// ---------------------------------------------------------------------------------

extern "C" fn worker_main(arg: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: `arg` points into the leaked runtime's worker array (spawn_runtime_thread).
    let w: &'static WorkerShared = unsafe { &*(arg as *const WorkerShared) };
    let rt = runtime_unchecked();
    w.tp.store(sys::thread_pointer(), Ordering::Relaxed);
    w.tid.store(sys::gettid() as u32, Ordering::Relaxed);
    if crate::config::config().direct_wait {
        w.wake_fd.store(sys::eventfd_new(), Ordering::Release);
    }
    WORKER.with(|c| c.set(w));
    // Workers run program code, so they take the program's signals (a handler then runs
    // with the interrupted fiber's TLS, as it would on that thread natively), under the
    // mask the program's threads would have inherited.
    // SAFETY: a valid sigset pointer into the leaked runtime.
    unsafe { pthread_sigmask(libc::SIG_SETMASK, &rt.initial_sigmask, ptr::null_mut()) };
    let base = sys::sigmask_get() & !crate::signal::KICK_BIT;
    sys::sigmask_set(base);
    w.base_sigmask.store(base, Ordering::Relaxed);
    // Scheduler context is shielded from program signal handlers except at the safe
    // point at the top of the loop (crate::handlers).
    crate::handlers::set_depth(1);
    let mut tick: u32 = 0;
    loop {
        crate::handlers::worker_safe_point(&w.deferred, base);
        tick = tick.wrapping_add(1);
        w.timers.fire_due();
        match find_work(rt, w, tick) {
            Some(f) => {
                run_fiber(w, f);
                if w.state.load(Ordering::Acquire) != W_ACTIVE {
                    rejoin_or_retire(rt, w);
                }
            }
            None => idle(rt, w),
        }
    }
}

/// After a blocked call returned: become ACTIVE again if the pool is short, else retire
/// as a spare until the monitor needs us.
#[cold]
fn rejoin_or_retire(rt: &Runtime, w: &WorkerShared) {
    if w.state.compare_exchange(W_BLOCKED, W_ACTIVE, Ordering::AcqRel, Ordering::Acquire).is_err() {
        return;
    }
    if rt.active.fetch_add(1, Ordering::AcqRel) < rt.target {
        return; // the pool was short: keep working
    }
    rt.active.fetch_sub(1, Ordering::AcqRel);
    // Retire: hand everything queued here to the others.
    // SAFETY: we are w's OS thread.
    let local = unsafe { &*w.local.get() };
    while let Some(f) = local.pop() {
        rt.injector.push(f);
    }
    let p = w.lifo.swap(ptr::null_mut(), Ordering::AcqRel);
    if !p.is_null() {
        // SAFETY: slot entries come from Arc::into_raw.
        rt.injector.push(unsafe { Arc::from_raw(p) });
    }
    w.spare_word.store(0, Ordering::Release);
    w.state.store(W_SPARE, Ordering::Release);
    rt.notify();
    bump(&STATS.workers_retired);
    while w.state.load(Ordering::Acquire) == W_SPARE {
        sys::futex_wait(&w.spare_word, 0, None);
        crate::handlers::worker_safe_point(&w.deferred, w.base_sigmask.load(Ordering::Relaxed));
    }
}

fn find_work(rt: &Runtime, w: &WorkerShared, tick: u32) -> Option<FiberRef> {
    // SAFETY: we are w's OS thread.
    let local = unsafe { &*w.local.get() };
    if tick.is_multiple_of(GLOBAL_CHECK_INTERVAL) {
        reactor::poll_if_stale(reactor::STALE_NS);
        if let Some(f) = steal_global(rt, local) {
            return Some(f);
        }
    }
    let p = w.lifo.swap(ptr::null_mut(), Ordering::AcqRel);
    if !p.is_null() {
        // SAFETY: slot entries come from Arc::into_raw.
        return Some(unsafe { Arc::from_raw(p) });
    }
    if let Some(f) = local.pop() {
        return Some(f);
    }
    if let Some(f) = steal_global(rt, local) {
        return Some(f);
    }
    steal_from_others(rt, w, local)
}

fn steal_global(rt: &Runtime, local: &Deque<FiberRef>) -> Option<FiberRef> {
    if let Some(f) = rt.drain_handoff(local) {
        return Some(f);
    }
    loop {
        match rt.injector.steal_batch_and_pop(local) {
            Steal::Success(f) => return Some(f),
            Steal::Empty => return None,
            Steal::Retry => continue,
        }
    }
}

fn steal_from_others(rt: &Runtime, w: &WorkerShared, local: &Deque<FiberRef>) -> Option<FiberRef> {
    let all = rt.workers();
    let n = all.len();
    for k in 1..n {
        let victim = &all[(w.index + k) % n];
        loop {
            match victim.stealer.steal_batch_and_pop(local) {
                Steal::Success(f) => {
                    bump(&STATS.steals);
                    return Some(f);
                }
                Steal::Empty => break,
                Steal::Retry => continue,
            }
        }
        // The lifo slot of a busy worker is left alone: its owner runs it as soon as
        // the waker switches out (stealing it would split a ping-pong pair across
        // cores). A blocked worker's slot is fair game; a slot whose owner made no
        // progress for a tick is moved to the injector by the monitor.
        if victim.state.load(Ordering::Relaxed) != W_ACTIVE && !victim.lifo.load(Ordering::Relaxed).is_null() {
            let p = victim.lifo.swap(ptr::null_mut(), Ordering::AcqRel);
            if !p.is_null() {
                bump(&STATS.steals);
                // SAFETY: slot entries come from Arc::into_raw.
                return Some(unsafe { Arc::from_raw(p) });
            }
        }
    }
    None
}

/// Runs `f` until its next switch and acts on the reason.
fn run_fiber(w: &WorkerShared, f: FiberRef) {
    f.worker.store(w as *const WorkerShared as usize, Ordering::Relaxed);
    f.set_life(Life::Running);
    w.running.store(f.id, Ordering::Relaxed);
    w.progress.fetch_add(1, Ordering::Relaxed);
    let fiber_tp = f.tp.load(Ordering::Acquire);
    let own_tp = w.tp.load(Ordering::Relaxed);
    // SAFETY: we dequeued `f`, so we are its only runner (park protocol / queues hand
    // out each fiber once). Between the two FS writes no code touches TLS: resume()
    // is corosensei's register switch, which uses none.
    // Per-fiber signal masks (see `crate::signal`): install the fiber's before the
    // switch, and put the worker's own back afterwards if the fiber has (or, during
    // this run, acquired) a mask of its own.
    //
    // The masks change while FS is the fiber's: a program signal that the new mask
    // lets through at once then finds the fiber's shield (it is suspended inside
    // one) and is deferred to the fiber, which takes it when it leaves the shield
    // right after the switch — not to the worker's scheduler context, where it
    // would be deferred again at every such switch (crate::handlers).
    //
    // Every fiber has a mask (its creator's, from `thread::create`); only one that
    // differs from the worker's costs the two system calls.
    let base = w.base_sigmask.load(Ordering::Relaxed);
    let own_mask = |f: &Fiber| {
        f.has_sigmask
            .load(Ordering::Acquire)
            .then(|| f.sigmask.load(Ordering::Relaxed) & !crate::signal::KICK_BIT)
            .filter(|&m| m != base)
    };
    let result = unsafe {
        let co = f.coroutine_mut();
        sys::set_thread_pointer(fiber_tp);
        if let Some(m) = own_mask(&f) {
            sys::sigmask_set(m);
        }
        let r = co.resume(());
        if own_mask(&f).is_some() {
            sys::sigmask_set(base);
        }
        sys::set_thread_pointer(own_tp);
        r
    };
    w.running.store(0, Ordering::Relaxed);
    w.progress.fetch_add(1, Ordering::Relaxed);
    bump(&STATS.switches);
    // SAFETY: we are w's OS thread.
    let local = unsafe { &*w.local.get() };
    match result {
        corosensei::CoroutineResult::Yield(Switch::Yield) => {
            f.set_life(Life::Runnable);
            local.push(f);
        }
        corosensei::CoroutineResult::Yield(Switch::Park) => {
            f.set_life(Life::Parked);
            if f.park_state.compare_exchange(PARK_RUNNING, PARK_PARKED, Ordering::AcqRel, Ordering::Acquire).is_err() {
                // NOTIFIED while it was still switching out: run it again.
                f.park_state.store(PARK_RUNNING, Ordering::Release);
                f.set_life(Life::Runnable);
                local.push(f);
            }
        }
        corosensei::CoroutineResult::Yield(Switch::RunOnDonor) => {
            f.set_life(Life::OnDonor);
            f.worker.store(0, Ordering::Relaxed);
            if crate::config::in_forked_child() {
                // The fiber forked and is the child's thread now (thread.rs, "Fork").
                crate::thread::resume_donor_in_forked_child(&f);
            }
            f.donor_word.store(DONOR_RUN, Ordering::Release);
            sys::futex_wake(&f.donor_word, 1);
        }
        corosensei::CoroutineResult::Yield(Switch::Preempt) => {
            // Suspended inside the kick handler (crate::preempt), whose mask this thread
            // still has; to the back of the global queue, behind the fibers that waited.
            sys::sigmask_set(base);
            f.set_life(Life::Runnable);
            let rt = runtime_unchecked();
            rt.injector.push(f);
            rt.notify();
        }
        corosensei::CoroutineResult::Yield(Switch::BackToPool) => {
            crate::fatal(&["fiber asked to return to the pool while on a worker"]);
        }
        corosensei::CoroutineResult::Return(v) => {
            f.set_life(Life::Finished);
            crate::thread::fiber_ended(&f);
            f.worker.store(0, Ordering::Relaxed);
            f.retval.store(v, Ordering::Relaxed);
            f.donor_word.store(DONOR_FINISH, Ordering::Release);
            sys::futex_wake(&f.donor_word, 1);
        }
    }
}

/// Spins before sleeping, while some other worker is busy running fibers: only it can
/// hand us work within a spin's time. With everyone idle, work comes from the kernel
/// (I/O, timers, other processes), and spinning would only take the CPU away from the
/// process that is about to answer us (Go's rule for spinning Ms is similar). Every
/// round looks at the queues, every fourth calls `probe` (readiness is work too: a
/// reply that arrives while we spin must not wait for the spin to end). Returns
/// whether work or readiness turned up.
fn spin_for_work(rt: &Runtime, w: &WorkerShared, mut probe: impl FnMut() -> bool) -> bool {
    let others_idle = rt.num_sleeping.load(Ordering::SeqCst) + rt.num_spinning.load(Ordering::SeqCst);
    let spin = crate::config::config().spin_rounds;
    let rounds = if others_idle + 1 < rt.active.load(Ordering::Relaxed) { spin } else { 0 };
    rt.num_spinning.fetch_add(1, Ordering::SeqCst);
    let mut found = false;
    for round in 0..rounds {
        if rt.has_work(Some(w)) || (round % 4 == 0 && probe()) {
            found = true;
            break;
        }
        if round < spin / 4 {
            for _ in 0..64 {
                sys::cpu_relax();
            }
        } else {
            // Later rounds give the CPU to any other runnable thread (another process
            // on this machine, e.g. the client of a server we run): a spinning worker
            // must not starve the work it is waiting for.
            sys::sched_yield_raw();
        }
    }
    rt.num_spinning.fetch_sub(1, Ordering::SeqCst);
    found
}

fn idle(rt: &Runtime, w: &WorkerShared) {
    let polled_something = || {
        if !reactor::try_acquire_poller() {
            return false;
        }
        let n = reactor::poll(Some(0));
        reactor::release_poller();
        n > 0
    };
    if spin_for_work(rt, w, polled_something) {
        return;
    }

    w.sleep_word.store(SLEEPING, Ordering::SeqCst);
    rt.num_sleeping.fetch_add(1, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    if !rt.has_work(Some(w)) {
        bump(&STATS.worker_sleeps);
        let d = w.timers.next_deadline();
        let deadline = if d == u64::MAX { None } else { Some(d) };
        if reactor::available() {
            // Sleep in epoll_wait (any number of idle workers do, see crate::io::reactor).
            // `polling` is published before the re-check of `sleep_word`, and a
            // notifier CASes `sleep_word` before it reads `polling` (all SeqCst): it
            // either sees us polling and writes the eventfd, or we see its NOTIFIED
            // and do not wait.
            w.polling.store(true, Ordering::SeqCst);
            if w.sleep_word.load(Ordering::SeqCst) == SLEEPING {
                reactor::sleep_in_epoll(deadline);
            }
            w.polling.store(false, Ordering::SeqCst);
        } else {
            sys::futex_wait(&w.sleep_word, SLEEPING, deadline);
        }
    }
    if w.sleep_word.swap(AWAKE, Ordering::SeqCst) == NOTIFIED {
        bump(&STATS.worker_wakeups);
    }
    rt.num_sleeping.fetch_sub(1, Ordering::SeqCst);
}

// ---------------------------------------------------------------------------------
// Monitor
// ---------------------------------------------------------------------------------

extern "C" fn monitor_main(_: *mut libc::c_void) -> *mut libc::c_void {
    let rt = runtime_unchecked();
    let mut last_progress = vec![0u64; rt.workers.len()];
    let mut stuck_ticks = vec![0u32; rt.workers.len()];
    // Ticks without progress before the next look at the kernel state: STUCK_TICKS,
    // doubled (up to MAX_RECHECK_TICKS) each time the thread was found running, so that
    // a fiber that computes (or a worker the kernel preempted) costs the monitor a
    // /proc read every few ms instead of every tick.
    let mut check_after = vec![STUCK_TICKS; rt.workers.len()];
    // (CPU time, clock) of the worker's kernel thread at the first look in this
    // no-progress stretch; see `BLOCKED_CPU_SHARE`.
    let mut cpu_baseline: Vec<Option<(u64, u64)>> = vec![None; rt.workers.len()];
    let mut preempt_watch = crate::preempt::Watch::new(rt.workers.len());
    loop {
        let deadline = sys::now_ns() + MONITOR_TICK_NS;
        // The fiber dump is printed by its own thread (crate::dump), never here: the
        // monitor must keep ticking while thousands of lines are written.
        sys::futex_wait(&rt.monitor_word, 0, Some(deadline));
        reactor::poll_if_stale(MONITOR_TICK_NS);
        crate::thread::exit_if_main_left_and_all_done();
        if rt.num_sleeping.load(Ordering::SeqCst) > 0 && rt.num_spinning.load(Ordering::SeqCst) == 0 && rt.has_work(None) {
            rt.wake_one_sleeper();
        }
        for w in rt.workers() {
            let i = w.index;
            let p = w.progress.load(Ordering::Relaxed);
            if p == last_progress[i] {
                // The owner is stuck in one fiber, blocked, retired or asleep: what
                // waits in its queues or timer heap must not wait for it.
                release_queued(rt, w);
                w.timers.fire_due();
            }
            if w.state.load(Ordering::Acquire) != W_ACTIVE
                || w.running.load(Ordering::Relaxed) == 0
                || w.direct.load(Ordering::Relaxed)
                || p != last_progress[i]
            {
                last_progress[i] = p;
                stuck_ticks[i] = 0;
                check_after[i] = STUCK_TICKS;
                cpu_baseline[i] = None;
                continue;
            }
            stuck_ticks[i] += 1;
            if stuck_ticks[i] >= check_after[i] {
                stuck_ticks[i] = 0;
                let tid = w.tid.load(Ordering::Relaxed);
                if !thread_sleeps_in_kernel(tid) {
                    check_after[i] = (check_after[i] * 2).min(MAX_RECHECK_TICKS);
                    cpu_baseline[i] = None;
                    continue;
                }
                // Asleep in the kernel right now. A short futex wait inside glibc (a
                // malloc arena lock), a page fault or a preemption look the same at one
                // instant; a blocked call also used (almost) no CPU since the last look.
                let now = sys::now_ns();
                match (cpu_baseline[i], thread_cpu_ns(tid)) {
                    (Some((cpu0, t0)), Some(cpu)) if cpu.saturating_sub(cpu0) * BLOCKED_CPU_SHARE < now - t0 => {
                        check_after[i] = STUCK_TICKS;
                        cpu_baseline[i] = None;
                        mark_blocked(rt, w);
                    }
                    (_, Some(cpu)) => {
                        // First look (or it ran meanwhile): look again next tick.
                        cpu_baseline[i] = Some((cpu, now));
                        check_after[i] = 1;
                    }
                    (_, None) => {
                        // No schedstat in this kernel: the state alone decides.
                        check_after[i] = STUCK_TICKS;
                        mark_blocked(rt, w);
                    }
                }
            }
        }
        preempt_watch.tick(rt);
    }
}

/// The owner of `w` has been running one fiber for a whole tick: hand what waits in
/// its lifo slot and local deque to the injector. Other workers steal from a deque only
/// when they run dry, so without this a fiber queued behind a fiber that never
/// switches (a spin-wait on a flag) would starve while the rest of the pool is busy.
fn release_queued(rt: &Runtime, w: &WorkerShared) {
    let mut moved = false;
    let f = w.lifo.swap(ptr::null_mut(), Ordering::AcqRel);
    if !f.is_null() {
        // SAFETY: slot entries come from Arc::into_raw.
        rt.injector.push(unsafe { Arc::from_raw(f) });
        moved = true;
    }
    loop {
        match w.stealer.steal() {
            Steal::Success(f) => {
                rt.injector.push(f);
                moved = true;
            }
            Steal::Empty => break,
            Steal::Retry => continue,
        }
    }
    if moved {
        rt.notify();
    }
}

/// Declares `w` blocked and brings a spare in if the pool is short.
pub(crate) fn mark_blocked(rt: &Runtime, w: &WorkerShared) {
    if w.state.compare_exchange(W_ACTIVE, W_BLOCKED, Ordering::AcqRel, Ordering::Acquire).is_err() {
        return;
    }
    bump(&STATS.workers_blocked);
    let id = w.running.load(Ordering::Relaxed);
    if id != 0 {
        if let Some(f) = crate::dump::find_by_id(id) {
            f.foreign_blocks.fetch_add(1, Ordering::Relaxed);
        }
    }
    if rt.active.fetch_sub(1, Ordering::AcqRel) > rt.target {
        return;
    }
    // Prefer waking a retired spare.
    for s in rt.workers() {
        if s.state.compare_exchange(W_SPARE, W_ACTIVE, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            rt.active.fetch_add(1, Ordering::AcqRel);
            s.spare_word.store(1, Ordering::Release);
            sys::futex_wake(&s.spare_word, 1);
            return;
        }
    }
    let idx = rt.started.load(Ordering::Acquire);
    if idx >= rt.workers.len() {
        return; // out of slots: the pool runs short until a blocked worker returns
    }
    rt.active.fetch_add(1, Ordering::AcqRel);
    rt.started.store(idx + 1, Ordering::Release);
    bump(&STATS.workers_spawned);
    spawn_runtime_thread(worker_main, &rt.workers[idx] as *const WorkerShared as *mut libc::c_void);
}

/// A worker counts as blocked only if its thread ran less than 1/BLOCKED_CPU_SHARE of
/// the time between two looks (a tick or more apart). Origin: a fiber that computes
/// with brief kernel waits (arena locks, page faults) runs most of the time; one in a
/// blocking call runs ~0. Issue 10 saw 9–14 spare workers started for a C++ program
/// whose fibers block in nothing we do not intercept.
const BLOCKED_CPU_SHARE: u64 = 4;

/// Reads `/proc/self/task/TID/<file>` into `buf` with raw system calls; the length read.
fn read_task_file(tid: u32, file: &[u8], buf: &mut [u8]) -> Option<usize> {
    let mut path = [0u8; 64];
    let prefix = b"/proc/self/task/";
    path[..prefix.len()].copy_from_slice(prefix);
    let mut out = prefix.len();
    let mut digits = [0u8; 10];
    let (mut n, mut len) = (tid, 0);
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        n /= 10;
        len += 1;
        if n == 0 {
            break;
        }
    }
    for k in (0..len).rev() {
        path[out] = digits[k];
        out += 1;
    }
    path[out] = b'/';
    out += 1;
    if out + file.len() >= path.len() {
        return None;
    }
    path[out..out + file.len()].copy_from_slice(file);
    // path[out + file.len()] is already the terminating NUL.
    // SAFETY: `path` is NUL-terminated, `buf` is writable for its length; raw syscalls.
    let n = unsafe {
        let fd = sys::syscall6(
            libc::SYS_openat as usize,
            libc::AT_FDCWD as usize,
            path.as_ptr() as usize,
            (libc::O_RDONLY | libc::O_CLOEXEC) as usize,
            0,
            0,
            0,
        );
        if fd < 0 {
            return None;
        }
        let n = sys::syscall6(libc::SYS_read as usize, fd as usize, buf.as_mut_ptr() as usize, buf.len(), 0, 0, 0);
        sys::syscall6(libc::SYS_close as usize, fd as usize, 0, 0, 0, 0, 0);
        n
    };
    (n > 0).then_some(n as usize)
}

/// CPU time (ns) kernel thread `tid` has run, from its schedstat (None without one).
fn thread_cpu_ns(tid: u32) -> Option<u64> {
    let mut buf = [0u8; 128];
    let n = read_task_file(tid, b"schedstat", &mut buf)?;
    let digits = buf[..n].iter().take_while(|c| c.is_ascii_digit());
    let mut v: u64 = 0;
    let mut any = false;
    for &c in digits {
        v = v.wrapping_mul(10).wrapping_add((c - b'0') as u64);
        any = true;
    }
    any.then_some(v)
}

/// Whether kernel thread `tid` of this process is sleeping (state S or D).
pub(crate) fn thread_sleeps_in_kernel(tid: u32) -> bool {
    let mut buf = [0u8; 512];
    let Some(n) = read_task_file(tid, b"stat", &mut buf) else { return false };
    // Format: "tid (comm) S ...": the state follows the last ')'.
    let b = &buf[..n];
    match b.iter().rposition(|&c| c == b')') {
        Some(i) if i + 2 < b.len() => matches!(b[i + 2], b'S' | b'D'),
        _ => false,
    }
}

impl WorkerShared {
    /// `active`, `blocked` or `spare` (for the dump).
    pub fn state_name(&self) -> &'static str {
        match self.state.load(Ordering::Relaxed) {
            W_ACTIVE if self.direct.load(Ordering::Relaxed) => "direct-wait",
            W_ACTIVE => "active",
            W_BLOCKED => "blocked",
            _ => "spare",
        }
    }

    /// Whether this worker is ACTIVE and runs a fiber on the CPU (not in a direct wait).
    pub(crate) fn runs_fiber_on_cpu(&self) -> bool {
        self.state.load(Ordering::Acquire) == W_ACTIVE
            && self.running.load(Ordering::Relaxed) != 0
            && !self.direct.load(Ordering::Relaxed)
    }

    /// Program signals deferred on this worker's kernel thread, not yet unblocked.
    pub fn deferred_signals(&self) -> u64 {
        self.deferred.load(Ordering::Relaxed)
    }
}

/// The signal mask of the worker that runs fiber `f` (None if it runs on none).
pub fn worker_base_sigmask(f: &Fiber) -> Option<u64> {
    let w = f.worker.load(Ordering::Relaxed) as *const WorkerShared;
    // SAFETY: `worker` points into the leaked runtime's worker array.
    (!w.is_null()).then(|| unsafe { (*w).base_sigmask.load(Ordering::Relaxed) })
}

/// Notes that a program signal was deferred (and is blocked) on kernel thread `tid`;
/// if that is a worker, its next safe point unblocks it. Async-signal-safe.
pub fn note_deferred_signal(tid: u32, bit: u64) {
    let Some(rt) = try_runtime() else { return };
    if let Some(w) = rt.workers().iter().find(|w| w.tid.load(Ordering::Relaxed) == tid) {
        w.deferred.fetch_or(bit, Ordering::Relaxed);
    }
}
