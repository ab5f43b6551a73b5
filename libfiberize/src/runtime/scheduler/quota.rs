//! Following the CPU quota of the process's cgroup while the program runs.
//!
//! The workers start from the quota (`base::cgroup`, `config::default_workers`). Then a
//! quota can change while the program runs: `docker update --cpus`, `systemctl
//! set-property … CPUQuota=`, or a write to `cpu.max`. The monitor follows it. Once
//! every [`CHECK_EVERY_TICKS`] ticks it reads the limit again from the group found at
//! start: one small file per level up to the mount's root for v2, two for v1. A doze
//! counts the ticks it skipped, and the monitor is never woken for this. The pool then
//! wants min(CPUs in the affinity mask, limit) ACTIVE workers, at least 1. That is both
//! the pool's target and `Runtime::cpus`. With more, the
//! monitor wakes spares or starts workers, up to the pool's spare slots
//! (`monitor::bring_in_worker`). With fewer, the surplus workers retire as spares when
//! they next run dry (`worker::retire_if_surplus`). A pool kept busy without a break
//! keeps its surplus until then.
//!
//! Not followed: `FIBERIZE_WORKERS` (then nothing changes), a move of the process to
//! another group (the group is found once), a changed affinity mask, and the few
//! figures taken from the configured count at start. Those are the readiness
//! threshold of `io::ops`, and whether there is a readiness set per worker and how
//! many (`runtime::poller::per_worker_by_default`).
//!
//! Counter: `quota_changes`.

use super::*;
use crate::base::cgroup::{self, Group};

/// How often the limit is read again, in monitor ticks (1 ms): once a second. Origin: a
/// quota changes by hand or by an orchestrator, seconds apart; a read costs 1 to 8
/// small file reads.
const CHECK_EVERY_TICKS: u64 = 1000;

pub(super) struct QuotaFollow {
    /// The group found at start; None: nothing to follow.
    group: Option<Group>,
    affinity: usize,
    /// The workers wanted for the limit last read.
    workers: usize,
    ticks: u64,
}

impl QuotaFollow {
    pub(super) fn new() -> QuotaFollow {
        let cfg = crate::base::config::config();
        let group = if cfg.workers_set { None } else { cgroup::own_group() };
        QuotaFollow { group, affinity: affinity_cpus(), workers: cfg.workers, ticks: 0 }
    }

    /// After each monitor tick; `ticks`: the ticks it stood for (more after a doze).
    pub(super) fn tick(&mut self, rt: &Runtime, ticks: u64) {
        let Some(group) = &self.group else { return };
        self.ticks += ticks;
        if self.ticks < CHECK_EVERY_TICKS {
            return;
        }
        self.ticks = 0;
        let workers = group.cpu_limit().map_or(self.affinity, |n| n.min(self.affinity)).max(1);
        if workers == self.workers {
            return;
        }
        self.workers = workers;
        bump(&STATS.quota_changes);
        rt.cpus.store(workers, Ordering::Relaxed);
        rt.target.store(workers, Ordering::Relaxed);
        while rt.active.load(Ordering::Acquire) < workers {
            if !monitor::bring_in_worker(rt) {
                break;
            }
        }
    }
}

/// CPUs in the affinity mask (a raw system call: `sched_getaffinity` is one of our
/// exports).
fn affinity_cpus() -> usize {
    // SAFETY: all-zero is a valid (empty) cpu_set_t.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    if sys::sched_getaffinity(&mut set) <= 0 {
        return 1;
    }
    // SAFETY: CPU_COUNT reads the set the kernel filled.
    (unsafe { libc::CPU_COUNT(&set) } as usize).max(1)
}
