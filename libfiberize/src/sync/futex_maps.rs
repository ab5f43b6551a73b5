//! The table of the address space behind `sync::futex_shared`: `/proc/self/maps` read
//! into merged, sorted ranges, each shared (`s`) or private (`p`), and the search of
//! such a table. No locks here: the caller publishes and guards it.

use core::sync::atomic::{AtomicI32, Ordering};

use crate::base::sys;

/// Ranges the table holds. Origin: a guess with room, not a measurement: adjacent
/// mappings of one kind merge, so the count is about the number of holes and shared
/// mappings; past it the table keeps only the shared ranges. The two 32 KiB arrays are
/// zeroed `.bss`, untouched until the first table is read.
pub const CAP: usize = 4096;

/// The answer for one address.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Class {
    /// In a `p` mapping: only this process's threads can use the word.
    Private,
    /// In an `s` mapping: the kernel serves it.
    Shared,
    /// In no range of the table.
    Unknown,
}

/// Bit 0 of a stored start: the range is shared (starts are page-aligned).
pub const SHARED_BIT: usize = 1;

/// Binary search over `len` sorted ranges given by `at(i) = (start | shared bit, end)`.
pub fn search(len: usize, at: impl Fn(usize) -> (usize, usize), addr: usize) -> Class {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let (s, e) = at(mid);
        if addr < s & !SHARED_BIT {
            hi = mid;
        } else if addr >= e {
            lo = mid + 1;
        } else {
            return if s & SHARED_BIT != 0 { Class::Shared } else { Class::Private };
        }
    }
    Class::Unknown
}

/// `/proc/self/maps`, kept open from the pool's start ([`keep_maps_open`]) out of the
/// way of the program's numbers, and read with `pread` from offset 0, which makes the
/// kernel walk the mappings afresh; -1: not kept. Opened at each read, it took the
/// lowest free number for the length of the read, while the program's other threads
/// ran: one of them that opened a file then got a number it would not natively.
static KEPT_MAPS: AtomicI32 = AtomicI32::new(-1);

const MAPS_PATH: &[u8] = b"/proc/self/maps\0";

/// Opens the kept `/proc/self/maps` ([`KEPT_MAPS`]). Called where no program thread
/// can open a descriptor at the same moment: when the pool starts (inside the
/// program's first `pthread_create`) and in a forked child's fork hook.
pub fn keep_maps_open() {
    if KEPT_MAPS.load(Ordering::Acquire) >= 0 {
        return;
    }
    if let Some(fd) = crate::base::own_fds::open_nul_out_of_the_way(MAPS_PATH, libc::O_RDONLY) {
        KEPT_MAPS.store(fd, Ordering::Release);
        crate::base::own_fds::hold(&KEPT_MAPS);
    }
}

/// In a forked child, after `base::own_fds` closed the parent's descriptors: the kept
/// file named the parent (`/proc/self` is resolved at the open), so the child's own
/// is opened, if the parent kept one.
pub fn reopen_in_forked_child() {
    if KEPT_MAPS.swap(-1, Ordering::AcqRel) >= 0 {
        keep_maps_open();
    }
}

/// Reads `/proc/self/maps` into `t` (only its shared ranges if `shared_only`):
/// whether it was read whole and well formed.
pub fn read_maps(t: &mut Ranges, shared_only: bool) -> bool {
    let kept = KEPT_MAPS.load(Ordering::Acquire);
    if kept < 0 {
        // Not kept: before the pool starts (the program's only thread is the caller, so
        // no other thread of it can open a descriptor meanwhile), or the open at the
        // start failed (no room for a descriptor: then this one fails as well, most
        // likely).
        let Some(fd) = crate::base::own_fds::open_nul(MAPS_PATH, libc::O_RDONLY) else {
            t.clear(shared_only);
            return false;
        };
        let ok = read_maps_from(fd, t, shared_only);
        crate::base::own_fds::close(fd);
        return ok;
    }
    // The program's `dup2` onto the kept number moves the file (`base::own_fds`): a read
    // that began on the old number read the program's file, so it is made again once.
    read_maps_from(kept, t, shared_only) || {
        let now = KEPT_MAPS.load(Ordering::Acquire);
        now != kept && now >= 0 && read_maps_from(now, t, shared_only)
    }
}

fn read_maps_from(fd: i32, t: &mut Ranges, shared_only: bool) -> bool {
    t.clear(shared_only);
    let mut parser = Parser::new();
    let mut buf = [0u8; 4096];
    let mut offset = 0u64;
    loop {
        let n = sys::pread64(fd, &mut buf, offset);
        if n == -(libc::EINTR as isize) {
            continue;
        }
        if n < 0 {
            return false;
        }
        if n == 0 {
            return parser.finish(t);
        }
        offset += n as u64;
        parser.feed(&buf[..n as usize], t);
    }
}

/// A table of merged, sorted ranges being built.
pub struct Ranges {
    pub starts: [usize; CAP],
    pub ends: [usize; CAP],
    pub len: usize,
    pub shared_only: bool,
    pub overflowed: bool,
}

impl Ranges {
    pub const fn new() -> Ranges {
        Ranges { starts: [0; CAP], ends: [0; CAP], len: 0, shared_only: false, overflowed: false }
    }

    fn clear(&mut self, shared_only: bool) {
        self.len = 0;
        self.shared_only = shared_only;
        self.overflowed = false;
    }

    /// Adds the mapping `[start, end)`; mappings come in ascending order.
    fn push(&mut self, start: usize, end: usize, shared: bool) {
        if (self.shared_only && !shared) || end <= start || start & SHARED_BIT != 0 {
            return;
        }
        if let Some(last) = self.len.checked_sub(1) {
            if start < self.ends[last] {
                return; // out of order (the file changed while read): the next bump rereads
            }
            if start == self.ends[last] && (self.starts[last] & SHARED_BIT != 0) == shared {
                self.ends[last] = end;
                return;
            }
        }
        if self.len == CAP {
            self.overflowed = true;
            return;
        }
        self.starts[self.len] = start | if shared { SHARED_BIT } else { 0 };
        self.ends[self.len] = end;
        self.len += 1;
    }

    /// The class of `addr` in this table.
    pub fn class(&self, addr: usize) -> Class {
        let c = search(self.len, |i| (self.starts[i], self.ends[i]), addr);
        if self.shared_only && c == Class::Unknown {
            Class::Private
        } else {
            c
        }
    }
}

impl Default for Ranges {
    fn default() -> Self {
        Self::new()
    }
}

/// A streaming reader of `/proc/self/maps` lines (`start-end perms …`): only the
/// first two fields matter, so no line buffer is needed however long the path.
struct Parser {
    field: u8,
    start: usize,
    end: usize,
    perm: u8,
    shared: bool,
    bad: bool,
}

impl Parser {
    fn new() -> Parser {
        Parser { field: 0, start: 0, end: 0, perm: 0, shared: false, bad: false }
    }

    fn feed(&mut self, bytes: &[u8], t: &mut Ranges) {
        for &b in bytes {
            match (self.field, b) {
                (_, b'\n') => {
                    if self.field >= 2 && !self.bad {
                        t.push(self.start, self.end, self.shared);
                    } else if self.field > 0 || self.start != 0 {
                        self.bad = true;
                    }
                    let bad = self.bad;
                    *self = Parser::new();
                    self.bad = bad;
                }
                (0, b'-') => self.field = 1,
                (0, _) => match hex(b) {
                    Some(d) => self.start = self.start.wrapping_shl(4) | d,
                    None => self.bad = true,
                },
                (1, b' ') => self.field = 2,
                (1, _) => match hex(b) {
                    Some(d) => self.end = self.end.wrapping_shl(4) | d,
                    None => self.bad = true,
                },
                (2, b' ') => self.field = 3,
                (2, _) => {
                    if self.perm == 3 {
                        self.shared = b == b's';
                    }
                    self.perm += 1;
                }
                _ => {}
            }
        }
    }

    /// The end of the file: whether every line was well formed.
    fn finish(&mut self, t: &mut Ranges) -> bool {
        if self.field != 0 {
            self.feed(b"\n", t);
        }
        !self.bad
    }
}

fn hex(b: u8) -> Option<usize> {
    (b as char).to_digit(16).map(|d| d as usize)
}

/// A test's anonymous read-write page of type `kind` (`MAP_SHARED`, `MAP_PRIVATE`),
/// at `hint` (an address only, never dereferenced) if the kernel gives it; the test
/// unmaps it.
#[cfg(test)]
pub fn anonymous_page(hint: usize, kind: libc::c_int) -> *mut libc::c_void {
    // SAFETY: a new anonymous mapping; without MAP_FIXED it replaces nothing.
    let p = unsafe { libc::mmap(hint as *mut _, 4096, libc::PROT_READ | libc::PROT_WRITE, kind | libc::MAP_ANONYMOUS, -1, 0) };
    assert_ne!(p, libc::MAP_FAILED);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Box<Ranges> {
        let mut t = Box::new(Ranges::new());
        let mut p = Parser::new();
        for chunk in text.as_bytes().chunks(7) {
            p.feed(chunk, &mut t);
        }
        assert!(p.finish(&mut t));
        t
    }

    const MAPS: &str = "\
55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]
7f0000000000-7f0000001000 rw-s 00000000 00:01 1234                       /dev/zero (deleted)
7f0000001000-7f0000002000 rw-s 00000000 00:05 98                         /SYSV00000000 (deleted)
7f0000002000-7f0000003000 r--p 00000000 08:01 77                         /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000003000-7f0000004000 r-xp 00001000 08:01 77                         /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000010000-7f0000011000 rw-s 00000000 00:01 5                          /memfd:ring (deleted)
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]
";

    #[test]
    fn shared_private_and_holes() {
        let t = table(MAPS);
        assert_eq!(t.class(0x55d0c0a00000), Class::Private);
        assert_eq!(t.class(0x55d0c0a20ffc), Class::Private);
        assert_eq!(t.class(0x55d0c0a21000), Class::Unknown);
        assert_eq!(t.class(0x7f0000000000), Class::Shared);
        assert_eq!(t.class(0x7f0000001ffc), Class::Shared);
        assert_eq!(t.class(0x7f0000002000), Class::Private);
        assert_eq!(t.class(0x7f0000003ffc), Class::Private);
        assert_eq!(t.class(0x7f0000004000), Class::Unknown);
        assert_eq!(t.class(0x7f0000010800), Class::Shared);
        assert_eq!(t.class(0x7ffc00000100), Class::Private);
        assert_eq!(t.class(0), Class::Unknown);
        assert_eq!(t.class(usize::MAX & !3), Class::Unknown);
    }

    #[test]
    fn adjacent_ranges_of_one_kind_merge() {
        let t = table(MAPS);
        // heap | two shared | two libc | memfd | stack
        assert_eq!(t.len, 5);
    }

    #[test]
    fn shared_only_table_counts_the_rest_private() {
        let mut t = Box::new(Ranges::new());
        t.clear(true);
        let mut p = Parser::new();
        p.feed(MAPS.as_bytes(), &mut t);
        assert!(p.finish(&mut t));
        assert_eq!(t.len, 2);
        assert_eq!(t.class(0x7f0000000800), Class::Shared);
        assert_eq!(t.class(0x55d0c0a00000), Class::Private);
        assert_eq!(t.class(0x1000), Class::Private);
    }

    #[test]
    fn overflow_is_noticed() {
        let mut t = Box::new(Ranges::new());
        for i in 0..=CAP {
            t.push(0x10000 + i * 0x2000, 0x11000 + i * 0x2000, false);
        }
        assert!(t.overflowed);
        assert_eq!(t.len, CAP);
    }

    #[test]
    fn a_garbled_line_fails_the_read() {
        let mut t = Box::new(Ranges::new());
        let mut p = Parser::new();
        p.feed(b"zz-1000 rw-p 0 0 0\n", &mut t);
        assert!(!p.finish(&mut t));
    }

    #[test]
    fn a_last_line_without_newline_counts() {
        let t = table("1000-2000 rw-s 0 0 0");
        assert_eq!(t.class(0x1800), Class::Shared);
    }

    #[test]
    fn this_process_reads_its_own_maps() {
        let mut t = Box::new(Ranges::new());
        assert!(read_maps(&mut t, false));
        let local = 0u32;
        assert_eq!(t.class(&local as *const u32 as usize), Class::Private);
        let heap = Box::new(0u32);
        assert_eq!(t.class(&*heap as *const u32 as usize), Class::Private);
        let p = anonymous_page(0, libc::MAP_SHARED);
        assert!(read_maps(&mut t, false));
        assert_eq!(t.class(p as usize), Class::Shared);
        // SAFETY: the page mapped above.
        unsafe { libc::munmap(p, 4096) };
    }
}
