//! Issue 13: WTLS (`fiberize.h`) natively and preloaded, with fibers migrating between
//! two workers; and the report (`FIBERIZE_REPORT`): where the program still waits.

mod harness;

use std::time::Duration;

use harness::*;

const LIMIT: Duration = Duration::from_secs(120);

/// Runs natively, then preloaded with two workers: same stdout and status, active preload.
fn both_ways_two_workers(name: &str, args: &[&str]) -> Run {
    let bin = build_c(name);
    let native = run(&bin, args, false, LIMIT);
    let pre = run_with(&bin, args, true, &[("FIBERIZE_WORKERS", "2")], LIMIT);
    assert_eq!(native.status, Some(0), "{name} failed natively:\n{}{}", native.stdout, native.stderr);
    assert_eq!(pre.status, Some(0), "{name} failed preloaded:\n{}{}", pre.stdout, pre.stderr);
    assert_eq!(pre.stdout, native.stdout, "{name}: stdout differs; preloaded stderr:\n{}", pre.stderr);
    assert!(native.stderr.contains("preloaded=0 worker_blocks=0"), "{}", native.stderr);
    assert!(pre.stderr.contains("preloaded=1"), "{name}: library not active:\n{}", pre.stderr);
    pre
}

/// The TLS blocks of the 2 workers. Under qemu a worker's thread also sleeps in the
/// emulator's own locks (whose holder the loaded host preempted) or in a runtime lock
/// the monitor cannot recognize there (`/proc/TID/syscall` shows the host's system
/// call numbers), and the monitor brings a spare in, whose block the fibers then use
/// too: there, each spare started counts.
fn max_worker_blocks(pre: &Run) -> u64 {
    2 + if emulated() { stat(pre, "workers_spawned") } else { 0 }
}

fn value(s: &str, key: &str) -> u64 {
    s.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {s}"))
}

#[test]
fn wtls_macros_natively_and_preloaded_with_migration() {
    let pre = both_ways_two_workers("wtls", &["64", "200"]);
    assert!(pre.stdout.contains("WTLS_ADDR_OF increments 12800 of 12800"), "{}", pre.stdout);
    assert!(pre.stdout.contains("WTLS_REGISTER increments 12800 of 12800"), "{}", pre.stdout);
    assert!(pre.stdout.contains("AT_FIBER_DESTROY before destructors 64 of 64"), "{}", pre.stdout);
    let blocks = value(&pre.stderr, "worker_blocks");
    assert!((1..=max_worker_blocks(&pre)).contains(&blocks), "{blocks} worker blocks with 2 workers:\n{}", pre.stderr);
    assert!(value(&pre.stderr, "migrated") >= 1, "no fiber moved between workers:\n{}", pre.stderr);
    assert!(stat(&pre, "fibers_created") >= 64, "{}", pre.stderr);
}

#[test]
fn wtls_from_cpp_thread_locals() {
    let pre = both_ways_two_workers("wtls_cpp", &["32", "100"]);
    assert!(pre.stdout.contains("increments 3200 of 3200, callbacks before thread_local destructors 32 of 32"), "{}", pre.stdout);
    let blocks = value(&pre.stderr, "worker_blocks");
    assert!((1..=max_worker_blocks(&pre)).contains(&blocks), "{blocks} worker blocks with 2 workers:\n{}", pre.stderr);
}

#[test]
fn header_is_installed_next_to_the_library() {
    let h = lib_path().with_file_name("fiberize.h");
    let text = std::fs::read_to_string(&h).unwrap_or_else(|e| panic!("{}: {e}", h.display()));
    assert!(text.contains("WTLS_ADDR_OF") && text.contains("AT_FIBER_DESTROY"));
}

fn temp_file(name: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("fiberize-{name}-{}.txt", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// The lines of the report's list that starts after the line starting with `title`.
fn list_after<'a>(report: &'a str, title: &str) -> Vec<&'a str> {
    report.lines().skip_while(|l| !l.starts_with(title)).skip(2).take_while(|l| l.starts_with("  ")).collect()
}

#[test]
fn report_names_the_blocking_call_and_the_hot_lock_first() {
    let bin = build_c("report");
    let args = ["2", "300", "8", "20000"];
    let native = run(&bin, &args, false, LIMIT);
    assert_eq!(native.status, Some(0), "{}{}", native.stdout, native.stderr);
    let file = temp_file("report");
    let pre = run_with(&bin, &args, true, &[("FIBERIZE_WORKERS", "2"), ("FIBERIZE_REPORT", file.to_str().unwrap())], LIMIT);
    let report = std::fs::read_to_string(&file).unwrap_or_default();
    let _ = std::fs::remove_file(&file);
    assert_eq!(pre.status, Some(0), "{}{}", pre.stdout, pre.stderr);
    assert_eq!(pre.stdout, native.stdout);
    assert!(pre.stderr.contains("preloaded=1"), "{}", pre.stderr);
    assert!(!pre.stderr.contains("==== report"), "the report went to stderr, not the file:\n{}", pre.stderr);
    let blocked = list_after(&report, "calls that blocked a worker");
    // Under qemu-user the monitor sees qemu's own system call and stack in
    // /proc/TID/syscall, and call sites cannot be found: qemu does not implement
    // process_vm_readv (ENOSYS), with which the library reads stacks.
    assert!(
        emulated() || blocked.first().is_some_and(|l| l.contains("nanosleep") && l.contains("blocker_in_raw_sleep")),
        "the raw nanosleep is not first:\n{report}"
    );
    let locks = list_after(&report, "most contended locks");
    assert!(
        locks.first().is_some_and(|l| l.contains("mutex") && (emulated() || l.contains("hot_lock_user"))),
        "the hot lock is not first:\n{report}"
    );
    assert!(report.contains("worker time (sampled every 1 ms): running fibers"), "{report}");
    assert!(stat(&pre, "workers_blocked") >= 1, "{}", pre.stderr);
}

#[test]
fn stats_and_report_to_files_survive_a_closed_stderr() {
    // xz closes fd 2 before it exits: a path keeps the stats line and the report.
    let bin = build_c("report");
    let (stats, report) = (temp_file("stats"), temp_file("report-closed"));
    let pre = run_with(
        &bin,
        &["0", "0", "4", "1000", "close-stderr"],
        true,
        &[("FIBERIZE_STATS", stats.to_str().unwrap()), ("FIBERIZE_REPORT", report.to_str().unwrap())],
        LIMIT,
    );
    let (stats_text, report_text) =
        (std::fs::read_to_string(&stats).unwrap_or_default(), std::fs::read_to_string(&report).unwrap_or_default());
    let _ = (std::fs::remove_file(&stats), std::fs::remove_file(&report));
    assert_eq!(pre.status, Some(0), "{}{}", pre.stdout, pre.stderr);
    assert!(stats_text.starts_with("fiberize: stats workers="), "{stats_text:?}");
    assert!(report_text.contains("==== end of report ===="), "{report_text:?}");
    assert!(!pre.stderr.contains("fiberize: stats"), "{}", pre.stderr);
}
