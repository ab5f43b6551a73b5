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
    assert!((1..=2).contains(&blocks), "{blocks} worker blocks with 2 workers:\n{}", pre.stderr);
    assert!(value(&pre.stderr, "migrated") >= 1, "no fiber moved between workers:\n{}", pre.stderr);
    assert!(stat(&pre, "fibers_created") >= 64, "{}", pre.stderr);
}

#[test]
fn wtls_from_cpp_thread_locals() {
    let pre = both_ways_two_workers("wtls_cpp", &["32", "100"]);
    assert!(pre.stdout.contains("increments 3200 of 3200, callbacks before thread_local destructors 32 of 32"), "{}", pre.stdout);
    let blocks = value(&pre.stderr, "worker_blocks");
    assert!((1..=2).contains(&blocks), "{blocks} worker blocks with 2 workers:\n{}", pre.stderr);
}

#[test]
fn header_is_installed_next_to_the_library() {
    let h = lib_path().with_file_name("fiberize.h");
    let text = std::fs::read_to_string(&h).unwrap_or_else(|e| panic!("{}: {e}", h.display()));
    assert!(text.contains("WTLS_ADDR_OF") && text.contains("AT_FIBER_DESTROY"));
}
