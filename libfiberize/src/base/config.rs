//! Configuration by environment, read once, before or after constructors ran.
//!
//! | variable              | meaning                                                   |
//! |-----------------------|-----------------------------------------------------------|
//! | `FIBERIZE=off`        | disable: every export passes straight through to glibc   |
//! | `FIBERIZE_WORKERS=N`  | worker threads (default: CPUs in the affinity mask, capped by the cgroup CPU quota) |
//! | `FIBERIZE_STATS=1`    | print one `fiberize: stats …` line to stderr at exit (a value with a `/` is a file to append it to) |
//! | `FIBERIZE_REPORT=PATH` | write the report (`crate::observe::report`) to PATH (`-`: stderr) at exit and on the dump signal |
//! | `FIBERIZE_METRICS=PATH[,INTERVAL]` | write the counters in Prometheus' text format to PATH every INTERVAL (default 10s; `500ms`, `30s`, `1m`) and at exit (`crate::observe::metrics`); queue waits only while `FIBERIZE_STATS` or `FIBERIZE_REPORT` measure them |
//! | `FIBERIZE_DUMP_SIGNAL=N` | on signal N, print every fiber (state, wait, origin) to stderr |
//! | `FIBERIZE_DUMP_AT_EXIT=1` | print the fiber dump at exit as well                 |
//! | `FIBERIZE_WATCHDOG=SECONDS` | stall watchdog (read by `crate::observe::watchdog`; `FIBERIZE_WATCHDOG_FILE` for its output) |
//! | `FIBERIZE_TURN_US=N` | a fiber's turn: after N µs on its worker, its next socket read sends it to the back of the global queue while other fibers wait (default 1000; 0: off; see `runtime::scheduler::turn`) |
//! | `FIBERIZE_PREEMPT_MS=N` | time slice after which a fiber that does not switch is preempted while other fibers wait (default 5; 0: off; see `crate::runtime::preempt`) |
//! | `FIBERIZE_SYNC_INLINE=1` | run `fsync`/`fdatasync`/`sync_file_range` on the worker instead of the fiber's donor |
//!
//! The on/off decision is taken at the first call into any export and never changes:
//! objects such as mutexes are laid out by whichever implementation saw them first, so
//! switching implementations mid-run would misread them.

use core::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use crate::base::rawlock::RawOnce;

// `STATE`: the on/off decision, taken at the first export call and never changed.
/// No export has been called yet.
const STATE_UNDECIDED: u8 = 0;
/// The runtime serves the exports.
const STATE_ENABLED: u8 = 1;
/// `FIBERIZE=off` (or no usable environment): every export passes through to glibc.
const STATE_DISABLED: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(STATE_UNDECIDED);

/// Set in a child process after `fork` from a parent that had started the pool: only
/// the forking OS thread survives there, so no worker exists; new threads are plain
/// glibc threads and every waiter is a thread. (A parent without a pool leaves a child
/// that starts its own: `thread::process`.)
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

/// Our process id, as the fork hooks last saw it: at load, and in every forked child
/// (`thread::process`).
static RECORDED_PID: core::sync::atomic::AtomicI32 = core::sync::atomic::AtomicI32::new(0);

/// Whether we run in a child that no hook announced: made by a raw `clone`/`vfork`
/// system call (not glibc's `fork`, not our `vfork`), which may share our memory. One
/// system call; for rare calls only (`sigaction`).
pub fn in_unannounced_child() -> bool {
    let recorded = RECORDED_PID.load(Ordering::Relaxed);
    recorded != 0 && recorded != crate::base::sys::getpid()
}

/// Records the current process id as ours (the fork hooks: at load, and in every
/// forked child).
pub fn record_pid() {
    RECORDED_PID.store(crate::base::sys::getpid(), Ordering::Relaxed);
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

/// Where a text at exit goes: stderr, or a file appended to (the path lives in the
/// environment block, which lasts as long as the process).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Stderr,
    File(&'static [u8]),
}

pub struct Config {
    /// Run file syncs on the worker (they then block it) instead of the donor.
    pub sync_inline: bool,
    pub workers: usize,
    pub stats: bool,
    /// Where the stats line goes (`FIBERIZE_STATS=/path`: a file; programs such as
    /// `xz` close stderr).
    pub stats_to: Output,
    /// `FIBERIZE_REPORT`: where the report goes; None: no report (the default).
    pub report: Option<Output>,
    /// `FIBERIZE_METRICS`: the Prometheus metrics file and how often it is written;
    /// None: no metrics (the default).
    pub metrics: Option<Metrics>,
    pub dump_signal: i32,
    pub dump_at_exit: bool,
    /// Idle rounds a worker spins before it sleeps (`FIBERIZE_SPIN`); `None`: the
    /// scheduler's own default (`runtime::scheduler::SPIN_ROUNDS`).
    pub spin_rounds: Option<u32>,
    /// A fiber alone on its worker waits for its descriptor in the kernel directly
    /// (`FIBERIZE_DIRECT_WAIT=0` turns it off; see `scheduler::direct_wait`).
    pub direct_wait: bool,
    /// A direct wait on a socket only while the socket's last segment came in on the
    /// worker's CPU, where its peer runs (`FIBERIZE_DIRECT_WAIT_PEER_CPU=0`: wherever
    /// it came in, the rule until session 11; see `io::peer_cpu::where_peer_runs`).
    pub direct_wait_peer_cpu: bool,
    /// A fiber's run is charged to its CPU account as timed by the cycle counter
    /// (`FIBERIZE_RUN_CLOCK=1`; off by default: by the monitor's 1 ms samples; see
    /// `runtime::scheduler::run_clock`).
    pub run_clock: bool,
    /// Time slice of a fiber before preemption, in ms (`FIBERIZE_PREEMPT_MS`; 0: off);
    /// `None`: the preemption module's default (`runtime::preempt::DEFAULT_SLICE_MS`).
    pub preempt_ms: Option<u64>,
    /// Sleeps at least this long (ms) give the fiber's dead stack pages back
    /// (`FIBERIZE_STACK_RELEASE_MS`; 0: never); `None`: the module's default
    /// (`runtime::stack_release::DEFAULT_RELEASE_AFTER_MS`).
    pub stack_release_ms: Option<u64>,
    /// A fiber's turn on its worker, in µs, after which its next socket read ends the
    /// turn while others wait (`FIBERIZE_TURN_US`; 0: never); `None`: the scheduler's
    /// default (`runtime::scheduler::turn::DEFAULT_TURN_US`).
    pub turn_us: Option<u64>,
    /// The turn while the program's threads rarely wake each other, in µs
    /// (`FIBERIZE_TURN_SHORT_US`; equal to the turn: always the one turn); `None`: the
    /// scheduler's default (`runtime::scheduler::turn::DEFAULT_SHORT_TURN_US`).
    pub turn_short_us: Option<u64>,
    /// Each worker sleeps in a readiness set of its own, holding the descriptors of the
    /// fibers that run on it (`FIBERIZE_POLL_PER_WORKER=1`; see `runtime::poller`).
    pub poll_per_worker: bool,
    /// The run order by CPU time (`FIBERIZE_FAIR=0` turns it off; see
    /// `runtime::scheduler::fair`).
    pub fair: bool,
    /// The coordinating queue goes before the soon queue on every Nth dequeue, 0: never
    /// (`FIBERIZE_COORDINATING_FIRST`); `None`: the scheduler's default
    /// (`runtime::scheduler::fair::coordinating_first`: by the queues' weighted lengths).
    pub coordinating_first: Option<u32>,
}

static CONFIG_ONCE: RawOnce = RawOnce::new();
static mut CONFIG: Config = Config {
    sync_inline: false,
    workers: 1,
    stats: false,
    stats_to: Output::Stderr,
    report: None,
    metrics: None,
    dump_signal: 0,
    dump_at_exit: false,
    spin_rounds: None,
    direct_wait: false,
    direct_wait_peer_cpu: true,
    run_clock: false,
    preempt_ms: None,
    stack_release_ms: None,
    turn_us: None,
    turn_short_us: None,
    poll_per_worker: false,
    fair: true,
    coordinating_first: None,
};

/// The configuration, read on first use. Every variable is checked once here: a value
/// that is not what the README's table allows gets one line on stderr saying what is
/// used instead (issue 14: `FIBERIZE_WORKERS=abc`, `0`, `-1`, empty were silently
/// ignored).
pub fn config() -> &'static Config {
    CONFIG_ONCE.call_once(|| {
        let cpus = default_workers();
        let workers = match env_number(b"FIBERIZE_WORKERS\0", 1, 1024, cpus as u64, "the usable CPUs") as usize {
            n if n > cpus => {
                warn(&[
                    b"FIBERIZE_WORKERS=",
                    trim(&digits(n as u64)),
                    b" is more than the ",
                    trim(&digits(cpus as u64)),
                    b" usable CPUs: the workers will share them",
                ]);
                n
            }
            n => n,
        };
        let dump_signal = env_number_in(b"FIBERIZE_DUMP_SIGNAL\0", 1, 64, 0, "no dump signal", false) as i32;
        let dump_signal = if dump_signal == crate::base::arch::KICK_SIGNAL {
            warn(&[
                b"FIBERIZE_DUMP_SIGNAL=",
                trim(&digits(dump_signal as u64)),
                b" is the library's own kick signal: no dump signal",
            ]);
            0
        } else {
            dump_signal
        };
        // A value with a '/' is a file (issue 13: `xz` closes stderr before exit).
        let stats_file = env_str(b"FIBERIZE_STATS\0").filter(|v| v.contains(&b'/'));
        let report = match env_str(b"FIBERIZE_REPORT\0") {
            None => None,
            Some(v) if v.is_empty() || is_off(v) => None,
            Some(b"-") => Some(Output::Stderr),
            Some(path) => Some(Output::File(path)),
        };
        let c = Config {
            sync_inline: env_switch(b"FIBERIZE_SYNC_INLINE\0", false),
            workers,
            stats: stats_file.is_some() || env_switch(b"FIBERIZE_STATS\0", false),
            stats_to: stats_file.map_or(Output::Stderr, Output::File),
            report,
            metrics: env_metrics(),
            dump_signal,
            dump_at_exit: env_switch(b"FIBERIZE_DUMP_AT_EXIT\0", false),
            spin_rounds: env_optional_number(b"FIBERIZE_SPIN\0", 0, 100_000).map(|n| n as u32),
            direct_wait: env_switch(b"FIBERIZE_DIRECT_WAIT\0", true),
            direct_wait_peer_cpu: env_switch(b"FIBERIZE_DIRECT_WAIT_PEER_CPU\0", true),
            run_clock: env_switch(b"FIBERIZE_RUN_CLOCK\0", false),
            preempt_ms: env_optional_number(b"FIBERIZE_PREEMPT_MS\0", 0, 60_000),
            stack_release_ms: env_optional_number(b"FIBERIZE_STACK_RELEASE_MS\0", 0, 3_600_000),
            turn_us: env_optional_number(b"FIBERIZE_TURN_US\0", 0, 1_000_000),
            turn_short_us: env_optional_number(b"FIBERIZE_TURN_SHORT_US\0", 1, 1_000_000),
            poll_per_worker: env_switch(b"FIBERIZE_POLL_PER_WORKER\0", false),
            fair: env_switch(b"FIBERIZE_FAIR\0", true),
            coordinating_first: env_optional_number(b"FIBERIZE_COORDINATING_FIRST\0", 0, 1000).map(|n| n as u32),
        };
        // SAFETY: written once, inside the RawOnce, before any reader passes is_done().
        unsafe { *core::ptr::addr_of_mut!(CONFIG) = c };
    });
    // SAFETY: initialized above and never written again.
    unsafe { &*core::ptr::addr_of!(CONFIG) }
}

/// One `fiberize: …` line on stderr, written with one raw system call (this may run
/// before the program's `main` and inside any export: no allocation, no stdio).
fn warn(parts: &[&[u8]]) {
    let mut buf = [0u8; 320];
    let mut n = 0;
    for part in [b"fiberize: ".as_slice()].iter().chain(parts.iter()).chain([b"\n".as_slice()].iter()) {
        let take = part.len().min(buf.len() - 1 - n);
        buf[n..n + take].copy_from_slice(&part[..take]);
        n += take;
    }
    if buf[n - 1] != b'\n' {
        buf[n] = b'\n';
        n += 1;
    }
    crate::base::sys::write(2, &buf[..n]);
}

/// Decimal digits of `v` (up to 20), as a small array trimmed by [`trim`].
fn digits(v: u64) -> [u8; 20] {
    let mut out = [b' '; 20];
    let mut v = v;
    let mut i = 20;
    loop {
        i -= 1;
        out[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out
}

/// `digits` without its leading blanks.
fn trim(d: &[u8; 20]) -> &[u8] {
    let start = d.iter().position(|&c| c != b' ').unwrap_or(19);
    &d[start..]
}

/// The name of a variable without its NUL.
fn name_of(name_nul: &[u8]) -> &[u8] {
    &name_nul[..name_nul.len() - 1]
}

/// A whole number in `[min, max]`: unset gives `default`; a value that is not a number
/// or is out of range gets a warning and `default` (below `min`, or above `max` when
/// `max` is no limit to clamp to, e.g. a signal number) or `max` (above).
fn env_number(name_nul: &'static [u8], min: u64, max: u64, default: u64, default_is: &str) -> u64 {
    env_number_in(name_nul, min, max, default, default_is, true)
}

/// A number whose default belongs to the module that uses it (the constant lives with
/// its protocol): `None` when unset or invalid (after the warning), else the value
/// (clamped to `max`).
fn env_optional_number(name_nul: &'static [u8], min: u64, max: u64) -> Option<u64> {
    env_str(name_nul)?;
    match env_number_in(name_nul, min, max, NO_DEFAULT, "the default", true) {
        NO_DEFAULT => None,
        v => Some(v),
    }
}

/// `env_number_in`'s default for [`env_optional_number`]: outside every allowed range,
/// and the warning names no number for it.
const NO_DEFAULT: u64 = u64::MAX;

fn env_number_in(name_nul: &'static [u8], min: u64, max: u64, default: u64, default_is: &str, clamp: bool) -> u64 {
    let default_digits = digits(default);
    let Some(raw) = env_str(name_nul) else { return default };
    let name = name_of(name_nul);
    let text = core::str::from_utf8(raw).unwrap_or("").trim();
    match text.parse::<u64>() {
        Ok(v) if v >= min && v <= max => v,
        Ok(v) if v > max && clamp => {
            warn(&[name, b"=", raw, b" is above the limit ", trim(&digits(max)), b": using ", trim(&digits(max))]);
            max
        }
        _ => {
            let why: &[u8] = if text.is_empty() {
                b" is empty"
            } else if text.parse::<i64>().is_ok() || text.parse::<u64>().is_ok() {
                b" is out of range"
            } else {
                b" is not a whole number"
            };
            warn(&[
                name,
                b"=",
                raw,
                why,
                b" (allowed: ",
                trim(&digits(min)),
                b"..",
                trim(&digits(max)),
                b"): using ",
                default_is.as_bytes(),
                if default == NO_DEFAULT { b"" } else { b" (" },
                if default == NO_DEFAULT { b"" } else { trim(&default_digits) },
                if default == NO_DEFAULT { b"" } else { b")" },
            ]);
            default
        }
    }
}

/// Where and how often the metrics file is written (`FIBERIZE_METRICS=PATH[,INTERVAL]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metrics {
    /// The file (lives in the environment block, like [`Output::File`]'s path).
    pub path: &'static [u8],
    pub interval_ms: u64,
}

/// `FIBERIZE_METRICS`' interval when none is given. Origin: Prometheus' common scrape
/// interval is 15 s to 1 min; a file a little fresher than that costs one small write.
pub const DEFAULT_METRICS_INTERVAL_MS: u64 = 10_000;
/// Bounds of the interval. Origin: below 100 ms the file would be rewritten faster than
/// anybody reads it; above an hour it is stale for any dashboard.
const METRICS_INTERVAL_MS: (u64, u64) = (100, 3_600_000);

fn env_metrics() -> Option<Metrics> {
    let raw = env_str(b"FIBERIZE_METRICS\0")?;
    if raw.is_empty() || is_off(raw) {
        return None;
    }
    let (path, interval) = match raw.iter().rposition(|&c| c == b',') {
        Some(i) => (&raw[..i], Some(&raw[i + 1..])),
        None => (raw, None),
    };
    if path.is_empty() {
        warn(&[b"FIBERIZE_METRICS=", raw, b" names no file: no metrics"]);
        return None;
    }
    if path[0] != b'/' {
        // Still used: a test or a one-off run in its own folder is fine.
        warn(&[b"FIBERIZE_METRICS=", raw, b": a relative path follows the program's working directory (servers change it)"]);
    }
    let interval_ms = match interval.map(parse_interval_ms) {
        None => DEFAULT_METRICS_INTERVAL_MS,
        Some(Some(ms)) if (METRICS_INTERVAL_MS.0..=METRICS_INTERVAL_MS.1).contains(&ms) => ms,
        Some(_) => {
            warn(&[
                b"FIBERIZE_METRICS=",
                raw,
                b": the interval is not 100ms..1h (e.g. 500ms, 10s, 1m; a bare number is seconds): using 10s",
            ]);
            DEFAULT_METRICS_INTERVAL_MS
        }
    };
    Some(Metrics { path, interval_ms })
}

/// `500ms`, `10s`, `10`, `1m`, `1h` in ms; None when it is none of these.
fn parse_interval_ms(text: &[u8]) -> Option<u64> {
    let text = core::str::from_utf8(text).ok()?.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit {
        "ms" => 1,
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(scale)
}

/// An on/off switch: `1`/`on`/`true`/`yes`/`enable(d)` or the `is_off` words; anything
/// else gets a warning and `default`.
fn env_switch(name_nul: &'static [u8], default: bool) -> bool {
    let Some(v) = env_str(name_nul) else { return default };
    if is_off(v) {
        return false;
    }
    if matches!(v, b"1" | b"on" | b"ON" | b"true" | b"yes" | b"enable" | b"enabled") {
        return true;
    }
    let used: &[u8] = if default { b"on" } else { b"off" };
    warn(&[name_of(name_nul), b"=", v, b" is neither on (1, on, true, yes) nor off (0, off, false, no): using ", used]);
    default
}

/// CPUs in our affinity mask, capped by the cgroup (v2 `cpu.max`, v1 `cpu.cfs_*`) quota.
pub fn default_workers() -> usize {
    // A raw system call: `sched_getaffinity` is one of our exports (docs/DESIGN.md §2.1).
    // SAFETY: all-zero is a valid (empty) cpu_set_t.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    // SAFETY: CPU_COUNT reads the set the kernel filled.
    let cpus = if crate::base::sys::sched_getaffinity(&mut set) > 0 { unsafe { libc::CPU_COUNT(&set) as usize } } else { 1 };
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
    let n = crate::base::sys::read_file_nul(path_nul, buf)?;
    core::str::from_utf8(&buf[..n]).ok()
}

#[cfg(test)]
mod tests {
    use super::parse_interval_ms;

    #[test]
    fn metrics_intervals_take_a_unit_or_seconds() {
        assert_eq!(parse_interval_ms(b"500ms"), Some(500));
        assert_eq!(parse_interval_ms(b"10s"), Some(10_000));
        assert_eq!(parse_interval_ms(b" 10 "), Some(10_000));
        assert_eq!(parse_interval_ms(b"2m"), Some(120_000));
        assert_eq!(parse_interval_ms(b"1h"), Some(3_600_000));
        for bad in [&b""[..], b"s", b"-1s", b"1.5s", b"10x", b"99999999999999999999h"] {
            assert_eq!(parse_interval_ms(bad), None, "{:?}", core::str::from_utf8(bad));
        }
    }
}
