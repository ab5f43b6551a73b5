//! The default worker count follows the CPU quota of the process's own cgroup and of
//! its ancestors (`libfiberize/src/base/cgroup`), not only the root group's.
//!
//! The tests make groups of their own in the cpu hierarchy (v1: the `cgroup` mount with
//! the `cpu` controller; else cgroup2 with `cpu` enabled at its root), give them
//! quotas, and start the program inside them through a shell that moves itself into
//! the groups before it execs the program. They need root and a hierarchy they may
//! write; where the machine does not allow that they print a `SKIP` line and pass.
//! `FIBERIZE_TEST_NEED_CGROUP=1` turns the skip into a failure. On 2 CPUs or more they
//! also change quotas while a program runs, which the monitor follows
//! (`libfiberize/src/runtime/scheduler/quota.rs`). The tests run one at a time: each
//! times its quota changes against a monitor that reads the limit once a second.

mod harness;
use harness::*;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

/// Held by each test for its whole run (see the module's comment).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Groups this test made, removed (deepest first) when dropped, on failure too.
struct Groups(Vec<PathBuf>);

impl Groups {
    fn make(&mut self, dir: PathBuf) -> Result<PathBuf, String> {
        std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        self.0.push(dir.clone());
        Ok(dir)
    }

    /// A group of the test's own, with a name no other run uses, below `root`.
    fn make_own(&mut self, root: &Path) -> Result<PathBuf, String> {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        self.make(root.join(format!("fiberize-test-{}-{nanos}", std::process::id())))
    }
}

impl Drop for Groups {
    fn drop(&mut self) {
        for dir in self.0.iter().rev() {
            // A group empties once its last process is reaped; allow the kernel a moment.
            for _ in 0..100 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if dir.exists() {
                eprintln!("cgroup test: could not remove {}", dir.display());
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Hierarchy {
    V1,
    V2,
}

/// Where this test may make groups with `controller` (`cpu`, `pids`): the mount point
/// of its hierarchy, or why not.
fn hierarchy_of(controller: &str) -> Result<(Hierarchy, PathBuf), String> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root".into());
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("mountinfo: {e}"))?;
    let mut v2 = None;
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(sep) = fields.iter().position(|f| *f == "-") else { continue };
        let (point, fstype, opts) = (fields[4], fields.get(sep + 1).copied(), fields.get(sep + 3).copied().unwrap_or(""));
        if fstype == Some("cgroup") && opts.split(',').any(|o| o == controller) && fields[3] == "/" {
            return Ok((Hierarchy::V1, PathBuf::from(point)));
        }
        if fstype == Some("cgroup2") && fields[3] == "/" {
            v2.get_or_insert_with(|| PathBuf::from(point));
        }
    }
    let root = v2.ok_or(format!("no cgroup v1 {controller} hierarchy and no cgroup2 mount"))?;
    let controllers = std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
    if !controllers.split_whitespace().any(|c| c == controller) {
        return Err(format!("the {controller} controller is not available in {}", root.display()));
    }
    enable_below(Hierarchy::V2, &root, controller)?;
    Ok((Hierarchy::V2, root))
}

/// cgroup2: lets the groups below `dir` use `controller` (v1: nothing to do).
fn enable_below(h: Hierarchy, dir: &Path, controller: &str) -> Result<(), String> {
    let file = dir.join("cgroup.subtree_control");
    if h == Hierarchy::V1 || std::fs::read_to_string(&file).unwrap_or_default().split_whitespace().any(|c| c == controller) {
        return Ok(());
    }
    std::fs::write(&file, format!("+{controller}")).map_err(|e| format!("cannot enable {controller} in {}: {e}", file.display()))
}

/// Passes with a `SKIP` line where the machine lets the test make no groups (fails
/// instead with `FIBERIZE_TEST_NEED_CGROUP` set).
fn skip(test: &str, why: &str) {
    assert!(std::env::var_os("FIBERIZE_TEST_NEED_CGROUP").is_none(), "{test}: cannot make the cgroups: {why}");
    println!("SKIP {test}: cannot make the cgroups here ({why})");
}

/// Gives `dir` a quota of `quota_us` per 100 ms.
fn set_quota(h: Hierarchy, dir: &Path, quota_us: u64) -> Result<(), String> {
    let w = |file: &str, text: String| std::fs::write(dir.join(file), &text).map_err(|e| format!("{file} <- {text}: {e}"));
    match h {
        Hierarchy::V1 => {
            w("cpu.cfs_period_us", "100000".into())?;
            w("cpu.cfs_quota_us", quota_us.to_string())
        }
        Hierarchy::V2 => w("cpu.max", format!("{quota_us} 100000")),
    }
}

/// Runs the app `name` with `args` preloaded inside the group `dir` ([`run_in_groups`]).
fn run_in_group(dir: &Path, name: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    run_in_groups(&[dir], name, args, env, true)
}

/// Runs the app `name` with `args` inside the groups `dirs` (one per hierarchy),
/// preloaded or natively: a shell writes its own pid to each group's `cgroup.procs`,
/// then execs the program (under qemu for a cross build), with the preload if asked;
/// the preload is not the shell's. The program must end with status 0.
fn run_in_groups(dirs: &[&Path], name: &str, args: &[&str], env: &[(&str, &str)], preload: bool) -> Run {
    let app = command(&build_c(name));
    let mut cmd = Command::new("sh");
    // sh -c SCRIPT LIB GROUPS... -- PROGRAM ARGS...
    let script = r#"lib="$0"
while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 97; shift; done
shift
if [ -n "$lib" ]; then LD_PRELOAD="$lib"; export LD_PRELOAD; fi
exec "$@""#;
    cmd.args(["-c", script]).arg(if preload { lib_path() } else { PathBuf::new() });
    cmd.args(dirs).arg("--").arg(app.get_program()).args(app.get_args()).args(args);
    for (k, v) in app.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    for k in ["LD_PRELOAD", "GLIBC_TUNABLES", "FIBERIZE", "FIBERIZE_WORKERS", "FIBERIZE_MAX_WORKERS", "FIBERIZE_STATS"] {
        cmd.env_remove(k);
    }
    if preload {
        cmd.env("GLIBC_TUNABLES", "glibc.pthread.rseq=0").env("FIBERIZE_STATS", "1");
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let what = format!("{name} {args:?} in {dirs:?} {env:?} (preload={preload})");
    let run = run_command(cmd, Duration::from_secs(120), &what);
    assert_eq!(run.status, Some(0), "{what}:\n{}{}", run.stdout, run.stderr);
    let active = if preload { "preloaded=1" } else { "preloaded=0" };
    assert!(run.stderr.contains(active), "{what}: no {active}: {}", run.stderr);
    run
}

/// CPUs in the affinity mask (`available_parallelism` would apply the test's own
/// cgroup quota as well).
fn affinity_cpus() -> usize {
    // SAFETY: an all-zero cpu_set_t is an empty set; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set), 0);
        libc::CPU_COUNT(&set) as usize
    }
}

/// Runs `steps` on a thread of its own, each after its delay from the start (the
/// program's start, near enough), while the caller runs the program; panics there
/// come back through `join`.
fn after_delays(steps: Vec<(u64, Box<dyn FnOnce() + Send>)>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let start = std::time::Instant::now();
        for (at_ms, step) in steps {
            std::thread::sleep(Duration::from_millis(at_ms).saturating_sub(start.elapsed()));
            step();
        }
    })
}

/// For a test that changes quotas under a running program: the cpu hierarchy and the
/// CPUs in the affinity mask; None after a SKIP line where the machine allows no
/// groups, or has 1 CPU (no quota changes the workers then).
fn run_time_test_setup(test: &str) -> Option<(Hierarchy, PathBuf, usize)> {
    let (h, root) = match hierarchy_of("cpu") {
        Ok(found) => found,
        Err(why) => {
            skip(test, &why);
            return None;
        }
    };
    let cpus = affinity_cpus();
    if cpus < 2 {
        println!("SKIP {test}: {cpus} CPU in the affinity mask, no quota changes the workers");
        return None;
    }
    Some((h, root, cpus))
}

/// A group of the test's own below `root`, made ready by `prepare`; None after a SKIP
/// line where that fails.
fn own_group(test: &str, groups: &mut Groups, root: &Path, prepare: impl FnOnce(&Path) -> Result<(), String>) -> Option<PathBuf> {
    match groups.make_own(root).and_then(|g| prepare(&g).map(|()| g)) {
        Ok(g) => Some(g),
        Err(why) => {
            skip(test, &format!("{why} (at {})", root.display()));
            None
        }
    }
}

/// The stats line, for the test's output.
fn stats_line(run: &Run) -> &str {
    run.stderr.lines().find(|l| l.starts_with("fiberize: stats")).unwrap_or("no stats line")
}

#[test]
fn workers_follow_the_quota_of_the_programs_own_cgroup() {
    const TEST: &str = "workers_follow_the_quota_of_the_programs_own_cgroup";
    let _serial = one_at_a_time();
    let (h, root) = match hierarchy_of("cpu") {
        Ok(found) => found,
        Err(why) => return skip(TEST, &why),
    };
    let mut groups = Groups(Vec::new());
    let Some(quota) = own_group(TEST, &mut groups, &root, |g| set_quota(h, g, 100_000)) else { return };
    let cpus = affinity_cpus();
    println!("{h:?} hierarchy at {}, group {}, {cpus} CPUs in the affinity mask", root.display(), quota.display());

    // One CPU's quota: one worker.
    let run = run_in_group(&quota, "core_threads", &["50"], &[]);
    assert_eq!(stat(&run, "workers"), 1, "1-CPU quota: {}", run.stderr);

    // A group without a quota of its own, inside the limited one: the parent's limit.
    let inner = groups.make(quota.join("inner")).expect("nested group");
    // cgroup2: the parent must hand the cpu controller down (it holds no process).
    enable_below(h, &quota, "cpu").expect("+cpu in the test group");
    let run = run_in_group(&inner, "core_threads", &["50"], &[]);
    assert_eq!(stat(&run, "workers"), 1, "nested in a 1-CPU group: {}", run.stderr);

    // 1.5 CPUs round up to 2 (at most the CPUs there are).
    set_quota(h, &quota, 150_000).expect("quota 150000");
    let run = run_in_group(&inner, "core_threads", &["50"], &[]);
    assert_eq!(stat(&run, "workers") as usize, cpus.min(2), "1.5-CPU quota: {}", run.stderr);

    // FIBERIZE_WORKERS still decides.
    set_quota(h, &quota, 100_000).expect("quota 100000");
    let run = run_in_group(&inner, "core_threads", &["50"], &[("FIBERIZE_WORKERS", "3")]);
    assert_eq!(stat(&run, "workers"), 3, "FIBERIZE_WORKERS=3: {}", run.stderr);
    assert!(run.stderr.contains("is more than the 1 usable CPUs"), "{}", run.stderr);

    // A quota changed while the program runs: the monitor reads it again once a second
    // and the pool follows, 1 -> 2 -> 1 ACTIVE workers (on 2 CPUs or more).
    if cpus < 2 {
        println!("SKIP the run-time part: {cpus} CPU in the affinity mask");
        return;
    }
    // Built before the clock starts; each phase lasts well over the monitor's second
    // (1 000 ticks, which a loaded machine stretches).
    build_c("cgroup_follow");
    let changer = {
        let quota = quota.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1500));
            set_quota(h, &quota, 200_000).expect("quota 200000");
            std::thread::sleep(Duration::from_millis(2500));
            set_quota(h, &quota, 100_000).expect("quota 100000 again");
        })
    };
    let run = run_in_group(&inner, "cgroup_follow", &["7000"], &[]);
    changer.join().unwrap();
    println!("{}", stats_line(&run));
    assert_eq!(stat(&run, "workers"), 1, "{}", run.stderr);
    assert_eq!(stat(&run, "quota_changes"), 2, "1 -> 2 -> 1 CPUs: {}", run.stderr);
    assert!(stat(&run, "workers_spawned") >= 1, "a worker started for the second CPU: {}", run.stderr);
    assert!(stat(&run, "workers_retired") >= 1, "the surplus worker retired: {}", run.stderr);
}

/// Issue 59 #2: the monitor keeps the limit files it reads by path. A v1 level whose
/// quota is `-1` is read without its period file, so keeping them in the order asked
/// for read a later quota against the next level's file: a nested group, unlimited at
/// start and limited to 1 CPU while the program ran, was not followed
/// (`quota_changes=0`), and with a limited parent one level's quota was divided by the
/// other's.
#[test]
fn a_quota_set_later_on_a_nested_unlimited_group_is_followed() {
    const TEST: &str = "a_quota_set_later_on_a_nested_unlimited_group_is_followed";
    let _serial = one_at_a_time();
    let Some((h, root, cpus)) = run_time_test_setup(TEST) else { return };
    let mut groups = Groups(Vec::new());
    let Some(outer) = own_group(TEST, &mut groups, &root, |g| enable_below(h, g, "cpu")) else { return };
    let inner = groups.make(outer.join("inner")).expect("nested group");
    build_c("cgroup_follow");
    // Both unlimited at start: as many workers as CPUs. Then the inner group gets
    // 1 CPU (-> 1 worker); then the outer 2 CPUs and the inner 1.5 (-> 2 workers: a
    // quota read against the outer level's file gave 150000 / 200000 -> 1).
    let (o, i) = (outer.clone(), inner.clone());
    let changer = after_delays(vec![
        (1500, Box::new(move || set_quota(h, &i, 100_000).expect("inner quota 100000"))),
        (
            4000,
            Box::new(move || {
                set_quota(h, &o, 200_000).expect("outer quota 200000");
                set_quota(h, &o.join("inner"), 150_000).expect("inner quota 150000");
            }),
        ),
    ]);
    let run = run_in_group(&inner, "cgroup_follow", &["6500"], &[]);
    changer.join().unwrap();
    println!("{}", stats_line(&run));
    assert_eq!(stat(&run, "workers") as usize, cpus, "unlimited at start: {}", run.stderr);
    assert_eq!(stat(&run, "quota_changes"), 2, "{cpus} -> 1 -> 2 CPUs: {}", run.stderr);
}

/// Issue 59 #8: a raised quota asks for a worker thread the program never makes
/// natively. Where no thread can be made (the group's `pids.max` reached, or
/// `RLIMIT_NPROC`), the pool goes on with the workers it has and counts the failure
/// (`worker_starts_failed`); it used to end the process ("cannot create a worker
/// thread"). The program's groups: a 1-CPU quota, and `pids.max` set to the tasks the
/// program has 1 s into its run; the quota is raised to 2 CPUs half a second later.
#[test]
fn a_raised_quota_at_the_pids_limit_leaves_the_program_running() {
    const TEST: &str = "a_raised_quota_at_the_pids_limit_leaves_the_program_running";
    let _serial = one_at_a_time();
    let Some((h, cpu_root, _)) = run_time_test_setup(TEST) else { return };
    let (pids_h, pids_root) = match hierarchy_of("pids") {
        Ok(found) => found,
        Err(why) => return skip(TEST, &why),
    };
    let mut groups = Groups(Vec::new());
    let Some(quota) = own_group(TEST, &mut groups, &cpu_root, |g| set_quota(h, g, 100_000)) else { return };
    let pids = if pids_h == Hierarchy::V2 && pids_root == cpu_root {
        quota.clone() // one hierarchy: the same group
    } else {
        let Some(pids) = own_group(TEST, &mut groups, &pids_root, |_| Ok(())) else { return };
        pids
    };
    println!("cpu group {}, pids group {}", quota.display(), pids.display());
    build_c("cgroup_follow");
    let mut runs = Vec::new();
    for preload in [false, true] {
        set_quota(h, &quota, 100_000).expect("quota 100000");
        std::fs::write(pids.join("pids.max"), "max").expect("pids.max <- max");
        let (q, p) = (quota.clone(), pids.clone());
        let changer = after_delays(vec![
            (
                1000,
                Box::new(move || {
                    let current = std::fs::read_to_string(p.join("pids.current")).expect("pids.current");
                    std::fs::write(p.join("pids.max"), current.trim()).expect("pids.max <- pids.current");
                    println!("pids.max {} (preload={preload})", current.trim());
                }),
            ),
            (1500, Box::new(move || set_quota(h, &q, 200_000).expect("quota 200000"))),
        ]);
        let run = run_in_groups(&[&quota, &pids], "cgroup_follow", &["4000"], &[], preload);
        changer.join().unwrap();
        runs.push(run);
    }
    let (native, pre) = (&runs[0], &runs[1]);
    println!("{}", stats_line(pre));
    assert_eq!(native.stdout, "done\n", "{}", native.stderr);
    assert_eq!(pre.stdout, native.stdout, "{}", pre.stderr);
    assert_eq!(stat(pre, "workers"), 1, "1-CPU quota at start: {}", pre.stderr);
    assert_eq!(stat(pre, "quota_changes"), 1, "1 -> 2 CPUs: {}", pre.stderr);
    assert!(stat(pre, "worker_starts_failed") >= 1, "no worker could start at pids.max: {}", pre.stderr);
}
