//! Issue 28: the Prometheus metrics file (`FIBERIZE_METRICS`). The report's test app
//! (a blocked worker and a hot mutex) runs natively and preloaded; the preloaded run's
//! file must pass `promtool check metrics` (Debian's `prometheus` package) and agree
//! with the stats line written right after it at exit.

mod harness;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use harness::*;

const LIMIT: Duration = Duration::from_secs(120);

fn temp_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fiberize-metrics-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `name{labels}` -> value, for every sample line.
fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (name, value) = l.rsplit_once(' ').unwrap_or_else(|| panic!("bad sample line {l:?}"));
            (name.to_string(), value.parse().unwrap_or_else(|_| panic!("bad value in {l:?}")))
        })
        .collect()
}

fn promtool_check(text: &str) {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool not found: apt-get install prometheus (scripts/test.sh installs it)");
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics failed:\n{}{}\nfile:\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn metrics_file_matches_the_stats_line() {
    let bin = build_c("report");
    let args = ["1", "300", "8", "20000"];
    let native = run(&bin, &args, false, LIMIT);
    assert_eq!(native.status, Some(0), "{}{}", native.stdout, native.stderr);
    let dir = temp_path("stats");
    let file = dir.join("app.prom");
    let stats = dir.join("stats.txt");
    let (metrics, report) = (format!("{},100ms", file.display()), dir.join("report.txt"));
    let env = [
        ("FIBERIZE_WORKERS", "2"),
        ("FIBERIZE_METRICS", metrics.as_str()),
        ("FIBERIZE_STATS", stats.to_str().unwrap()),
        ("FIBERIZE_REPORT", report.to_str().unwrap()),
    ];
    let pre = run_with(&bin, &args, true, &env, LIMIT);
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let line = std::fs::read_to_string(&stats).unwrap_or_default();
    let mut left: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    left.sort();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(pre.status, Some(0), "{}{}", pre.stdout, pre.stderr);
    assert_eq!(pre.stdout, native.stdout);
    assert!(pre.stderr.contains("preloaded=1"), "library not active:\n{}", pre.stderr);
    // The file, its lock, the stats line and the report; no temporary file left.
    assert_eq!(left, ["app.prom", "app.prom.lock", "report.txt", "stats.txt"], "files in the folder");
    promtool_check(&text);

    let m = samples(&text);
    let line = line.lines().find(|l| l.starts_with("fiberize: stats")).unwrap_or_else(|| panic!("no stats line: {line:?}"));
    let mut compared = 0;
    for kv in line.split_whitespace().skip(2) {
        let (key, value) = kv.split_once('=').unwrap();
        if let Some(source) = key.strip_prefix("queue_") {
            let counts: Vec<u64> = value.split(&[',', '/'][..]).map(|v| v.parse().unwrap()).collect();
            if source == "hist" {
                let inf = m["fiberize_queue_wait_seconds_bucket{le=\"+Inf\"}"] as u64;
                assert!(inf <= counts.iter().sum(), "queue histogram: file {inf}, line {value}");
                assert!(inf > 0, "no queue waits in the file:\n{text}");
            } else {
                let n = m[&format!("fiberize_queue_waits_total{{source=\"{source}\"}}")] as u64;
                assert!(n <= counts[0], "queue waits {source}: file {n}, line {}", counts[0]);
            }
            continue;
        }
        let value: u64 = value.parse().unwrap();
        let in_file = [format!("fiberize_{key}_total"), format!("fiberize_{key}")]
            .iter()
            .find_map(|name| m.get(name))
            .unwrap_or_else(|| panic!("stats counter {key} has no metric (add it to observe/metrics.rs METRICS):\n{text}"));
        let in_file = *in_file as u64;
        // The file is written first at exit: counters can only have grown since (a
        // fiber's last steps may still run on a worker), live fibers only gone down.
        match key {
            "fibers_created" | "workers" => assert_eq!(in_file, value, "{key}: file {in_file}, stats line {value}"),
            "live_fibers" => assert!(in_file >= value, "{key}: file {in_file} < stats line {value}"),
            _ => assert!(in_file <= value, "{key}: file {in_file} > stats line {value}"),
        }
        compared += 1;
    }
    assert!(compared >= 30, "only {compared} counters compared in {line}");
    // The app's 9 threads, and not one more: the writer thread is no fiber.
    assert_eq!(m["fiberize_fibers_created_total"], 9.0, "{text}");
    assert_eq!(m["fiberize_workers"], 2.0);
    // The report's sites: the hot mutex, named by its call site, as a labelled counter.
    let hot = m.iter().find(|(k, _)| k.starts_with("fiberize_site_waits_total{kind=\"mutex\",site=\"hot_lock_user+"));
    assert!(hot.is_some_and(|(_, &v)| v >= 1.0), "no hot_lock_user mutex series:\n{text}");
}

#[test]
fn bad_metrics_values_get_one_line_and_the_default() {
    let bin = build_c("report");
    let dir = temp_path("bad");
    let file = dir.join("bad.prom");
    let value = format!("{},10x", file.display());
    // Without the stats and the report: the queue waits are not measured, not exported.
    let env = [("FIBERIZE_METRICS", value.as_str()), ("FIBERIZE_STATS", "0")];
    let pre = run_with(&bin, &["1", "10", "2", "100"], true, &env, LIMIT);
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let empty = run_with(&bin, &["1", "10", "2", "100"], true, &[("FIBERIZE_METRICS", ",5s")], LIMIT);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(pre.status, Some(0), "{}", pre.stderr);
    let warnings: Vec<&str> = pre.stderr.lines().filter(|l| l.contains("FIBERIZE_METRICS")).collect();
    assert_eq!(warnings.len(), 1, "{}", pre.stderr);
    assert!(warnings[0].contains("using 10s"), "{}", warnings[0]);
    // The default interval is used: the exit's write is there all the same.
    assert!(text.contains("fiberize_fibers_created_total 3"), "{text}");
    assert!(!text.contains("fiberize_queue_wait"), "queue waits measured for the metrics file alone:\n{text}");
    assert!(empty.stderr.contains("FIBERIZE_METRICS=,5s names no file: no metrics"), "{}", empty.stderr);
}

/// One writer per file: while another process holds `PATH.lock` (here: the test itself),
/// a preloaded program says so once and leaves the file alone, its exit included.
#[test]
fn a_second_process_leaves_the_file_alone() {
    use std::os::fd::AsRawFd;
    let bin = build_c("report");
    let dir = temp_path("lock");
    let file = dir.join("shared.prom");
    std::fs::write(&file, "# the first writer's file\n").unwrap();
    let lock = std::fs::File::create(dir.join("shared.prom.lock")).unwrap();
    // SAFETY: flock on a descriptor we own, kept open for the run.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }, 0);
    let value = format!("{},100ms", file.display());
    let pre = run_with(&bin, &["1", "200", "2", "100"], true, &[("FIBERIZE_METRICS", &value)], LIMIT);
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    drop(lock);
    let after = run_with(&bin, &["1", "10", "2", "100"], true, &[("FIBERIZE_METRICS", &value)], LIMIT);
    let text_after = std::fs::read_to_string(&file).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(pre.status, Some(0), "{}", pre.stderr);
    assert!(pre.stderr.contains("preloaded=1"), "{}", pre.stderr);
    assert!(pre.stderr.contains("another process writes that file"), "{}", pre.stderr);
    assert_eq!(text, "# the first writer's file\n", "the second process wrote the file");
    // Once the lock is free, the next process writes it.
    assert!(!after.stderr.contains("another process"), "{}", after.stderr);
    assert!(text_after.contains("fiberize_fibers_created_total 3"), "{text_after}");
}
