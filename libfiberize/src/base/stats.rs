//! Process-wide counters, printed at exit with `FIBERIZE_STATS=1`.
//!
//! # Sharding
//!
//! Workers bump these on their hottest paths (every switch, park, unpark). One shared
//! atomic per counter made every bump a cross-core cache miss once more than two CPUs
//! bump it: on a many-core machine a single `switches` line took every worker's switch
//! through the same line (docs/RESULTS.md#stats-sharding). So each counter is split into [`SHARDS`] slots, one
//! group of cache lines per shard, and a bump picks its shard from the caller's stack
//! address (see [`shard`] for the measured alternative). The choice is TLS-free and
//! async-signal-safe (a donor's TLS may be borrowed by its fiber; a signal handler may
//! bump). Reading sums the shards. Relaxed increments: they are statistics, not
//! synchronization.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Shards per counter. Origin: a power of two well above the 16 workers of the largest
/// machine measured, so that concurrently running stacks rarely share a shard.
pub const SHARDS: usize = 64;

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        #[derive(Clone, Copy)]
        #[repr(usize)]
        enum Id { $($name,)* COUNT }
        pub struct Stats { $($(#[$doc])* pub $name: Counter,)* }
        pub static STATS: Stats = Stats { $($name: Counter(Id::$name as usize),)* };
        const COUNTERS: usize = Id::COUNT as usize;
        impl Stats {
            /// `name=value` pairs, space separated.
            pub fn render(&self) -> String {
                let mut s = String::new();
                $( s.push_str(concat!(" ", stringify!($name), "=")); s.push_str(&self.$name.get().to_string()); )*
                s
            }
        }
    };
}

counters! {
    fibers_created,
    fibers_finished,
    fibers_native_fallback,
    switches,
    yields,
    parks,
    unparks,
    steals,
    /// Fibers the monitor moved from a worker that made no switch for a tick (or that
    /// is stranded) to the injector (`scheduler::stuck`, `release_queued`).
    fibers_released,
    lifo_capped,
    mutex_handoffs,
    /// Woken mutex waiters that found the mutex taken again (a barger won) and slept
    /// again, at the front of its queue (`sync::mutex`).
    mutex_wakes_lost,
    /// Spin phases of woken mutex waiters that found the mutex taken again, and the
    /// ones skipped because the waiter's worker had other fibers queued ("Spinning" in
    /// `sync::lock_word`).
    lock_spins,
    lock_spins_skipped,
    donor_handoffs,
    timers_fired,
    worker_sleeps,
    worker_wakeups,
    direct_waits,
    direct_waits_declined_peer_elsewhere,
    /// Times a direct wait asked the kernel where a socket's peer runs (`io::peer_cpu`).
    peer_cpu_lookups,
    /// Direct waits that blocked without spinning first: the peer runs on the worker's
    /// CPU (`scheduler::direct_wait`, "Spinning").
    direct_waits_unspun,
    /// `poll` waits for input answered from the reactor's edge instead of a second,
    /// real `poll` after the wake-up (`io::ops::readiness::poll`).
    poll_probes_saved,
    /// Idle episodes that slept without spinning: the last fiber declined a wait for a
    /// peer on another CPU (`scheduler::sleep_without_spin_next`).
    idle_spins_skipped,
    /// Times the monitor dozed: the whole pool slept (`scheduler::monitor`, "Dozing").
    monitor_dozes,
    /// Times the monitor's thread woke: a tick, the end of a doze (`scheduler::monitor`).
    monitor_wakeups,
    /// Dozes begun after fewer quiet ticks than the full count, because the previous
    /// doze was long (`scheduler::monitor`, "Dozing again").
    monitor_redozes,
    /// Monitor sleeps longer than a tick because the pool was quiet at the end of the
    /// previous one (`scheduler::monitor`, "Stretching the tick while the pool is quiet").
    monitor_stretched_ticks,
    thread_waits,
    futex_waits,
    futex_wakes,
    /// Non-private futex operations passed to the kernel: their word is in shared memory (`sync::futex_shared`).
    futex_shared_to_kernel,
    /// Reads of `/proc/self/maps` for the table of shared ranges (`sync::futex_shared`).
    futex_maps_reads,
    /// Non-private two-word futex operations with one word in private memory and one in
    /// shared memory, split between the parking lot and the kernel (`sync::futex_split`).
    futex_split,
    workers_blocked,
    workers_spawned,
    workers_retired,
    /// Worker threads the pool could not start when it wanted one more ACTIVE worker
    /// (a spare for a blocked one, a raised quota): `pthread_create` failed (the
    /// group's `pids.max`, `RLIMIT_NPROC`), and the pool went on with the workers it
    /// had (`scheduler::blocked::bring_in_worker`).
    worker_starts_failed,
    fibers_demoted,
    demotions_completion_wait,
    demotions_long_block,
    signals_deferred,
    /// Process-directed signals handed to a fiber that does not block them
    /// (`signal::process`).
    signals_to_fibers,
    preemptions,
    turns_ended,
    /// Of those, turns ended at the short budget (`scheduler::turn`: the program's
    /// threads rarely woke each other).
    turns_ended_short,
    /// The turn policy's windows that chose the short and the long turn.
    turn_windows_short,
    turn_windows_long,
    /// Times the monitor found the cgroup's CPU quota changed the workers the pool
    /// wants (`scheduler::quota`).
    quota_changes,
    preempt_refused,
    preempt_fallbacks,
    stack_releases,
    /// Long sleeps that left the stack alone: the page below the kept margin still read
    /// as zero since the same range was released (`runtime::sleep::stack_release`).
    stack_releases_skipped,
    // Locality: what keeps a connection on its core, or does not.
    /// Runs of a fiber on another worker than its previous run (`scheduler::run_fiber`).
    migrations,
    /// Fibers made runnable by code on another worker than the one they last ran on
    /// (readiness dispatch, lock hand-offs, joins; `scheduler::wake::schedule`).
    cross_worker_wakes,
    /// Writes to an eventfd to wake a sleeping worker or end a direct wait.
    eventfd_writes,
    /// The runtime's descriptors moved to another number because the program
    /// `dup2`ed onto theirs (`base::own_fds::program_replaces`).
    own_fds_moved,
    /// `closefrom`s made by the library's own walk of `/proc/self/fd`, where
    /// `close_range` failed (`io::ops::lifecycle::closefrom`).
    closefrom_walks,
    /// `epoll_wait` calls on the readiness set, and the events they returned (the
    /// wake-up eventfd's included).
    epoll_waits,
    epoll_events,
    /// Descriptors moved to the readiness set of the worker their only waiter runs on
    /// (readiness sets per worker, `crate::io::scheduled_io`).
    fd_moves,
    /// Runtime-internal lock waits the monitor found a worker in and did not count as
    /// blocked (`scheduler::monitor`: no spare for them).
    internal_lock_waits,
    /// Mutex unlocks that gave their worker to a convoy's wakee, and futex wakes of one
    /// that gave it to theirs (`unpark_lock_waiter`).
    lock_wakes_yielded,
}

/// One shard: a slot for every counter, padded so that two shards never share a line.
#[repr(align(64))]
struct Shard([AtomicU64; COUNTERS]);

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_SHARD: Shard = Shard([ZERO; COUNTERS]);
static TABLE: [Shard; SHARDS] = [EMPTY_SHARD; SHARDS];

/// A counter: its index in every shard.
pub struct Counter(usize);

impl Counter {
    /// The sum over all shards (exact once the bumpers are quiet).
    pub fn get(&self) -> u64 {
        TABLE.iter().map(|s| s.0[self.0].load(Relaxed)).fold(0, u64::wrapping_add)
    }
}

/// The caller's shard: a hash of its stack region (64 KiB granules). Fibers and threads
/// that run at the same time run on different stacks, so they mostly bump different
/// lines. Measured alternative: the CPU number from `rdtscp` keeps each CPU on its own
/// lines, but costs tens of cycles per bump on a VM (docs/RESULTS.md#stats-sharding).
#[inline]
fn shard() -> &'static Shard {
    &TABLE[shard_index()]
}

/// The shard (`0..SHARDS`) for a bump from the calling stack, for other sharded
/// statistics (`crate::runtime::fibers::queue_delay`).
#[inline]
pub fn shard_index() -> usize {
    let marker = 0u8;
    let sp = &marker as *const u8 as usize;
    (((sp >> 16) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SHARDS.trailing_zeros())) as usize
}

#[inline]
pub fn bump(c: &Counter) {
    shard().0[c.0].fetch_add(1, Relaxed);
}

/// Adds `n` to a counter.
#[inline]
pub fn add(c: &Counter, n: u64) {
    shard().0[c.0].fetch_add(n, Relaxed);
}
