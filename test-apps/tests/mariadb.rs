//! MariaDB end to end under the preload (issue 5): bench-mysql/smoke.sh starts a
//! preloaded `mariadbd` on loopback with a fresh datadir, runs sysbench OLTP at 64 and
//! 1024 connections, shuts it down cleanly, then kills it with -9 under load and checks
//! that every acknowledged insert survived the restart. Bounded to a few minutes.
//! `scripts/test.sh` installs mariadb-server and sysbench.

use std::path::Path;
use std::process::Command;

#[test]
fn mariadb_sysbench_shutdown_and_crash_recovery() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = Command::new("timeout")
        .args(["600", "bash"])
        .arg(root.join("bench-mysql/smoke.sh"))
        .output()
        .expect("run bench-mysql/smoke.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let summary: Vec<&str> = stdout.lines().filter(|l| l.starts_with("smoke:") || l.starts_with("fiberize:")).collect();
    println!("{}", summary.join("\n"));
    assert!(out.status.success() && stdout.contains("smoke: ok"), "smoke test failed:\n{stdout}\n{stderr}");
}
