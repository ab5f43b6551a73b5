//! Which futex words without `FUTEX_PRIVATE_FLAG` the runtime may serve itself.
//!
//! # The rule
//!
//! A futex operation *without* the private flag ("shared" in the kernel's words) may
//! have waiters and wakers in other processes only if its word lies in memory that
//! another process can see: a `MAP_SHARED` mapping (anonymous, of a file, of a memfd,
//! of `/dev/shm`) or a SysV segment attached with `shmat`. Every such mapping shows an
//! `s` in the permissions column of `/proc/self/maps`; private memory (`p`: the heap,
//! stacks, `MAP_PRIVATE` mappings, also after a fork, which copies them) can only be
//! touched by this process's threads. So a non-private `FUTEX_WAIT`/`FUTEX_WAKE` on a
//! word outside every `s` mapping is served by the parking lot exactly as a private
//! one is (`sync::futex`), and only words in `s` mappings go to the kernel. libstdc++ 12
//! waits without the private flag in `std::atomic::wait`, `std::latch`, `std::barrier`,
//! `std::counting_semaphore` and `std::atomic_flag::wait`; before this rule each such
//! wait blocked a worker and the monitor brought in spares.
//!
//! The kernel keys the two kinds apart (a `FUTEX_WAKE_PRIVATE` does not wake a
//! non-private waiter on the same word), so the emulation parks non-private waiters
//! under the word's address with [`KEY_TAG`] set: a key no private futex, lock or
//! condition variable (all 4-aligned) can have.
//!
//! # The table
//!
//! Lookups must be cheap: a `notify_one` with nobody waiting is a few loads in
//! libstdc++ and should stay near that. So the answer comes from a table of the
//! address space, built from `/proc/self/maps` when it is first needed and again only
//! when it may be wrong: adjacent mappings of the same kind are merged into one range,
//! each marked shared or private, and holes stay holes. A lookup is a binary search
//! under a sequence lock (no lock, no allocation, no system call).
//!
//! The table may be wrong in two ways, and each has its remedy:
//!
//! * **A mapping changed through a call we see.** The library's `mmap`, `mmap64`,
//!   `munmap`, `mremap`, `shmat`, `shmdt` exports and `syscall()` with those numbers
//!   bump a generation counter ([`mapping_changed`]) after the real call, when the
//!   change can touch a shared range: every `mremap`, `shmat`, `shmdt`; an `mmap`
//!   that is `MAP_SHARED` or `MAP_FIXED` (a non-fixed private mapping only fills a
//!   hole, which the table did not count as shared); a `munmap` that overlaps a shared
//!   range of the table, or any `munmap` while the table is already out of date. A
//!   lookup that finds the table older than the counter rebuilds it first. The bump
//!   happens before `mmap` returns, so a thread that learns the new address from the
//!   mapping thread sees the bump too.
//! * **A mapping appeared through a call we do not see**: glibc's own inline `mmap`
//!   (`malloc`'s large blocks and arenas, `sem_open`), or a library's inline system
//!   call. Such a mapping lands in what the table knows as a hole, so an address in no
//!   range means "the table is too old": the table is rebuilt and asked again, and an
//!   address still in no range (unmapped: the kernel answers `EFAULT`) goes to the
//!   kernel.
//!
//! Once an address is answered, it keeps its answer while its mapping lives: a
//! rebuild reads the same `s` or `p` for it. That matters: a waiter parked in the
//! library is never woken by a wake that went to the kernel, and the reverse. (When a
//! mapping is replaced, the kernel's own futex keys change as well, so a waiter on the
//! old mapping is not woken natively either.) For the same reason a failure to read
//! `/proc/self/maps` freezes the table for good: addresses it knew as private stay
//! emulated, everything else goes to the kernel, and nothing flips later.
//!
//! # Designs rejected
//!
//! * *Every non-private futex to the kernel* (before): correct, but every C++20 wait
//!   blocks a worker (a 200-thread program ran on 5 to 11 kernel threads with 10
//!   spare workers).
//! * *Every non-private futex emulated*: a word in a `MAP_SHARED` page waited on by a
//!   parent and woken by its child (or by any other process) would never wake.
//! * *Asking the kernel per call* (`mincore`, `process_madvise`, reading
//!   `/proc/self/map_files`, `get_mempolicy`): a system call per wake, and none of
//!   them tells shared from private cheaply.
//! * *Only a list of the shared ranges* (no holes): cheaper to build, but a shared
//!   mapping made by an inline `mmap` (glibc's `sem_open`) would look private until
//!   the next tracked change. Holes let a lookup notice that the table is too old.
//!   The full table is kept while it fits [`CAP`] ranges; past that the table keeps
//!   only the shared ranges (and that blind spot).
//! * *A per-thread cache of the last answer*: a thread's TLS may be borrowed by its
//!   fiber, and the sequence-locked search is already a few dozen loads.
//!
//! # Limits
//!
//! * A word the kernel itself wakes without the private flag while a program waits
//!   on it through `syscall()` (a `CLONE_CHILD_CLEARTID` word of a thread the program
//!   made with a raw `clone`, a robust-list entry) is not woken: the waiter is parked
//!   in the library. glibc's own waits of that kind use inline system calls and never
//!   come here.
//! * A two-word operation (`FUTEX_WAKE_OP`, `FUTEX_CMP_REQUEUE`) is emulated only if
//!   both words are private; otherwise both go to the kernel.
//! * A shared mapping made by an inline system call in a range that the table holds
//!   as private (one unmapped by an inline `munmap`) looks private until the next
//!   tracked change.

use core::cell::UnsafeCell;
use core::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::base::rawlock::RawMutex;
use crate::base::stats::{bump, STATS};
use crate::base::sys;

/// Set in the parking-lot key of a non-private futex (the word's address is 4-aligned).
pub const KEY_TAG: usize = 1;

/// Ranges the table holds. Origin: a JVM with 500 threads maps about 1 500 ranges,
/// merged about 1 000; 4 096 leaves room, and 64 KiB of zeroed `.bss` costs nothing
/// until used.
pub const CAP: usize = 4096;

/// Bit 0 of a stored start: the range is shared (starts are page-aligned).
const SHARED_BIT: usize = 1;

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

/// Bumped by every mapping change that may touch a shared range.
static GENERATION: AtomicU64 = AtomicU64::new(1);
/// Odd while the published table is being rewritten.
static SEQ: AtomicU64 = AtomicU64::new(0);
/// The generation the published table was read at (0: never built).
static BUILT_AT: AtomicU64 = AtomicU64::new(0);
static LEN: AtomicUsize = AtomicUsize::new(0);
/// The published table holds only shared ranges (it overflowed [`CAP`]).
static SHARED_ONLY: AtomicBool = AtomicBool::new(false);
/// `/proc/self/maps` could not be read: the table is frozen (see the module's essay).
static FROZEN: AtomicBool = AtomicBool::new(false);
static STARTS: [AtomicUsize; CAP] = [const { AtomicUsize::new(0) }; CAP];
static ENDS: [AtomicUsize; CAP] = [const { AtomicUsize::new(0) }; CAP];

/// The builder's scratch table, used under [`BUILDER`].
struct Scratch(UnsafeCell<Ranges>);
// SAFETY: only touched while holding BUILDER.
unsafe impl Sync for Scratch {}
static BUILDER: RawMutex = RawMutex::new();
static SCRATCH: Scratch = Scratch(UnsafeCell::new(Ranges::new()));

/// Whether a non-private futex operation on `addr` is served by the parking lot.
#[inline]
pub fn emulate(addr: usize) -> bool {
    match lookup(addr) {
        Some(Class::Private) => true,
        Some(Class::Shared) => false,
        _ => emulate_slow(addr),
    }
}

/// The table's answer if the table is current (or frozen), else None.
#[inline]
fn lookup(addr: usize) -> Option<Class> {
    let gen = GENERATION.load(Ordering::Acquire);
    let (class, built) = read_published(addr);
    (built == gen || FROZEN.load(Ordering::Relaxed)).then_some(class)
}

/// Searches the published table under the sequence lock: (class, generation built at).
fn read_published(addr: usize) -> (Class, u64) {
    loop {
        let s1 = SEQ.load(Ordering::Acquire);
        if s1 & 1 != 0 {
            sys::cpu_relax();
            continue;
        }
        let built = BUILT_AT.load(Ordering::Relaxed);
        let len = LEN.load(Ordering::Relaxed).min(CAP);
        let shared_only = SHARED_ONLY.load(Ordering::Relaxed);
        let class = search(len, |i| (STARTS[i].load(Ordering::Relaxed), ENDS[i].load(Ordering::Relaxed)), addr);
        let class = if shared_only && class == Class::Unknown { Class::Private } else { class };
        fence(Ordering::Acquire);
        if SEQ.load(Ordering::Relaxed) == s1 {
            return (class, built);
        }
    }
}

/// Binary search over `len` sorted ranges given by `at(i) = (start | shared bit, end)`.
fn search(len: usize, at: impl Fn(usize) -> (usize, usize), addr: usize) -> Class {
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

#[cold]
fn emulate_slow(addr: usize) -> bool {
    BUILDER.lock();
    // Another thread may have rebuilt while we waited.
    let class = match lookup(addr) {
        Some(c @ (Class::Private | Class::Shared)) => c,
        _ if FROZEN.load(Ordering::Relaxed) => read_published(addr).0,
        _ => {
            rebuild();
            // Fresh from /proc/self/maps, read after the caller's word was mapped: its
            // answer holds even if another change bumped the counter meanwhile.
            read_published(addr).0
        }
    };
    BUILDER.unlock();
    class == Class::Private
}

/// Rereads `/proc/self/maps` into the published table. Under [`BUILDER`].
fn rebuild() {
    bump(&STATS.futex_maps_reads);
    let gen = GENERATION.load(Ordering::Acquire);
    // SAFETY: we hold BUILDER, the scratch table's lock.
    let scratch = unsafe { &mut *SCRATCH.0.get() };
    let mut ok = read_maps(scratch, false);
    if ok && scratch.overflowed {
        ok = read_maps(scratch, true);
    }
    if !ok || scratch.overflowed {
        // Keep the old table's answers; nothing flips from now on.
        FROZEN.store(true, Ordering::Relaxed);
        return;
    }
    let s = SEQ.load(Ordering::Relaxed);
    SEQ.store(s + 1, Ordering::Relaxed);
    fence(Ordering::Release);
    for i in 0..scratch.len {
        STARTS[i].store(scratch.starts[i], Ordering::Relaxed);
        ENDS[i].store(scratch.ends[i], Ordering::Relaxed);
    }
    LEN.store(scratch.len, Ordering::Relaxed);
    SHARED_ONLY.store(scratch.shared_only, Ordering::Relaxed);
    BUILT_AT.store(gen, Ordering::Relaxed);
    SEQ.store(s + 2, Ordering::Release);
}

fn read_maps(t: &mut Ranges, shared_only: bool) -> bool {
    t.clear(shared_only);
    let Some(fd) = sys::open_nul(b"/proc/self/maps\0", libc::O_RDONLY) else {
        return false;
    };
    let mut parser = Parser::new();
    let mut buf = [0u8; 4096];
    let ok = loop {
        let n = sys::read(fd, &mut buf);
        if n == -(libc::EINTR as isize) {
            continue;
        }
        if n < 0 {
            break false;
        }
        if n == 0 {
            break parser.finish(t);
        }
        parser.feed(&buf[..n as usize], t);
    };
    sys::close(fd);
    ok
}

/// A mapping change may have touched a shared range (see the module's essay).
#[inline]
pub fn mapping_changed() {
    GENERATION.fetch_add(1, Ordering::Release);
}

/// After a successful `mmap` with `flags`.
#[inline]
pub fn after_mmap(flags: libc::c_int) {
    if flags & (libc::MAP_SHARED | libc::MAP_SHARED_VALIDATE | libc::MAP_FIXED) != 0 {
        mapping_changed();
    }
}

/// After a successful `munmap(addr, len)`.
#[inline]
pub fn after_munmap(addr: usize, len: usize) {
    let gen = GENERATION.load(Ordering::Acquire);
    if BUILT_AT.load(Ordering::Acquire) == 0 {
        return; // no table yet: it will be read after this change anyway
    }
    let end = addr.saturating_add(len);
    let touches_shared = loop {
        let s1 = SEQ.load(Ordering::Acquire);
        if s1 & 1 != 0 {
            sys::cpu_relax();
            continue;
        }
        let current = BUILT_AT.load(Ordering::Relaxed) == gen;
        let len = LEN.load(Ordering::Relaxed).min(CAP);
        let hit = !current
            || (0..len).any(|i| {
                let s = STARTS[i].load(Ordering::Relaxed);
                s & SHARED_BIT != 0 && s & !SHARED_BIT < end && ENDS[i].load(Ordering::Relaxed) > addr
            });
        fence(Ordering::Acquire);
        if SEQ.load(Ordering::Relaxed) == s1 {
            break hit;
        }
    };
    if touches_shared {
        mapping_changed();
    }
}

/// After a successful raw `syscall(nr, a1, a2, a3, a4, …)` (the program's own).
#[inline]
pub fn after_syscall(nr: libc::c_long, a1: libc::c_long, a2: libc::c_long, a4: libc::c_long) {
    match nr {
        libc::SYS_mmap => after_mmap(a4 as libc::c_int),
        libc::SYS_munmap => after_munmap(a1 as usize, a2 as usize),
        libc::SYS_mremap | libc::SYS_shmat | libc::SYS_shmdt => mapping_changed(),
        _ => {}
    }
}

/// In a forked child (its only thread, inside fork): a builder that was copied in
/// the middle of its work no longer exists. The child's mappings are the parent's
/// (shared ones still shared), so a finished table stays right.
pub fn reset_in_forked_child() {
    BUILDER.reset_in_forked_child();
    let s = SEQ.load(Ordering::Relaxed);
    if s & 1 != 0 {
        LEN.store(0, Ordering::Relaxed);
        BUILT_AT.store(0, Ordering::Relaxed);
        SEQ.store(s + 1, Ordering::Relaxed);
    }
}

/// A table of merged, sorted ranges being built.
pub struct Ranges {
    starts: [usize; CAP],
    ends: [usize; CAP],
    len: usize,
    shared_only: bool,
    overflowed: bool,
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
        // SAFETY: an anonymous shared page, unmapped below.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        assert!(read_maps(&mut t, false));
        assert_eq!(t.class(p as usize), Class::Shared);
        // SAFETY: the page mapped above.
        unsafe { libc::munmap(p, 4096) };
    }

    #[test]
    fn the_published_table_follows_mapping_changes() {
        let local = 0u32;
        assert!(emulate(&local as *const u32 as usize));
        // SAFETY: an anonymous shared page, unmapped below.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        // Not told of the mapping: it lands in a hole, and the lookup rereads the maps.
        assert!(!emulate(p as usize));
        // SAFETY: the page mapped above.
        unsafe { libc::munmap(p, 4096) };
        after_munmap(p as usize, 4096);
        // SAFETY: a private page at the same place if the kernel gives it, unmapped below.
        let q =
            unsafe { libc::mmap(p, 4096, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
        assert_ne!(q, libc::MAP_FAILED);
        assert!(emulate(q as usize));
        // SAFETY: the page mapped above.
        unsafe { libc::munmap(q, 4096) };
        assert!(!emulate(0x10), "an unmapped address goes to the kernel");
    }
}
