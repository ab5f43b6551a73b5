//! A fiber's turn: how long it may keep its worker while serving request after request.
//!
//! # Why (issue 11)
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
//! of requests. The run queues were FIFO per wake-up; the order by CPU time
//! (`fair.rs`, issue 27) is what addresses that; turns only bound the longest runs.
//!
//! # The rule
//!
//! A worker notes when the running fiber's turn began: at the fiber's first stream read
//! that returns data in this run ([`note_stream_read`]; a run is told from the next by
//! the worker's `progress` count, so that a switch neither reads the clock nor writes
//! anything for turns). At each later such read, if the turn has
//! lasted `FIBERIZE_TURN_US` ([`DEFAULT_TURN_US`]) and other fibers wait in the worker's
//! queues or the global queue, the fiber ends its turn (`Switch::EndTurn`): it goes to
//! the back of its worker's deque with the request it just read, as a preempted fiber
//! does, or to the worker's later queue if the turn put it ahead of its share of the
//! CPU (`fair.rs`). Until issue 27 it went to the back of the global injector, behind
//! every runnable fiber of the pool and usually to another worker (with
//! `FIBERIZE_FAIR=0` it still does). Tried with the order by CPU time and dropped:
//! ending a turn only once the run put the fiber ahead of its share (turns of ~3 ms at
//! 16 connections): point_select over TCP @16 fell to 0.46x native and @64 to 0.65x
//! (`bench-mysql/tails.sh`, 2 rounds, the 2-vCPU VM loaded by other work), against
//! 1.13x and 1.08x with plain 1 ms turns in the same runs. A read is where a server is between two requests:
//! it holds no latch there (a transaction in progress keeps its row locks, as it does
//! while its client thinks). A fiber with nobody waiting keeps going. The rule costs
//! one clock read per stream read that returns data (~80 ns on the 2-vCPU VM).
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

/// A worker's current turn: the `progress` value of the run it began in, and when.
#[derive(Default)]
pub(super) struct Turn {
    run: AtomicU64,
    started_ns: AtomicU64,
}

/// The turn budget in ns (0: off), read once.
fn turn_ns() -> u64 {
    static TURN_NS: AtomicU64 = AtomicU64::new(u64::MAX);
    let v = TURN_NS.load(Ordering::Relaxed);
    if v != u64::MAX {
        return v;
    }
    let ns = crate::base::config::config().turn_us.unwrap_or(DEFAULT_TURN_US) * 1000;
    TURN_NS.store(ns, Ordering::Relaxed);
    ns
}

/// A fiber's socket read returned data: starts its turn, or ends it if it is spent
/// and other fibers wait (see the module docs). For the I/O layer, in fiber context.
pub fn note_stream_read() {
    let budget = turn_ns();
    if budget == 0 {
        return;
    }
    let Some(f) = fiber::current() else { return };
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
    let rt = runtime_unchecked();
    if w.stealer.is_empty()
        && w.soon.stealer.is_empty()
        && w.later.stealer.is_empty()
        && rt.injector.is_empty()
        && rt.handoff_head.load(Ordering::Relaxed).is_null()
    {
        // Nobody waits: keep the worker, start a new turn.
        w.turn.started_ns.store(now, Ordering::Relaxed);
        return;
    }
    bump(&STATS.turns_ended);
    // SAFETY: we are this fiber, on its stack.
    unsafe { f.suspend(Switch::EndTurn) };
}
