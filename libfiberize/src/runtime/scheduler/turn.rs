//! A fiber's turn: how long it may keep its worker while serving request after request.
//!
//! # Why
//!
//! A fiber runs until it switches. A server connection's fiber that writes a reply and
//! then reads finds the next request already there when its client answered in the
//! meantime (on a small machine the kernel runs the woken client while our worker is
//! still busy), and goes on without parking. So a run serves several requests while
//! thousands of fibers wait in the queues, and a transaction that needs many round trips
//! plus its lock and commit waits pays a trip through that queue for each. The kernel
//! time-slices a native server's threads, so none serves a run of requests while the
//! others wait (the measurements: docs/RESULTS.md#turn-length).
//!
//! What it does not fix: the kernel shares CPU *time* per thread (EEVDF): a connection
//! that used little CPU per wake-up (a transaction's statement between lock waits and
//! commits) is owed time and runs before one that served a run of requests. The run
//! queues are FIFO per wake-up; turns only bound the longest runs (an order by CPU time
//! was tried and removed: docs/RESULTS.md#run-order-by-cpu-time).
//!
//! # The rule
//!
//! A worker notes when the running fiber's turn began: at the fiber's first stream read
//! that returns data in this run ([`note_stream_read`]; a run is told from the next by
//! the worker's `progress` count, so that a switch neither reads the clock nor writes
//! anything for turns). At each later such read, if the turn has
//! lasted [`TURN_US`] and other fibers wait in the worker's
//! queues or the global queue, the fiber ends its turn (`Switch::EndTurn`): it goes to
//! the back of its worker's deque with the request it just read, as a preempted fiber
//! does. A read is where a server is between two requests: it holds no latch there (a
//! transaction in progress keeps its row locks, as it does while its client thinks). A
//! fiber with nobody waiting keeps going. The rule costs one clock read per stream read
//! that returns data.
//!
//! # Two lengths: the program decides
//!
//! A long turn bounds the longest runs but not the everyday tail: with a few dozen
//! connections a request waits behind the turns of the fibers queued before it. A
//! shorter turn cuts that tail, but costs programs whose connections hold row locks
//! between statements, since every cut turn delays what other connections wait for. The
//! two kinds of program look different from here: a lock-handing program's threads wake
//! each other all the time (lock and condition hand-offs, group commit), independent
//! connections almost never. So the monitor counts, over windows of `POLICY_WINDOW_TICKS` ticks, the
//! pool's runs and fiber-to-fiber wake-ups (`wake::schedule`'s fiber branch): after
//! `CALM_WINDOWS` windows in a row under `HANDOFF_PER_MILLE`, with fewer than
//! `SHORT_MAX_WAITING_PER_WORKER` runnable fibers per worker on average, the turn is the
//! short one ([`SHORT_TURN_US`]), at the first busy
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

use super::policy::{CALM_WINDOWS, HANDOFF_PER_MILLE, MIN_RUNS_PER_WINDOW, SHORT_MAX_WAITING_PER_WORKER, SHORT_TURN_US, TURN_US};
use super::*;
use crate::base::stats::{bump, STATS};

fn long_turn_ns() -> u64 {
    TURN_US * 1000
}

fn short_turn_ns() -> u64 {
    (SHORT_TURN_US * 1000).min(long_turn_ns())
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
    /// At the end of each window of `policy::POLICY_WINDOW_TICKS` ticks;
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
        if window_runs < MIN_RUNS_PER_WINDOW {
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

/// A fiber's socket read returned data: starts its turn, or ends it if it is spent
/// and other fibers wait (see the module docs). For the I/O layer, in fiber context.
pub fn note_stream_read() {
    let Some(f) = fiber::current() else { return };
    // A fiber exists, so the runtime does.
    let rt = runtime_unchecked();
    let budget = rt.turn_budget.ns.load(Ordering::Relaxed);
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
