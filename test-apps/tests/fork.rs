//! Issue 17: fork and vfork as glibc. Each app runs natively and under the preload;
//! stdout and exit status must match, and the preloaded run must show that the library
//! was active.

mod harness;
use harness::*;

#[test]
fn fork_family_children_behave_as_natively() {
    // Every case: a forked thread's child that returns / calls pthread_exit (it hung
    // before), threads and locks in a child and a grandchild, a vfork child's
    // sigaction/dup2/close (it reset the parent's handler), a child closing a pipe the
    // parent waits on, exec from a thread, daemon(), system/popen/posix_spawn at once.
    let (native, pre) = same_both_ways("proc_fork_child", &[]);
    assert!(native.stdout.contains("child returns: status=0 key_destructor=a"), "{}", native.stdout);
    assert!(native.stdout.contains("handler_kept=1 handler_ran=1"), "{}", native.stdout);
    assert!(stat(&pre, "fibers_created") >= 20, "{}", pre.stderr);
}

#[test]
fn forked_child_closing_a_pipe_keeps_the_parents_epoll_registration() {
    // Where the parent's reader parks through the reactor, its pipe is in the epoll set
    // that the child's descriptor also names: the child's close must not take it out
    // (the reader hung). (The reader may also wait directly, alone on its worker; the
    // switch that forced the park is retired.)
    let bin = build_c("proc_fork_child");
    let native = run(&bin, &["pipe"], false, std::time::Duration::from_secs(60));
    let pre = run(&bin, &["pipe"], true, std::time::Duration::from_secs(60));
    assert_eq!(native.status, Some(0), "{}{}", native.stdout, native.stderr);
    assert_eq!(pre.status, Some(0), "{}{}", pre.stdout, pre.stderr);
    assert_eq!(pre.stdout, native.stdout);
    assert!(pre.stdout.contains("ok=1"), "{}", pre.stdout);
    assert!(pre.stderr.contains("preloaded=1"), "{}", pre.stderr);
}

#[test]
fn fork_exec_stress_all_children_reaped() {
    // 64 threads x 8 forks each (the acceptance figure is x 20: 1.5 s natively and
    // 2.2 s preloaded on the idle 2-vCPU machine, but 6-10 s and 15-18 s while other
    // work loads it, so the suite takes 8; all three ways of ending still occur), the
    // parent's other threads contending on a mutex that the program's atfork hooks
    // take across each fork. The harness's time limit turns a hang into a failure.
    let start = std::time::Instant::now();
    let (native, pre) = same_both_ways("proc_fork_stress", &["64", "8"]);
    assert!(native.stdout.contains("ok=512 bad=0 of 512"), "{}", native.stdout);
    assert!(stat(&pre, "fibers_created") >= 68, "{}", pre.stderr);
    assert!(start.elapsed() < std::time::Duration::from_secs(60), "took {:?}", start.elapsed());
}

#[test]
fn daemon_forked_before_any_thread_runs_its_threads_as_fibers() {
    // Issue 25: the parent forks before it has any thread (once, and daemon(3)-style
    // with a second fork after setsid); the child's 8 threads take turns on a mutex
    // and condition variable. They were plain threads preloaded: a fork child never
    // started a pool. Each child prints its own stats line at exit.
    let (native, pre) = same_both_ways("proc_daemon_threads", &[]);
    for case in ["fork", "double_fork"] {
        assert!(native.stdout.contains(&format!("{case}: child status=0")), "{}", native.stdout);
        assert!(native.stdout.contains(&format!("{case}: turns=1600 total=7200")), "{}", native.stdout);
        assert!(native.stderr.contains(&format!("{case}: child_fibers=0")), "{}", native.stderr);
        assert!(pre.stderr.contains(&format!("{case}: child_fibers=8")), "{}", pre.stderr);
    }
    assert!(pre.stderr.contains("parent_is_fiber=0"), "{}", pre.stderr);
    let child_stats: Vec<&str> = pre.stderr.lines().filter(|l| l.starts_with("fiberize: stats")).collect();
    assert_eq!(child_stats.len(), 2, "one stats line per daemon child, none from the parent:\n{}", pre.stderr);
    assert!(child_stats.iter().all(|l| l.contains(" fibers_created=8 ")), "{}", pre.stderr);
}
