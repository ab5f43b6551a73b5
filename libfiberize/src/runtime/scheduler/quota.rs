//! Following the CPU quota of the process's cgroup while the program runs.
//!
//! The workers start from the quota (`base::cgroup`, `config::default_workers`). Then a
//! quota can change while the program runs: `docker update --cpus`, `systemctl
//! set-property … CPUQuota=`, or a write to `cpu.max`. The monitor follows it. Once
//! every [`QUOTA_CHECK_EVERY_TICKS`] ticks it reads the limit again from the group found at
//! start: one small file per level up to the mount's root for v2, two for v1. A doze
//! counts the ticks it skipped, and the monitor is never woken for this. The files are
//! opened when the pool starts, kept by path, and read again with `pread`
//! ([`KeptFiles`]). The
//! pool then wants min(CPUs in the affinity mask, limit) ACTIVE workers, at least 1.
//! That is both the pool's target and `Runtime::cpus`. With more, the monitor wakes
//! spares or starts workers, up to the pool's spare slots (`blocked::bring_in_worker`).
//! A thread that cannot be made (the group's `pids.max`, `RLIMIT_NPROC`; a native
//! program makes none for a quota) stops the adding: the pool goes on with the workers
//! it has, and the count (`worker_starts_failed`) says so. It is not tried again until
//! the limit changes again; a spare for a blocked worker still may be. With fewer, the
//! surplus workers retire as spares when they next run dry
//! (`worker::retire_if_surplus`). A pool kept busy without a break keeps its surplus
//! until then.
//!
//! Not followed: `FIBERIZE_WORKERS` (then nothing changes), a move of the process to
//! another group (the group is found once), a changed affinity mask, and the few
//! figures taken from the configured count at start. Those are the readiness
//! threshold of `io::ops`, and whether there is a readiness set per worker and how
//! many (`runtime::sleep::poller::per_worker_by_default`).
//!
//! Counters: `quota_changes`, `worker_starts_failed`.

use super::policy::QUOTA_CHECK_EVERY_TICKS;
use super::*;
use crate::base::cgroup::{self, Group};

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
        let limit = group.cpu_limit_with(&mut |path, buf| files.read(path, buf));
        limit.map_or(self.affinity, |n| n.min(self.affinity)).max(1)
    }

    /// After each monitor tick; `ticks`: the ticks it stood for (more after a doze).
    pub(super) fn tick(&mut self, rt: &Runtime, ticks: u64) {
        if self.group.is_none() {
            return;
        }
        self.ticks += ticks;
        if self.ticks < QUOTA_CHECK_EVERY_TICKS {
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
            if !blocked::bring_in_worker(rt) {
                break;
            }
        }
    }
}

/// The group's limit files, kept open by path, out of the way of the program's numbers
/// (`own_fds::open_nul_out_of_the_way`), and read again with `pread` at offset 0. Opening
/// them once a second took the lowest free number for a moment, and a program that
/// made descriptors then (a socketpair and a pipe) got numbers above it, which its
/// `close_range` and `open` did not give back (`io_fdreuse`'s `reused=0`). The first
/// read, inside the pool's start, opens every file the walk asks for (v1 reads a
/// level's period even when its quota is `-1`, so both are opened then).
///
/// Keyed by the path, not by the order of asking: the files a walk asks for need not
/// be the same from one read to the next (a v1 walk used to skip a level's period
/// while its quota was `-1`, and the n-th file kept was then read as another level's).
/// A file that could not be opened (a v2 `cpu.max` that appears only when the
/// controller is enabled later) stays in the table and is tried again at each read: a
/// missing path costs one failed `openat` a second and takes no descriptor. Past
/// [`KEPT_FILES`] files or [`KEPT_PATH_BYTES`] bytes of paths, a file is opened by
/// path at each read, as before.
///
/// The descriptors live in cells of the process ([`KEPT_FDS`]), held for
/// `base::own_fds`: a program's `dup2` onto one of the numbers moves the file and points
/// the cell at its new number. The n-th entry's descriptor is `fds[n]`.
struct KeptFiles {
    files: [KeptFile; KEPT_FILES],
    fds: &'static [AtomicI32; KEPT_FILES],
    /// Entries of `files` in use.
    kept: usize,
    /// The kept files' paths (NUL included), back to back; `paths[..paths_len]` in use.
    paths: [u8; KEPT_PATH_BYTES],
    paths_len: usize,
}

#[derive(Clone, Copy)]
struct KeptFile {
    /// Its path: `paths[path_at..path_at + path_len]`.
    path_at: usize,
    path_len: usize,
}

/// The kept files' descriptors: cells of the process (there is one `KeptFiles`, the
/// monitor's, which moves), held for `base::own_fds` (a program's `dup2` onto one of
/// the numbers moves the file and points the cell at its new number).
#[cfg_attr(test, allow(dead_code))]
static KEPT_FDS: [AtomicI32; KEPT_FILES] = [const { AtomicI32::new(-1) }; KEPT_FILES];

/// The cells of [`KeptFiles`]: the process's one table (the monitor's). A unit test
/// makes tables of its own, each with cells of its own.
#[cfg(not(test))]
fn kept_fd_cells() -> &'static [AtomicI32; KEPT_FILES] {
    &KEPT_FDS
}

#[cfg(test)]
fn kept_fd_cells() -> &'static [AtomicI32; KEPT_FILES] {
    Box::leak(Box::new([const { AtomicI32::new(-1) }; KEPT_FILES]))
}

/// Two files (v1) per level for 8 levels of groups. Origin: systemd's deepest slices
/// (`/system.slice/x.service/y`) are 3 or 4 levels; containers add 2 or 3.
const KEPT_FILES: usize = 16;

/// Room for the kept files' paths. Origin: 16 paths of 256 bytes; systemd's and
/// docker's group paths are under 150 (a docker ID is 64 hex digits).
const KEPT_PATH_BYTES: usize = 4096;

impl KeptFiles {
    fn new() -> KeptFiles {
        KeptFiles {
            files: [KeptFile { path_at: 0, path_len: 0 }; KEPT_FILES],
            fds: kept_fd_cells(),
            kept: 0,
            paths: [0; KEPT_PATH_BYTES],
            paths_len: 0,
        }
    }

    /// Reads the file `path_nul` (NUL-terminated) into `buf`: its length, None if it
    /// could not be opened or read or is empty.
    fn read(&mut self, path_nul: &[u8], buf: &mut [u8]) -> Option<usize> {
        let Some(file) = self.find(path_nul).or_else(|| self.keep(path_nul)) else {
            // Past the table: open for the read (marked and closed with the program's
            // closes kept out; an `open` of the program's at that instant gets the
            // number above).
            return crate::base::own_fds::read_file_nul(path_nul, buf);
        };
        let cell = &self.fds[file];
        if cell.load(Ordering::Acquire) < 0 {
            let fd = crate::base::own_fds::open_nul_out_of_the_way(path_nul, libc::O_RDONLY)?;
            cell.store(fd, Ordering::Release);
            crate::base::own_fds::hold(cell);
        }
        let n = sys::pread64(cell.load(Ordering::Acquire), buf, 0);
        (n > 0).then_some(n as usize)
    }

    /// The entry kept for `path_nul`.
    fn find(&self, path_nul: &[u8]) -> Option<usize> {
        let files = &self.files[..self.kept];
        files.iter().position(|f| &self.paths[f.path_at..f.path_at + f.path_len] == path_nul)
    }

    /// A new entry for `path_nul`, not yet opened; None when the table is full.
    fn keep(&mut self, path_nul: &[u8]) -> Option<usize> {
        let at = self.paths_len;
        if self.kept == KEPT_FILES || path_nul.len() > KEPT_PATH_BYTES - at {
            return None;
        }
        self.paths[at..at + path_nul.len()].copy_from_slice(path_nul);
        self.paths_len += path_nul.len();
        self.files[self.kept] = KeptFile { path_at: at, path_len: path_nul.len() };
        self.kept += 1;
        Some(self.kept - 1)
    }
}

#[cfg(test)]
mod tests;
