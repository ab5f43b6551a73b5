//! The pthread synchronization family (issue 3): rwlocks, semaphores, barriers,
//! pthread_once / call_once and spinlocks, each C program run natively and under the
//! preload (default workers, and one worker), with identical stdout and exit status,
//! and a hard timeout per run so that a hang fails instead of blocking.
//!
//! Needs `target/release/libfiberize.so` (`cargo build --release -p interpose`), or
//! `FIBERIZE_LIB=/path/to/libfiberize.so`.

mod harness;
use harness::*;

use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(60);

/// Native run, then preloaded runs (default workers and a single worker): same
/// stdout and exit status; the preload must have taken effect (the apps report it on
/// stderr: `fiberize_active`, `main_is_fiber`, `threads_were_fibers`).
fn native_vs_preloaded(name: &str) {
    let bin = build_c(name);
    let ok_line = format!("{name}: ok");
    let native = run(&bin, &[], false, TIMEOUT);
    assert_eq!(native.status, Some(0), "native run failed\n--- stdout\n{}\n--- stderr\n{}", native.stdout, native.stderr);
    assert!(native.stdout.contains(&ok_line), "native stdout lacks {ok_line:?}:\n{}", native.stdout);
    assert!(native.stderr.contains("fiberize_active=-1"), "native run saw the library:\n{}", native.stderr);

    for workers in [None, Some("1")] {
        let env: Vec<(&str, &str)> = workers.map(|w| ("FIBERIZE_WORKERS", w)).into_iter().collect();
        let pre = run_with(&bin, &[], true, &env, TIMEOUT);
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
    native_vs_preloaded("sync_rwlock");
}

#[test]
fn sync_sem() {
    native_vs_preloaded("sync_sem");
}

#[test]
fn sync_barrier_once_spin() {
    native_vs_preloaded("sync_barrier_once_spin");
}

/// `std::call_once` whose callable throws the first time (test-apps/cpp/call_once_throw.cpp).
#[test]
fn call_once_throw() {
    native_vs_preloaded("call_once_throw");
}
