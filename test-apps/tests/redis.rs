//! Issue 16: redis-server 7 (Debian's) with `--io-threads 4 --io-threads-do-reads yes`
//! livelocked under the preload: its I/O-thread fibers busy-wait for work on every
//! worker, and the one the main thread waits for never got a worker. With preemption
//! it serves `redis-benchmark -c 200 -n 100000 -t set,get,incr` and answers PING.
//! The same command line runs natively first (with fewer requests: natively the four
//! spinning threads make a busy 2-CPU machine slow) as the reference. Loopback only,
//! every step bounded; `scripts/test.sh` installs redis-server and redis-tools.

mod harness;
use harness::*;

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Server {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
    output: Option<std::thread::JoinHandle<String>>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("timeout")
        .args(["10", "redis-cli", "-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli (redis-tools) must be installed");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn start(preload: bool) -> Server {
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("fiberize-redis-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = Command::new("redis-server");
    cmd.args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--save", "", "--appendonly", "no", "--daemonize", "no"])
        .args(["--io-threads", "4", "--io-threads-do-reads", "yes", "--dir"])
        .arg(&dir)
        .env_remove("LD_PRELOAD")
        .env_remove("FIBERIZE_PREEMPT_MS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if preload {
        cmd.env("LD_PRELOAD", lib_path()).env("GLIBC_TUNABLES", "glibc.pthread.rseq=0").env("FIBERIZE_STATS", "1");
    }
    let mut child = cmd.spawn().expect("redis-server must be installed (scripts/test.sh installs it)");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let output = std::thread::spawn(move || {
        let mut s = String::new();
        let e = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let _ = out.read_to_string(&mut s);
        s + &e.join().unwrap_or_default()
    });
    let mut server = Server { child, port, dir, output: Some(output) };
    let start = Instant::now();
    while cli(port, &["ping"]) != "PONG" {
        if start.elapsed() > Duration::from_secs(20) || server.child.try_wait().unwrap().is_some() {
            let log = stop(&mut server);
            panic!("redis-server (preload={preload}) did not come up:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    server
}

/// Shuts the server down (kills it if it does not go within 20 s); its output.
fn stop(s: &mut Server) -> String {
    let _ = cli(s.port, &["shutdown", "nosave"]);
    let start = Instant::now();
    while s.child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = s.child.kill();
            let _ = s.child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(&s.dir);
    s.output.take().map(|h| h.join().unwrap_or_default()).unwrap_or_default()
}

/// `redis-benchmark -c 200 -n N -t set,get,incr` (bounded): requests/s per test.
fn bench(s: &mut Server, n: u32) -> Vec<(String, f64)> {
    let out = Command::new("timeout")
        .args(["300", "redis-benchmark", "-h", "127.0.0.1", "-p", &s.port.to_string(), "-c", "200", "-n", &n.to_string()])
        .args(["-t", "set,get,incr", "--csv"])
        .output()
        .expect("redis-benchmark");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        let log = stop(s);
        panic!("redis-benchmark failed ({:?}):\n{text}\n{}\nserver:\n{log}", out.status, String::from_utf8_lossy(&out.stderr));
    }
    // CSV: "test","rps",...
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').map(|x| x.trim_matches('"')).collect();
            Some((f.first()?.to_string(), f.get(1)?.parse().ok()?))
        })
        .collect()
}

#[test]
fn redis_io_threads_benchmark_and_ping() {
    let mut native = start(false);
    let nat = bench(&mut native, 20_000);
    assert_eq!(cli(native.port, &["ping"]), "PONG");
    stop(&mut native);

    let mut pre = start(true);
    let pr = bench(&mut pre, 100_000);
    let pong = cli(pre.port, &["ping"]);
    let log = stop(&mut pre);
    println!("redis requests/s native (-n 20000) {nat:?}\nredis requests/s preloaded (-n 100000) {pr:?}");
    for t in ["SET", "GET", "INCR"] {
        assert!(nat.iter().any(|(n, r)| n == t && *r > 0.0), "native: no {t} result: {nat:?}");
        assert!(pr.iter().any(|(n, r)| n == t && *r > 0.0), "preloaded: no {t} result: {pr:?}\n{log}");
    }
    assert_eq!(pong, "PONG", "preloaded redis did not answer PING after the benchmark:\n{log}");
    let stats = log.lines().find(|l| l.starts_with("fiberize: stats")).unwrap_or_else(|| panic!("no stats line:\n{log}"));
    let value = |k: &str| -> u64 {
        stats.split_whitespace().find_map(|kv| kv.strip_prefix(&format!("{k}="))).and_then(|v| v.parse().ok()).unwrap_or(0)
    };
    assert!(value("fibers_created") >= 3, "the I/O threads should be fibers: {stats}");
    assert!(value("preemptions") > 0, "the I/O threads' spin-waits need preemption: {stats}");
}
