//! Process-wide counters, printed at exit with `FIBERIZE_STATS=1`.
//! Relaxed increments: they are statistics, not synchronization.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        pub struct Stats { $(pub $name: Counter,)* }
        pub static STATS: Stats = Stats { $($name: Counter(AtomicU64::new(0)),)* };
        impl Stats {
            /// `name=value` pairs, space separated.
            pub fn render(&self) -> String {
                let mut s = String::new();
                $( s.push_str(concat!(" ", stringify!($name), "=")); s.push_str(&self.$name.0.load(Relaxed).to_string()); )*
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
    donor_handoffs,
    timers_fired,
    worker_sleeps,
    worker_wakeups,
    direct_waits,
    thread_waits,
    futex_waits,
    futex_wakes,
    workers_blocked,
    workers_spawned,
    workers_retired,
    fibers_demoted,
    signals_deferred,
    preemptions,
    preempt_refused,
    preempt_fallbacks,
}

/// One counter per cache line: workers bump different counters on hot paths, and
/// sharing a line would make every switch a cross-core miss.
#[repr(align(64))]
pub struct Counter(pub AtomicU64);

impl Counter {
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

#[inline]
pub fn bump(c: &Counter) {
    c.0.fetch_add(1, Relaxed);
}
