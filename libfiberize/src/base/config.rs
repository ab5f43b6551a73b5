//! Configuration by environment, read once, before or after constructors ran.
//!
//! Every `FIBERIZE_*` variable is parsed and checked here, and nowhere else: a value
//! outside what the table allows gets one `fiberize: NAME=value …` line on stderr that
//! says what is used instead. The operator's variables ([`VARIABLES`]; the README's
//! table lists the same, a test checks):
//!
//! | variable              | meaning                                                   |
//! |-----------------------|-----------------------------------------------------------|
//! | `FIBERIZE=off`        | disable: every export passes straight through to glibc   |
//! | `FIBERIZE_WORKERS=N`  | worker threads (default: CPUs in the affinity mask, capped by the CPU quota of our own cgroup) |
//! | `FIBERIZE_STATS=1`    | print one `fiberize: stats …` line to stderr at exit (a value with a `/` is a file to append it to) |
//! | `FIBERIZE_REPORT=PATH` | write the report (`crate::observe::report`) to PATH (`-`: stderr) at exit and on the dump signal |
//! | `FIBERIZE_METRICS=PATH[,INTERVAL]` | write the counters in Prometheus' text format to PATH every INTERVAL (default 10s; `500ms`, `30s`, `1m`) and at exit (`crate::observe::metrics`); queue waits only while `FIBERIZE_STATS` or `FIBERIZE_REPORT` measure them |
//! | `FIBERIZE_DUMP_SIGNAL=N` | on signal N, print every fiber (state, wait, origin) to stderr |
//! | `FIBERIZE_DUMP_AT_EXIT=1` | print the fiber dump at exit as well                 |
//! | `FIBERIZE_WATCHDOG=SECONDS` | stall watchdog (`crate::observe::watchdog`; fractions allowed, 0: off) |
//! | `FIBERIZE_WATCHDOG_FILE=PATH` | append the watchdog's reports to PATH instead of stderr |
//! | `FIBERIZE_PREEMPT_MS=N` | time slice after which a fiber that does not switch is preempted while other fibers wait (default 5; 0: off; see `crate::runtime::preemption::preempt`) |
//! | `FIBERIZE_TZ=off`     | turn the mktime/tzset throttle off (`crate::tz`; read by [`tz_throttle_wanted`], also with `FIBERIZE=off`) |
//! | `FIBERIZE_TUNE=name=value,…` | A/B switches of the scheduler's rules whose question is still open, for experiments ([`TUNE_NAMES`]; docs/DESIGN.md §2.18) |
//!
//! `FIBERIZE_TUNE`'s names, each a field of [`Config`]: `poll_per_worker`.
//! `FIBERIZE_POLL_PER_WORKER` is still read as another name for
//! `FIBERIZE_TUNE=poll_per_worker=…` (benchmark scripts outside this tree set it). A
//! switch goes once its A/B run is decided (the decided rule stays, its constant in
//! `runtime::scheduler::policy`); a retired name gets the unknown-switch line. The
//! variables of earlier knobs ([`RETIRED`]) are ignored with one line each.
//!
//! The on/off decision is taken at the first call into any export and never changes:
//! objects such as mutexes are laid out by whichever implementation saw them first, so
//! switching implementations mid-run would misread them.

use core::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use crate::base::rawlock::RawOnce;

mod values;
use values::*;

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
    let value = env_str(b"FIBERIZE\0");
    let on = !matches!(value, Some(v) if is_off(v));
    // Racing first callers compute the same answer from the same environment; the one
    // that records it says what was wrong with the value.
    let first = STATE
        .compare_exchange(STATE_UNDECIDED, if on { STATE_ENABLED } else { STATE_DISABLED }, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok();
    if let (true, Some(v)) = (first, value) {
        if !v.is_empty() && !is_off(v) && !is_on(v) {
            warn(&[b"FIBERIZE=", v, b" is neither on (1, on, true, yes) nor off (0, off, false, no): using on"]);
        }
    }
    STATE.load(Ordering::Relaxed) == STATE_ENABLED
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

/// Where a text at exit goes: stderr, or a file appended to (the path lives in the
/// environment block, which lasts as long as the process).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Stderr,
    File(&'static [u8]),
}

#[derive(Clone, Copy)]
pub struct Config {
    pub workers: usize,
    /// `FIBERIZE_WORKERS` was given (not empty): the count is the operator's, and a
    /// changed cgroup quota is not followed (`runtime::scheduler::quota`).
    pub workers_set: bool,
    /// The CPUs the process may use at start: its affinity mask, capped by its
    /// cgroup's quota ([`default_workers`], read once here).
    pub usable_cpus: usize,
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
    /// The stall watchdog's limit in ns (`FIBERIZE_WATCHDOG`, in seconds); 0: off.
    pub watchdog_ns: u64,
    /// Where the watchdog's reports go (`FIBERIZE_WATCHDOG_FILE`; None: stderr).
    pub watchdog_file: Option<&'static [u8]>,
    /// Time slice of a fiber before preemption, in ms (`FIBERIZE_PREEMPT_MS`; 0: off);
    /// `None`: the scheduler's default (`runtime::scheduler::policy::DEFAULT_SLICE_MS`).
    pub preempt_ms: Option<u64>,

    // `FIBERIZE_TUNE`'s switches (A/B runs with an open question; docs/DESIGN.md §2.18).
    /// Each worker sleeps in a readiness set of its own, holding the descriptors of the
    /// fibers that run on it (`poll_per_worker`, or `FIBERIZE_POLL_PER_WORKER`; see
    /// `runtime::sleep::poller`); `None`: the poller decides by the number of workers
    /// (`runtime::sleep::poller::per_worker_by_default`).
    pub poll_per_worker: Option<bool>,
}

/// The operator's variables, as the README's "Environment" table lists them (a test
/// checks that the two name the same set).
pub const VARIABLES: [&str; 12] = [
    "FIBERIZE",
    "FIBERIZE_WORKERS",
    "FIBERIZE_STATS",
    "FIBERIZE_REPORT",
    "FIBERIZE_METRICS",
    "FIBERIZE_DUMP_SIGNAL",
    "FIBERIZE_DUMP_AT_EXIT",
    "FIBERIZE_WATCHDOG",
    "FIBERIZE_WATCHDOG_FILE",
    "FIBERIZE_PREEMPT_MS",
    "FIBERIZE_TZ",
    "FIBERIZE_TUNE",
];

/// `FIBERIZE_TUNE`'s names ([`apply_tune`] parses them; docs/DESIGN.md §2.18 says what
/// each does, its default and the question it is kept for).
pub const TUNE_NAMES: [&str; 1] = ["poll_per_worker"];

/// `FIBERIZE_TUNE` names of switches that are gone: their A/B run is decided and the
/// decided rule stays (docs/RESULTS.md names the run), or their policy was removed (the
/// run order by CPU time's three, docs/RESULTS.md#run-order-by-cpu-time). Each gets the
/// unknown-switch line.
pub const RETIRED_TUNE_NAMES: [&str; 10] = [
    "direct_wait",
    "direct_wait_peer_cpu",
    "turn_us",
    "turn_short_us",
    "spin",
    "stack_release_ms",
    "sync_inline",
    "fair",
    "coordinating_first",
    "run_clock",
];

/// Variables that were knobs of their own: set, each gets one line saying so and is
/// ignored (their rule is decided, or their policy removed).
pub const RETIRED: [&[u8]; 11] = [
    b"FIBERIZE_FAIR\0",
    b"FIBERIZE_COORDINATING_FIRST\0",
    b"FIBERIZE_RUN_CLOCK\0",
    b"FIBERIZE_DIRECT_WAIT\0",
    b"FIBERIZE_DIRECT_WAIT_PEER_CPU\0",
    b"FIBERIZE_TURN_US\0",
    b"FIBERIZE_TURN_SHORT_US\0",
    b"FIBERIZE_SPIN\0",
    b"FIBERIZE_STACK_RELEASE_MS\0",
    b"FIBERIZE_SYNC_INLINE\0",
    b"FIBERIZE_MAX_WORKERS\0",
];

/// What a variable says before it is read: the scheduler's own defaults.
const DEFAULTS: Config = Config {
    workers: 1,
    workers_set: false,
    usable_cpus: 1,
    stats: false,
    stats_to: Output::Stderr,
    report: None,
    metrics: None,
    dump_signal: 0,
    dump_at_exit: false,
    watchdog_ns: 0,
    watchdog_file: None,
    preempt_ms: None,
    poll_per_worker: None,
};

static CONFIG_ONCE: RawOnce = RawOnce::new();
static mut CONFIG: Config = DEFAULTS;

/// The configuration, read on first use. Every variable is checked once here: a value
/// that is not what the README's table allows gets one line on stderr saying what is
/// used instead (`FIBERIZE_WORKERS=abc`, `0`, `-1` or empty were once silently ignored).
pub fn config() -> &'static Config {
    CONFIG_ONCE.call_once(|| {
        let c = read_config();
        // SAFETY: written once, inside the RawOnce, before any reader passes is_done().
        unsafe { *core::ptr::addr_of_mut!(CONFIG) = c };
    });
    // SAFETY: initialized above and never written again.
    unsafe { &*core::ptr::addr_of!(CONFIG) }
}

fn read_config() -> Config {
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
    // A value with a '/' is a file (`xz` closes stderr before exit).
    let stats_file = env_str(b"FIBERIZE_STATS\0").filter(|v| v.contains(&b'/'));
    let report = match env_str(b"FIBERIZE_REPORT\0") {
        None => None,
        Some(v) if v.is_empty() || is_off(v) => None,
        Some(b"-") => Some(Output::Stderr),
        Some(path) => Some(Output::File(path)),
    };
    let (watchdog_ns, watchdog_file) = env_watchdog();
    let mut c = Config {
        workers,
        usable_cpus: cpus,
        workers_set: env_str(b"FIBERIZE_WORKERS\0").is_some_and(|v| !v.is_empty()),
        stats: stats_file.is_some() || env_switch(b"FIBERIZE_STATS\0", false),
        stats_to: stats_file.map_or(Output::Stderr, Output::File),
        report,
        metrics: env_metrics(),
        dump_signal,
        dump_at_exit: env_switch(b"FIBERIZE_DUMP_AT_EXIT\0", false),
        watchdog_ns,
        watchdog_file,
        preempt_ms: env_optional_number(b"FIBERIZE_PREEMPT_MS\0", 0, 60_000),
        ..DEFAULTS
    };
    for name_nul in RETIRED {
        let Some(v) = env_str(name_nul) else { continue };
        warn(&[name_of(name_nul), b"=", v, b" is retired and ignored (its rule is decided or removed)"]);
    }
    if env_str(b"FIBERIZE_POLL_PER_WORKER\0").is_some() {
        c.poll_per_worker = Some(env_switch(b"FIBERIZE_POLL_PER_WORKER\0", false));
    }
    if let Some(tune) = env_str(b"FIBERIZE_TUNE\0") {
        apply_tune(&mut c, tune);
    }
    c
}

/// `FIBERIZE_TUNE=name=value,name=value`: each entry sets one of [`TUNE_NAMES`]; an
/// entry that names none, or whose value is not what that switch takes, gets one line
/// and leaves the switch as it was.
fn apply_tune(c: &mut Config, tune: &'static [u8]) {
    for entry in tune.split(|&b| b == b',') {
        let entry = trim_blanks(entry);
        if entry.is_empty() {
            continue;
        }
        let Some(eq) = entry.iter().position(|&b| b == b'=') else {
            warn(&[b"FIBERIZE_TUNE=", entry, b" is not name=value: ignored"]);
            continue;
        };
        let (name, value) = (trim_blanks(&entry[..eq]), &entry[eq + 1..]);
        // What a warning calls the switch: `FIBERIZE_TUNE=name`.
        let mut label_buf = [0u8; 48];
        let label = concat_into(&mut label_buf, &[b"FIBERIZE_TUNE=", name]);
        match name {
            b"poll_per_worker" => c.poll_per_worker = Some(switch_value(label, value, c.poll_per_worker.unwrap_or(false))),
            _ if RETIRED_TUNE_NAMES.iter().any(|n| n.as_bytes() == name) => warn(&[
                b"FIBERIZE_TUNE=",
                entry,
                b": no such switch, ignored (retired: its rule is decided or removed; the switches: poll_per_worker)",
            ]),
            _ => warn(&[b"FIBERIZE_TUNE=", entry, b": no such switch, ignored (the switches: poll_per_worker)"]),
        }
    }
}

/// The longest watchdog limit, in seconds. Origin: a stall longer than a day is not
/// what a watchdog is for, and the limit in ns stays far from overflow.
const WATCHDOG_MAX_SECS: f64 = 86_400.0;

/// `FIBERIZE_WATCHDOG=SECONDS` (fractions allowed; 0: off) and `FIBERIZE_WATCHDOG_FILE`.
fn env_watchdog() -> (u64, Option<&'static [u8]>) {
    let file = env_str(b"FIBERIZE_WATCHDOG_FILE\0").filter(|p| !p.is_empty());
    let Some(raw) = env_str(b"FIBERIZE_WATCHDOG\0") else {
        if let Some(path) = file {
            warn(&[b"FIBERIZE_WATCHDOG_FILE=", path, b" without FIBERIZE_WATCHDOG: no watchdog"]);
        }
        return (0, None);
    };
    let ns = watchdog_limit_ns(raw);
    (ns, if ns > 0 { file } else { None })
}

/// `FIBERIZE_WATCHDOG`'s value in ns (0: off), after the warning if it is not a number
/// of seconds from 0 to a day.
fn watchdog_limit_ns(raw: &[u8]) -> u64 {
    let text = core::str::from_utf8(raw).unwrap_or("").trim();
    let secs = match text.parse::<f64>() {
        Ok(s) if s.is_finite() && (0.0..=WATCHDOG_MAX_SECS).contains(&s) => s,
        Ok(s) if s.is_finite() && s > WATCHDOG_MAX_SECS => {
            warn(&[b"FIBERIZE_WATCHDOG=", raw, b" is above the limit 86400 (a day): using 86400"]);
            WATCHDOG_MAX_SECS
        }
        _ if text.is_empty() || is_off(raw) => 0.0,
        _ => {
            warn(&[b"FIBERIZE_WATCHDOG=", raw, b" is not a number of seconds from 0 to 86400: no watchdog"]);
            0.0
        }
    };
    (secs * 1e9) as u64
}

/// Whether the mktime/tzset throttle is wanted (`FIBERIZE_TZ`; on when unset or empty).
/// Read by `crate::tz` once, with or without `FIBERIZE=off`, so not part of [`Config`]:
/// a value that is neither on nor off turns it off, as any such value always did.
pub fn tz_throttle_wanted() -> bool {
    match env_str(b"FIBERIZE_TZ\0") {
        None | Some(b"") => true,
        Some(v) => switch_value(b"FIBERIZE_TZ", v, false),
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

/// CPUs in our affinity mask, capped by the CPU quota of our own cgroup and its
/// ancestors (`crate::base::cgroup`).
pub fn default_workers() -> usize {
    let cpus = affinity_cpus();
    let quota = crate::base::cgroup::cpu_limit();
    let n = match quota {
        Some(q) => cpus.min(q),
        None => cpus,
    };
    n.max(1)
}

/// CPUs in our affinity mask (1 if the kernel will not say). The quota follower reads
/// it again (`runtime::scheduler::quota`).
pub fn affinity_cpus() -> usize {
    // A raw system call: `sched_getaffinity` is one of our exports (docs/DESIGN.md §2.1).
    // SAFETY: all-zero is a valid (empty) cpu_set_t.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    if crate::base::sys::sched_getaffinity(&mut set) <= 0 {
        return 1;
    }
    // SAFETY: CPU_COUNT reads the set the kernel filled.
    (unsafe { libc::CPU_COUNT(&set) } as usize).max(1)
}

#[cfg(test)]
mod tests;
