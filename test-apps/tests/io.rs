//! Issue 5 test apps: readiness I/O, processes and signals. Each app runs natively and
//! under the preload; stdout and exit status must match, and the preloaded run must
//! show that the library was active.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn lib_path() -> PathBuf {
    let p = std::env::var_os("FIBERIZE_LIB").map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/release/libfiberize.so"));
    assert!(p.exists(), "{} is missing: run `cargo build --release -p interpose` first", p.display());
    p
}

/// Compiles `test-apps/c/<name>.c` into the cargo target dir (once per test binary run).
fn build_c(name: &str) -> PathBuf {
    let src = workspace().join("test-apps/c").join(format!("{name}.c"));
    let dir = workspace().join("target/test-apps-io");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(name);
    let st = Command::new("cc")
        .args(["-O2", "-g", "-pthread", "-Wall", "-o"]).arg(&out).arg(&src).args(["-ldl"])
        .status().expect("cc");
    assert!(st.success(), "compiling {}", src.display());
    out
}

struct Run {
    status: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs with a hard time limit: a hang fails the test instead of blocking CI.
fn run(bin: &Path, args: &[&str], preload: bool, limit: Duration) -> Run {
    let mut cmd = Command::new(bin);
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    if preload {
        cmd.env("LD_PRELOAD", lib_path()).env("GLIBC_TUNABLES", "glibc.pthread.rseq=0").env("FIBERIZE_STATS", "1");
    } else {
        cmd.env_remove("LD_PRELOAD");
    }
    let mut child = cmd.spawn().expect("spawn");
    let start = Instant::now();
    loop {
        if let Some(_st) = child.try_wait().unwrap() {
            break;
        }
        if start.elapsed() > limit {
            let _ = Command::new("gdb").args(["-batch", "-ex", "thread apply all bt 8", "-p"])
                .arg(child.id().to_string()).status();
            child.kill().ok();
            let out = child.wait_with_output().unwrap();
            panic!("{} {:?} (preload={preload}) hung for {:?}\nstdout:\n{}\nstderr:\n{}", bin.display(), args, limit,
                String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    Run {
        status: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs natively and preloaded; asserts identical stdout/status and an active preload.
fn same_both_ways(name: &str, args: &[&str]) -> (Run, Run) {
    let bin = build_c(name);
    let limit = Duration::from_secs(90);
    let native = run(&bin, args, false, limit);
    let pre = run(&bin, args, true, limit);
    assert_eq!(native.status, Some(0), "{name} failed natively:\n{}{}", native.stdout, native.stderr);
    assert_eq!(pre.status, native.status, "{name}: exit status differs\nnative:\n{}{}\npreloaded:\n{}{}",
        native.stdout, native.stderr, pre.stdout, pre.stderr);
    assert_eq!(pre.stdout, native.stdout, "{name}: stdout differs; preloaded stderr:\n{}", pre.stderr);
    assert!(pre.stderr.contains("preloaded=1"), "{name}: library not active:\n{}", pre.stderr);
    assert!(native.stderr.contains("preloaded=0"), "{name}: native run saw the library:\n{}", native.stderr);
    assert!(pre.stderr.contains("fiberize: stats"), "{name}: no stats line:\n{}", pre.stderr);
    (native, pre)
}

fn stat(run: &Run, key: &str) -> u64 {
    let line = run.stderr.lines().find(|l| l.starts_with("fiberize: stats")).expect("stats line");
    line.split_whitespace().find_map(|kv| kv.strip_prefix(&format!("{key}="))).and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

fn distinct_tids(run: &Run) -> usize {
    run.stderr.split_whitespace().find_map(|kv| kv.strip_prefix("distinct_tids=")).and_then(|v| v.parse().ok()).expect("distinct_tids")
}

fn nproc() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

#[test]
fn echo_server_hundreds_of_connections() {
    let (native, pre) = same_both_ways("io_echo", &["300", "100"]);
    // 300 client threads and 300 connection threads ran as fibers on a few workers.
    assert!(distinct_tids(&native) > 300, "native run should use many threads: {}", native.stderr);
    assert!(distinct_tids(&pre) <= nproc() + 4, "too many kernel threads under the preload: {}", pre.stderr);
    assert!(stat(&pre, "fibers_created") >= 600);
    assert!(stat(&pre, "parks") > 0);
}

#[test]
fn pipes_poll_select_epoll_and_a_stuck_syscall() {
    let (_native, pre) = same_both_ways("io_pipes", &[]);
    // The threads stuck in an unintercepted syscall were replaced by spare workers.
    assert!(stat(&pre, "workers_blocked") >= 1, "{}", pre.stderr);
}

#[test]
fn fork_system_popen_signals() {
    let (_native, pre) = same_both_ways("proc_fork", &[]);
    assert!(stat(&pre, "fibers_created") >= 11, "{}", pre.stderr);
}

#[test]
fn signals_directed_at_threads() {
    let (_native, pre) = same_both_ways("sig_kill", &[]);
    assert!(stat(&pre, "fibers_created") >= 4, "{}", pre.stderr);
}
