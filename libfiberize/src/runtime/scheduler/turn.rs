//! A fiber's turn: how long it may keep its worker while serving request after request.
//!
//! # Why
//!
//! A fiber runs until it switches. A server connection's fiber that writes a reply and
//! then reads finds the next request already there when its client answered in the
//! meantime (on a small machine the kernel runs the woken client while our worker is
//! still busy), and goes on without parking. MariaDB with `point_select` at 2048
//! connections next to `read_write` at 256 on 2 vCPUs (`bench-mysql/mix.sh`,
//! `FIBERIZE_STATS=1`, `runtime::queue_delay`): 242 000 parks for ~1.5 M queries, so
//! a run served ~6 requests; ~2 250 fibers waited in the injector (dump), and a fiber
//! woken by readiness waited 375–440 ms on average before it ran. A `read_write`
//! transaction needs ~20 round trips plus its lock and commit waits, each another trip
//! through that queue: read_write p95 5.8 s against 2.0 s natively (medians of 3 runs). The kernel
//! time-slices a native server's threads, so none serves a run of requests while the
//! others wait.
//!
//! What it does not fix: natively read_write still gets ~2.3x the transactions
//! (native 328 tps against 143, same runs). The kernel shares CPU *time* per thread
//! (EEVDF): a connection that used little CPU per wake-up (a read_write statement
//! between lock waits and commits) is owed time and runs before one that served a run
//! of requests. The run queues are FIFO per wake-up; turns only bound the longest runs
//! (an order by CPU time was tried and removed: docs/DESIGN.md §3).
//!
//! # The rule
//!
//! A worker notes when the running fiber's turn began: at the fiber's first stream read
//! that returns data in this run ([`note_stream_read`]; a run is told from the next by
//! the worker's `progress` count, so that a switch neither reads the clock nor writes
//! anything for turns). At each later such read, if the turn has
//! lasted `FIBERIZE_TUNE=turn_us` ([`DEFAULT_TURN_US`]) and other fibers wait in the worker's
//! queues or the global queue, the fiber ends its turn (`Switch::EndTurn`): it goes to
//! the back of its worker's deque with the request it just read, as a preempted fiber
//! does (until 2026-11-25 it went to the back of the global injector, behind every
//! runnable fiber of the pool and usually to another worker). A read is where a server is
//! between two requests: it holds no latch there (a transaction in progress keeps its
//! row locks, as it does while its client thinks). A fiber with nobody waiting keeps
//! going. The rule costs one clock read per stream read that returns data (~80 ns on
//! the 2-vCPU VM).
//!
//! # Two lengths: the program decides
//!
//! A turn of 1 ms bounds the longest runs but not the everyday tail: at 16 connections
//! over TCP a request waits behind the turns of the fibers queued before it, and
//! point_select's p95 was 2.3–2.6x native. A shorter turn cuts that p95 (to 1.0–1.3x with
//! 40 µs, [`DEFAULT_SHORT_TURN_US`]), but a quarter of a millisecond had cost TPC-C @256
//! a twentieth of its throughput when tried before: a TPC-C connection
//! holds row locks between its statements, and every cut turn delays what other
//! connections wait for. The two kinds of program look different from here: TPC-C's
//! threads wake each other all the time (lock and condition hand-offs, group commit:
//! 120–630 fiber-to-fiber wake-ups per 1000 runs), point_select's connections almost
//! never (6–10). So the monitor counts, over windows of `POLICY_WINDOW_TICKS` ticks, the
//! pool's runs and fiber-to-fiber wake-ups (`wake::schedule`'s fiber branch): after
//! `CALM_WINDOWS` windows in a row under `HANDOFF_PER_MILLE`, with fewer than
//! `SHORT_MAX_WAITING_PER_WORKER` runnable fibers per worker on average, the turn is the
//! short one (`FIBERIZE_TUNE=turn_short_us`, [`DEFAULT_SHORT_TURN_US`]), at the first busy
//! window the long one again. (With hundreds waiting per worker a request waits behind
//! hundreds of turns whatever their length, and short ones only cost throughput.) Counters `turn_windows_short`, `turn_windows_long`,
//! `turns_ended_short`. MariaDB's pool-of-threads makes the same distinction by
//! transaction state (`thread_pool_priority=auto`: a connection inside a transaction
//! is served first); a library cannot see transactions, but it sees their hand-offs.
//!
//! Go ends a goroutine's turn at a function call once its 10 ms slice is over
//! (cooperative preemption); tokio gives a task a budget of 128 resource operations
//! per poll before it must yield. Here the budget is time, measured from the first
//! read, and the check sits at the one operation every server does per request.

use super::*;
use crate::base::stats::{bump, STATS};

/// Default turn in µs. Origin: measured with `bench-mysql/mix.sh` on the 2-vCPU machine
/// (shared with other work; point_select @2048 + read_write @256, medians of 3 runs of
/// 45 s): turn off: read_write 134 tps, p95 5.8 s, point_select 30.8k tps, 42 794 queue
/// waits over 1 s; 1000 µs: 143 tps, p95 4.4 s, 32.3k tps, 3 911 waits over 1 s; 500 µs:
/// p95 4.0 s but point_select 23.1k. Shorter turns cost throughput: point_select alone
/// @1024 (2 runs of 20 s) was 45k (off), 41–51k (1000), 28–30k (300), 21k (100) tps,
/// because every cut turn costs the fiber another trip through the queue for its next
/// request. A millisecond is also the order of the kernel's own time slice.
pub const DEFAULT_TURN_US: u64 = 1000;

/// Default turn in µs while the program's threads rarely wake each other and few fibers
/// wait (see the module docs). Origin: point_select over TCP loopback and the unix
/// socket, 2-vCPU VMs with the client, servers side by side (`bench-mysql/tails.sh`).
/// First 250, 150 and 100 µs (3 rounds, `CONFIGS="native s150=…+FIBERIZE_TUNE=turn_short_us=150
/// s100=… s250=…" PATHS=tcp CONNS="2 16 64"`): p95 at 16 / 64 connections 1.88x / 1.43x
/// native with 250, 1.57x / 1.26x with 150, 1.15x / 0.98x with 100, throughput the same
/// within the noise. On a faster VM (AMD EPYC, 2026-11-26..27) 100 µs left the p95 at
/// 1.43–1.81x native over TCP (nine runs): a fiber there serves 3–4 requests per turn,
/// and the first request of each turn waits for the turns of every fiber queued before
/// it. 40 µs held it at 1.02–1.33x in five runs of 3–5 rounds, at a throughput within
/// 5 % of 100 µs's in three of them (the runs: docs/DESIGN.md §3, "The short turn is
/// 40 µs"); 30 µs cost more throughput for no better p95.
/// The turn stays long where hundreds wait ([`SHORT_MAX_WAITING_PER_WORKER`]) and in
/// programs whose threads hand each other locks (TPC-C), so neither sees this value.
pub const DEFAULT_SHORT_TURN_US: u64 = 40;

/// Fiber-to-fiber wake-ups per 1000 runs at or above which the turn is the long one.
/// Origin: the two kinds of server the 2-vCPU VM runs are far apart (`FIBERIZE_STATS`,
/// `queue_fiber_wake` against `switches`): MariaDB's point_select (independent
/// connections) 6–10 per 1000 runs at 16–1024 connections; TPC-C @256 (row locks,
/// group commit) 120 with short turns, 400–630 with long ones. 30 sits between them,
/// with a factor of 3–4 to either side.
const HANDOFF_PER_MILLE: u64 = 30;

/// Quiet windows in a row before the turn becomes the short one. Origin: TPC-C @256 on
/// the 2-vCPU VM has single windows of 16 ms with few wake-ups between its busy ones
/// (90 of 395 windows by the rate alone); four in a row (64 ms) are rare there.
const CALM_WINDOWS: u32 = 4;

/// Runnable fibers per active worker, on average over a window, at or above which the
/// turn is the long one whatever the wake-ups. Origin: point_select at 1024
/// connections (`bench-mysql/tails.sh`, 2-vCPU VM, 3 rounds): with the short turn
/// throughput fell from 1.56x to 1.27x native over TCP (1.50x to 1.17x over the unix
/// socket) while the p95 barely moved (2.5x to 2.25x native): with hundreds waiting
/// per worker a request waits behind hundreds of turns whatever their length, and every
/// cut turn is another trip through the queue. At 16 and 64 connections fewer than 32
/// wait per worker.
const SHORT_MAX_WAITING_PER_WORKER: u64 = 32;

/// A window with fewer runs than this keeps the previous decision: too few to tell.
const MIN_RUNS_PER_WINDOW: u64 = 64;

/// The pool's turn now, in ns (0: turns off). Written by the monitor ([`Policy`]), read
/// at every stream read that returns data: Relaxed, a stale value for a tick is harmless.
pub(super) struct Budget {
    ns: AtomicU64,
    short: AtomicBool,
}

impl Budget {
    /// The long turn until the monitor's first decision.
    pub(super) fn new() -> Budget {
        Budget { ns: AtomicU64::new(long_turn_ns()), short: AtomicBool::new(false) }
    }
}

fn long_turn_ns() -> u64 {
    crate::base::config::config().turn_us.unwrap_or(DEFAULT_TURN_US) * 1000
}

fn short_turn_ns() -> u64 {
    let long = long_turn_ns();
    (crate::base::config::config().turn_short_us.unwrap_or(DEFAULT_SHORT_TURN_US) * 1000).min(long)
}

/// The monitor's side: counts runs and fiber-to-fiber wake-ups over a window of ticks
/// and sets the budget. Monitor-local state.
#[derive(Default)]
pub(super) struct Policy {
    last_runs: u64,
    last_fiber_wakes: u64,
    /// Windows in a row with few fiber-to-fiber wake-ups and short queues.
    calm_windows: u32,
}

impl Policy {
    /// At the end of each window of `monitor::POLICY_WINDOW_TICKS` ticks;
    /// `mean_waiting`: the fibers waiting in the run queues, on average over it.
    pub(super) fn window_end(&mut self, rt: &Runtime, mean_waiting: u64) {
        let (mut runs, mut fiber_wakes) = (0u64, 0u64);
        for w in rt.workers() {
            // `progress` moves twice per run (as the run begins and as it ends).
            runs += w.progress.load(Ordering::Relaxed) / 2;
            fiber_wakes += w.turn.fiber_wakes.load(Ordering::Relaxed);
        }
        let (window_runs, window_wakes) = (runs.wrapping_sub(self.last_runs), fiber_wakes.wrapping_sub(self.last_fiber_wakes));
        self.last_runs = runs;
        self.last_fiber_wakes = fiber_wakes;
        let long = long_turn_ns();
        if long == 0 || window_runs < MIN_RUNS_PER_WINDOW {
            return;
        }
        // Short only after CALM_WINDOWS quiet windows in a row, long at once: the long turn
        // is the safe one (a cut turn may delay what other threads wait for).
        let workers = rt.active.load(Ordering::Relaxed).max(1) as u64;
        if window_wakes * 1000 < window_runs * HANDOFF_PER_MILLE && mean_waiting < SHORT_MAX_WAITING_PER_WORKER * workers {
            self.calm_windows = self.calm_windows.saturating_add(1);
        } else {
            self.calm_windows = 0;
        }
        let short = self.calm_windows >= CALM_WINDOWS;
        rt.turn_budget.ns.store(if short { short_turn_ns() } else { long }, Ordering::Relaxed);
        rt.turn_budget.short.store(short, Ordering::Relaxed);
        bump(if short { &STATS.turn_windows_short } else { &STATS.turn_windows_long });
    }
}

/// A worker's current turn: the `progress` value of the run it began in, and when; and
/// the fibers that fibers running on it woke (the policy's measure).
#[derive(Default)]
pub(super) struct Turn {
    run: AtomicU64,
    started_ns: AtomicU64,
    fiber_wakes: AtomicU64,
}

impl Turn {
    /// A fiber running on this worker made another runnable (`wake::schedule`). Only the
    /// worker's own OS thread writes: a load and a store, no read-modify-write.
    #[inline]
    pub(super) fn note_fiber_wake(&self) {
        self.fiber_wakes.store(self.fiber_wakes.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }
}

/// A fiber's socket read returned data: starts its turn, or ends it if it is spent
/// and other fibers wait (see the module docs). For the I/O layer, in fiber context.
pub fn note_stream_read() {
    let Some(f) = fiber::current() else { return };
    // A fiber exists, so the runtime does.
    let rt = runtime_unchecked();
    let budget = rt.turn_budget.ns.load(Ordering::Relaxed);
    if budget == 0 {
        return;
    }
    // `f` is the caller: its worker is the one whose OS thread we are on.
    let Some(w) = super::worker_of(f) else { return };
    let now = sys::now_ns();
    let run = w.progress.load(Ordering::Relaxed);
    if w.turn.run.load(Ordering::Relaxed) != run {
        // The first such read of this run: its turn begins.
        w.turn.run.store(run, Ordering::Relaxed);
        w.turn.started_ns.store(now, Ordering::Relaxed);
        return;
    }
    if now.saturating_sub(w.turn.started_ns.load(Ordering::Relaxed)) < budget {
        return;
    }
    if !w.has_queued(false, Ordering::Relaxed) && rt.injector.is_empty() && rt.handoff_head.load(Ordering::Relaxed).is_null() {
        // Nobody waits: keep the worker, start a new turn.
        w.turn.started_ns.store(now, Ordering::Relaxed);
        return;
    }
    bump(&STATS.turns_ended);
    if rt.turn_budget.short.load(Ordering::Relaxed) {
        bump(&STATS.turns_ended_short);
    }
    // SAFETY: we are this fiber, on its stack.
    unsafe { f.suspend(Switch::EndTurn) };
}
