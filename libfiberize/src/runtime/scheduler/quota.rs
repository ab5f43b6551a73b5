//! Following the CPU quota of the process's cgroup while the program runs.
//!
//! The workers start from the quota (`base::cgroup`, `config::default_workers`). Then a
//! quota can change while the program runs: `docker update --cpus`, `systemctl
//! set-property … CPUQuota=`, or a write to `cpu.max`. The monitor follows it. Once
//! every [`CHECK_EVERY_TICKS`] ticks it reads the limit again from the group found at
//! start: one small file per level up to the mount's root for v2, two for v1. A doze
//! counts the ticks it skipped, and the monitor is never woken for this. The files are
//! opened once, when the pool starts, and read again with `pread` ([`KeptFiles`]). The
//! pool then wants min(CPUs in the affinity mask, limit) ACTIVE workers, at least 1.
//! That is both the pool's target and `Runtime::cpus`. With more, the monitor wakes
//! spares or starts workers, up to the pool's spare slots (`monitor::bring_in_worker`).
//! With fewer, the surplus workers retire as spares when
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
    /// Its limit files, kept open.
    files: KeptFiles,
    affinity: usize,
    /// The workers wanted for the limit last read.
    workers: usize,
    ticks: u64,
}

impl QuotaFollow {
    pub(super) fn new() -> QuotaFollow {
        let cfg = crate::base::config::config();
        let group = if cfg.workers_set { None } else { cgroup::own_group() };
        let mut follow = QuotaFollow {
            group,
            files: KeptFiles::new(),
            affinity: crate::base::config::affinity_cpus(),
            workers: cfg.workers,
            ticks: 0,
        };
        follow.read_limit(); // opens the files now, inside the pool's start (`start::start_pool`)
        follow
    }

    /// The workers the group's limit asks for now (the affinity mask's CPUs without a
    /// group or a limit).
    fn read_limit(&mut self) -> usize {
        let Some(group) = &self.group else { return self.affinity };
        let files = &mut self.files;
        files.next = 0;
        let limit = group.cpu_limit_with(&mut |path, buf| files.read(path, buf));
        limit.map_or(self.affinity, |n| n.min(self.affinity)).max(1)
    }

    /// After each monitor tick; `ticks`: the ticks it stood for (more after a doze).
    pub(super) fn tick(&mut self, rt: &Runtime, ticks: u64) {
        if self.group.is_none() {
            return;
        }
        self.ticks += ticks;
        if self.ticks < CHECK_EVERY_TICKS {
            return;
        }
        self.ticks = 0;
        let workers = self.read_limit();
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

/// The group's limit files, opened at the first read, out of the way of the program's
/// numbers (`own_fds::open_nul_out_of_the_way`), and read again with `pread` at offset 0.
/// Opening them once a second took the lowest free number for a moment, and a program
/// that made descriptors then (a socketpair and a pipe) got numbers above it, which
/// its `close_range` and `open` did not give back (`io_fdreuse`'s `reused=0`). A read
/// asks for the files in the same order every time (`Group::cpu_limit_with` walks the
/// same levels), so the n-th file asked for is the n-th kept; past [`KEPT_FILES`] they
/// are opened by path at each read, as before. -1: it could not be opened at the first
/// read (no limit file at that level), and it is not tried again.
struct KeptFiles {
    /// Files kept so far (their descriptors are [`KEPT_FDS`]'s first).
    kept: usize,
    /// The file the current read asks for next.
    next: usize,
}

/// The kept files' descriptors: cells of the process (there is one `KeptFiles`, the
/// monitor's, which moves), held for `base::own_fds` (a program's `dup2` onto one of
/// the numbers moves the file and points the cell at its new number).
static KEPT_FDS: [AtomicI32; KEPT_FILES] = [const { AtomicI32::new(-1) }; KEPT_FILES];

/// Two files (v1) per level for 8 levels of groups. Origin: systemd's deepest slices
/// (`/system.slice/x.service/y`) are 3 or 4 levels; containers add 2 or 3.
const KEPT_FILES: usize = 16;

impl KeptFiles {
    fn new() -> KeptFiles {
        KeptFiles { kept: 0, next: 0 }
    }

    fn read(&mut self, path_nul: &[u8], buf: &mut [u8]) -> Option<usize> {
        let k = self.next;
        self.next += 1;
        if k >= KEPT_FILES {
            // Deeper than any group seen: open for the read (marked and closed with
            // the program's closes kept out; an `open` of the program's at that instant
            // gets the number above).
            return crate::base::own_fds::read_file_nul(path_nul, buf);
        }
        if k == self.kept {
            let fd = crate::base::own_fds::open_nul_out_of_the_way(path_nul, libc::O_RDONLY).unwrap_or(-1);
            KEPT_FDS[k].store(fd, Ordering::Release);
            if fd >= 0 {
                crate::base::own_fds::hold(&KEPT_FDS[k]);
            }
            self.kept += 1;
        }
        let fd = KEPT_FDS[k].load(Ordering::Acquire);
        if fd < 0 {
            return None;
        }
        let n = sys::pread64(fd, buf, 0);
        (n > 0).then_some(n as usize)
    }
}
