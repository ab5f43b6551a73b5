//! Issue 25: apache2 (Debian's) with the worker MPM in one process (`apache2 -X`, 256
//! worker threads and a listener), serving a page, then stopped with SIGTERM. Apache
//! wakes its listener, blocked in `accept`, with `pthread_kill(listener, SIGHUP)`, whose
//! handler has no `SA_RESTART`: `accept` must return EINTR. Under the preload it did
//! not; the listener never exited, apache gave up on it after 5 s and then died with
//! SIGSEGV in a module it had already unloaded. Now it exits 0 (in about half a
//! second, as natively; the test asserts no time, only a bound against a hang). The
//! preloaded run's stats line (apache sends stderr to its error log) must show the
//! threads were fibers, all finished before the exit (`live_fibers=0`). Loopback
//! only, private configuration and directory; `scripts/test.sh` installs apache2.

mod harness;
use harness::*;

use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const APACHE: &str = "/usr/sbin/apache2";
const MODULES: &str = "/usr/lib/apache2/modules";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A configuration of its own: worker MPM, one process of 256 threads, bound to
/// 127.0.0.1:`port`, everything under `dir`.
fn write_config(dir: &Path, port: u16) -> PathBuf {
    std::fs::create_dir_all(dir.join("htdocs")).unwrap();
    std::fs::write(dir.join("htdocs/index.html"), "hello from apache\n").unwrap();
    let d = dir.display();
    let conf = format!(
        "ServerRoot {d}\nListen 127.0.0.1:{port}\n\
         LoadModule mpm_worker_module {MODULES}/mod_mpm_worker.so\n\
         LoadModule authz_core_module {MODULES}/mod_authz_core.so\n\
         PidFile {d}/httpd.pid\nErrorLog {d}/error.log\nLogLevel info\nServerName 127.0.0.1\n\
         DocumentRoot {d}/htdocs\nDefaultRuntimeDir {d}\nMutex file:{d} default\n\
         User nobody\nGroup nogroup\n\
         ServerLimit 1\nStartServers 1\nThreadLimit 256\nThreadsPerChild 256\nMaxRequestWorkers 256\n"
    );
    let path = dir.join("httpd.conf");
    std::fs::write(&path, conf).unwrap();
    path
}

fn get_page(port: u16) -> Option<String> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /index.html HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).ok()?;
    Some(reply)
}

struct Outcome {
    status: Option<i32>,
    signal: Option<i32>,
    threads: usize,
    page: String,
    log: String,
}

/// Starts apache, fetches the page, counts its threads, sends SIGTERM and waits for the
/// exit (each step bounded).
fn run_apache(preload: bool) -> Outcome {
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("fiberize-apache-{}-{port}", std::process::id()));
    let conf = write_config(&dir, port);
    let early = std::fs::File::create(dir.join("stderr.txt")).unwrap();
    let mut cmd = Command::new(APACHE);
    cmd.arg("-X").arg("-f").arg(&conf).stdin(Stdio::null()).stdout(Stdio::null()).stderr(early);
    for k in ["LD_PRELOAD", "GLIBC_TUNABLES", "FIBERIZE", "FIBERIZE_WORKERS", "FIBERIZE_STATS"] {
        cmd.env_remove(k);
    }
    if preload {
        cmd.env("LD_PRELOAD", lib_path()).env("GLIBC_TUNABLES", "glibc.pthread.rseq=0").env("FIBERIZE_STATS", "1");
    }
    let mut child = cmd.spawn().expect("apache2");
    let logs = |dir: &Path| {
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
        read("stderr.txt") + &read("error.log")
    };
    let start = Instant::now();
    let page = loop {
        if let Some(p) = get_page(port).filter(|p| p.contains("hello from apache")) {
            break p;
        }
        if start.elapsed() > Duration::from_secs(20) || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("apache2 (preload={preload}) did not serve the page:\n{}", logs(&dir));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let threads = std::fs::read_dir(format!("/proc/{}/task", child.id())).map(|d| d.count()).unwrap_or(0);
    // SAFETY: kill(2) on the child we started and have not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) }, 0);
    let stopped = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if stopped.elapsed() > Duration::from_secs(20) {
            let _ =
                Command::new("gdb").args(["-batch", "-ex", "thread apply all bt 8", "-p"]).arg(child.id().to_string()).status();
            let _ = child.kill();
            let _ = child.wait();
            panic!("apache2 (preload={preload}) did not stop within 20 s of SIGTERM:\n{}", logs(&dir));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!("apache2 preload={preload}: {status} {:.2} s after SIGTERM, {threads} threads", stopped.elapsed().as_secs_f64());
    let log = logs(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    Outcome { status: status.code(), signal: status.signal(), threads, page, log }
}

#[test]
fn apache_worker_mpm_stops_on_sigterm() {
    if !Path::new(APACHE).exists() || !Path::new(MODULES).join("mod_mpm_worker.so").exists() {
        eprintln!("SKIPPED apache_worker_mpm_stops_on_sigterm: {APACHE} is not installed (Debian's apache2; scripts/test.sh installs it)");
        return;
    }
    let native = run_apache(false);
    assert_eq!((native.status, native.signal), (Some(0), None), "natively:\n{}", native.log);
    assert!(native.threads > 256, "natively {} threads", native.threads);
    let pre = run_apache(true);
    assert_eq!((pre.status, pre.signal), (Some(0), None), "preloaded (native: exit 0):\n{}", pre.log);
    assert_eq!(pre.page.lines().last(), native.page.lines().last());
    // The library was active, and every thread, the listener included, finished.
    let run = Run { status: pre.status, stdout: String::new(), stderr: pre.log.clone() };
    assert!(stat(&run, "fibers_created") > 256, "{}", pre.log);
    assert_eq!(stat(&run, "live_fibers"), 0, "a thread did not exit:\n{}", pre.log);
}
