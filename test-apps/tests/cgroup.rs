//! The default worker count follows the CPU quota of the process's own cgroup and of
//! its ancestors (`libfiberize/src/base/cgroup`), not only the root group's.
//!
//! The test makes a group of its own in the cpu hierarchy (v1: the `cgroup` mount with
//! the `cpu` controller; else cgroup2 with `cpu` enabled at its root), gives it a
//! quota, and starts the preloaded program inside it through a shell that moves itself
//! into the group before it execs the program. It needs root and a hierarchy it may
//! write; where the machine does not allow that it prints a `SKIP` line and passes.
//! `FIBERIZE_TEST_NEED_CGROUP=1` turns the skip into a failure. On 2 CPUs or more it
//! also changes the quota while a program runs, which the monitor follows
//! (`libfiberize/src/runtime/scheduler/quota.rs`).

mod harness;
use harness::*;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Groups this test made, removed (deepest first) when dropped, on failure too.
struct Groups(Vec<PathBuf>);

impl Groups {
    fn make(&mut self, dir: PathBuf) -> Result<PathBuf, String> {
        std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        self.0.push(dir.clone());
        Ok(dir)
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

/// Where this test may make cpu groups: the mount point of the cpu hierarchy, or why not.
fn cpu_hierarchy() -> Result<(Hierarchy, PathBuf), String> {
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
        if fstype == Some("cgroup") && opts.split(',').any(|o| o == "cpu") && fields[3] == "/" {
            return Ok((Hierarchy::V1, PathBuf::from(point)));
        }
        if fstype == Some("cgroup2") && fields[3] == "/" {
            v2.get_or_insert_with(|| PathBuf::from(point));
        }
    }
    let root = v2.ok_or("no cgroup v1 cpu hierarchy and no cgroup2 mount")?;
    let controllers = std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
    if !controllers.split_whitespace().any(|c| c == "cpu") {
        return Err(format!("the cpu controller is not available in {}", root.display()));
    }
    let subtree = std::fs::read_to_string(root.join("cgroup.subtree_control")).unwrap_or_default();
    if !subtree.split_whitespace().any(|c| c == "cpu") {
        std::fs::write(root.join("cgroup.subtree_control"), "+cpu")
            .map_err(|e| format!("cannot enable cpu in {}/cgroup.subtree_control: {e}", root.display()))?;
    }
    Ok((Hierarchy::V2, root))
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

/// Runs the app `name` with `args` preloaded inside the group `dir`: a shell writes its
/// own pid to the group's `cgroup.procs`, then execs the program (under qemu for a
/// cross build) with the preload; the preload is not the shell's.
fn run_in_group(dir: &Path, name: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    let app = command(&build_c(name));
    let mut cmd = Command::new("sh");
    cmd.args(["-c", r#"echo $$ > "$0/cgroup.procs" && LD_PRELOAD="$1" && export LD_PRELOAD && shift && exec "$@""#]);
    cmd.arg(dir).arg(lib_path()).arg(app.get_program()).args(app.get_args()).args(args);
    for (k, v) in app.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    for k in ["LD_PRELOAD", "FIBERIZE", "FIBERIZE_WORKERS", "FIBERIZE_MAX_WORKERS"] {
        cmd.env_remove(k);
    }
    cmd.env("GLIBC_TUNABLES", "glibc.pthread.rseq=0").env("FIBERIZE_STATS", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let run = run_command(cmd, Duration::from_secs(120), &format!("{name} {args:?} in {} {env:?}", dir.display()));
    assert_eq!(run.status, Some(0), "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("preloaded=1"), "library not active: {}", run.stderr);
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

#[test]
fn workers_follow_the_quota_of_the_programs_own_cgroup() {
    let (h, root) = match cpu_hierarchy() {
        Ok(found) => found,
        Err(why) => {
            assert!(std::env::var_os("FIBERIZE_TEST_NEED_CGROUP").is_none(), "cannot make a cpu cgroup: {why}");
            println!("SKIP workers_follow_the_quota_of_the_programs_own_cgroup: cannot make a cpu cgroup here ({why})");
            return;
        }
    };
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let mut groups = Groups(Vec::new());
    let name = format!("fiberize-test-{}-{nanos}", std::process::id());
    let quota = groups.make(root.join(name)).and_then(|g| set_quota(h, &g, 100_000).map(|()| g));
    let quota = match quota {
        Ok(g) => g,
        Err(why) => {
            assert!(std::env::var_os("FIBERIZE_TEST_NEED_CGROUP").is_none(), "cannot make a cpu cgroup: {why}");
            println!("SKIP workers_follow_the_quota_of_the_programs_own_cgroup: {why} ({h:?} at {})", root.display());
            return;
        }
    };
    let cpus = affinity_cpus();
    println!("{h:?} hierarchy at {}, group {}, {cpus} CPUs in the affinity mask", root.display(), quota.display());

    // One CPU's quota: one worker.
    let run = run_in_group(&quota, "core_threads", &["50"], &[]);
    assert_eq!(stat(&run, "workers"), 1, "1-CPU quota: {}", run.stderr);

    // A group without a quota of its own, inside the limited one: the parent's limit.
    let inner = groups.make(quota.join("inner")).expect("nested group");
    if h == Hierarchy::V2 {
        // cgroup2: the parent must hand the cpu controller down (it holds no process).
        std::fs::write(quota.join("cgroup.subtree_control"), "+cpu").expect("+cpu in the test group");
    }
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
    println!("{}", run.stderr.lines().find(|l| l.starts_with("fiberize: stats")).unwrap_or("no stats line"));
    assert_eq!(stat(&run, "workers"), 1, "{}", run.stderr);
    assert_eq!(stat(&run, "quota_changes"), 2, "1 -> 2 -> 1 CPUs: {}", run.stderr);
    assert!(stat(&run, "workers_spawned") >= 1, "a worker started for the second CPU: {}", run.stderr);
    assert!(stat(&run, "workers_retired") >= 1, "the surplus worker retired: {}", run.stderr);
}
