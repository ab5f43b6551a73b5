//! Configuration by environment, read once, before or after constructors ran.
//!
//! | variable              | meaning                                                   |
//! |-----------------------|-----------------------------------------------------------|
//! | `FIBERIZE=off`        | disable: every export passes straight through to glibc   |
//! | `FIBERIZE_WORKERS=N`  | worker threads (default: CPUs in the affinity mask, capped by the cgroup CPU quota) |
//! | `FIBERIZE_STATS=1`    | print one `fiberize: stats …` line to stderr at exit      |
//! | `FIBERIZE_DUMP_SIGNAL=N` | on signal N, print every fiber (state, wait, origin) to stderr |
//! | `FIBERIZE_DUMP_AT_EXIT=1` | print the fiber dump at exit as well                 |
//! | `FIBERIZE_WATCHDOG=SECONDS` | stall watchdog (read by `crate::watchdog`; `FIBERIZE_WATCHDOG_FILE` for its output) |
//! | `FIBERIZE_PREEMPT_MS=N` | time slice after which a fiber that does not switch is preempted while other fibers wait (default 5; 0: off; see `crate::preempt`) |
//! | `FIBERIZE_SYNC_INLINE=1` | run `fsync`/`fdatasync`/`sync_file_range` on the worker instead of the fiber's donor |
//!
//! The on/off decision is taken at the first call into any export and never changes:
//! objects such as mutexes are laid out by whichever implementation saw them first, so
//! switching implementations mid-run would misread them.

use core::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use crate::rawlock::RawOnce;

const STATE_UNDECIDED: u8 = 0;
const STATE_ENABLED: u8 = 1;
const STATE_DISABLED: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(STATE_UNDECIDED);

/// Set in a child process after `fork`: only the forking OS thread survives there, so
/// no worker exists; new threads are plain glibc threads and every waiter is a thread.
static FORKED_CHILD: AtomicBool = AtomicBool::new(false);

/// Whether the runtime's implementations are in use (as opposed to pass-through).
#[inline]
pub fn enabled() -> bool {
    match STATE.load(Ordering::Relaxed) {
        STATE_ENABLED => true,
        STATE_DISABLED => false,
        _ => decide(),
    }
}

#[cold]
fn decide() -> bool {
    let on = !matches!(env_str(b"FIBERIZE\0"), Some(v) if is_off(v));
    // Racing first callers compute the same answer from the same environment.
    let _ = STATE.compare_exchange(
        STATE_UNDECIDED,
        if on { STATE_ENABLED } else { STATE_DISABLED },
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    STATE.load(Ordering::Relaxed) == STATE_ENABLED
}

fn is_off(v: &[u8]) -> bool {
    matches!(v, b"off" | b"0" | b"false" | b"no" | b"OFF" | b"disable" | b"disabled")
}

/// Whether new threads may become fibers (enabled, and not in a forked child).
#[inline]
pub fn fibers_allowed() -> bool {
    enabled() && !FORKED_CHILD.load(Ordering::Relaxed)
}

#[inline]
pub fn in_forked_child() -> bool {
    FORKED_CHILD.load(Ordering::Relaxed)
}

pub fn mark_forked_child() {
    FORKED_CHILD.store(true, Ordering::Relaxed);
}

/// Reads an environment variable without allocating or locking (`getenv` is not
/// shadowed by us, and the environment is set up before any constructor runs).
pub fn env_str(name_nul: &'static [u8]) -> Option<&'static [u8]> {
    // SAFETY: `name_nul` is NUL-terminated; getenv returns a pointer into the
    // environment block, which lives for the process (we never call setenv).
    unsafe {
        let p = libc::getenv(name_nul.as_ptr().cast());
        if p.is_null() {
            return None;
        }
        Some(core::slice::from_raw_parts(p.cast::<u8>(), libc::strlen(p)))
    }
}

pub fn env_u64(name_nul: &'static [u8]) -> Option<u64> {
    let v = env_str(name_nul)?;
    core::str::from_utf8(v).ok()?.trim().parse().ok()
}

pub fn env_flag(name_nul: &'static [u8]) -> bool {
    matches!(env_str(name_nul), Some(v) if !v.is_empty() && !is_off(v))
}

pub struct Config {
    /// Run file syncs on the worker (they then block it) instead of the donor.
    pub sync_inline: bool,
    pub workers: usize,
    pub stats: bool,
    pub dump_signal: i32,
    pub dump_at_exit: bool,
    /// Idle rounds a worker spins before it sleeps (`FIBERIZE_SPIN`).
    pub spin_rounds: u32,
    /// A fiber alone on its worker waits for its descriptor in the kernel directly
    /// (`FIBERIZE_DIRECT_WAIT=0` turns it off; see `scheduler::direct_wait`).
    pub direct_wait: bool,
    /// Time slice of a fiber before preemption, in ms (`FIBERIZE_PREEMPT_MS`; 0: off).
    pub preempt_ms: u64,
}

static CONFIG_ONCE: RawOnce = RawOnce::new();
static mut CONFIG: Config = Config {
    sync_inline: false,
    workers: 1,
    stats: false,
    dump_signal: 0,
    dump_at_exit: false,
    spin_rounds: 0,
    direct_wait: false,
    preempt_ms: 0,
};

/// The configuration, read on first use.
pub fn config() -> &'static Config {
    CONFIG_ONCE.call_once(|| {
        let workers = match env_u64(b"FIBERIZE_WORKERS\0") {
            Some(n) if n > 0 => (n as usize).min(1024),
            _ => default_workers(),
        };
        let c = Config {
            sync_inline: env_flag(b"FIBERIZE_SYNC_INLINE\0"),
            workers,
            stats: env_flag(b"FIBERIZE_STATS\0"),
            dump_signal: env_u64(b"FIBERIZE_DUMP_SIGNAL\0").unwrap_or(0) as i32,
            dump_at_exit: env_flag(b"FIBERIZE_DUMP_AT_EXIT\0"),
            spin_rounds: env_u64(b"FIBERIZE_SPIN\0").map_or(crate::scheduler::SPIN_ROUNDS, |n| n.min(100_000) as u32),
            direct_wait: !matches!(env_str(b"FIBERIZE_DIRECT_WAIT\0"), Some(v) if is_off(v)),
            preempt_ms: env_u64(b"FIBERIZE_PREEMPT_MS\0").map_or(crate::preempt::DEFAULT_SLICE_MS, |ms| ms.min(60_000)),
        };
        // SAFETY: written once, inside the RawOnce, before any reader passes is_done().
        unsafe { *core::ptr::addr_of_mut!(CONFIG) = c };
    });
    // SAFETY: initialized above and never written again.
    unsafe { &*core::ptr::addr_of!(CONFIG) }
}

/// CPUs in our affinity mask, capped by the cgroup (v2 `cpu.max`, v1 `cpu.cfs_*`) quota.
pub fn default_workers() -> usize {
    // A raw system call: `sched_getaffinity` is one of our exports (docs/DESIGN.md §2.1).
    // SAFETY: `set` is a valid out-parameter of the size we pass.
    let cpus = unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        let r = crate::sys::syscall6(
            libc::SYS_sched_getaffinity as usize,
            0,
            core::mem::size_of::<libc::cpu_set_t>(),
            &mut set as *mut libc::cpu_set_t as usize,
            0,
            0,
            0,
        );
        if r > 0 {
            libc::CPU_COUNT(&set) as usize
        } else {
            1
        }
    };
    let quota = cgroup_cpu_limit();
    let n = match quota {
        Some(q) => cpus.min(q),
        None => cpus,
    };
    n.max(1)
}

fn cgroup_cpu_limit() -> Option<usize> {
    let mut buf = [0u8; 128];
    if let Some(s) = read_small_file(b"/sys/fs/cgroup/cpu.max\0", &mut buf) {
        let mut it = s.split_ascii_whitespace();
        let quota = it.next()?;
        let period: u64 = it.next()?.parse().ok()?;
        if quota == "max" || period == 0 {
            return None;
        }
        let q: u64 = quota.parse().ok()?;
        return Some(q.div_ceil(period) as usize);
    }
    let mut b1 = [0u8; 64];
    let mut b2 = [0u8; 64];
    let q: i64 = read_small_file(b"/sys/fs/cgroup/cpu/cpu.cfs_quota_us\0", &mut b1)?.trim().parse().ok()?;
    let p: i64 = read_small_file(b"/sys/fs/cgroup/cpu/cpu.cfs_period_us\0", &mut b2)?.trim().parse().ok()?;
    if q <= 0 || p <= 0 {
        return None;
    }
    Some((q as u64).div_ceil(p as u64) as usize)
}

/// Reads a small file with raw system calls (our exports may shadow open/read).
fn read_small_file<'a>(path_nul: &'static [u8], buf: &'a mut [u8]) -> Option<&'a str> {
    use crate::sys::syscall6;
    // SAFETY: path is NUL-terminated; buf is a valid writable region.
    unsafe {
        let fd = syscall6(
            libc::SYS_openat as usize,
            libc::AT_FDCWD as usize,
            path_nul.as_ptr() as usize,
            (libc::O_RDONLY | libc::O_CLOEXEC) as usize,
            0,
            0,
            0,
        );
        if fd < 0 {
            return None;
        }
        let n = syscall6(libc::SYS_read as usize, fd as usize, buf.as_mut_ptr() as usize, buf.len(), 0, 0, 0);
        syscall6(libc::SYS_close as usize, fd as usize, 0, 0, 0, 0, 0);
        if n <= 0 {
            return None;
        }
        core::str::from_utf8(&buf[..n as usize]).ok()
    }
}
