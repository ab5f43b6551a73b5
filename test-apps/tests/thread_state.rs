//! Calls that name the calling thread implicitly (`set_tid_address`, the robust list,
//! `tgkill` to itself, `sched_*` with 0, the thread's name, `sigaltstack`, `rseq`): a
//! fiber gets what its thread would natively, and no worker keeps what a fiber set
//! (`libfiberize/src/thread/kernel_state.rs`). And Debian's `stress-ng`, whose pthread
//! stressor checks several of these, passes preloaded.
//!
//! Needs `target/release/libfiberize.so` (`cargo build --release -p interpose`), or
//! `FIBERIZE_LIB=/path/to/libfiberize.so`.

mod harness;
use harness::*;

use std::process::Command;
use std::time::Duration;

#[test]
fn kernel_state_of_the_calling_thread_is_the_fibers_own() {
    let (_native, pre) = same_both_ways("thread_kernel_state", &["200", "10"]);
    assert!(pre.stderr.contains("fiber_seen=1"), "the threads did not run as fibers:\n{}", pre.stderr);
    assert_eq!(stat(&pre, "fibers_created"), 400, "two generations of 200: {}", pre.stderr);
    assert_eq!(stat(&pre, "fibers_demoted"), 0, "{}", pre.stderr);
    // One worker: every fiber's calls go through the same kernel thread.
    let bin = build_c("thread_kernel_state");
    let one = run_with(&bin, &["50", "10"], true, &[("FIBERIZE_WORKERS", "1")], Duration::from_secs(120));
    assert_eq!(one.status, Some(0), "{}{}", one.stdout, one.stderr);
    assert_eq!(one.stdout, _native.stdout.replace("threads=200", "threads=50"));
    assert!(one.stderr.contains("fiber_seen=1"), "{}", one.stderr);
}

/// `stress-ng --pthread --mutex --futex --sem --yield` preloaded, for a few seconds:
/// every stressor passes, and the fibers were in effect (the metrics file, which one
/// process of the run writes while it runs: stressors leave with `_exit`, so no stats
/// line comes at exit).
#[test]
fn stress_ng_thread_stressors_pass_preloaded() {
    if emulated() {
        eprintln!("skipped: stress-ng is the host's, the library under test is not");
        return;
    }
    if Command::new("stress-ng").arg("--version").output().map(|o| !o.status.success()).unwrap_or(true) {
        eprintln!("skipped: stress-ng is not installed (scripts/test.sh installs it: apt-get install stress-ng)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("fiberize-stress-ng-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let metrics = dir.join("metrics.prom");
    let mut cmd = Command::new("stress-ng");
    cmd.args(["--pthread", "2", "--mutex", "2", "--futex", "2", "--sem", "2", "--yield", "2", "-t", "4s"])
        .args(["--temp-path", dir.to_str().unwrap()])
        .env("LD_PRELOAD", lib_path())
        .env("GLIBC_TUNABLES", "glibc.pthread.rseq=0")
        .env("FIBERIZE_METRICS", format!("{},200ms", metrics.display()));
    let r = run_command(cmd, Duration::from_secs(60), "stress-ng");
    let prom = std::fs::read_to_string(&metrics).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(r.status, Some(0), "stress-ng failed preloaded:\n{}{}", r.stdout, r.stderr);
    let all = format!("{}{}", r.stdout, r.stderr);
    assert!(all.contains("successful run completed"), "{all}");
    let created = prom
        .lines()
        .find_map(|l| l.strip_prefix("fiberize_fibers_created_total "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    assert!(created > 0, "no fibers in the stressor processes; metrics file:\n{prom}\n{all}");
}
