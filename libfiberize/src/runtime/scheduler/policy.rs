//! The scheduling policy in one place: where a runnable fiber goes, which one a worker
//! runs next, and every number those rules use.
//!
//! # The queues
//!
//! Per worker: the **urgent** queue (lock waiters a convoy's unlocker yields to), the
//! **lifo slot** (one fiber: the last one a fiber on this worker woke), the local
//! **deque** (FIFO; stolen in batches) and the **coordinating** queue (FIFO; fibers that
//! waited on a condition variable or a futex within their last [`COORDINATING_WAITS`]
//! descriptor waits). Global: the **injector** (fibers woken by plain threads and the
//! monitor, and what the monitor takes off a stuck worker) and the **hand-off list**
//! (donors push there without allocating). `WorkerShared`'s queue methods in `mod.rs`
//! are the only place that lists a worker's queues.
//!
//! # Two rule sets, side by side
//!
//! A fiber is *placed* by whoever makes it runnable (`wake.rs`), and *taken* by the
//! worker that runs it next (`worker::find_work`). Read the two together:
//!
//! | the wake side places (`wake::schedule`, `unpark_lock_waiter`) | `find_work` takes, in this order |
//! |---|---|
//! | | 0. every [`POLL_CHECK_INTERVAL`]th dequeue: the own readiness set, if nobody polled it for [`STALE_NS`] (its fibers go to the own deque) |
//! | a convoy's waiter (parked [`CONVOY_TICKS`] or more, others behind it): the waker's **urgent** queue, and the waker yields | 1. the **urgent** queue |
//! | | 2. every [`GLOBAL_CHECK_INTERVAL`]th dequeue: the hand-off list and the injector first |
//! | a fiber woken by a fiber: the waker's **lifo slot**; the occupant it displaces goes to the back of its class's queue | 3. the **lifo slot**, at most [`LIFO_STREAK_CAP`] in a row while the deque or the coordinating queue holds fibers (past the cap the slot's fiber goes to the back of its class's queue) |
//! | woken in a worker's scheduler context (readiness it harvested, timers it fired), or requeued on its own worker (a preemption, a turn's end): the back of its **deque**, or of its **coordinating** queue if it coordinates; a yield: the deque whatever its class; a requeue goes behind the **injector** instead when nothing is queued here and the injector is not empty | 4. the coordinating queue or the deque, drawn [`COORDINATING_WEIGHT`]`·c : d` by their lengths; then the other of the two |
//! | woken by a plain thread or the monitor: the **injector**; by a donor: the **hand-off list** | 5. the hand-off list, then the injector (a batch into the own deque) |
//! | | 6. steal from another worker: a batch of its deque, or its coordinating queue; its urgent queue and lifo slot only when it is not ACTIVE |
//! | | 7. nothing: spin ([`SPIN_ROUNDS`]; none after a direct wait declined for a peer on another CPU), then sleep in the readiness set. (A fiber alone on its worker blocks the worker in a direct wait on its descriptor instead of parking: `direct_wait.rs`.) |
//!
//! Why each step:
//!
//! 0. Readiness that arrives while every worker is busy would otherwise wait for the
//!    monitor's tick and then travel through the injector; polling between two fibers
//!    keeps it on the worker that owns the set, and the clock read that tells staleness
//!    is paid on one dequeue in [`POLL_CHECK_INTERVAL`].
//! 1. A convoy's waiter is the one fiber everybody else waits for: its unlocker gave it
//!    the worker, so it runs before the wakees the unlocker may still produce.
//! 2. A worker whose own queues never run dry would starve the global queues: Go's
//!    `schedule` looks at its global run queue once in 61 ticks for the same reason.
//! 3. A lock hand-off or a ping-pong runs the wakee next on the same core, with no
//!    system call and no cache line crossing; the cap (tokio's `MAX_LIFO_POLLS_PER_TICK`)
//!    stops a group that hands a lock round from holding the worker forever. An idle
//!    worker is woken only for a surplus, so that a producer/consumer pair stays on one
//!    core.
//! 4. A coordinating fiber holds what other fibers wait for (a transaction's row locks
//!    between statements), so it gets about [`COORDINATING_WEIGHT`] times the turns of a
//!    deque fiber; the draw is weighted by the queues' lengths, so neither starves.
//!    Requeues go to the back (round robin), so a fiber that yields or whose turn ended
//!    ([`TURN_US`], [`SHORT_TURN_US`]) or that was preempted ([`DEFAULT_SLICE_MS`]) waits
//!    behind the others.
//! 5. Fibers from outside the pool come next: the batch moved into the own deque is
//!    then stealable by the others.
//! 6. Stealing spreads a surplus; the lifo slot and the urgent queue of an ACTIVE worker
//!    are its own to run next (stealing them would split a ping-pong pair across cores).
//!    The monitor moves a worker's queues to the injector when the worker is stranded
//!    ([`STRANDED_TICKS`], [`DESCHEDULED_STRANDED_TICKS`]), so a busy waker never
//!    strands its wakee.
//! 7. A short spin saves a sleeping worker's wake-up for every reply while another
//!    worker is busy; a long one takes the CPU from the process that is about to answer.
//!
//! The monitor's side, once a tick ([`MONITOR_TICK_NS`]): stuck and blocked workers
//! ([`STUCK_TICKS`], [`MAX_RECHECK_TICKS`], [`BLOCKED_CPU_SHARE`], [`LONG_BLOCK_NS`],
//! spares up to [`MAX_SPARES`]), preemption, the turn's length over windows of
//! [`POLICY_WINDOW_TICKS`] ([`HANDOFF_PER_MILLE`], [`CALM_WINDOWS`],
//! [`SHORT_MAX_WAITING_PER_WORKER`], [`MIN_RUNS_PER_WINDOW`]), the cgroup quota
//! ([`QUOTA_CHECK_EVERY_TICKS`]), its stretch ([`MAX_TICK_STRETCH`]) and its doze
//! ([`DOZE_AFTER_QUIET_TICKS`], [`REDOZE_AFTER_QUIET_TICKS`], [`MAX_DOZE_NS`]).
//!
//! # Designs rejected
//!
//! - The run order by CPU time (soon, coordinating and later queues; sampled vruntime):
//!   neutral on one family, a large loss on another (docs/RESULTS.md#run-order-by-cpu-time).
//! - A strict high-priority queue for coordinating fibers (MariaDB pool-of-threads'):
//!   the transactions took the CPU from the point selects (docs/RESULTS.md#share-policy).
//! - A fixed every-Nth-dequeue rule for the coordinating queue: the share then followed
//!   the queues' lengths (docs/RESULTS.md#coordinating-weight).
//! - Workers added to compete for the CPUs (the share policy): stalls, worse tails
//!   (docs/RESULTS.md#share-policy).
//! - The displaced lifo occupant and requeues to the injector, and a thief woken for
//!   every wakee: pairs spread over every CPU (docs/RESULTS.md#lifo-slot-and-requeue).
//! - Turns of a quarter millisecond while few fibers wait: cost TPC-C's throughput
//!   (docs/RESULTS.md#turn-length).
//! - One readiness set for every pool size: connections migrate on many cores
//!   (docs/RESULTS.md#poll-sets-per-worker); one poller thread and futex sleepers
//!   (docs/RESULTS.md#epoll-sleepers).
//! - A worker's own `SCHED_BATCH` or EEVDF slice (docs/RESULTS.md#worker-scheduling-policy).
//!
//! # Kept elsewhere
//!
//! Outside this module and still scheduling policy, where their layer or their code
//! keeps them: the mutex's spin and fairness (`sync::lock_word`'s `SPIN_LIMIT`,
//! `sync::mutex`), the direct wait's peer-CPU rule (`io::peer_cpu`), the readiness
//! threshold of `io::ops`, and the dead-stack release after a long sleep
//! (`runtime::sleep::stack_release::RELEASE_AFTER_MS`, memory rather than order).

// ---- Where work is taken from (`worker::find_work`) ----

/// Every this many dequeues a worker looks at the global queues first. Origin: the
/// constant Go's scheduler uses; no A/B run here.
pub const GLOBAL_CHECK_INTERVAL: u32 = 61;
/// Every this many dequeues a busy worker polls its readiness set if it is stale.
/// Origin: chosen on the MariaDB yardstick; see docs/RESULTS.md#reactor-polling.
pub const POLL_CHECK_INTERVAL: u32 = 4;
/// How old a set's last poll may get before a busy or spinning worker polls it. Origin:
/// well under a loopback round trip; see docs/RESULTS.md#reactor-polling.
pub const STALE_NS: u64 = 50_000;
/// Fibers run in a row from the lifo slot while the deque or the coordinating queue
/// waits. Origin: tokio's `MAX_LIFO_POLLS_PER_TICK`; see docs/RESULTS.md#lifo-slot-and-requeue.
pub const LIFO_STREAK_CAP: u32 = 3;
/// The turns a coordinating fiber gets for one of a deque fiber. Origin: chosen on the
/// MariaDB mix and the yardstick's read_write; see docs/RESULTS.md#coordinating-weight.
pub const COORDINATING_WEIGHT: u64 = 4;
/// Descriptor waits after a condition or futex wait during which a fiber still counts
/// as coordinating. Origin: the removed run order's window, kept; see
/// docs/RESULTS.md#coordinating-keeps-class.
pub const COORDINATING_WAITS: u8 = 32;

// ---- Idle workers (`worker::spin_for_work`) ----

/// Idle rounds a worker spins before it sleeps. Origin: chosen on MariaDB point selects
/// at two connections; see docs/RESULTS.md#idle-spin.
pub const SPIN_ROUNDS: u32 = 16;
/// The first `SPIN_ROUNDS / SPIN_PAUSE_PART` rounds pause; the rest `sched_yield`.
/// Origin: skipping the pause part was worse; see docs/RESULTS.md#idle-spin.
pub const SPIN_PAUSE_PART: u32 = 4;
/// `pause` instructions in one pausing round (a few hundred ns). Origin: a guess; no
/// A/B run yet.
pub const PAUSES_PER_ROUND: u32 = 64;
/// A spinning worker polls for readiness every this many rounds. Origin: a guess; no
/// A/B run yet.
pub const SPIN_PROBE_EVERY: u32 = 4;
/// Pools of at least this many workers get a readiness set per worker. Origin: chosen
/// on MariaDB on many cores and on two shared vCPUs, nothing measured between; see
/// docs/RESULTS.md#poll-sets-per-worker.
pub const PER_WORKER_SETS_FROM: usize = 4;

// ---- Turns and preemption (`turn.rs`, `runtime::preemption::preempt`) ----

/// A fiber's turn in µs, after which its next stream read ends it while others wait.
/// Origin: chosen on the MariaDB mix and point_select; see docs/RESULTS.md#turn-length.
pub const TURN_US: u64 = 1000;
/// The turn in µs while the program's threads rarely wake each other and few fibers
/// wait. Origin: chosen on point_select over TCP and unix sockets, checked on TPC-C; see
/// docs/RESULTS.md#short-turn-40us.
pub const SHORT_TURN_US: u64 = 40;
/// Fiber-to-fiber wake-ups per 1000 runs at or above which the turn is the long one.
/// Origin: between point_select's and TPC-C's rates; see docs/RESULTS.md#turn-two-lengths.
pub const HANDOFF_PER_MILLE: u64 = 30;
/// Quiet windows in a row before the turn becomes the short one. Origin: TPC-C's quiet
/// windows come singly; see docs/RESULTS.md#turn-two-lengths.
pub const CALM_WINDOWS: u32 = 4;
/// Runnable fibers per active worker, on average over a window, at or above which the
/// turn is the long one. Origin: point_select at many connections; see
/// docs/RESULTS.md#turn-two-lengths.
pub const SHORT_MAX_WAITING_PER_WORKER: u64 = 32;
/// A window with fewer runs keeps the previous decision: too few to tell. Origin: a
/// guess; no A/B run yet.
pub const MIN_RUNS_PER_WINDOW: u64 = 64;
/// Monitor ticks per decision of the turn policy. Origin: chosen with the two turn
/// lengths; see docs/RESULTS.md#turn-two-lengths.
pub const POLICY_WINDOW_TICKS: u32 = 16;
/// The default preemption slice, in ms (`FIBERIZE_PREEMPT_MS` overrides). Origin: chosen
/// on redis with io-threads; see docs/RESULTS.md#preemption-slice.
pub const DEFAULT_SLICE_MS: u64 = 5;
/// Refused preemption requests in a row (one per tick) after which the monitor gives
/// the pool a spare worker instead; counted in refusals, not time, so a worker the
/// kernel does not run has refused nothing. Origin: far longer than any libc call that
/// does not block; a guess, no A/B run yet.
pub const FALLBACK_AFTER_REFUSALS: u32 = 20;

// ---- The wake side (`wake::unpark_lock_waiter`, `clock::parked_long`) ----

/// Monitor ticks a mutex waiter parked before its unlocker yields to it (a convoy).
/// Origin: chosen on the MariaDB mix against short hand-offs; see
/// docs/RESULTS.md#convoy-yield.
pub const CONVOY_TICKS: u64 = 2;

// ---- The monitor (`monitor.rs`, `stuck.rs`, `blocked.rs`, `quota.rs`) ----

/// The monitor's period. Origin: the order of the kernel's time slice; no A/B run yet.
pub const MONITOR_TICK_NS: u64 = 1_000_000;
/// Ticks without progress before a sleeping worker counts as blocked. Origin: chosen
/// against spare workers started for short kernel waits; see
/// docs/RESULTS.md#monitor-blocked-rule.
pub const STUCK_TICKS: u32 = 2;
/// Longest gap between two looks at a running worker's kernel state, in ticks: a fiber
/// that computes and then blocks is noticed within this plus `STUCK_TICKS`. Origin: a
/// guess; no A/B run yet.
pub const MAX_RECHECK_TICKS: u32 = 16;
/// A worker counts as blocked only if its thread ran less than 1/BLOCKED_CPU_SHARE of
/// the time between two looks: a fiber that computes with brief kernel waits (arena
/// locks, page faults) runs most of the time, one in a blocking call hardly at all.
/// Origin: see docs/RESULTS.md#monitor-blocked-rule.
pub const BLOCKED_CPU_SHARE: u64 = 4;
/// How long a worker may stay BLOCKED in one call before its fiber is marked for
/// demotion to its donor: a call that lasts longer is a thread's waiting loop, which
/// costs a spare worker for as long as it runs. Origin: a guess (a DNS lookup or an
/// `flock` on a busy file ends well within); no A/B run yet.
pub const LONG_BLOCK_NS: u64 = 1_000_000_000;
/// Extra worker slots for spares beyond the target. Origin: a bound; no A/B run yet.
pub const MAX_SPARES: usize = 256;
/// Ticks without a switch after which the monitor hands a worker's queues to the
/// injector though no worker idles. Origin: the default preemption slice, which bounds
/// such a run; see docs/RESULTS.md#stranded-release.
pub const STRANDED_TICKS: u32 = 5;
/// The same for a worker the kernel kept off its CPU half the stretch. Origin: see
/// docs/RESULTS.md#stranded-release.
pub const DESCHEDULED_STRANDED_TICKS: u32 = 20;
/// A worker counts as kept off its CPU when its thread ran less than
/// 1/DESCHEDULED_CPU_SHARE of a no-progress stretch. Origin: see
/// docs/RESULTS.md#stranded-release.
pub const DESCHEDULED_CPU_SHARE: u64 = 2;
/// How often the cgroup quota is read again, in ticks. Origin: a quota changes seconds
/// apart; a guess, no A/B run yet (docs/RESULTS.md#cgroup-quota tests that it is followed).
pub const QUOTA_CHECK_EVERY_TICKS: u64 = 1000;
/// Quiet ticks in a row before the monitor dozes. Origin: one policy window; see
/// docs/RESULTS.md#monitor-doze.
pub const DOZE_AFTER_QUIET_TICKS: u32 = POLICY_WINDOW_TICKS;
/// Quiet ticks before the monitor dozes again after a long doze. Origin: an idle
/// MariaDB's background errands; see docs/RESULTS.md#monitor-doze.
pub const REDOZE_AFTER_QUIET_TICKS: u32 = 2;
/// Longest stretch of the tick while the pool is quiet, as a power of two: 4 ticks.
/// Origin: under the preemption slice (`STRANDED_TICKS`), so a fiber that began to run
/// in a stretched tick is looked at before its slice ends; see
/// docs/RESULTS.md#tick-stretch.
pub const MAX_TICK_STRETCH: u32 = 2;
/// Longest doze: it bounds what a doze delays (the exit after `pthread_exit` in `main`,
/// the monitor's net for a lost wake-up). Origin: see docs/RESULTS.md#monitor-doze.
pub const MAX_DOZE_NS: u64 = 50_000_000;
