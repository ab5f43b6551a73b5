//! Issue 11: no stall, no hang. Fiber dumps taken under load (the program completes
//! with the same output as natively), a dump whose output blocks (the monitor must
//! keep replacing blocked workers), the stall watchdog (it reports a real stall and
//! stays quiet under load), and MariaDB: point_select/read_write alternations with
//! dumps (bench-mysql/alternate.sh) and a short soak (bench-mysql/soak.sh).

mod harness;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use harness::*;

const LIMIT: Duration = Duration::from_secs(120);

/// Runs natively, then preloaded with `env`; asserts the same stdout and exit status
/// and that the library was active. Returns the preloaded run.
fn same_with_env(name: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    let bin = build_c(name);
    let native = run(&bin, args, false, LIMIT);
    let pre = run_with(&bin, args, true, env, LIMIT);
    assert_eq!(native.status, Some(0), "{name} failed natively:\n{}{}", native.stdout, native.stderr);
    assert_eq!(pre.status, native.status, "{name}: exit status differs\npreloaded:\n{}{}", pre.stdout, pre.stderr);
    assert_eq!(
        pre.stdout,
        native.stdout,
        "{name}: stdout differs (left: preloaded, right: native); preloaded stderr (tail):\n{}",
        tail(&pre.stderr)
    );
    assert!(pre.stderr.contains("preloaded=1"), "{name}: library not active:\n{}", tail(&pre.stderr));
    pre
}

fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

fn count(s: &str, pat: &str) -> usize {
    s.matches(pat).count()
}

#[test]
fn dumps_under_load_change_nothing() {
    // 1500 idle fibers (each in every dump), 16 threads creating/joining threads,
    // locking, handing off and timing out, a dump requested every 2 ms.
    for workers in ["1", "2"] {
        let pre = same_with_env(
            "stall_dump_load",
            &["1500", "16", "300"],
            &[("FIBERIZE_DUMP_SIGNAL", "12"), ("FIBERIZE_WORKERS", workers)],
        );
        let dumps = count(&pre.stderr, "fiber dump:");
        assert!(dumps >= 5, "only {dumps} dumps printed:\n{}", tail(&pre.stderr));
        // Only the last one may be cut short, by the program's exit.
        assert!(count(&pre.stderr, "end of dump") + 1 >= dumps, "a dump was cut short:\n{}", tail(&pre.stderr));
        assert!(pre.stdout.contains("counter 4800"), "{}", pre.stdout);
    }
}

#[test]
fn a_dump_with_blocked_output_does_not_stop_the_monitor() {
    // stderr is a pipe nobody reads while a dump of 3000 fibers is written; then a
    // fiber blocks the only worker in a raw read() that only another fiber can end.
    // With the dump printed by the monitor, nothing replaced the blocked worker: hang.
    let pre = same_with_env(
        "stall_dump_load",
        &["3000", "4", "20", "stuck-stderr"],
        &[("FIBERIZE_DUMP_SIGNAL", "12"), ("FIBERIZE_WORKERS", "1")],
    );
    assert!(pre.stdout.contains("blocked worker replaced while stderr was stuck"), "{}", pre.stdout);
    assert!(stat(&pre, "workers_blocked") >= 1, "the raw read did not block the worker:\n{}", tail(&pre.stderr));
}

#[test]
fn watchdog_reports_a_fiber_that_keeps_its_worker() {
    // One worker; a fiber wakes another, then computes for 1.5 s without switching.
    // Preemption off: with it, the computing fiber would be preempted and no stall
    // would happen (the watchdog is for the stalls preemption cannot end).
    let file = std::env::temp_dir().join(format!("fiberize-watchdog-{}.txt", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let pre = same_with_env(
        "stall_spin",
        &["1500"],
        &[("FIBERIZE_WORKERS", "1"), ("FIBERIZE_WATCHDOG", "0.5"), ("FIBERIZE_PREEMPT_MS", "0")],
    );
    assert_eq!(count(&pre.stderr, "watchdog: no fiber switch"), 1, "{}", pre.stderr);
    assert!(pre.stderr.contains("runnable waits on semaphore"), "{}", pre.stderr);
    // The dump shows the waited-on word as it is now and the program's frames above
    // the wait (the test app's own code, named by dladdr or by its offset in the app).
    let waiting = pre.stderr.lines().find(|l| l.contains("runnable waits on semaphore")).unwrap_or_default();
    assert!(waiting.contains(" word 0x"), "no lock word in the dump line: {waiting}");
    assert!(waiting.contains(" at ") && waiting.contains("stall_spin"), "no program frame in the dump line: {waiting}");
    // The same to a file, and nothing on stderr.
    let pre = same_with_env(
        "stall_spin",
        &["1500"],
        &[
            ("FIBERIZE_WORKERS", "1"),
            ("FIBERIZE_WATCHDOG", "0.5"),
            ("FIBERIZE_PREEMPT_MS", "0"),
            ("FIBERIZE_WATCHDOG_FILE", file.to_str().unwrap()),
        ],
    );
    assert!(!pre.stderr.contains("watchdog"), "{}", pre.stderr);
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let _ = std::fs::remove_file(&file);
    assert!(text.contains("watchdog: no fiber switch") && text.contains("end of dump"), "{text}");
}

#[test]
fn watchdog_stays_quiet_under_load() {
    let pre = same_with_env("stall_dump_load", &["500", "16", "300"], &[("FIBERIZE_WATCHDOG", "1"), ("FIBERIZE_WORKERS", "1")]);
    assert!(!pre.stderr.contains("watchdog"), "{}", tail(&pre.stderr));
}

fn mariadb_script(script: &str, env: &[(&str, &str)], limit_s: u32) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut cmd = Command::new("timeout");
    cmd.args([limit_s.to_string().as_str(), "bash"]).arg(root.join(script));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run script");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{stdout}");
    assert!(out.status.success(), "{script} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

#[test]
fn mariadb_alternations_with_dumps_never_stall() {
    // The sequence, scaled to a small machine: point_select at 1024
    // connections then read_write at 64, 3 times, a fiber dump every 2 s. Any second
    // at 0 tps, a run without a result or an error fails.
    let out = mariadb_script(
        "bench-mysql/alternate.sh",
        &[("ROUNDS", "3"), ("SECS", "8"), ("PS_THREADS", "1024"), ("DUMP_EVERY", "2"), ("HANG_GRACE", "45")],
        500,
    );
    assert!(out.contains("stalls 0, hangs 0"), "{out}");
}

#[test]
fn mariadb_short_soak() {
    let out = mariadb_script(
        "bench-mysql/soak.sh",
        &[("DURATION", "60"), ("PS_THREADS", "512"), ("RW_THREADS", "64"), ("LEDGER_OPS", "400"), ("DUMP_EVERY", "10")],
        500,
    );
    assert!(out.contains("0 errors, 0 stalls, 0 lost commits"), "{out}");
}
