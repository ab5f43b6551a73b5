//! The kept limit files, over real files in a temporary directory laid out as a cgroup
//! hierarchy.

use super::*;
use crate::base::cgroup::{Placement, Version};
use std::path::{Path, PathBuf};

/// A directory of its own under the temporary directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("fiberize-quota-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn write(&self, file: &str, text: &str) {
        let path = self.0.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The group `path` of a `version` hierarchy mounted at `mount`.
fn group_at(version: Version, mount: &Path, path: &str) -> Group {
    let fstype = if version == Version::V1 { "cgroup cgroup rw,cpu" } else { "cgroup2 cgroup2 rw" };
    let line = format!("32 31 0:29 / {} rw,relatime - {fstype}", mount.display());
    let mut placement = Placement::new(version, path.as_bytes());
    placement.line(line.as_bytes());
    placement.group().expect("group")
}

/// The limit of `group` read through `files`, as the monitor reads it.
fn limit(group: &Group, files: &mut KeptFiles) -> Option<usize> {
    group.cpu_limit_with(&mut |path, buf| files.read(path, buf))
}

fn nul(path: &Path) -> Vec<u8> {
    let mut p = path.as_os_str().as_encoded_bytes().to_vec();
    p.push(0);
    p
}

fn text(files: &mut KeptFiles, path: &Path) -> Option<String> {
    let mut buf = [0u8; 64];
    let n = files.read(&nul(path), &mut buf)?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

#[test]
fn each_path_reads_its_own_file_whatever_was_asked_before() {
    let dir = Scratch::new("by-path");
    for name in ["a", "b", "c"] {
        dir.write(name, name);
    }
    let [a, b, c] = ["a", "b", "c"].map(|n| dir.0.join(n));
    let mut files = KeptFiles::new();
    assert_eq!([&a, &b, &c].map(|p| text(&mut files, p)), [Some("a"), Some("b"), Some("c")].map(|t| t.map(String::from)));
    // Fewer files, in another order: each is still its own (the n-th asked for was
    // read from the n-th kept).
    assert_eq!(text(&mut files, &c).as_deref(), Some("c"));
    assert_eq!(text(&mut files, &b).as_deref(), Some("b"));
    // Read again, not opened again: the new content, the same three descriptors.
    dir.write("a", "A");
    assert_eq!(text(&mut files, &a).as_deref(), Some("A"));
    assert_eq!(files.kept, 3);
}

/// Writes `files` (path below `dir`, text), then reads `group`'s limit through `kept`.
fn limit_after(dir: &Scratch, files: &[(&str, &str)], group: &Group, kept: &mut KeptFiles) -> Option<usize> {
    files.iter().for_each(|(path, text)| dir.write(path, text));
    limit(group, kept)
}

#[test]
fn a_file_missing_at_first_is_read_once_it_appears() {
    let dir = Scratch::new("missing");
    let group = group_at(Version::V2, &dir.0, "/app");
    std::fs::create_dir(dir.0.join("app")).unwrap();
    let mut files = KeptFiles::new();
    assert_eq!(limit(&group, &mut files), None, "no cpu.max anywhere");
    // The controller enabled later: `cpu.max` appears (systemd's CPUQuota=200%).
    assert_eq!(limit_after(&dir, &[("app/cpu.max", "200000 100000\n")], &group, &mut files), Some(2));
    assert_eq!(limit_after(&dir, &[("app/cpu.max", "100000 100000\n")], &group, &mut files), Some(1));
    assert_eq!(files.kept, 2, "app/cpu.max and the mount's cpu.max, each kept once");
}

#[test]
fn a_quota_set_later_on_an_unlimited_v1_level_is_read_against_its_own_period() {
    let dir = Scratch::new("v1-later");
    for level in ["", "outer/", "outer/inner/"] {
        dir.write(&format!("{level}cpu.cfs_quota_us"), "-1\n");
        dir.write(&format!("{level}cpu.cfs_period_us"), "100000\n");
    }
    let group = group_at(Version::V1, &dir.0, "/outer/inner");
    let mut files = KeptFiles::new();
    assert_eq!(limit(&group, &mut files), None, "unlimited at start");
    // The inner group limited to 1 CPU: read against the outer level's quota file
    // (-1), it was no limit.
    let inner_1 = [("outer/inner/cpu.cfs_quota_us", "100000\n")];
    assert_eq!(limit_after(&dir, &inner_1, &group, &mut files), Some(1));
    // A limited parent: 150000 / 100000 is 2 CPUs, not 150000 / 200000 (the outer
    // level's quota) = 1.
    let both = [("outer/cpu.cfs_quota_us", "200000\n"), ("outer/inner/cpu.cfs_quota_us", "150000\n")];
    assert_eq!(limit_after(&dir, &both, &group, &mut files), Some(2));
    // The parent's limit holds where it is the tighter one.
    assert_eq!(limit_after(&dir, &[("outer/cpu.cfs_quota_us", "100000\n")], &group, &mut files), Some(1));
    assert_eq!(files.kept, 6, "two files per level, each kept once");
}

#[test]
fn past_the_table_files_are_read_by_path() {
    let dir = Scratch::new("full");
    let paths: Vec<PathBuf> = (0..KEPT_FILES + 3).map(|i| dir.0.join(i.to_string())).collect();
    for (i, p) in paths.iter().enumerate() {
        std::fs::write(p, i.to_string()).unwrap();
    }
    let mut files = KeptFiles::new();
    for _ in 0..2 {
        for (i, p) in paths.iter().enumerate() {
            assert_eq!(text(&mut files, p), Some(i.to_string()));
        }
    }
    assert_eq!(files.kept, KEPT_FILES);
    // A path longer than the room left for paths is read by path too.
    let long = dir.0.join("x".repeat(200));
    std::fs::write(&long, "long").unwrap();
    assert_eq!(text(&mut KeptFiles { paths_len: KEPT_PATH_BYTES - 10, ..KeptFiles::new() }, &long).as_deref(), Some("long"));
}
