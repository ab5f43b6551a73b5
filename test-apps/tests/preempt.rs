//! Issue 16: preemption. Fibers that busy-wait without calling into the library must
//! not starve the fiber they wait for: spinning hand-offs with more spinners than
//! workers finish under the preload as natively, with 1 and 2 workers; a spin inside
//! libc (never preempted there) falls back to a spare worker; with preemption off the
//! same program livelocks (so these tests do exercise it).

mod harness;
use harness::*;

use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// Runs `sync_spin_handoff args` natively and preloaded with `workers` workers;
/// asserts the same stdout and exit status; returns the preloaded run.
fn handoffs(args: &[&str], workers: &str) -> Run {
    same_as_native("sync_spin_handoff", args, workers)
}

/// Runs C app `name` natively and preloaded with `workers` workers; asserts the same
/// stdout and exit status (0) and that the preload took effect; returns the preloaded run.
fn same_as_native(name: &str, args: &[&str], workers: &str) -> Run {
    let bin = build_c(name);
    let native = run(&bin, args, false, LIMIT);
    assert_eq!(native.status, Some(0), "native run failed:\n{}{}", native.stdout, native.stderr);
    let pre = run_with(&bin, args, true, &[("FIBERIZE_WORKERS", workers)], LIMIT);
    assert_eq!(pre.status, native.status, "exit status differs:\n{}{}", pre.stdout, pre.stderr);
    assert_eq!(pre.stdout, native.stdout, "stdout differs; preloaded stderr:\n{}", pre.stderr);
    assert!(pre.stderr.contains("preloaded=1"), "library not active:\n{}", pre.stderr);
    pre
}

#[test]
fn spinning_handoffs_one_worker() {
    let pre = handoffs(&["8", "4"], "1");
    assert!(stat(&pre, "preemptions") >= 8, "hand-offs between 8 spinners on 1 worker need preemptions:\n{}", pre.stderr);
}

#[test]
fn spinning_handoffs_two_workers() {
    let pre = handoffs(&["8", "4"], "2");
    assert!(stat(&pre, "preemptions") >= 4, "{}", pre.stderr);
}

#[test]
fn spin_inside_libc_falls_back_to_a_spare_worker() {
    let pre = handoffs(&["4", "2", "libc"], "1");
    assert!(stat(&pre, "preempt_refused") > 0, "a spin in memchr must be refused:\n{}", pre.stderr);
    assert!(stat(&pre, "preempt_fallbacks") > 0, "{}", pre.stderr);
}

/// The control: without preemption one worker and eight spinners never finish.
#[test]
fn without_preemption_spinners_livelock() {
    let bin = build_c("sync_spin_handoff");
    let app = command(&bin); // the app, or qemu and the app
    let out = Command::new("timeout")
        .args(["3"])
        .arg(app.get_program())
        .args(app.get_args())
        .args(["8", "4"])
        .env("LD_PRELOAD", lib_path())
        .env("GLIBC_TUNABLES", "glibc.pthread.rseq=0")
        .env("FIBERIZE_WORKERS", "1")
        .env("FIBERIZE_PREEMPT_MS", "0")
        .output()
        .expect("run timeout");
    assert_eq!(out.status.code(), Some(124), "expected a livelock without preemption: {}", String::from_utf8_lossy(&out.stdout));
}

/// Computing threads beside a client/echo pair doing round trips through pipes (the
/// client waits on a condition variable in each) and a thread spinning on
/// `sched_yield` (`sched_fair.c`): a yield, a preemption and a wake-up by readiness all
/// go to the back of the worker's deque, so the round trips are served while the
/// computing fibers run, and everything finishes as natively. Returns the preloaded run.
fn round_trips_beside_hogs(args: &[&str], workers: &str) -> Run {
    let pre = same_as_native("sched_fair", args, workers);
    let hogs = args[0];
    assert!(pre.stdout.contains(&format!("hogs that computed and stopped: {hogs} of {hogs}")), "{}", pre.stdout);
    pre
}

/// Hogs that yield between chunks: round robin on the deque. A yield that queued the
/// fiber ahead of the others (or anywhere the worker does not come back to) would keep
/// the client from running on one worker until the limit.
#[test]
fn yielding_hogs_leave_round_trips_served_one_worker() {
    let pre = round_trips_beside_hogs(&["4", "200"], "1");
    assert!(stat(&pre, "yields") > 0, "{}", pre.stderr);
}

#[test]
fn yielding_hogs_leave_round_trips_served_two_workers() {
    round_trips_beside_hogs(&["4", "200"], "2");
}

/// Hogs that never switch on their own: on one worker the client runs only because
/// each preempted hog goes to the back of the deque, behind the fibers that waited.
#[test]
fn preempted_hogs_leave_round_trips_served_one_worker() {
    let pre = round_trips_beside_hogs(&["2", "30", "spin"], "1");
    assert!(stat(&pre, "preemptions") > 0, "the hogs were never preempted:\n{}", pre.stderr);
}
