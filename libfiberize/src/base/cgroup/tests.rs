//! The parsers and the walk, fed with fixture text and a fake file system.

use super::*;
use std::collections::HashMap;

/// Finds the group from the fixture texts of `/proc/self/cgroup` and mountinfo.
fn group(cgroup: &str, mountinfo: &str) -> Option<Group> {
    let mut m = Membership::new();
    cgroup.lines().for_each(|l| m.line(l.as_bytes()));
    let (version, path) = m.group()?;
    let mut p = Placement::new(version, path);
    mountinfo.lines().for_each(|l| p.line(l.as_bytes()));
    p.group()
}

/// The limit of `g` over the files `fs`; also the files it tried, in order.
fn limit(g: &Group, fs: &[(&str, &str)]) -> (Option<usize>, Vec<String>) {
    let fs: HashMap<&str, &str> = fs.iter().copied().collect();
    let mut tried = Vec::new();
    let n = g.cpu_limit_with(&mut |path: &[u8], buf: &mut [u8]| {
        let path = std::str::from_utf8(path.strip_suffix(b"\0").expect("NUL-terminated")).unwrap();
        tried.push(path.to_string());
        let text = fs.get(path)?.as_bytes();
        let n = text.len().min(buf.len());
        buf[..n].copy_from_slice(&text[..n]);
        Some(n)
    });
    (n, tried)
}

fn dir(g: &Group) -> &str {
    std::str::from_utf8(g.dir()).unwrap()
}

const V2_MOUNT: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot";

/// This machine's layout: v1 controllers each on their own, plus an empty v2 hierarchy.
const HYBRID_MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw";

#[test]
fn v2_group_and_its_ancestors() {
    let g = group("0::/system.slice/mariadb.service\n", V2_MOUNT).expect("group");
    assert_eq!(g.version, Version::V2);
    assert_eq!(dir(&g), "/sys/fs/cgroup/system.slice/mariadb.service");
    assert_eq!(g.mount_point(), b"/sys/fs/cgroup");
    let (n, tried) = limit(
        &g,
        &[
            ("/sys/fs/cgroup/system.slice/mariadb.service/cpu.max", "100000 100000\n"),
            ("/sys/fs/cgroup/system.slice/cpu.max", "max 100000\n"),
        ],
    );
    assert_eq!(n, Some(1));
    assert_eq!(
        tried,
        ["/sys/fs/cgroup/system.slice/mariadb.service/cpu.max", "/sys/fs/cgroup/system.slice/cpu.max", "/sys/fs/cgroup/cpu.max"]
    );
    // `max` everywhere, or no files at all: no limit.
    assert_eq!(limit(&g, &[("/sys/fs/cgroup/system.slice/mariadb.service/cpu.max", "max 100000\n")]).0, None);
    assert_eq!(limit(&g, &[]).0, None);
}

#[test]
fn the_tightest_level_wins_and_quotas_round_up() {
    let g = group("0::/a/b/c\n", V2_MOUNT).unwrap();
    let fs = [
        ("/sys/fs/cgroup/a/b/c/cpu.max", "max 100000\n"),
        ("/sys/fs/cgroup/a/b/cpu.max", "400000 100000\n"),
        ("/sys/fs/cgroup/a/cpu.max", "150000 100000\n"),
    ];
    assert_eq!(limit(&g, &fs).0, Some(2), "ceil(1.5) from the grandparent");
    // A quota under one period still leaves one worker.
    assert_eq!(limit(&g, &[("/sys/fs/cgroup/a/b/c/cpu.max", "20000 100000")]).0, Some(1));
    assert_eq!(limit(&g, &[("/sys/fs/cgroup/a/b/c/cpu.max", "250000 50000\n")]).0, Some(5));
}

#[test]
fn v1_cpu_hierarchy_wins_over_v2_in_a_hybrid_layout() {
    let cgroup = "12:name=systemd:/\n4:memory:/process_api/1c3a\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/fiberize-test/inner\n0::/\n";
    let g = group(cgroup, HYBRID_MOUNTS).expect("group");
    assert_eq!(g.version, Version::V1);
    assert_eq!(dir(&g), "/sys/fs/cgroup/cpu/fiberize-test/inner");
    let fs = [
        ("/sys/fs/cgroup/cpu/fiberize-test/inner/cpu.cfs_quota_us", "-1\n"),
        ("/sys/fs/cgroup/cpu/fiberize-test/inner/cpu.cfs_period_us", "100000\n"),
        ("/sys/fs/cgroup/cpu/fiberize-test/cpu.cfs_quota_us", "100000\n"),
        ("/sys/fs/cgroup/cpu/fiberize-test/cpu.cfs_period_us", "100000\n"),
        ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n"),
        ("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n"),
    ];
    assert_eq!(limit(&g, &fs).0, Some(1));
    // The v2 line comes first on older kernels' order too: v1 still wins.
    let g = group("0::/\n1:cpu:/x\n", HYBRID_MOUNTS).unwrap();
    assert_eq!((g.version, dir(&g)), (Version::V1, "/sys/fs/cgroup/cpu/x"));
    // Everything -1: no limit.
    let g = group("1:cpu:/\n", HYBRID_MOUNTS).unwrap();
    assert_eq!(dir(&g), "/sys/fs/cgroup/cpu");
    assert_eq!(limit(&g, &fs[4..]).0, None);
}

/// A level asks for the same files whatever they say: the monitor keeps them open
/// from its first read, inside the pool's start (`scheduler::quota::KeptFiles`).
#[test]
fn a_v1_level_asks_for_its_period_also_without_a_quota() {
    let g = group("1:cpu:/a\n", HYBRID_MOUNTS).unwrap();
    let unlimited = [("/sys/fs/cgroup/cpu/a/cpu.cfs_quota_us", "-1\n"), ("/sys/fs/cgroup/cpu/a/cpu.cfs_period_us", "100000\n")];
    let limited = [("/sys/fs/cgroup/cpu/a/cpu.cfs_quota_us", "50000\n"), unlimited[1]];
    let (n, tried) = limit(&g, &unlimited);
    assert_eq!(n, None);
    assert_eq!(limit(&g, &limited), (Some(1), tried.clone()));
    assert_eq!(
        tried,
        [
            "/sys/fs/cgroup/cpu/a/cpu.cfs_quota_us",
            "/sys/fs/cgroup/cpu/a/cpu.cfs_period_us",
            "/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
            "/sys/fs/cgroup/cpu/cpu.cfs_period_us"
        ]
    );
}

#[test]
fn v1_cpu_and_cpuacct_mounted_together() {
    let mounts = "\
25 24 0:22 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:9 - cgroup cgroup rw,cpu,cpuacct
26 24 0:23 / /sys/fs/cgroup/cpuset rw,nosuid shared:10 - cgroup cgroup rw,cpuset";
    let g = group("5:cpuset:/\n4:cpu,cpuacct:/user.slice/db.service\n", mounts).unwrap();
    assert_eq!(dir(&g), "/sys/fs/cgroup/cpu,cpuacct/user.slice/db.service");
    let fs = [
        ("/sys/fs/cgroup/cpu,cpuacct/user.slice/db.service/cpu.cfs_quota_us", "300000\n"),
        ("/sys/fs/cgroup/cpu,cpuacct/user.slice/db.service/cpu.cfs_period_us", "100000\n"),
    ];
    assert_eq!(limit(&g, &fs).0, Some(3));
    // A quota without its period file is no limit at that level.
    assert_eq!(limit(&g, &fs[..1]).0, None);
    // `cpuacct` or `cpuset` alone is not the cpu controller.
    assert!(group("5:cpuset:/\n2:cpuacct:/a\n", mounts).is_none());
}

#[test]
fn a_mount_root_below_the_hierarchy_root() {
    // A container without its own cgroup namespace: the host's path, the container's
    // group mounted at /sys/fs/cgroup.
    let mounts = "1150 1140 0:26 /docker/abc /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw";
    let g = group("0::/docker/abc/inner\n", mounts).unwrap();
    assert_eq!(dir(&g), "/sys/fs/cgroup/inner");
    assert_eq!(g.mount_point(), b"/sys/fs/cgroup");
    let (n, tried) = limit(&g, &[("/sys/fs/cgroup/cpu.max", "200000 100000\n")]);
    assert_eq!(n, Some(2));
    assert_eq!(tried, ["/sys/fs/cgroup/inner/cpu.max", "/sys/fs/cgroup/cpu.max"], "never above the mount");
    // The group at the mount's root itself.
    assert_eq!(dir(&group("0::/docker/abc\n", mounts).unwrap()), "/sys/fs/cgroup");
    // A group outside the mount (a sibling, or one whose name only begins alike).
    assert!(group("0::/docker/other\n", mounts).is_none());
    assert!(group("0::/docker/abcd\n", mounts).is_none());
    // A v1 mount with a root as well.
    let v1 = "40 31 0:29 /kube/pod1 /sys/fs/cgroup/cpu ro - cgroup cgroup rw,cpu,cpuacct";
    assert_eq!(dir(&group("3:cpu,cpuacct:/kube/pod1/c1\n", v1).unwrap()), "/sys/fs/cgroup/cpu/c1");
}

#[test]
fn of_two_mounts_the_one_showing_more_ancestors_wins() {
    let mounts = "\
50 22 0:26 /a /mnt/sub rw - cgroup2 cgroup2 rw
30 22 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw
51 22 0:26 /a/b /mnt/deeper rw - cgroup2 cgroup2 rw";
    let g = group("0::/a/b/c\n", mounts).unwrap();
    assert_eq!(dir(&g), "/sys/fs/cgroup/a/b/c");
    // Only the narrower mounts: the shortest root that holds the group.
    let g = group("0::/a/b/c\n", "50 22 0:26 /a/b /x rw - cgroup2 c rw\n51 22 0:26 /a /y rw - cgroup2 c rw").unwrap();
    assert_eq!(dir(&g), "/y/b/c");
}

#[test]
fn escaped_mount_points_and_a_hierarchy_mounted_at_slash() {
    let g = group("0::/g\n", "30 22 0:26 / /mnt/cg\\040x rw - cgroup2 cgroup2 rw").unwrap();
    assert_eq!(dir(&g), "/mnt/cg x/g");
    assert!(group("0::/g\n", "30 22 0:26 / /mnt/bad\\09 rw - cgroup2 cgroup2 rw").is_none());
    // A container's cgroup2 mounted at `/` (and the group at its root: the files are
    // `/cpu.max`).
    let g = group("0::/a\n", "30 22 0:26 / / rw - cgroup2 cgroup2 rw").unwrap();
    let (n, tried) = limit(&g, &[("/a/cpu.max", "100000 100000")]);
    assert_eq!((n, tried), (Some(1), vec!["/a/cpu.max".to_string(), "/cpu.max".to_string()]));
    let g = group("0::/\n", "30 22 0:26 / / rw - cgroup2 cgroup2 rw").unwrap();
    assert_eq!(limit(&g, &[("/cpu.max", "300000 100000\n")]).0, Some(3));
}

#[test]
fn no_group_no_mount_or_a_broken_file_is_no_limit() {
    assert!(group("", V2_MOUNT).is_none());
    assert!(group("0::/a\n", HYBRID_MOUNTS.lines().next().unwrap()).is_none(), "no cgroup2 mount");
    assert!(group("1:cpu:/a\n", V2_MOUNT).is_none(), "no v1 cpu mount");
    assert!(group("garbage\n0::/a\n", V2_MOUNT).is_none());
    assert!(group("0::relative\n", V2_MOUNT).is_none());
    let long = format!("0::/{}\n", "x".repeat(DIR_CAP));
    assert!(group(&long, V2_MOUNT).is_none());
    // A path with ':' in it is still one path.
    assert_eq!(dir(&group("0::/a:b\n", V2_MOUNT).unwrap()), "/sys/fs/cgroup/a:b");
}

#[test]
fn limit_files_parse() {
    assert_eq!(parse_v2_max(b"max 100000\n"), None);
    assert_eq!(parse_v2_max(b"100000 100000\n"), Some(1));
    assert_eq!(parse_v2_max(b"100001 100000"), Some(2));
    assert_eq!(parse_v2_max(b"100000 0\n"), None);
    assert_eq!(parse_v2_max(b"100000\n"), None);
    assert_eq!(parse_v2_max(b"-5 100000\n"), None);
    assert_eq!(parse_v1_number(b"-1\n"), None);
    assert_eq!(parse_v1_number(b"100000\n"), Some(100000));
    assert_eq!(parse_v1_number(b"1e5\n"), None);
    assert_eq!(parse_v1_number(b"99999999999999999999\n"), None);
    assert_eq!(cpus(1, 100000), Some(1));
    assert_eq!(cpus(0, 100000), Some(1));
    assert_eq!(cpus(100000, 0), None);
}

#[test]
fn mountinfo_lines_with_and_without_optional_fields() {
    let m = parse_mountinfo_line(b"36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 shared:2 - ext3 /dev/root rw,errors=continue");
    assert_eq!(m, Some(Mount { root: b"/mnt1", point: b"/mnt2", fstype: b"ext3", super_options: b"rw,errors=continue" }));
    let m = parse_mountinfo_line(b"32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu").unwrap();
    assert_eq!((m.fstype, m.super_options), (&b"cgroup"[..], &b"rw,cpu"[..]));
    assert_eq!(parse_mountinfo_line(b"32 31 0:29 / /x rw,relatime cgroup cgroup rw"), None, "no separator");
    assert_eq!(below_root(b"/a/b", b"/"), Some(&b"/a/b"[..]));
    assert_eq!(below_root(b"/", b"/"), Some(&b""[..]));
    assert_eq!(below_root(b"/a/b/c", b"/a/b"), Some(&b"/c"[..]));
    assert_eq!(below_root(b"/a/bc", b"/a/b"), None);
    assert_eq!(below_root(b"/a", b"/a/b"), None);
}

#[test]
fn lines_are_read_across_reads_and_long_lines_dropped() {
    let text = b"first\nsecond line\n0123456789abcdef0123\nlast";
    for chunk in [1, 3, 7, 100] {
        let mut at = 0;
        let read = |buf: &mut [u8]| {
            let n = chunk.min(buf.len()).min(text.len() - at);
            buf[..n].copy_from_slice(&text[at..at + n]);
            at += n;
            n as isize
        };
        let mut buf = [0u8; 16];
        let mut lines = Vec::new();
        let dropped = each_line(read, &mut buf, |l| lines.push(String::from_utf8(l.to_vec()).unwrap()));
        assert_eq!(dropped, Some(true), "chunk {chunk}");
        assert_eq!(lines, ["first", "second line", "last"], "chunk {chunk}");
    }
    let mut calls = 0;
    let failing = |_: &mut [u8]| {
        calls += 1;
        if calls == 1 {
            -(libc::EINTR as isize)
        } else {
            -(libc::EIO as isize)
        }
    };
    assert_eq!(each_line(failing, &mut [0u8; 16], |_| {}), None);
}

#[test]
fn this_process_finds_a_group_or_none_without_failing() {
    // Whatever the machine: no panic, and a limit is at least 1.
    if let Some(g) = own_group() {
        assert!(g.dir().starts_with(g.mount_point()));
        assert!(g.cpu_limit().is_none_or(|n| n >= 1));
    }
}
