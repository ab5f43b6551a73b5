//! Issue 2: the runtime core. Each app runs natively and under the preload with the
//! same stdout and exit status; under the preload, threads must really be fibers (few
//! distinct kernel thread ids, the library's counters).

mod harness;
use harness::*;

use std::time::Duration;

#[test]
fn five_hundred_threads_keep_their_identity() {
    let (native, pre) = same_both_ways("core_threads", &["500"]);
    assert!(distinct_tids(&native) >= 100, "native should spread over many threads: {}", native.stderr);
    let tids = distinct_tids(&pre);
    assert!(tids <= nproc() + 4, "{tids} kernel threads ran the 500 fibers (max {}): {}", nproc() + 4, pre.stderr);
    assert!(stat(&pre, "fibers_created") >= 500);
    assert!(stat(&pre, "switches") >= 500);
}

#[test]
fn rust_std_program_with_200_threads() {
    let bin = rust_bin("rust_std_threads");
    let (_native, pre) = same_both_ways_bin("rust_std_threads", &bin, &["200"]);
    let tids = distinct_tids(&pre);
    assert!(tids <= nproc() + 4, "{tids} kernel threads under the preload: {}", pre.stderr);
    assert!(stat(&pre, "futex_waits") > 0, "std's futex waits should be served by the library: {}", pre.stderr);
}

#[test]
fn cpp_threads_mutex_condvar_atomic_wait_thread_local() {
    let (_native, pre) = same_both_ways("cpp_std", &[]);
    // libstdc++ 12's atomic::wait waits with FUTEX_WAIT without the private flag; the
    // library parks it (its word is in private memory, `sync::futex_shared`). Before,
    // it went to the kernel and each worker a fiber blocked there got a spare, dozens
    // under qemu; the bound still counts spares there, as any slow start may.
    let spares = if emulated() { stat(&pre, "workers_spawned") as usize } else { 0 };
    assert!(distinct_tids(&pre) <= nproc() + 4 + spares, "{}", pre.stderr);
}

/// Issue 24: waits that are not blocking calls get no spare worker. 200 std::threads
/// on std::mutex, std::shared_mutex, std::condition_variable and yield: under the
/// preload they run as fibers on the workers alone (a spare each time the monitor
/// took a wait on one of the runtime's own locks for a blocked call, before).
#[test]
fn cpp_lock_family_gets_no_spare_workers() {
    let (_native, pre) = same_both_ways("cpp_spares", &["300"]);
    assert!(stat(&pre, "fibers_created") >= 200, "{}", pre.stderr);
    assert!(stat(&pre, "parks") > 0, "the threads never waited for each other: {}", pre.stderr);
    assert!(distinct_tids(&pre) <= nproc() + 4, "{}", pre.stderr);
    let spawned = stat(&pre, "workers_spawned");
    assert!(spawned <= 2, "{spawned} spare workers started for intercepted waits: {}", pre.stderr);
}

/// Issue 49: C++20 waits (std::atomic::wait/notify, std::atomic_flag::wait, std::latch,
/// std::barrier, std::counting_semaphore) across 200 threads. libstdc++ 12 waits for
/// them with futexes without the private flag; on private memory the library parks
/// them, so the fibers run on the workers alone and no spare worker is started. Kernel
/// threads are counted by /proc/thread-self in the program (gettid is virtualized).
#[test]
fn cpp20_waits_run_as_fibers_without_spares() {
    let (native, pre) = same_both_ways("cpp20_waits", &["waits", "20"]);
    assert!(distinct_tids(&native) >= 100, "native should spread over many threads: {}", native.stderr);
    assert!(stat(&pre, "fibers_created") >= 200, "{}", pre.stderr);
    assert!(stat(&pre, "futex_waits") > 0, "the waits were not parked: {}", pre.stderr);
    assert_eq!(stat(&pre, "futex_shared_to_kernel"), 0, "a wait on private memory went to the kernel: {}", pre.stderr);
    let (spawned, blocked) = (stat(&pre, "workers_spawned"), stat(&pre, "workers_blocked"));
    // Under qemu-user the monitor cannot read a wait on the runtime's own locks and a
    // worker also sleeps in qemu's locks (docs/DESIGN.md "Known hazards"): spares may
    // start there, and the bound counts them, as cpp_std's does.
    let spares = if emulated() { spawned as usize } else { 0 };
    let tids = distinct_tids(&pre);
    let max = nproc() + 2 + spares;
    assert!(tids <= max, "{tids} kernel threads ran the 200 fibers (max {max}): {}", pre.stderr);
    if !emulated() {
        assert!(spawned == 0 && blocked == 0, "workers_spawned={spawned} workers_blocked={blocked}: {}", pre.stderr);
    }
}

/// Issue 49: a non-private futex word in a MAP_SHARED page is shared with a forked
/// child: the parent's FUTEX_WAIT is woken by the child's FUTEX_WAKE and the reverse,
/// from main and from a thread (a fiber). Those go to the kernel.
#[test]
fn shared_page_futex_between_processes_goes_to_the_kernel() {
    let (native, pre) = same_both_ways("cpp20_waits", &["shared"]);
    assert!(!native.stdout.contains("NOT"), "{}", native.stdout);
    assert!(stat(&pre, "futex_shared_to_kernel") >= 4, "{}", pre.stderr);
}

/// Issue 59 #3: a private `mmap` only fills a hole of the table of shared ranges, so
/// it must not make the next non-private futex reread `/proc/self/maps`. 200 waits on
/// a private word, each after a private mmap: one read at the first wait, a few at
/// most for the runtime's own changes (200 before: `MAP_SHARED_VALIDATE`, 3, was
/// tested as a bit mask and matched `MAP_PRIVATE`, 2).
#[test]
fn private_mmaps_do_not_reread_the_maps() {
    let (_native, pre) = same_both_ways("sync_futex_words", &["mmap"]);
    assert!(pre.stderr.contains("waiter_is_fiber=1"), "{}", pre.stderr);
    assert!(stat(&pre, "futex_waits") >= 200, "the waits were not served by the library: {}", pre.stderr);
    assert_eq!(stat(&pre, "futex_shared_to_kernel"), 0, "{}", pre.stderr);
    let reads = stat(&pre, "futex_maps_reads");
    assert!(reads < 10, "{reads} reads of /proc/self/maps for 200 waits after private mmaps: {}", pre.stderr);
}

/// Issue 59 #9: FUTEX_WAKE_OP, FUTEX_CMP_REQUEUE and FUTEX_REQUEUE without the private
/// flag whose words lie one in private memory (waiters parked in the library: fibers
/// and the main thread) and one in a MAP_SHARED mapping (waiters in the kernel), in
/// both orders. Natively every waiter wakes and the operations return as many; before,
/// the operation went wholly to the kernel and the library's waiters timed out (or,
/// requeued by the kernel onto the private word, were never woken there). Also both
/// words private: FUTEX_REQUEUE returns woken + requeued, as the kernel's does (the
/// library returned the woken alone).
#[test]
fn two_word_futex_ops_across_private_and_shared_memory() {
    for mode in ["wake_op", "wake_op_rev", "requeue", "requeue_rev", "requeue_private"] {
        let (native, pre) = same_both_ways("sync_futex_words", &[mode]);
        assert!(!native.stdout.contains("timed_out=1") && !native.stdout.contains("woken=0"), "{}", native.stdout);
        assert!(pre.stderr.contains("waiter_is_fiber=1"), "{mode}: {}", pre.stderr);
        let split = stat(&pre, "futex_split");
        if mode == "requeue_private" {
            assert_eq!(split, 0, "both words are private: {}", pre.stderr);
        } else {
            assert!(split >= 1, "{mode}: no operation was split: {}", pre.stderr);
        }
    }
}

#[test]
fn mutex_and_condvar_semantics() {
    let (_n, pre) = same_both_ways("sync_mutex_cond", &[]);
    // The convoy: its members' unlocks wake the next while others still wait, and
    // give the wakee the worker (scheduler::unpark_lock_waiter).
    assert!(stat(&pre, "lock_wakes_yielded") > 0, "no unlock yielded to its wakee: {}", pre.stderr);
}

#[test]
fn futex_operations() {
    let (_n, pre) = same_both_ways("sync_futex", &[]);
    assert!(stat(&pre, "futex_waits") > 0, "{}", pre.stderr);
}

/// A lock on a raw futex word (InnoDB's `srw_mutex` shape) whose holders now and then
/// sleep inside it: exact counts both ways, lockers that are fibers and that slept on the
/// word, and an unlock's wake of one waiter that gave the wakee the worker
/// (`parking::unpark_one_handing_off`): without that, a woken waiter stays counted in the
/// word until its turn comes, and every unlock meanwhile makes another wake. A signal
/// through a word its waker never waits on (a producer's notify per item) does not
/// hand off: that made every item a round trip between two fibers.
#[test]
fn a_futex_lock_of_innodbs_shape() {
    let (native, pre) = same_both_ways("sync_futex_lock", &[]);
    assert_eq!(native.stdout, "count=24000 word=0\n", "{}", native.stderr);
    assert!(pre.stderr.contains("fiber_threads=8"), "the lockers were not fibers: {}", pre.stderr);
    assert!(stat(&pre, "futex_waits") > 0, "no thread ever slept on the word: {}", pre.stderr);
    assert!(stat(&pre, "lock_wakes_yielded") > 0, "no wake of one gave the wakee the worker: {}", pre.stderr);

    let (native, pre) = same_both_ways("sync_futex_lock", &["signal"]);
    assert_eq!(native.stdout, "signals=20000 consumer_saw=20000\n", "{}", native.stderr);
    assert!(pre.stderr.contains("fiber_threads=2"), "{}", pre.stderr);
    assert!(stat(&pre, "futex_waits") > 0, "the consumer never slept on the word: {}", pre.stderr);
    assert!(stat(&pre, "futex_wakes") >= 20000, "{}", pre.stderr);
    assert_eq!(stat(&pre, "lock_wakes_yielded"), 0, "a signal's wake gave the wakee the worker: {}", pre.stderr);
}

#[test]
fn stress_two_thousand_threads() {
    let (_n, pre) = same_both_ways("core_threads", &["2000"]);
    assert!(distinct_tids(&pre) <= nproc() + 4, "{}", pre.stderr);
}

#[test]
fn single_worker_and_disabled_library() {
    let bin = build_c("core_threads");
    let native = run(&bin, &["300"], false, Duration::from_secs(120));
    assert_eq!(native.status, Some(0));
    // One worker: everything still completes (no fiber may depend on parallelism).
    let one = run_env(&bin, &["300"], &[("FIBERIZE_WORKERS", "1")]);
    assert_eq!(one.status, Some(0), "{}", one.stderr);
    assert_eq!(one.stdout, native.stdout);
    assert!(stat(&one, "workers") == 1, "{}", one.stderr);
    assert!(distinct_tids(&one) <= 1 + 4, "{}", one.stderr);
    // FIBERIZE=off: pure pass-through, same results, the marker reports inactive.
    let off = run_env(&bin, &["300"], &[("FIBERIZE", "off")]);
    assert_eq!(off.status, Some(0), "{}", off.stderr);
    assert_eq!(off.stdout, native.stdout);
    assert!(off.stderr.contains("preloaded=0"), "{}", off.stderr);
    assert!(distinct_tids(&off) >= 100, "disabled library should leave real threads: {}", off.stderr);
}

#[test]
fn fiber_dump_lists_every_fiber() {
    let bin = build_c("core_threads");
    let r = run_env(&bin, &["50"], &[("FIBERIZE_DUMP_AT_EXIT", "1")]);
    assert_eq!(r.status, Some(0), "{}", r.stderr);
    assert!(r.stderr.contains("fiberize: ---- fiber dump"), "{}", r.stderr);
    assert!(r.stderr.contains("fiberize: worker 0 tid"), "{}", r.stderr);
}

#[test]
fn main_thread_pthread_exit_waits_for_the_others() {
    let (_n, pre) = same_both_ways("main_exit", &[]);
    assert!(pre.stdout.contains("thread 3 done"), "{}", pre.stdout);
}

/// A program that sleeps most of the time: its timers, a condvar timeout, a pipe's
/// readiness and a condvar signal all arrive while every worker sleeps, and the
/// monitor dozes meanwhile instead of ticking (`monitor`, "Dozing": an idle MariaDB
/// cost 2.7 % of a CPU in ticks). Same output as natively.
#[test]
fn an_idle_pool_lets_the_monitor_doze_and_still_wakes_for_everything() {
    let (native, pre) = same_both_ways("core_idle", &[]);
    assert_eq!(
        native.stdout,
        "nanosleep 150 ms returned\ntimedwait 200 ms timed out\npipe read hello\ncondvar signal arrived\nticker woke 10 times\n",
        "{}",
        native.stderr
    );
    assert!(stat(&pre, "fibers_created") >= 4, "{}", pre.stderr);
    assert!(stat(&pre, "monitor_dozes") > 0, "the monitor never dozed:\n{}", pre.stderr);
    // The ticker's errands come after dozes of ~40 ms: the monitor dozes again after two
    // quiet ticks instead of 16. (Its wake-ups over the ~460 ms, quiet 2-vCPU VM, 5028e3c:
    // 58-61, against 126-159 with 16 each time; a count of wake-ups depends on the
    // machine's load, so the test asserts the rule's own counter.)
    assert!(stat(&pre, "monitor_redozes") > 0, "the monitor never dozed again soon after an errand:\n{}", pre.stderr);
    // Between the errands and before each doze the pool is quiet at tick ends: the
    // ticks stretch (`monitor`, "Stretching the tick while the pool is quiet").
    assert!(stat(&pre, "monitor_stretched_ticks") > 0, "the monitor's tick never stretched:\n{}", pre.stderr);
}

#[test]
fn cancellation_of_fibers() {
    let (_, pre) = same_both_ways("cancel", &[]);
    // The quiet sigwait case ran in a fiber (its wait on the donor), not natively.
    assert!(
        pre.stderr.contains("quiet sigwait:") && pre.stderr.contains("fiber=1"),
        "the sigwait waiter was no fiber:\n{}",
        pre.stderr
    );
}

#[test]
fn bad_environment_values_get_one_warning_each() {
    // Each wrong value is named on one line with what is used instead; the program
    // runs as usual (issue 14).
    let bin = build_c("core_threads");
    let cases: &[(&str, &str, &str)] = &[
        ("FIBERIZE_WORKERS", "abc", "FIBERIZE_WORKERS=abc is not a whole number"),
        ("FIBERIZE_WORKERS", "0", "FIBERIZE_WORKERS=0 is out of range"),
        ("FIBERIZE_WORKERS", "-1", "FIBERIZE_WORKERS=-1 is out of range"),
        ("FIBERIZE_WORKERS", "", "FIBERIZE_WORKERS= is empty"),
        ("FIBERIZE_WORKERS", "1000", "is more than the"),
        ("FIBERIZE_STATS", "maybe", "FIBERIZE_STATS=maybe is neither on"),
        ("FIBERIZE_DUMP_SIGNAL", "99", "FIBERIZE_DUMP_SIGNAL=99 is out of range"),
        ("FIBERIZE_PREEMPT_MS", "soon", "FIBERIZE_PREEMPT_MS=soon is not a whole number"),
        ("FIBERIZE", "maybe", "FIBERIZE=maybe is neither on"),
        ("FIBERIZE_WATCHDOG", "soon", "FIBERIZE_WATCHDOG=soon is not a number of seconds"),
        ("FIBERIZE_WATCHDOG_FILE", "/tmp/x", "FIBERIZE_WATCHDOG_FILE=/tmp/x without FIBERIZE_WATCHDOG"),
        ("FIBERIZE_TUNE", "poll_per_worker=maybe", "FIBERIZE_TUNE=poll_per_worker=maybe is neither on"),
        ("FIBERIZE_TUNE", "poll_per_worker=1,nosuch=1", "FIBERIZE_TUNE=nosuch=1: no such switch"),
        ("FIBERIZE_TUNE", "turn_us=500", "FIBERIZE_TUNE=turn_us=500: no such switch, ignored (retired"),
        ("FIBERIZE_TUNE", "fair=0", "FIBERIZE_TUNE=fair=0: no such switch"),
        ("FIBERIZE_FAIR", "0", "FIBERIZE_FAIR=0 is retired and ignored (its rule is decided or removed)"),
        ("FIBERIZE_SPIN", "0", "FIBERIZE_SPIN=0 is retired and ignored"),
        ("FIBERIZE_RUN_CLOCK", "1", "FIBERIZE_RUN_CLOCK=1 is retired and ignored"),
        ("FIBERIZE_MAX_WORKERS", "32", "FIBERIZE_MAX_WORKERS=32 is retired"),
    ];
    for (var, value, expect) in cases {
        let r = run_env(&bin, &["20"], &[(var, value)]);
        assert_eq!(r.status, Some(0), "{var}={value}: {}", r.stderr);
        let warnings: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with("fiberize: FIBERIZE")).collect();
        assert_eq!(warnings.len(), 1, "{var}={value}: {}", r.stderr);
        assert!(warnings[0].contains(expect), "{var}={value}: {}", r.stderr);
        assert!(r.stderr.contains("preloaded=1"), "{}", r.stderr);
    }
    // Good values, and FIBERIZE_POLL_PER_WORKER (another name for FIBERIZE_TUNE's
    // poll_per_worker, which scripts outside this tree set): no warning.
    let good = [
        ("FIBERIZE_WORKERS", "1"),
        ("FIBERIZE_TUNE", "poll_per_worker=0"),
        ("FIBERIZE_POLL_PER_WORKER", "1"),
        ("FIBERIZE", "on"),
    ];
    for (var, value) in good {
        let r = run_env(&bin, &["20"], &[(var, value)]);
        assert!(!r.stderr.contains("fiberize: FIBERIZE"), "{var}={value}: {}", r.stderr);
        assert!(r.stderr.contains("preloaded=1"), "{var}={value}: {}", r.stderr);
    }
}

/// Issue 12: long sleeps give a fiber's dead stack pages back (runtime/sleep/stack_release.rs);
/// live frame data, errno, deep calls afterwards and a signal handler's frame during the
/// sleep behave as natively.
#[test]
fn long_sleepers_release_dead_stack_pages() {
    let (native, pre) = same_both_ways("stack_release", &["64"]);
    assert!(stat(&pre, "stack_releases") >= 64 * 3, "every sleeper should release its dead pages: {}", pre.stderr);
    // A long sleep right after one at the same depth finds nothing written below the
    // margin and skips the system call; one after deep calls does not.
    assert!(stat(&pre, "stack_releases_skipped") >= 64, "{}", pre.stderr);
    eprintln!("native: {}preloaded: {}", native.stderr, pre.stderr);
}

#[test]
fn each_thread_has_its_own_tid_and_tgkill_reaches_it() {
    // Issue 25: 64 threads (more than the workers) alive at once: gettid() and
    // syscall(SYS_gettid) distinct, equal, listed in /proc/self/task (preloaded they
    // were the workers' ids); a tgkill/tkill to a thread's tid runs the handler in
    // that thread; nice value and affinity by tid read back.
    let (native, pre) = same_both_ways("thread_ids", &["64"]);
    assert!(native.stdout.contains("threads=64 distinct=64 gettid_eq_syscall=64 in_proc_task=64"), "{}", native.stdout);
    assert!(native.stdout.contains("signal_in_target=64 gettid_in_handler=64 misplaced=0"), "{}", native.stdout);
    assert!(native.stdout.contains("nice_by_tid=64 affinity_by_tid=64"), "{}", native.stdout);
    assert!(pre.stderr.contains("fibers=64"), "every thread should be a fiber:\n{}", pre.stderr);
    assert!(stat(&pre, "fibers_created") >= 64, "{}", pre.stderr);
}
