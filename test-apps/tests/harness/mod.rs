//! Shared helpers of the test-app tests: build an app, run it natively and under
//! the preload with a hard time limit, compare, read the stats line.
//!
//! With `FIBERIZE_TEST_ARCH=aarch64` (scripts/test-aarch64.sh) the same tests, still
//! built for and run on the host, cross-compile the apps with Debian's aarch64 gcc into
//! `target/test-apps-aarch64/`, run them under `qemu-aarch64-static` (which passes its
//! environment, `LD_PRELOAD` included, to the emulated program) and preload the
//! aarch64 library.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The architecture the apps are built for and run on, when it is not the host's.
struct Cross {
    cc: &'static str,
    cxx: &'static str,
    runner: &'static str,
    apps_dir: &'static str,
    lib: &'static str,
    rust_bins: &'static str,
}

fn cross() -> Option<&'static Cross> {
    const AARCH64: Cross = Cross {
        cc: "aarch64-linux-gnu-gcc",
        cxx: "aarch64-linux-gnu-g++",
        runner: "qemu-aarch64-static",
        apps_dir: "target/test-apps-aarch64",
        lib: "target/aarch64-unknown-linux-gnu/release/libfiberize.so",
        rust_bins: "target/aarch64-unknown-linux-gnu/release",
    };
    match std::env::var("FIBERIZE_TEST_ARCH").as_deref() {
        Ok("aarch64") => Some(&AARCH64),
        Ok(other) if !other.is_empty() => panic!("FIBERIZE_TEST_ARCH={other}: only aarch64 is known"),
        _ => None,
    }
}

pub fn lib_path() -> PathBuf {
    let default = cross().map_or("target/release/libfiberize.so", |c| c.lib);
    let p = std::env::var_os("FIBERIZE_LIB").map(PathBuf::from).unwrap_or_else(|| workspace().join(default));
    assert!(p.exists(), "{} is missing: run `cargo build --release -p interpose` first", p.display());
    p
}

/// Where cargo put the package's Rust programs (built before the integration tests; for
/// aarch64 by scripts/test-aarch64.sh).
pub fn rust_bin(name: &str) -> PathBuf {
    let dirs: &[&str] = match cross() {
        Some(c) => &[c.rust_bins],
        None => &["target/release", "target/debug"],
    };
    let p = dirs.iter().map(|d| workspace().join(d).join(name)).find(|p| p.exists());
    p.unwrap_or_else(|| panic!("{name} not built in {dirs:?}"))
}

/// Whether the apps run under an emulator (qemu-user): `/proc/TID/syscall` then shows
/// the emulator's host system calls, not the app's.
pub fn emulated() -> bool {
    cross().is_some()
}

/// How many times longer the apps' own deadlines are under an emulator: the harness
/// passes it as `FIBERIZE_TEST_SLOW` (test-apps/c/sync_common.h reads it) and lengthens
/// its own hang limit (`run_command`) as much. qemu-user runs these apps some 5 to 15
/// times slower than the host, more on a loaded machine; the deadlines only catch
/// hangs, so a generous factor costs nothing while the tests pass.
const EMULATED_SLOWDOWN: u32 = 3;

/// [`EMULATED_SLOWDOWN`] under an emulator, else 1.
pub fn slow_factor() -> u32 {
    if emulated() {
        EMULATED_SLOWDOWN
    } else {
        1
    }
}

/// A command that runs the app `bin` (under qemu-user for a cross-built app, with
/// `FIBERIZE_TEST_SLOW` set).
///
/// qemu itself (not the app, `-U` takes it out of the app's environment) gets
/// `G_SLICE=always-malloc`: qemu-user 7.2 with GLib 2.74 allocates the nodes of its tree
/// of translated code (`tcg_tb_insert`, `g_tree_insert`) with GLib's slice allocator,
/// whose mutexes have no atfork handler. An app's `fork` (also `posix_spawn`'s
/// `CLONE_VFORK`, which qemu turns into a fork) while another emulated thread held one
/// left the child's copy locked, and the child hung at its first new translation
/// (a futex on that mutex in qemu's own data, under `cpu_exec`; `proc_fork_child`
/// preloaded hung in 2 of 15 runs, in its posix_spawn case, and in none of 300 with
/// the variable). `always-malloc` hands those allocations to glibc's malloc, whose
/// locks glibc's fork keeps consistent in the child.
pub fn command(bin: &Path) -> Command {
    match cross() {
        Some(c) => {
            let mut cmd = Command::new(c.runner);
            cmd.args(["-U", "G_SLICE"]).env("G_SLICE", "always-malloc");
            cmd.arg(bin).env("FIBERIZE_TEST_SLOW", EMULATED_SLOWDOWN.to_string());
            cmd
        }
        None => Command::new(bin),
    }
}

/// Compiles `test-apps/c/<name>.c` (or `test-apps/cpp/<name>.cpp`) into
/// `target/test-apps/`, once per test process: tests of one binary run in parallel and
/// must not rewrite a program another test is executing (ETXTBSY). The compiler writes
/// a temporary file that is renamed into place.
pub fn build_c(name: &str) -> PathBuf {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT.get_or_init(|| Mutex::new(HashMap::new())).lock().unwrap();
    if let Some(p) = built.get(name) {
        return p.clone();
    }
    let c = workspace().join("test-apps/c").join(format!("{name}.c"));
    let cpp = workspace().join("test-apps/cpp").join(format!("{name}.cpp"));
    let dir = workspace().join(cross().map_or("target/test-apps", |c| c.apps_dir));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(name);
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    let st = if c.exists() {
        Command::new(cross().map_or("cc", |c| c.cc))
            .args(["-O2", "-g", "-pthread", "-Wall", "-I"])
            .arg(workspace().join("interpose/include"))
            .arg("-o")
            .arg(&tmp)
            .arg(&c)
            .args(["-ldl", "-lm"])
            .status()
    } else {
        Command::new(cross().map_or("c++", |c| c.cxx))
            .args(["-O2", "-g", "-pthread", "-std=c++20", "-Wall", "-I"])
            .arg(workspace().join("interpose/include"))
            .arg("-o")
            .arg(&tmp)
            .arg(&cpp)
            .args(["-ldl"])
            .status()
    }
    .expect("compiler");
    assert!(st.success(), "compiling {name}");
    std::fs::rename(&tmp, &out).unwrap();
    built.insert(name.to_string(), out.clone());
    out
}

pub struct Run {
    pub status: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs with a hard time limit: a hang fails the test instead of blocking CI.
pub fn run(bin: &Path, args: &[&str], preload: bool, limit: Duration) -> Run {
    run_with(bin, args, preload, &[], limit)
}

/// `run` with extra environment variables. The native run inherits no preload and no
/// fiberize settings from the test's own environment.
pub fn run_with(bin: &Path, args: &[&str], preload: bool, env: &[(&str, &str)], limit: Duration) -> Run {
    let cmd = prepared(bin, args, preload, env);
    run_command(cmd, limit, &format!("{} {args:?} (preload={preload}, env {env:?})", bin.display()))
}

/// The command [`run_with`] runs, for a test that starts the program itself (a server
/// it talks to while it runs).
pub fn prepared(bin: &Path, args: &[&str], preload: bool, env: &[(&str, &str)]) -> Command {
    let mut cmd = command(bin);
    cmd.args(args);
    for k in ["LD_PRELOAD", "GLIBC_TUNABLES", "FIBERIZE", "FIBERIZE_WORKERS", "FIBERIZE_STATS", "FIBERIZE_TUNE"] {
        cmd.env_remove(k);
    }
    if preload {
        cmd.env("LD_PRELOAD", lib_path()).env("GLIBC_TUNABLES", "glibc.pthread.rseq=0").env("FIBERIZE_STATS", "1");
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Runs a prepared command with a hard time limit, collecting stdout and stderr while
/// it runs (a chatty program must not block on a full pipe). On a hang: every thread's
/// stack (gdb), then a panic with what the program printed. `what` names the run.
pub fn run_command(mut cmd: Command, limit: Duration, what: &str) -> Run {
    use std::io::Read;
    let limit = limit * slow_factor();
    // Its own process group, so that a hung run is killed with every process it forked:
    // a forked child left behind holds the output pipes open, and reading them to the
    // end would then hang the test (seen under qemu: two orphaned proc_fork_child).
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    let collect = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = collect(Box::new(child.stdout.take().expect("stdout")));
    let err = collect(Box::new(child.stderr.take().expect("stderr")));
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if start.elapsed() > limit {
            let _ =
                Command::new("gdb").args(["-batch", "-ex", "thread apply all bt 8", "-p"]).arg(child.id().to_string()).status();
            // SAFETY: kill(2) on the process group made above (its id is the child's pid).
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            let _ = child.wait();
            panic!(
                "{what} hung for {limit:?}\nstdout:\n{}\nstderr:\n{}",
                out.join().unwrap_or_default(),
                err.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run { status: status.code(), stdout: out.join().unwrap_or_default(), stderr: err.join().unwrap_or_default() }
}

/// Runs natively and preloaded; asserts identical stdout/status and an active preload.
pub fn same_both_ways(name: &str, args: &[&str]) -> (Run, Run) {
    same_both_ways_bin(name, &build_c(name), args)
}

/// [`same_both_ways`] for an already built program.
pub fn same_both_ways_bin(name: &str, bin: &Path, args: &[&str]) -> (Run, Run) {
    let bin = bin.to_path_buf();
    let limit = Duration::from_secs(120);
    let native = run(&bin, args, false, limit);
    let pre = run(&bin, args, true, limit);
    assert_eq!(native.status, Some(0), "{name} failed natively:\n{}{}", native.stdout, native.stderr);
    assert_eq!(
        pre.status, native.status,
        "{name}: exit status differs\nnative:\n{}{}\npreloaded:\n{}{}",
        native.stdout, native.stderr, pre.stdout, pre.stderr
    );
    assert_eq!(pre.stdout, native.stdout, "{name}: stdout differs; preloaded stderr:\n{}", pre.stderr);
    assert!(pre.stderr.contains("preloaded=1"), "{name}: library not active:\n{}", pre.stderr);
    assert!(native.stderr.contains("preloaded=0"), "{name}: native run saw the library:\n{}", native.stderr);
    assert!(pre.stderr.contains("fiberize: stats"), "{name}: no stats line:\n{}", pre.stderr);
    (native, pre)
}

pub fn stat(run: &Run, key: &str) -> u64 {
    let line = run.stderr.lines().find(|l| l.starts_with("fiberize: stats")).expect("stats line");
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

pub fn distinct_tids(run: &Run) -> usize {
    run.stderr
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("distinct_tids="))
        .and_then(|v| v.parse().ok())
        .expect("distinct_tids")
}

pub fn nproc() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Runs preloaded with extra environment variables (same time limit as `run`).
pub fn run_env(bin: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    run_with(bin, args, true, env, Duration::from_secs(120))
}
