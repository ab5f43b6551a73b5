//! The pthread synchronization family (issue 3): rwlocks, semaphores, barriers,
//! pthread_once / call_once and spinlocks, each C program run natively and under the
//! preload (default workers, and one worker), with identical stdout and exit status,
//! and a hard timeout per run so that a hang fails instead of blocking.
//!
//! Needs `target/release/libfiberize.so` (`cargo build --release -p interpose`), or
//! `FIBERIZE_LIB=/path/to/libfiberize.so`. The C programs come from the shared build
//! (`TEST_APPS_BIN_DIR`) when it has them, else they are compiled here with `cc`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(60);

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

fn preload_lib() -> PathBuf {
    let lib = std::env::var_os("FIBERIZE_LIB")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/release/libfiberize.so"));
    assert!(lib.exists(), "{} is missing: run `cargo build --release -p interpose` first", lib.display());
    lib
}

fn tmp_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sync_family");
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

/// Compiles `source` with `compiler` into the temp dir unless the binary is newer.
fn compile(compiler: &str, source: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let out = tmp_dir().join(name);
    let fresh = match (std::fs::metadata(&out), std::fs::metadata(source)) {
        (Ok(o), Ok(s)) => o.modified().ok() >= s.modified().ok(),
        _ => false,
    };
    if !fresh {
        let st = Command::new(compiler)
            .args(["-O2", "-g", "-Wall", "-pthread", "-o"])
            .arg(&out)
            .arg(source)
            .args(extra)
            .status()
            .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
        assert!(st.success(), "{compiler} failed for {}", source.display());
    }
    out
}

/// The test program `name` (from test-apps/c/NAME.c).
fn c_program(name: &str) -> PathBuf {
    if let Some(dir) = option_env!("TEST_APPS_BIN_DIR") {
        let p = Path::new(dir).join(name);
        if p.exists() {
            return p;
        }
    }
    let src = workspace_root().join("test-apps/c").join(format!("{name}.c"));
    compile("cc", &src, name, &["-ldl"])
}

struct Run {
    status: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

/// Runs `bin` with `env` (and without any inherited preload), killing it after
/// TIMEOUT.
fn run(bin: &Path, env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(bin);
    cmd.env_remove("LD_PRELOAD").env_remove("FIBERIZE").env_remove("FIBERIZE_WORKERS").env_remove("GLIBC_TUNABLES");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let start = Instant::now();
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn test program");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            let stdout = t_out.join().unwrap_or_default();
            let stderr = t_err.join().unwrap_or_default();
            panic!(
                "{} {:?} timed out after {:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
                bin.display(),
                env,
                TIMEOUT
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        status: status.code(),
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
        elapsed: start.elapsed(),
    }
}

/// Native run, then preloaded runs (default workers and a single worker): same
/// stdout and exit status; the preload must have taken effect.
fn native_vs_preloaded(bin: &Path, ok_line: &str) {
    let lib = preload_lib();
    let lib = lib.to_str().expect("utf-8 path");
    let native = run(bin, &[]);
    eprintln!("native: {:?}", native.elapsed);
    assert_eq!(native.status, Some(0), "native run failed\n--- stdout\n{}\n--- stderr\n{}", native.stdout, native.stderr);
    assert!(native.stdout.contains(ok_line), "native stdout lacks {ok_line:?}:\n{}", native.stdout);
    assert!(native.stderr.contains("fiberize_active=-1"), "native run saw the library:\n{}", native.stderr);

    for workers in [None, Some("1")] {
        let mut env = vec![("LD_PRELOAD", lib), ("GLIBC_TUNABLES", "glibc.pthread.rseq=0")];
        if let Some(w) = workers {
            env.push(("FIBERIZE_WORKERS", w));
        }
        let pre = run(bin, &env);
        eprintln!("preloaded (workers {:?}): {:?}", workers, pre.elapsed);
        assert_eq!(
            pre.status, native.status,
            "preloaded (workers {workers:?}) exit status differs\n--- stdout\n{}\n--- stderr\n{}",
            pre.stdout, pre.stderr
        );
        assert_eq!(pre.stdout, native.stdout, "preloaded (workers {workers:?}) stdout differs\n--- stderr\n{}", pre.stderr);
        assert!(pre.stderr.contains("fiberize_active=1"), "preload did not take effect:\n{}", pre.stderr);
        assert!(pre.stderr.contains("main_is_fiber=0"), "main thread should be a plain thread:\n{}", pre.stderr);
        assert!(pre.stderr.contains("threads_were_fibers=1"), "threads did not run as fibers:\n{}", pre.stderr);
    }
}

#[test]
fn sync_rwlock() {
    native_vs_preloaded(&c_program("sync_rwlock"), "sync_rwlock: ok");
}

#[test]
fn sync_sem() {
    native_vs_preloaded(&c_program("sync_sem"), "sync_sem: ok");
}

#[test]
fn sync_barrier_once_spin() {
    native_vs_preloaded(&c_program("sync_barrier_once_spin"), "sync_barrier_once_spin: ok");
}

/// `std::call_once` whose callable throws the first time: glibc resets the once
/// control during unwinding (which must pass through our `pthread_once` frame), the
/// exception reaches the caller, and a waiting caller runs the callable again.
const CALL_ONCE_THROW_CPP: &str = r#"
#include <atomic>
#include <chrono>
#include <cstdio>
#include <dlfcn.h>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

static std::once_flag flag;
static std::atomic<int> attempts{0}, caught{0}, fibers{0};

static void note_fiber() {
    auto f = (int (*)())dlsym(RTLD_DEFAULT, "fiberize_is_fiber");
    if (f && f()) fibers = 1;
}

static void init() {
    if (++attempts == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(60));
        throw std::runtime_error("first attempt fails");
    }
}

static void caller() {
    note_fiber();
    try {
        std::call_once(flag, init);
    } catch (const std::runtime_error &) {
        ++caught;
    }
}

int main() {
    auto a = (int (*)())dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "fiberize_active=%d main_is_fiber=0\n", a ? a() : -1);
    std::vector<std::thread> ts;
    ts.emplace_back(caller);
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
    for (int i = 0; i < 3; i++) ts.emplace_back(caller);
    caller();
    for (auto &t : ts) t.join();
    try { std::call_once(flag, init); } catch (...) { ++caught; }
    fprintf(stderr, "threads_were_fibers=%d\n", fibers.load());
    printf("call_once with a throwing callable: attempts=%d caught=%d\n", attempts.load(), caught.load());
    printf("call_once_throw: ok\n");
    return 0;
}
"#;

#[test]
fn call_once_throw() {
    let src = tmp_dir().join("call_once_throw.cpp");
    if std::fs::read_to_string(&src).ok().as_deref() != Some(CALL_ONCE_THROW_CPP) {
        std::fs::write(&src, CALL_ONCE_THROW_CPP).expect("write C++ source");
    }
    let bin = compile("c++", &src, "call_once_throw", &["-ldl"]);
    native_vs_preloaded(&bin, "call_once_throw: ok");
}
