//! Starting the pool: once, on the first `pthread_create` (`thread::pthread::create`
//! calls [`start`] with the upper layers' hooks): the workers and their deques, the
//! idle epoll set, the preemption timer, the worker threads and the monitor.

use super::*;

static START: RawOnce = RawOnce::new();

/// Starts the worker pool on first use, with the upper layers' `hooks` (installed
/// before any worker runs), and returns the runtime. Later calls return it at once.
pub fn start(hooks: &'static crate::runtime::fibers::hooks::Hooks) -> &'static Runtime {
    if let Some(rt) = try_runtime() {
        return rt;
    }
    START.call_once(|| {
        crate::runtime::fibers::hooks::install(hooks);
        start_pool();
    });
    try_runtime().unwrap_or_else(|| crate::fatal(&["runtime failed to start"]))
}

/// Whether nobody has begun to start the pool (a pool half started by another thread
/// counts as started: it may have created workers, the epoll set, the timer).
pub fn pool_never_started() -> bool {
    START.never_called()
}

fn start_pool() {
    sys::detect_thread_pointer_method();
    let cfg = crate::base::config::config();
    let n = cfg.workers;
    // SAFETY: querying the mask into a valid out-parameter.
    let initial_sigmask = unsafe {
        let mut m: libc::sigset_t = core::mem::zeroed();
        crate::base::real::pthread_sigmask(libc::SIG_SETMASK, ptr::null(), &mut m);
        m
    };
    let slots = n + policy::MAX_SPARES;
    let mut workers = Vec::with_capacity(slots);
    for index in 0..slots {
        let local = Deque::new_fifo();
        let stealer = local.stealer();
        workers.push(WorkerShared {
            index,
            local: UnsafeCell::new(local),
            stealer,
            lifo: lifo::LifoSlot::new(),
            sleep_word: SleepWord::new(),
            tp: AtomicUsize::new(0),
            tid: AtomicU32::new(0),
            running: Padded(AtomicU64::new(0)),
            progress: Padded(AtomicU64::new(0)),
            urgent: lifo::SideQueue::new(),
            coordinating: lifo::SideQueue::new(),
            turn: Padded(Default::default()),
            role: WorkerRole::active(),
            polling: AtomicBool::new(false),
            direct: AtomicBool::new(false),
            sleep_without_spin: AtomicBool::new(false),
            readiness_set: AtomicUsize::new(0),
            wake_fd: AtomicI32::new(-1),
            task_files: task_files::TaskFiles::new(),
            base_sigmask: AtomicU64::new(0),
            deferred: AtomicU64::new(0),
            timers: Padded(timer::TimerHeap::new()),
            preempt_request: AtomicU64::new(0),
            times: Padded(Default::default()),
        });
    }
    let rt = Box::leak(Box::new(Runtime {
        workers: workers.into_boxed_slice(),
        started: AtomicUsize::new(n),
        target: AtomicUsize::new(n),
        active: AtomicUsize::new(n),
        cpus: AtomicUsize::new(crate::base::config::config().usable_cpus),
        injector: Injector::new(),
        turn_budget: turn_state::Budget::new(),
        handoff_head: AtomicPtr::new(ptr::null_mut()),
        idle: IdleCounts::new(),
        monitor_doze: crate::runtime::sleep::sleep_state::MonitorDoze::new(),
        initial_sigmask,
    }));
    if cfg.stats || cfg.report.is_some() {
        crate::runtime::fibers::queue_delay::enable();
    }
    crate::runtime::sleep::poller::init(
        n,
        cfg.poll_per_worker.unwrap_or_else(|| crate::runtime::sleep::poller::per_worker_by_default(n)),
    );
    crate::runtime::preemption::preempt::init();
    // The descriptors the runtime keeps are made here, inside the program's first
    // `pthread_create`, while no other program thread can make one: opened later,
    // beside the program's threads, each took the lowest free number for a moment
    // (see `own_fds::eventfd_new_out_of_the_way`). Only a spare's are made later.
    for w in &rt.workers[..n] {
        w.wake_fd.store(crate::base::own_fds::eventfd_new_out_of_the_way(), Ordering::Release);
    }
    let quota = Box::into_raw(Box::new(quota::QuotaFollow::new()));
    RUNTIME.store(rt, Ordering::Release);
    let rt = runtime_unchecked();
    for w in &rt.workers[..n] {
        crate::base::own_fds::hold_eventfd(&w.wake_fd); // -1 if none could be made: never matches
    }
    for i in 0..n {
        spawn_runtime_thread(worker::worker_main, &rt.workers[i] as *const WorkerShared as *mut libc::c_void);
    }
    for w in &rt.workers[..n] {
        // A worker publishes its tid first thing.
        let tid = loop {
            match w.tid.load(Ordering::Relaxed) {
                0 => sys::sched_yield_raw(),
                tid => break tid,
            }
        };
        w.task_files.open(tid);
    }
    spawn_runtime_thread(monitor::monitor_main, quota.cast());
    (crate::runtime::fibers::hooks::get().after_pool_started)();
}
