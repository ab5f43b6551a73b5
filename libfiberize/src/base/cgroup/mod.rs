//! The CPU limit of the process's own cgroup: v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`,
//! v2 `cpu.max`. The default worker count is capped by it (`config::default_workers`).
//!
//! # Which group
//!
//! `/proc/self/cgroup` names the process's group in each hierarchy, relative to the
//! hierarchy's root as the process's cgroup namespace sees it. The v1 line whose
//! controllers include `cpu` (`4:cpu,cpuacct:/user.slice/db.service`) wins; otherwise
//! the v2 line (`0::/path`) is used. `/proc/self/mountinfo` says where that hierarchy is
//! mounted: the `cgroup` mount whose super options include `cpu`, or the `cgroup2`
//! mount. A mount shows the hierarchy from its root field down (a container may see
//! `/docker/ID` mounted at `/sys/fs/cgroup`), so the group's directory is the mount
//! point plus the group's path below that root. A group outside every such mount's
//! root cannot be read: no limit. Of several mounts of the hierarchy, the one with the
//! shortest root wins, because it shows the most ancestors.
//!
//! # Which limit
//!
//! A group runs no faster than any of its ancestors. The limit is the tightest among
//! the group and each ancestor up to the mount's root. Each level allows
//! `ceil(quota / period)` CPUs, at least 1. A level whose file is missing, unreadable
//! or says "no limit" (v2 `max`, v1 `-1`) adds nothing; v2's root group has no
//! `cpu.max`.
//!
//! This runs inside `config::config()`, possibly before the program's constructors and
//! its allocator: raw system calls, fixed buffers on the stack (about 10 KiB), no
//! allocation. Anything unexpected means no limit: a path longer than [`DIR_CAP`], a
//! malformed `/proc/self/cgroup`, a failed read.

use crate::base::sys;

/// The longest group directory (mount point plus path) followed, in bytes.
pub const DIR_CAP: usize = 1024;
/// The longest line of `/proc/self/cgroup` or `/proc/self/mountinfo` read whole.
const LINE_CAP: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// A path in a fixed buffer.
#[derive(Clone, Copy)]
pub struct PathBuf {
    bytes: [u8; DIR_CAP],
    len: usize,
}

impl PathBuf {
    const fn new() -> PathBuf {
        PathBuf { bytes: [0; DIR_CAP], len: 0 }
    }

    fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// Appends `s`; false (and unchanged) if it does not fit.
    fn push(&mut self, s: &[u8]) -> bool {
        if s.len() > DIR_CAP - self.len {
            return false;
        }
        self.bytes[self.len..self.len + s.len()].copy_from_slice(s);
        self.len += s.len();
        true
    }

    /// Replaces the content with `s`, unescaped as mountinfo escapes paths (`\040` for a
    /// space: octal, three digits). False on a bad escape or if it does not fit.
    fn set_unescaped(&mut self, s: &[u8]) -> bool {
        self.len = 0;
        let mut i = 0;
        while i < s.len() {
            let c = if s[i] == b'\\' {
                let digits = s.get(i + 1..i + 4).filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
                let Some(d) = digits else { return false };
                i += 4;
                ((d[0] - b'0') << 6) | ((d[1] - b'0') << 3) | (d[2] - b'0')
            } else {
                i += 1;
                s[i - 1]
            };
            if !self.push(&[c]) {
                return false;
            }
        }
        true
    }
}

/// Whether the comma-separated `list` has the item `cpu` (not `cpuacct`, `cpuset`).
fn has_cpu(list: &[u8]) -> bool {
    list.split(|&b| b == b',').any(|item| item == b"cpu")
}

/// The process's CPU group as `/proc/self/cgroup` names it, fed one line at a time.
pub struct Membership {
    version: Option<Version>,
    path: PathBuf,
    broken: bool,
}

impl Membership {
    const fn new() -> Membership {
        Membership { version: None, path: PathBuf::new(), broken: false }
    }

    /// One line, `hierarchy-ID:controller-list:path` (the path may hold `:`).
    pub fn line(&mut self, line: &[u8]) {
        let mut parts = line.splitn(3, |&b| b == b':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            self.broken = !line.is_empty() || self.broken;
            return;
        };
        let version = if id == b"0" && controllers.is_empty() {
            if self.version == Some(Version::V1) {
                return; // the v1 `cpu` hierarchy holds the controller
            }
            Version::V2
        } else if has_cpu(controllers) {
            Version::V1
        } else {
            return;
        };
        self.version = Some(version);
        self.path.len = 0;
        if !path.starts_with(b"/") || !self.path.push(path) {
            self.broken = true;
        }
    }

    /// The hierarchy and the group's path in it; None if none was found or a line
    /// could not be read.
    pub fn group(&self) -> Option<(Version, &[u8])> {
        if self.broken {
            return None;
        }
        Some((self.version?, self.path.as_slice()))
    }
}

/// The fields of a mountinfo line that matter here (paths still escaped).
#[derive(Debug, PartialEq, Eq)]
pub struct Mount<'a> {
    pub root: &'a [u8],
    pub point: &'a [u8],
    pub fstype: &'a [u8],
    pub super_options: &'a [u8],
}

/// Splits `36 35 98:0 /root /point rw,noatime master:1 - fstype source super,options`
/// (`man 5 proc_pid_mountinfo`); the optional fields before `-` may be absent.
pub fn parse_mountinfo_line(line: &[u8]) -> Option<Mount<'_>> {
    let mut fields = line.split(|&b| b == b' ');
    let _id = fields.next()?;
    let _parent = fields.next()?;
    let _dev = fields.next()?;
    let root = fields.next()?;
    let point = fields.next()?;
    let _options = fields.next()?;
    for optional in fields.by_ref() {
        if optional == b"-" {
            let fstype = fields.next()?;
            let _source = fields.next()?;
            let super_options = fields.next().unwrap_or(b"");
            return Some(Mount { root, point, fstype, super_options });
        }
    }
    None
}

/// The part of the group's `path` below the mount's `root` (both start with `/`): `""`
/// for the root itself, None if the group lies outside the mount.
pub fn below_root<'a>(path: &'a [u8], root: &[u8]) -> Option<&'a [u8]> {
    let root = if root == b"/" { &b""[..] } else { root };
    let rest = path.strip_prefix(root)?;
    match rest {
        b"" | b"/" => Some(b""),
        _ if rest.starts_with(b"/") => Some(rest.strip_suffix(b"/").unwrap_or(rest)),
        _ => None, // `/a/bc` is not below `/a/b`
    }
}

/// The process's CPU group on the file system: `dir` (no trailing `/`, empty for a group
/// at the root of a hierarchy mounted at `/`) and the length of its mount point within
/// it (the walk up stops there).
#[derive(Clone, Copy)]
pub struct Group {
    pub version: Version,
    dir: PathBuf,
    top: usize,
    /// The unescaped root of the mount chosen (shorter roots win), its length.
    root_len: usize,
}

impl Group {
    pub fn dir(&self) -> &[u8] {
        self.dir.as_slice()
    }

    pub fn mount_point(&self) -> &[u8] {
        &self.dir.as_slice()[..self.top]
    }

    /// The tightest limit from the group up to its mount's root, in whole CPUs; None if
    /// no level has one. `read` reads a file (a NUL-terminated path) into the buffer and
    /// returns the length read.
    pub fn cpu_limit_with(&self, read: &mut impl FnMut(&[u8], &mut [u8]) -> Option<usize>) -> Option<usize> {
        let dir = self.dir.as_slice();
        let mut k = dir.len();
        let mut tightest: Option<usize> = None;
        loop {
            if let Some(n) = self.level_limit(&dir[..k], read) {
                tightest = Some(tightest.map_or(n, |t| t.min(n)));
            }
            if k <= self.top {
                return tightest;
            }
            // The path below the mount point starts with '/', so one is found.
            k = dir[..k].iter().rposition(|&b| b == b'/').map_or(self.top, |i| i.max(self.top));
        }
    }

    fn level_limit(&self, dir: &[u8], read: &mut impl FnMut(&[u8], &mut [u8]) -> Option<usize>) -> Option<usize> {
        let mut path = [0u8; DIR_CAP + 32];
        let mut file = |name: &[u8], buf: &mut [u8]| -> Option<usize> {
            let n = dir.len() + name.len();
            path[..dir.len()].copy_from_slice(dir);
            path[dir.len()..n].copy_from_slice(name);
            read(&path[..n], buf)
        };
        let mut a = [0u8; 64];
        match self.version {
            Version::V2 => {
                let n = file(b"/cpu.max\0", &mut a)?;
                parse_v2_max(&a[..n])
            }
            Version::V1 => {
                // Both files are read, also while the quota is `-1`: a level asks for
                // the same files whatever they say (the monitor keeps them open from
                // its first read, `scheduler::quota::KeptFiles`).
                let quota = file(b"/cpu.cfs_quota_us\0", &mut a);
                let mut b = [0u8; 64];
                let period = file(b"/cpu.cfs_period_us\0", &mut b);
                cpus(parse_v1_number(&a[..quota?])?, parse_v1_number(&b[..period?])?)
            }
        }
    }

    /// The limit, read with raw system calls. Each file is open for the length of its
    /// read (a transient descriptor): this is the configuration's read, when the
    /// library starts, before the program has threads (the quota follower keeps its
    /// files instead: `runtime::scheduler::quota`).
    pub fn cpu_limit(&self) -> Option<usize> {
        self.cpu_limit_with(&mut |path, buf| crate::base::own_fds::read_file_nul(path, buf))
    }
}

/// Chooses, among the lines of mountinfo fed one at a time, the mount that shows the
/// group `path` of hierarchy `version`.
pub struct Placement<'a> {
    version: Version,
    path: &'a [u8],
    found: Option<Group>,
}

impl<'a> Placement<'a> {
    pub fn new(version: Version, path: &'a [u8]) -> Placement<'a> {
        Placement { version, path, found: None }
    }

    pub fn line(&mut self, line: &[u8]) {
        let Some(m) = parse_mountinfo_line(line) else { return };
        let ours = match self.version {
            Version::V1 => m.fstype == b"cgroup" && has_cpu(m.super_options),
            Version::V2 => m.fstype == b"cgroup2",
        };
        if !ours {
            return;
        }
        let mut root = PathBuf::new();
        if !root.set_unescaped(m.root) {
            return;
        }
        if matches!(&self.found, Some(g) if g.root_len <= root.len) {
            return; // one that shows as many ancestors or more was found first
        }
        let Some(rel) = below_root(self.path, root.as_slice()) else { return };
        let mut dir = PathBuf::new();
        if !dir.set_unescaped(m.point) {
            return;
        }
        if dir.as_slice() == b"/" {
            dir.len = 0; // files are `dir` + "/cpu.max"
        }
        let top = dir.len;
        if !dir.push(rel) {
            return;
        }
        self.found = Some(Group { version: self.version, dir, top, root_len: root.len });
    }

    pub fn group(self) -> Option<Group> {
        self.found
    }
}

/// `ceil(quota / period)` CPUs, at least 1; None for no limit (a period of 0).
pub fn cpus(quota: u64, period: u64) -> Option<usize> {
    if period == 0 {
        return None;
    }
    Some(usize::try_from(quota.div_ceil(period)).unwrap_or(usize::MAX).max(1))
}

/// v2 `cpu.max`: `max 100000` (no limit) or `QUOTA PERIOD`.
pub fn parse_v2_max(text: &[u8]) -> Option<usize> {
    let mut it = text.split(|b| b.is_ascii_whitespace()).filter(|s| !s.is_empty());
    let quota = it.next()?;
    let period = parse_u64(it.next()?)?;
    if quota == b"max" {
        return None;
    }
    cpus(parse_u64(quota)?, period)
}

/// A v1 `cpu.cfs_*_us` value; None for a negative one (`-1`: no limit) or garbage.
pub fn parse_v1_number(text: &[u8]) -> Option<u64> {
    parse_u64(text.trim_ascii())
}

fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')))
}

/// Feeds `f` each line of what `read` yields (a `read(2)`: bytes, 0 at the end, a
/// negative errno), through `buf`. A line longer than `buf` is dropped. None on a read
/// error, else whether a line was dropped.
pub fn each_line(mut read: impl FnMut(&mut [u8]) -> isize, buf: &mut [u8], mut f: impl FnMut(&[u8])) -> Option<bool> {
    let mut filled = 0;
    let mut dropping = false;
    let mut dropped = false;
    loop {
        if filled == buf.len() {
            filled = 0; // the line does not fit: skip to its end
            dropping = true;
            dropped = true;
        }
        let n = read(&mut buf[filled..]);
        if n == -(libc::EINTR as isize) {
            continue;
        }
        if n < 0 {
            return None;
        }
        if n == 0 {
            if filled > 0 && !dropping {
                f(&buf[..filled]);
            }
            return Some(dropped);
        }
        let end = filled + n as usize;
        let mut start = 0;
        while let Some(i) = buf[start..end].iter().position(|&b| b == b'\n') {
            if !dropping {
                f(&buf[start..start + i]);
            }
            dropping = false;
            start += i + 1;
        }
        buf.copy_within(start..end, 0);
        filled = end - start;
    }
}

/// [`each_line`] over a file read with raw system calls (a transient descriptor: read
/// when the library starts and when the quota follower is made, inside the program's
/// first `pthread_create`, where no other program thread opens).
fn each_line_of(path_nul: &[u8], buf: &mut [u8], f: impl FnMut(&[u8])) -> Option<bool> {
    let fd = crate::base::own_fds::open_nul(path_nul, libc::O_RDONLY)?;
    let r = each_line(|b| sys::read(fd, b), buf, f);
    crate::base::own_fds::close(fd);
    r
}

/// The process's own CPU group, found through `/proc/self/cgroup` and
/// `/proc/self/mountinfo`.
pub fn own_group() -> Option<Group> {
    let mut line = [0u8; LINE_CAP];
    let mut membership = Membership::new();
    if each_line_of(b"/proc/self/cgroup\0", &mut line, |l| membership.line(l))? {
        return None; // a dropped line may have been ours
    }
    let (version, path) = membership.group()?;
    let mut placement = Placement::new(version, path);
    each_line_of(b"/proc/self/mountinfo\0", &mut line, |l| placement.line(l))?;
    placement.group()
}

/// The CPU limit of the process's own cgroup, in whole CPUs; None if there is none or
/// it cannot be read.
pub fn cpu_limit() -> Option<usize> {
    own_group()?.cpu_limit()
}

#[cfg(test)]
mod tests;
