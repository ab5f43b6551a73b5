//! The run order by CPU time (issue 27): a fiber that used more than its share of the
//! CPU waits behind those that did not.
//!
//! # Why
//!
//! The queues are first-come per wake-up. The kernel orders its threads by the CPU time
//! they used (EEVDF): a thread that ran little since it last waited is owed time and runs
//! before one that kept the CPU. Without that order a server connection that serves a
//! run of requests and a connection that needs one short statement between lock waits
//! queue alike, and turns (`turn.rs`) and preemption sent the long runner to the back
//! of the *global* queue, behind everybody and usually onto another worker: at 16
//! connections over TCP loopback that trip was most of the p95.
//!
//! # The accounts
//!
//! (The fiber's two words live in `crate::runtime::cpu_account`.)
//!
//! ```text
//!   fiber:   vruntime  (ns of CPU charged to it, virtual: see the clamp below)
//!   pool:    V         (the vruntime of a fiber that got exactly its fair share)
//!
//!         V - SLEEP_CREDIT        V     V + WAKE_DEBT   V + AHEAD_LIMIT
//!   ---------|--------------------|-----------|-----------|------------------->
//!   a fiber that wakes is brought |      runs in the      |  "ahead": waits in its
//!   into this range (lifted or forgiven)  normal order    |  worker's later queue
//! ```
//!
//! * **Charging without a clock read.** A clock read per switch halves a switch-heavy
//!   program's rate (`queue_delay`'s measurement, where `RDTSC` was trapped), so CPU time
//!   is *sampled*, as the BSD schedulers' statclock does: every monitor tick adds a
//!   tick (1 ms; with timed runs, the time since the previous tick) to
//!   `cpu_sampled_ns` of each worker that is running a fiber on the CPU, and the worker,
//!   when the fiber switches out, charges what was added during the run. A run of 30 µs
//!   is charged a whole tick with probability 3 %: over many runs the expected charge is
//!   the CPU time used, but equal fibers drift ahead of V by chance (`run_clock` has the
//!   measurement and the experimental alternative, `FIBERIZE_TUNE=run_clock=1`: each run
//!   timed by the cycle counter).
//! * **The pool's virtual time V** advances every tick by `elapsed × busy / (busy +
//!   runnable)` (`elapsed`: a tick; with timed runs the time since the previous tick):
//!   with `busy` workers running fibers and `runnable` fibers queued, each of those
//!   contenders would have received that much CPU since the previous tick if the pool
//!   were perfectly fair (the virtual time of generalized processor sharing). Only the
//!   monitor writes it; workers read it when they queue a fiber.
//! * **Sleepers get a bounded head start, and a bounded debt.** A fiber that becomes
//!   runnable after a wait (`unpark`, its donor handing it back, a new fiber) has its
//!   vruntime brought into `V - SLEEP_CREDIT_NS ..= V + WAKE_DEBT_LIMIT_NS`: sleeping
//!   long earns no more than the credit, and what it used past its share before it
//!   waited is forgiven beyond the debt limit, as EEVDF clamps a task's lag when it
//!   sleeps. Without the upper bound equal fibers drifted into the later queue by
//!   chance: a fiber's lead over V is a random walk with no drift (sampled charges of
//!   a whole tick, or timed turns of varying length, against V's steady rise), and the
//!   floor alone makes it wander upwards without bound: with ahead limits of 8 and
//!   16 ms, point_select's fibers at 16 and 64 connections still reached them 10 900
//!   and 13 000 times in 6 runs of 10 s, against 19 500 at 2 ms (issue 27, session
//!   13). So only a fiber that keeps running without waiting (turn ends, preemptions,
//!   yields) can get ahead: a CPU hog, not a connection that parks between requests.
//! * **Ahead fibers wait.** A fiber queued by a worker (a wake-up, the end of a turn, a
//!   preemption, a yield) whose vruntime is more than `AHEAD_LIMIT_NS` past V goes to
//!   the worker's **later queue** instead of its lifo slot or local deque. The end of a
//!   turn and a preemption no longer go to the global injector: a fiber that is not
//!   ahead goes to the back of its own worker's deque (no migration, no trip behind
//!   every runnable fiber of the pool); one that is ahead waits in the later queue.
//!   Wake-ups from plain threads and donors still go through the injector and the
//!   hand-off list (they are not on a worker).
//!
//! * **Owed fibers go first.** A fiber woken in a worker's scheduler context (readiness
//!   the worker harvested, a timer it fired) whose vruntime is more than `OWED_NS`
//!   behind V used clearly less than its share (it slept through lock waits and
//!   commits, as a read_write connection does, or waited long in the queues): it goes
//!   to the worker's **soon queue**, which the worker serves before its deque, except
//!   every `DEQUE_FIRST_INTERVAL`th dequeue (the deque's bound). This is EEVDF's "a
//!   task with positive lag is eligible first", with two levels instead of a tree.
//!   Fibers woken by fibers keep the lifo slot (a hand-off runs next anyway).
//!
//! * **Coordinating fibers are served more often.** A fiber that waited on a condition
//!   variable or a futex (another thread's progress: a commit, a row lock, a latch)
//!   within its last `COORDINATION_CREDIT` descriptor waits is *coordinating*. Its
//!   readiness wake-ups, turn ends, preemptions, and a lifo wakee it displaced, go to
//!   the worker's **coordinating queue**. Between it and the soon queue (fibers owed
//!   CPU time) a worker picks by their lengths weighted: the coordinating queue first
//!   with probability `S·c / (S·c + s)` (`c`, `s` the fibers in each, `S` =
//!   `COORDINATING_SERVICE_WEIGHT`, 2), so that while both classes wait a coordinating
//!   fiber is served `S` times as often as an owed one (`coordinating_first`;
//!   `FIBERIZE_TUNE=coordinating_first=N` fixes the ratio instead, every Nth dequeue, 0:
//!   never). Its CPU time is charged divided by `COORDINATING_WEIGHT` (4; a weight, as
//!   a nice level is: it may use that many times a plain fiber's share before it is
//!   ahead).
//!
//! ```text
//!   find_work:  urgent (a convoy's wakee, wake::unpark_lock_waiter) -> lifo slot (capped)
//!               -> soon and coordinating (picked by weighted length) -> deque -> global
//!               -> steal (coordinating, soon, deque) -> later (own, then stolen)
//!               every 4th dequeue the deque first;
//!               every 8th the later head if it is due; every 61st the global queues first
//! ```
//!
//! # Why coordinating fibers go first
//!
//! The order by CPU time alone gives every connection of a server the same rate of
//! requests when all of them wait in the queues: each is served in turn. Natively they
//! do not wait there alike. In the MariaDB mix (point_select @2048 + read_write @256
//! over TCP, 2 vCPUs) the kernel shares the CPUs between the server's threads *and*
//! sysbench's, and a point_select round trip spends most of its 165 ms on the client's
//! side; preloaded, the clients answer at once (their threads wait 0.08 ms for a CPU,
//! against 25–38 ms natively) and every request waits in the server's queues. Both
//! servers used 1.34 CPUs (`/proc/PID/stat`). Natively, counted in wall-clock seconds
//! with every connection up (session 9: the figures before read sysbench's late
//! reports), a read_write connection made 5–7 statements a second against 2.7–3.6 for
//! a point_select one; without this class the preloaded server gave read_write 0.60x
//! native (p95 1.84x) and point_select 1.64x, with it 2.45x (p95 1.02x) and 1.04x
//! (docs/DESIGN.md §2.11). A transaction also
//! holds row locks that other transactions wait for, so its slowness spreads (read_write
//! transactions took 7 s). MariaDB's own pool-of-threads serves connections inside a
//! transaction from a high-priority queue for the same reason. A library cannot see a
//! transaction; it sees a fiber that waits on other threads between its descriptor
//! waits: every one of the mix's 256 read_write fibers did (once per 4 descriptor
//! waits), and almost no point_select fiber (1 wait in ~37 000).
//!
//! The coordinating class is bounded: every 4th dequeue the deque goes first, the soon
//! queue keeps the share its length gives it, and a coordinating fiber that uses more
//! than `COORDINATING_WEIGHT` times a plain fiber's share waits in the later queue. A
//! fixed ratio between the two queues was tried first (sessions 7–9: first on every
//! other dequeue, then never first); the share it gives depends on how many fibers of
//! each class wait, and so on the machine: "never first" gave the mix's read_write
//! 1.45–3.0x native on one VM and 0.75x (p95 1.9x) on a faster one, where
//! point_select's clients keep more requests queued (issue 27, session 10). Where every
//! fiber coordinates (TPC-C, a producer/consumer program) the coordinating queue takes
//! the place of the soon queue and the deque: one FIFO, in which a fiber that ended its
//! turn queues with fresh wake-ups, and the later queue still holds those ahead of
//! their share.
//!
//! # Serving the later queue, and the bound on its wait
//!
//! Every `LATER_CHECK_INTERVAL`th dequeue a worker looks at the head of its later
//! queue and runs it if it is no longer ahead (V caught up) or has waited
//! `KICKUP_TICKS`; otherwise the head goes to the back. When a worker finds nothing
//! else (lifo slot, deque, global queues, other workers' deques) it runs its later
//! queue's head, then steals other workers' later queues, and V jumps to that fiber's
//! vruntime less the limit (the pool is work-conserving: being ahead never leaves a CPU
//! idle). So a fiber waits in a later queue at most `KICKUP_TICKS` ms plus the time
//! its worker takes to reach `LATER_CHECK_INTERVAL` dequeues times the queue's length
//! (each check rotates the head), and V grows while anyone runs, so an ahead fiber
//! falls back into the normal order once the others have had their share. The monitor
//! moves a stuck worker's later queue to the injector as it does its deque.
//!
//! MariaDB's pool-of-threads has the same two-level shape (a high-priority queue for
//! connections inside a transaction, with `thread_pool_prio_kickup_timer` so that the
//! low queue never starves); here the level is decided by CPU time, which a library can
//! see, instead of transaction state, which it cannot.
//!
//! `FIBERIZE_TUNE=fair=0` turns the order off: every fiber is "not ahead", turns and
//! preemption go to the global injector as before (for A/B runs of one library).

use super::run_clock::RunClock;
use super::*;
use crate::runtime::fiber::WaitKind;
use crate::runtime::queue_delay::Source;

/// The monitor's period: the unit of the limits below.
pub(super) const TICK_NS: u64 = MONITOR_TICK_NS;
/// The most one tick counts for, however late it comes: a monitor descheduled that long
/// says nothing about what the workers did meanwhile. Origin: ten ticks.
const MAX_TICK_SPAN_NS: u64 = 10 * TICK_NS;
/// How far past V a fiber's vruntime may be before it waits in the later queue, while
/// runs are charged by the monitor's samples (the default). Origin: two ticks, so that
/// one unlucky sample (a short run caught by the tick) never demotes a fiber by itself.
pub(super) const AHEAD_LIMIT_NS: u64 = 2 * TICK_NS;
/// The same while runs are timed (`FIBERIZE_TUNE=run_clock=1`, `run_clock`). Origin (issue
/// 27, session 12): a fiber that ends a turn gets a turn per round of its worker's
/// queue, however much less its neighbours ran before they parked, so timed charges put
/// such fibers steadily ahead; with 2 ms, point_select at 64 connections over TCP sent
/// 36 000 fibers to the later queue in 6 runs of 10 s (p95 1.24–1.75x native), with
/// 5 ms 19 000 (p95 1.13x, p99 0.90x; `bench-mysql/tails.sh`, 3 rounds, 2-vCPU VM).
/// The kernel's EEVDF base slice is 3 ms on 8 CPUs.
pub(super) const TIMED_AHEAD_LIMIT_NS: u64 = 5 * TICK_NS;

/// The ahead limit for the way runs are charged now.
#[inline]
fn ahead_limit(rt: &Runtime) -> u64 {
    if rt.fair.run_clock.timed() {
        TIMED_AHEAD_LIMIT_NS
    } else {
        AHEAD_LIMIT_NS
    }
}

/// The most a fiber's vruntime may be behind V when it wakes: the head start a sleeper
/// gets. Origin: CFS's sleeper credit, half its 6 ms latency target.
const SLEEP_CREDIT_NS: u64 = 3 * TICK_NS;
/// The most a fiber's vruntime may be past V when it wakes: what it used past its share
/// beyond this before it waited is forgiven (module docs). Origin: one tick, half the
/// ahead limit, so that a fiber just woken is never ahead; EEVDF's bound on a sleeping
/// task's lag is of the same order (twice its 0.7–3 ms slice). Point_select over TCP
/// at 64 connections, 2-vCPU VM (issue 27, session 13, `bench-mysql/tails.sh`, 3
/// rounds): later-queue stays 2 229 against 17 633 without it, p99 1.36x native
/// against 2.21x, tps 1.03x against 0.91x; over five runs p99 1.29–1.46x, but the p95
/// no better (1.49–1.81x; the later queue had also cut the runs of the fibers that
/// serve the most requests back to back).
const WAKE_DEBT_LIMIT_NS: u64 = TICK_NS;
// A fiber just woken is never ahead, however its runs are charged.
const _: () = assert!(WAKE_DEBT_LIMIT_NS < AHEAD_LIMIT_NS && WAKE_DEBT_LIMIT_NS < TIMED_AHEAD_LIMIT_NS);
/// A later-queue head that has waited this many ticks runs at the next check whatever
/// its vruntime. Origin: a tenth of MariaDB's `thread_pool_prio_kickup_timer` (1 s),
/// since a round trip here is a fraction of a pool-of-threads statement.
const KICKUP_TICKS: u64 = 100;
/// Every this many dequeues a worker looks at its later queue's head first.
pub(super) const LATER_CHECK_INTERVAL: u32 = 8;
/// How far behind V a fiber woken in a worker's scheduler context (readiness, a timer)
/// must be to go to the worker's soon queue. Origin: one tick, half the sleeper credit's
/// range, so that a fiber woken at the floor (it slept long, or used little CPU since
/// it last waited) qualifies and one that is at par with the pool does not.
const OWED_NS: u64 = TICK_NS;
/// Every this many dequeues the deque goes before the soon queue, so that a stream of
/// owed wake-ups cannot starve the deque (at least a quarter of the dequeues are its).
pub(super) const DEQUE_FIRST_INTERVAL: u32 = 4;

/// Descriptor waits for which a fiber counts as coordinating after a wait on another
/// thread's progress. Origin: a MariaDB read_write transaction (20 round trips) waits
/// on a condition variable or a futex about once per 4 descriptor waits (a commit, the
/// redo log, InnoDB latches), so 32 spans more than one transaction; a point_select
/// connection made 1 such wait in ~37 000 descriptor waits (issue 27, session 7).
const COORDINATION_CREDIT: u32 = 32;

/// A coordinating fiber's share of the CPU against a fiber that only waits for its
/// descriptors: its CPU time is charged divided by this. Origin: in the MariaDB mix
/// natively, a read_write connection's thread used 4–12 times the CPU of a point_select
/// connection's (1.3–1.8 ms/s against 0.15–0.37; issue 27, session 7).
pub(super) const COORDINATING_WEIGHT: u64 = 4;

/// How many times as often as an owed fiber a coordinating fiber is served while both
/// wait: the weight of the coordinating queue's length when a worker picks between it
/// and the soon queue (`coordinating_first`). Origin: the MariaDB mix on 2 vCPUs (issue
/// 27, session 10, ratios to native in the same run): 2 gave read_write 2.3–2.8x,
/// p95 0.65–0.82x, point_select 1.33–1.57x per round; 4 gave 2.4–4.8x, 0.35–0.91x,
/// 1.02–1.56x; 8 about as 4. More than 2 only moves point_select's share to
/// transactions that already get more than natively.
const COORDINATING_SERVICE_WEIGHT: u64 = 2;

/// Whether dequeue number `tick` looks at the `coordinating` queue before the `soon`
/// queue.
///
/// By default by their weighted lengths: the coordinating queue first with probability
/// `S·c / (S·c + s)` (`S` = `COORDINATING_SERVICE_WEIGHT`, `c` and `s` the two
/// lengths), so that while both wait, a coordinating fiber is served `S` times as often
/// as an owed one (a weighted round robin over the fibers, not over the classes).
/// `tick` is hashed to pick, so that consecutive dequeues spread over the range. The
/// lengths are read only in that mode, and the soon queue's only when the coordinating
/// queue holds any. `FIBERIZE_TUNE=coordinating_first=N` fixes the ratio instead: every
/// `N`th dequeue (0: never; for A/B runs).
///
/// Why not a fixed ratio: the share it gives depends on how many fibers of each class
/// wait, which depends on the machine. In the MariaDB mix (issue 27, sessions 9 and 10,
/// 2 vCPUs each) "never first" gave read_write 1.45–3.0x native and point_select
/// 1.25–1.39x on one VM, and read_write 0.75x (p95 1.9x) and point_select 2.1x on a
/// faster one, where point_select's 2 048 clients keep many more requests queued.
#[inline]
pub(super) fn coordinating_first(tick: u32, coordinating: &SideQueue, soon: &SideQueue) -> bool {
    const UNREAD: u32 = u32::MAX;
    const WEIGHTED: u32 = u32::MAX - 1;
    static EVERY: AtomicU32 = AtomicU32::new(UNREAD);
    let mut every = EVERY.load(Ordering::Relaxed);
    if every == UNREAD {
        every = crate::base::config::config().coordinating_first.unwrap_or(WEIGHTED);
        EVERY.store(every, Ordering::Relaxed);
    }
    match every {
        WEIGHTED => {
            let waiting = coordinating.stealer.len() as u64;
            waiting != 0 && weighted_pick(tick, waiting * COORDINATING_SERVICE_WEIGHT, soon.stealer.len() as u64)
        }
        0 => false,
        n => tick % n == n - 1,
    }
}

/// Whether `tick` falls into the first `a` of `a + b` parts (`a` out of `a + b`
/// dequeues over a run of ticks): Fibonacci hashing spreads the tick over 32 bits, and
/// the high bits of its product with `a + b` pick the part (Lemire's reduction).
#[inline]
fn weighted_pick(tick: u32, a: u64, b: u64) -> bool {
    if a == 0 {
        return false;
    }
    let spread = tick.wrapping_mul(0x9E37_79B9) as u64;
    (spread * (a + b)) >> 32 < a
}

/// Whether the order by CPU time is on (`FIBERIZE_TUNE=fair`, default on), read once.
#[inline]
pub(super) fn enabled() -> bool {
    static ON: AtomicU32 = AtomicU32::new(2);
    match ON.load(Ordering::Relaxed) {
        2 => {
            let on = crate::base::config::config().fair;
            ON.store(on as u32, Ordering::Relaxed);
            on
        }
        v => v == 1,
    }
}

/// The monitor's tick count (0 before the pool runs): a clock of 1 ms resolution that
/// costs one Relaxed load (`sync::parking` stamps lock waiters with it).
pub fn monitor_ticks() -> u64 {
    super::try_runtime().map_or(0, |rt| rt.fair.ticks.load(Ordering::Relaxed))
}

/// A mutex waiter parked this many monitor ticks (≥ 1 ms) sits in a convoy, not in a
/// hand-off between running fibers (µs: prodcons, the hammer), and its unlocker yields
/// to it (`wake::unpark_lock_waiter`). Origin: MariaDB's convoys waited 0.1–2.6 s; with
/// the yield for every waiter, bench_core's prodcons lost ~15 % (issue 27, session 6).
const CONVOY_TICKS: u64 = 2;

/// Whether a wait that began at monitor tick `since` has lasted `CONVOY_TICKS`.
pub fn parked_long(since: u64) -> bool {
    monitor_ticks().saturating_sub(since) >= CONVOY_TICKS
}

/// The pool's virtual time and tick count; written by the monitor only.
#[derive(Default)]
pub(super) struct FairClock {
    v_ns: AtomicU64,
    ticks: AtomicU64,
    /// CLOCK_MONOTONIC at the previous tick while runs are timed (0 before the first).
    last_tick_ns: AtomicU64,
    /// The cycle counter's calibration, for the charges (`run_clock`).
    pub(super) run_clock: RunClock,
}

impl Runtime {
    /// The monitor's tick: samples every worker running a fiber on the CPU and advances
    /// V (module docs); `runnable`: the fibers waiting in the run queues now.
    ///
    /// Where runs are timed (`run_clock`), by the time since the previous tick, not by
    /// one tick: on a loaded machine the monitor is a thread like any other and its
    /// ticks come late (a run of the tails at 64 connections with timed charges and V
    /// moving a fixed tick per tick found fibers ahead 7 times as often as with the
    /// samples, which came late alike).
    /// Ticks a doze of the monitor skipped (`monitor`, "Dozing"): they still date lock
    /// waits and later-queue stays. Nothing ran meanwhile, so V stays.
    pub(super) fn fair_ticks_skipped(&self, skipped: u64) {
        self.fair.ticks.fetch_add(skipped, Ordering::Relaxed);
    }

    pub(super) fn fair_tick(&self, runnable: u64) {
        // The tick count also dates lock waits (`parked_long`): counted even without the order.
        self.fair.ticks.store(self.fair.ticks.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        if !enabled() {
            return;
        }
        self.fair.run_clock.calibrate(self.fair.ticks.load(Ordering::Relaxed));
        // Timed runs are charged their real length, so V and the samples (the bound on
        // a charge) follow the clock; sampled runs keep the unit of one tick per tick,
        // the rule their limits were measured with.
        let elapsed = if self.fair.run_clock.timed() {
            let now = sys::now_ns();
            let last = self.fair.last_tick_ns.swap(now, Ordering::Relaxed);
            if last == 0 {
                TICK_NS
            } else {
                now.saturating_sub(last).min(MAX_TICK_SPAN_NS)
            }
        } else {
            TICK_NS
        };
        let mut busy = 0u64;
        for w in self.workers() {
            if w.runs_fiber_on_cpu() {
                busy += 1;
                // Only the monitor writes `cpu_sampled_ns`.
                w.cpu_sampled_ns.store(w.cpu_sampled_ns.load(Ordering::Relaxed) + elapsed, Ordering::Relaxed);
            }
        }
        if busy > 0 {
            self.fair.v_ns.fetch_add(elapsed * busy / (busy + runnable), Ordering::Relaxed);
        }
    }

    #[inline]
    fn virtual_time(&self) -> u64 {
        self.fair.v_ns.load(Ordering::Relaxed)
    }
}

/// A fiber becomes runnable after a wait (or is new): brings its vruntime into
/// `V - SLEEP_CREDIT_NS ..= V + WAKE_DEBT_LIMIT_NS`. TLS-free (donors call it).
#[inline]
pub(super) fn note_woken(rt: &Runtime, f: &Fiber) {
    if !enabled() {
        return;
    }
    let v = rt.virtual_time();
    f.cpu.clamp_to(v.saturating_sub(SLEEP_CREDIT_NS), v + WAKE_DEBT_LIMIT_NS);
}

/// A fiber begins a wait of `kind` (`wake::park_current`): a wait on another thread's
/// progress makes it coordinating, a descriptor wait uses up one of its credit.
#[inline]
pub(super) fn note_wait(f: &Fiber, kind: u32) {
    if kind == WaitKind::Io as u32 {
        f.cpu.note_descriptor_wait();
    } else if kind == WaitKind::Cond as u32 || kind == WaitKind::Futex as u32 {
        f.cpu.note_coordinating_wait(COORDINATION_CREDIT);
    }
}

/// Whether `f` is coordinating: a wait on another thread's progress (a condition
/// variable, a futex) is among its last `COORDINATION_CREDIT` descriptor waits, as in
/// a database connection inside a transaction (commits, row locks, latches). Its
/// wake-ups and turn ends go to the coordinating queue, served more often than fibers
/// that only wait for their descriptors (module docs).
#[inline]
pub(super) fn is_coordinating(f: &Fiber) -> bool {
    enabled() && f.cpu.is_coordinating()
}

/// Whether `f` is owed CPU time: it used clearly less than its share (it slept, or
/// waited in the queues) and goes to the soon queue.
#[inline]
pub(super) fn is_owed(rt: &Runtime, f: &Fiber) -> bool {
    enabled() && f.cpu.vruntime() + OWED_NS < rt.virtual_time()
}

/// Whether `f` used more than its share: it waits in a later queue.
#[inline]
pub(super) fn is_ahead(rt: &Runtime, f: &Fiber) -> bool {
    enabled() && f.cpu.vruntime() > rt.virtual_time() + ahead_limit(rt)
}

/// One of a worker's two side queues ([`WorkerShared`]'s `soon` and `later`; module
/// docs): a FIFO deque that only its owner pushes to and pops from; others steal
/// through `stealer`.
pub(super) struct SideQueue {
    deque: UnsafeCell<Deque<FiberRef>>,
    pub(super) stealer: Stealer<FiberRef>,
}

impl SideQueue {
    pub(super) fn new() -> SideQueue {
        let deque = Deque::new_fifo();
        let stealer = deque.stealer();
        SideQueue { deque: UnsafeCell::new(deque), stealer }
    }

    /// # Safety
    /// As `WorkerShared::owner_local`: only the owning worker's OS thread, shielded or
    /// in scheduler context.
    #[inline]
    pub(super) unsafe fn owner(&self) -> &Deque<FiberRef> {
        // SAFETY: the caller is the only thread that touches the deque (contract above).
        unsafe { &*self.deque.get() }
    }

    /// Queues an ahead fiber (the later queue).
    ///
    /// # Safety
    /// As [`Self::owner`].
    pub(super) unsafe fn push_later(&self, rt: &Runtime, f: FiberRef) {
        bump(&STATS.fair_later);
        f.cpu.set_later_since(rt.fair.ticks.load(Ordering::Relaxed));
        // SAFETY: forwarded from this fn's contract.
        unsafe { self.owner() }.push(f);
    }

    /// Queues a lock's woken waiter (the urgent queue, `wake::unpark_lock_waiter`).
    ///
    /// # Safety
    /// As [`Self::owner`].
    #[inline]
    pub(super) unsafe fn push_urgent(&self, f: FiberRef) {
        // SAFETY: forwarded from this fn's contract.
        unsafe { self.owner() }.push(f);
    }

    /// Queues a coordinating fiber that is not ahead (the coordinating queue).
    ///
    /// # Safety
    /// As [`Self::owner`].
    #[inline]
    pub(super) unsafe fn push_coordinating(&self, f: FiberRef) {
        bump(&STATS.fair_coordinating);
        // SAFETY: forwarded from this fn's contract.
        unsafe { self.owner() }.push(f);
    }

    /// Queues a fiber that is owed CPU time (the soon queue).
    ///
    /// # Safety
    /// As [`Self::owner`].
    #[inline]
    pub(super) unsafe fn push_soon(&self, f: FiberRef) {
        bump(&STATS.fair_soon);
        // SAFETY: forwarded from this fn's contract.
        unsafe { self.owner() }.push(f);
    }

    /// The owner's next fiber, in order.
    ///
    /// # Safety
    /// As [`Self::owner`].
    #[inline]
    pub(super) unsafe fn pop(&self) -> Option<FiberRef> {
        // SAFETY: forwarded from this fn's contract.
        unsafe { self.owner() }.pop()
    }

    /// The head, if V caught up with it or it waited `KICKUP_TICKS`; otherwise the head
    /// goes to the back (so that one fiber far ahead does not hide the others).
    ///
    /// # Safety
    /// As [`Self::owner`].
    pub(super) unsafe fn pop_due(&self, rt: &Runtime) -> Option<FiberRef> {
        // SAFETY: forwarded from this fn's contract.
        let deque = unsafe { self.owner() };
        let f = deque.pop()?;
        if !is_ahead(rt, &f) {
            return Some(f);
        }
        if rt.fair.ticks.load(Ordering::Relaxed).saturating_sub(f.cpu.later_since()) >= KICKUP_TICKS {
            bump(&STATS.fair_kickups);
            return Some(f);
        }
        deque.push(f);
        None
    }

    /// The head whatever its vruntime (nothing else is runnable): V jumps to it.
    ///
    /// # Safety
    /// As [`Self::owner`].
    pub(super) unsafe fn pop_any(&self, rt: &Runtime) -> Option<FiberRef> {
        // SAFETY: forwarded from this fn's contract.
        let f = unsafe { self.owner() }.pop()?;
        catch_up(rt, &f);
        Some(f)
    }
}

/// A fiber from a later queue runs because nothing else could: V jumps to its vruntime
/// less the limit, so that the fibers behind it are judged against the work that is
/// actually there.
pub(super) fn catch_up(rt: &Runtime, f: &Fiber) {
    if enabled() {
        rt.fair.v_ns.fetch_max(f.cpu.vruntime().saturating_sub(ahead_limit(rt)), Ordering::Relaxed);
    }
}

/// Queues a fiber that switched out runnable on its own worker `w` (a yield, the end of
/// its turn, a preemption): the later queue if it is ahead, else the back of `w`'s
/// deque; with the order off, turn ends and preemptions go to the injector as before.
///
/// # Safety
/// `w`'s own OS thread, in its scheduler context.
pub(super) unsafe fn requeue_on_worker(rt: &Runtime, w: &WorkerShared, f: FiberRef, source: Source) {
    f.set_life(Life::Runnable);
    f.mark_queued(source);
    if !enabled() && source != Source::Yield {
        rt.injector.push(f);
        rt.notify();
        return;
    }
    // SAFETY: we are w's OS thread in scheduler context (this fn's contract).
    let local = unsafe { w.owner_local() };
    if is_ahead(rt, &f) {
        // SAFETY: as above.
        unsafe { w.later.push_later(rt, f) };
    } else if source != Source::Yield && is_coordinating(&f) {
        // SAFETY: as above.
        unsafe { w.coordinating.push_coordinating(f) };
    } else {
        local.push(f);
    }
    if source != Source::Yield && local.len() > 1 {
        // A surplus: others may take what waits here while this worker runs the next.
        rt.notify();
    }
}

#[cfg(test)]
mod tests {
    use super::weighted_pick;

    /// Over a run of consecutive ticks, `a` of every `a + b` dequeues pick the first
    /// queue, within a few percent, and never with `a` = 0, always with `b` = 0.
    #[test]
    fn weighted_pick_gives_each_part_its_share() {
        for (a, b) in [(1u64, 3u64), (4, 1000), (400, 1000), (7, 7), (1000, 1)] {
            let ticks = 100_000u32;
            let picked = (0..ticks).filter(|&t| weighted_pick(t, a, b)).count() as f64;
            let want = ticks as f64 * a as f64 / (a + b) as f64;
            assert!((picked - want).abs() <= want * 0.05 + 10.0, "{a}/{b}: {picked} picked, {want} wanted");
        }
        assert!((0..1000).all(|t| !weighted_pick(t, 0, 5)));
        assert!((0..1000).all(|t| weighted_pick(t, 5, 0)));
    }
}
