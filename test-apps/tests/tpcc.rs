//! The TPC-C client of bench-mysql/tpcc under the preload (issue 12): a private
//! `mariadbd` on loopback with a fresh datadir in /tmp, 1 warehouse loaded, then 10
//! terminals with `--no-wait` for a few seconds, natively and with the client
//! preloaded; after each run the consistency conditions 1-4 (`tpcc check`) hold, no
//! transaction failed, and the preloaded run made its terminals fibers. Bounded: every
//! step has a time limit, about a minute in all on 2 CPUs.
//! `scripts/test.sh` installs mariadb-server and libmariadb-dev.

mod harness;

use harness::{run_with, stat, workspace, Run};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server: killed and its datadir removed when the test ends, whatever happens.
struct Server {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A port below the ephemeral range that nothing listens on now.
fn free_port() -> u16 {
    let seed = std::process::id() as u64 ^ Instant::now().elapsed().as_nanos() as u64;
    (0..200u64)
        .map(|i| 12000 + ((seed.wrapping_mul(2654435761).wrapping_add(i * 7919)) % 18000) as u16)
        .find(|&p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
        .expect("a free port")
}

fn start_server() -> Server {
    let dir = std::env::temp_dir().join(format!("fiberize-tpcc-test.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("data");
    let st = Command::new("mariadb-install-db")
        .args(["--no-defaults", "--user=root", "--auth-root-authentication-method=normal"])
        .arg(format!("--datadir={}", data.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("mariadb-install-db (scripts/test.sh installs mariadb-server)");
    assert!(st.success(), "mariadb-install-db failed");
    let port = free_port();
    let child = Command::new("/usr/sbin/mariadbd")
        .args(["--no-defaults", "--user=root", "--bind-address=127.0.0.1", "--skip-log-bin"])
        .args(["--innodb-buffer-pool-size=256M", "--innodb-flush-log-at-trx-commit=2", "--max-connections=200"])
        .arg(format!("--datadir={}", data.display()))
        .arg(format!("--socket={}", dir.join("sock").display()))
        .arg(format!("--log-error={}", dir.join("err.log").display()))
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start mariadbd");
    let server = Server { child, dir, port };
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(start.elapsed() < Duration::from_secs(60), "mariadbd did not listen on {port} within 60 s");
        std::thread::sleep(Duration::from_millis(200));
    }
    server
}

/// target/tpcc/tpcc, built by bench-mysql/tpcc/build.sh (make) once per test process.
fn build_tpcc() -> PathBuf {
    let root = workspace();
    let st = Command::new("bash").arg(root.join("bench-mysql/tpcc/build.sh")).status().expect("bench-mysql/tpcc/build.sh");
    assert!(st.success(), "building the TPC-C client failed");
    root.join("target/tpcc/tpcc")
}

fn tpcc(bin: &Path, server: &Server, args: &[&str], preload: bool, limit_s: u64) -> Run {
    let port = server.port.to_string();
    let mut all = vec![args[0], "-P", &port];
    all.extend_from_slice(&args[1..]);
    let out = run_with(bin, &all, preload, &[], Duration::from_secs(limit_s));
    assert_eq!(out.status, Some(0), "tpcc {all:?} (preload={preload}) failed:\n{}\n{}", out.stdout, out.stderr);
    out
}

#[test]
fn tpcc_one_warehouse_ten_terminals_native_and_preloaded() {
    let bin = build_tpcc();
    let server = start_server();
    let load = tpcc(&bin, &server, &["load", "-w", "1", "-j", "3"], false, 120);
    assert!(load.stdout.contains("tpcc load: done"), "{}", load.stdout);
    for preload in [false, true] {
        let run = tpcc(&bin, &server, &["run", "-w", "1", "-t", "10", "-d", "5", "--no-wait", "--report", "2"], preload, 60);
        let result = run.stdout.lines().find(|l| l.starts_with("RESULT")).expect("a RESULT line").to_string();
        println!("preload={preload}: {result}");
        assert!(result.contains(" errors=0 "), "transactions failed: {}\n{}", run.stdout, run.stderr);
        let tpmc: f64 = result.split_whitespace().find_map(|kv| kv.strip_prefix("tpmC=")).unwrap().parse().unwrap();
        assert!(tpmc > 0.0, "no New-Order completed: {}", run.stdout);
        if preload {
            assert!(stat(&run, "fibers_created") >= 10, "the terminals did not become fibers:\n{}", run.stderr);
        } else {
            assert!(!run.stderr.contains("fiberize: stats"), "the native run saw the library:\n{}", run.stderr);
        }
        let check = tpcc(&bin, &server, &["check", "-w", "1"], false, 60);
        assert!(check.stdout.contains("tpcc check: ok"), "consistency after the run (preload={preload}):\n{}", check.stdout);
    }
}
