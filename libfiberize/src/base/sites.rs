//! The report's raw material (`FIBERIZE_REPORT`, rendered by `crate::observe::report`):
//! a fixed table of places where the program waited, and the capture of the
//! program's call site.
//!
//! # Cost
//!
//! Off by default: every recording path starts with [`on`], one relaxed load. On, a
//! record is two relaxed atomic adds on the entry's line, timed with the monitor's
//! 1 ms clock ([`now`]); the call site is captured (a stack scan, no symbol lookup) only when an
//! entry is made, and names are looked up only when the report is written.
//! (Walking frame pointers would be exact, but building the library with them cost the
//! uncontended lock path: docs/RESULTS.md#report-clock.)
//!
//! # The table
//!
//! [`SLOTS`] entries, open addressing on (kind, key): the key is the lock's address
//! for lock waits (so that one lock is one entry, named by the call site of its first
//! contended wait), the program's call site for blocked workers and slow file I/O,
//! the start routine for demoted fibers. An entry is claimed with one CAS and never
//! freed; when the table is full, records are counted in [`DROPPED`] and lost.
//!
//! # Call sites
//!
//! [`program_returns`] finds the program's return address on a stack (the caller's own,
//! [`program_call_site`], or a blocked worker's), read through `process_vm_readv`,
//! which fails instead of faulting on unmapped memory: the first
//! word that points into the executable code of an object that is not the C library,
//! the loader, the C++ runtime or libfiberize, just after a call instruction; and when
//! that is in a shared object (liburing, say), the first one into the main executable.

use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// What an entry counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Kind {
    /// A worker blocked in a call the library does not intercept (the monitor saw it).
    BlockedWorker = 1,
    /// A regular-file read or write that ran on the worker and was slow.
    SlowFileIo = 2,
    /// Waits on a mutex.
    Mutex = 3,
    /// Waits on a rwlock.
    RwLock = 4,
    /// Waits on a condition variable.
    Cond = 5,
    /// A fiber handed to its donor for good (blocked its worker too often).
    Demoted = 6,
}

pub struct Entry {
    /// `kind` (low 3 bits) | key << 3; 0: free.
    tag: AtomicUsize,
    /// The program's call site (0: not known yet or not found).
    pub site: AtomicUsize,
    /// For blocked workers: the instruction that blocked (in the C library, mostly).
    pub pc: AtomicUsize,
    /// For blocked workers: the system call number.
    pub detail: AtomicU64,
    /// For blocked workers whose call site is in a shared library (liburing, say): the
    /// first return address into the main executable above it (0: none found).
    pub outer_site: AtomicUsize,
    pub count: AtomicU64,
    /// Total and longest time, in ns of the report's clock ([`now`]).
    pub total_ns: AtomicU64,
    pub max_ns: AtomicU64,
}

impl Entry {
    pub fn kind(&self) -> usize {
        self.tag.load(Relaxed) & 7
    }
    pub fn key(&self) -> usize {
        self.tag.load(Relaxed) >> 3
    }
    /// Adds one more of what the entry counts, `t` ns long.
    pub fn add(&self, t: u64) {
        self.count.fetch_add(1, Relaxed);
        self.add_time(t);
    }
    pub fn add_time(&self, t: u64) {
        self.total_ns.fetch_add(t, Relaxed);
        // A load, and a store only for a new longest: no read-modify-write on the hot
        // path (two waits racing to set a new longest may leave the shorter one).
        if t > self.max_ns.load(Relaxed) {
            self.max_ns.store(t, Relaxed);
        }
    }
}

/// Entries in the table. Origin: a program's distinct contended locks and blocking
/// call sites are tens to a few hundred (MariaDB under sysbench included).
pub const SLOTS: usize = 2048;

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Entry = Entry {
    tag: AtomicUsize::new(0),
    site: AtomicUsize::new(0),
    pc: AtomicUsize::new(0),
    detail: AtomicU64::new(0),
    outer_site: AtomicUsize::new(0),
    count: AtomicU64::new(0),
    total_ns: AtomicU64::new(0),
    max_ns: AtomicU64::new(0),
};
static TABLE: [Entry; SLOTS] = [EMPTY; SLOTS];
/// Records lost to a full table.
pub static DROPPED: AtomicU64 = AtomicU64::new(0);
static ON: AtomicBool = AtomicBool::new(false);

/// Whether the report is being collected.
#[inline]
pub fn on() -> bool {
    ON.load(Relaxed)
}

/// Starts collecting (the pool's start does, when `FIBERIZE_REPORT` is set): first
/// the code ranges that tell program code from ours and the C library's.
pub fn start() {
    collect_code_ranges();
    set_now(crate::base::sys::now_ns());
    ON.store(true, Relaxed);
}

/// The report's clock: CLOCK_MONOTONIC in ns as of the monitor's last tick (1 ms),
/// so that timing a wait costs two relaxed loads. Reading a clock (or `rdtsc`, trapped
/// by a hypervisor) on the hot paths cost a condvar ping-pong a large share of its rate
/// with two reads per wait and per run (docs/RESULTS.md#report-clock). Waits
/// shorter than a tick count as 0 or 1 tick with the probability of crossing one, so
/// totals stay right on average; a longest wait is right to a tick.
static NOW: AtomicU64 = AtomicU64::new(0);

/// The report's clock (see [`NOW`]).
#[inline]
pub fn now() -> u64 {
    NOW.load(Relaxed)
}

/// Advances the report's clock (the monitor, every tick).
pub fn set_now(ns: u64) {
    NOW.store(ns, Relaxed);
}

/// The entry for (kind, key), made if new; `site` is called to name a new entry.
/// None when the table is full.
pub fn entry(kind: Kind, key: usize, site: impl FnOnce() -> usize) -> Option<&'static Entry> {
    let tag = (kind as usize) | (key << 3);
    let mut i = (tag.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) % SLOTS;
    for _ in 0..SLOTS {
        let e = &TABLE[i];
        // A plain load first: a CAS on a taken slot would take its line exclusively.
        match e.tag.load(Relaxed) {
            t if t == tag => return Some(e),
            0 => {}
            _ => {
                i = (i + 1) % SLOTS;
                continue;
            }
        }
        match e.tag.compare_exchange(0, tag, Relaxed, Relaxed) {
            Ok(_) => {
                e.site.store(site(), Relaxed);
                return Some(e);
            }
            Err(t) if t == tag => return Some(e),
            Err(_) => i = (i + 1) % SLOTS,
        }
    }
    DROPPED.fetch_add(1, Relaxed);
    None
}

/// Every entry in use.
pub fn entries() -> impl Iterator<Item = &'static Entry> {
    TABLE.iter().filter(|e| e.tag.load(Relaxed) != 0)
}

// ---------------------------------------------------------------------------------
// Code ranges and call sites
// ---------------------------------------------------------------------------------

/// Executable ranges of the loaded objects: (start, end, library) where `library` is
/// the C library, the loader, the C++ runtime or libfiberize (not the program's code).
/// The main executable's ranges come first (`dl_iterate_phdr` reports it first).
const MAX_RANGES: usize = 256;
static RANGES: [(AtomicUsize, AtomicUsize, AtomicBool); MAX_RANGES] =
    [const { (AtomicUsize::new(0), AtomicUsize::new(0), AtomicBool::new(false)) }; MAX_RANGES];
/// How many of the first ranges are the main executable's.
static MAIN_RANGES: AtomicUsize = AtomicUsize::new(0);
static NUM_RANGES: AtomicUsize = AtomicUsize::new(0);
/// Objects whose code is never "the program's call site".
const LIBRARIES: &[&[u8]] = &[b"libc.so", b"ld-linux", b"libpthread", b"libstdc++", b"libgcc_s", b"libfiberize", b"libdl."];

fn collect_code_ranges() {
    if NUM_RANGES.load(Relaxed) != 0 {
        return;
    }
    // SAFETY: `one_object` matches the callback type and only reads what the loader passes.
    unsafe { libc::dl_iterate_phdr(Some(one_object), core::ptr::null_mut()) };
}

unsafe extern "C" fn one_object(info: *mut libc::dl_phdr_info, _size: usize, _data: *mut libc::c_void) -> libc::c_int {
    // SAFETY: the loader passes a valid dl_phdr_info for the duration of the call.
    let info = unsafe { &*info };
    let name: &[u8] = if info.dlpi_name.is_null() {
        b""
    } else {
        // SAFETY: a NUL-terminated path owned by the loader.
        unsafe { core::ffi::CStr::from_ptr(info.dlpi_name) }.to_bytes()
    };
    let base_name = name.rsplit(|&c| c == b'/').next().unwrap_or(name);
    // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
    let phdrs = unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    let own = collect_code_ranges as *const () as usize;
    let ranges = phdrs.iter().filter(|ph| ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0).map(|ph| {
        let start = info.dlpi_addr as usize + ph.p_vaddr as usize;
        (start, start + ph.p_memsz as usize)
    });
    let is_self = ranges.clone().any(|(s, e)| (s..e).contains(&own));
    let library = is_self || LIBRARIES.iter().any(|l| base_name.starts_with(l));
    let main_executable = NUM_RANGES.load(Relaxed) == 0;
    for (s, e) in ranges {
        let n = NUM_RANGES.load(Relaxed);
        if n == MAX_RANGES {
            break;
        }
        RANGES[n].0.store(s, Relaxed);
        RANGES[n].1.store(e, Relaxed);
        RANGES[n].2.store(library, Relaxed);
        NUM_RANGES.store(n + 1, Relaxed);
        if main_executable {
            MAIN_RANGES.store(n + 1, Relaxed);
        }
    }
    0
}

/// Some(true) for library code, Some(false) for the program's, None for no code known.
fn code_owner(addr: usize) -> Option<bool> {
    let n = NUM_RANGES.load(Relaxed);
    RANGES[..n].iter().find(|(s, e, _)| addr >= s.load(Relaxed) && addr < e.load(Relaxed)).map(|(_, _, lib)| lib.load(Relaxed))
}

/// Whether `addr` is in the program's executable code (not a library's).
pub fn is_program_code(addr: usize) -> bool {
    code_owner(addr) == Some(false)
}

/// The program's call site of the library call the caller is in: the first return
/// address into the program's code on the caller's own stack (see [`program_returns`];
/// our own frames hold no program code addresses just after a call, except stale ones
/// left by earlier deeper calls, which are program call sites too). 0 if none.
#[inline(never)]
pub fn program_call_site() -> usize {
    let here = 0u8;
    program_returns(&here as *const u8 as usize, 2048).0
}

/// The first word on the stack above `sp` (up to `words` words) that points into the
/// program's executable code just after a call: the return address into the program
/// of a thread blocked in a library call; and, if that one is in a shared object, the
/// first such return address into the main executable. Reads with `process_vm_readv`
/// on our own process, so an unmapped page ends the search instead of faulting. 0 for
/// none found.
pub fn program_returns(sp: usize, words: usize) -> (usize, usize) {
    // Read in small chunks: this runs on fiber stacks, which may be small.
    let mut buf = [0usize; 64];
    let mut first = 0;
    let mut outer = 0;
    for_each_program_return(sp, words, &mut buf, |w| {
        if in_main_executable(w) {
            if first == 0 {
                first = w;
            } else {
                outer = w;
            }
            return false;
        }
        if first == 0 {
            first = w;
        }
        true
    });
    (first, outer)
}

/// Calls `visit` with each word on the stack above `sp` (up to `words` words) that
/// points into the program's code just after a call, innermost first, until `visit`
/// says stop (false). Reads `buf.len()` words per `process_vm_readv` on our own
/// process, so an unmapped page ends the walk instead of faulting.
fn for_each_program_return(sp: usize, words: usize, buf: &mut [usize], mut visit: impl FnMut(usize) -> bool) {
    let chunk_bytes = core::mem::size_of_val(buf);
    let mut at = sp & !7;
    let end = at.saturating_add(words * 8);
    while at < end {
        let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: chunk_bytes };
        let remote = libc::iovec { iov_base: at as *mut libc::c_void, iov_len: chunk_bytes };
        // SAFETY: `local` is `buf`, writable for its length.
        let n = unsafe { crate::base::sys::process_vm_readv(&local, &remote) };
        if n <= 0 {
            return;
        }
        for &w in &buf[..n as usize / 8] {
            if is_program_code(w) && follows_a_call(w) && !visit(w) {
                return;
            }
        }
        if (n as usize) < chunk_bytes {
            return; // the end of the mapping
        }
        at += chunk_bytes;
    }
}

/// Loads the table of code ranges if nobody has yet ([`start`] does, with the
/// report on): the fiber dump needs it to tell the program's frames.
pub fn ensure_code_ranges() {
    collect_code_ranges();
}

/// Up to `out.len()` words on the stack above `sp` that point into the program's code
/// just after a call, innermost first: a stack trace of the program's frames for the
/// fiber dump (a scan, so a stale return address left in a frame's padding can show up
/// too). Reads `scratch.len()` words in one `process_vm_readv` (fewer where the
/// mapping ends): a dump of thousands of fibers makes one system call per fiber. The
/// number found.
pub fn program_frames(sp: usize, scratch: &mut [usize], out: &mut [usize]) -> usize {
    let mut found = 0;
    if out.is_empty() {
        return 0;
    }
    let words = scratch.len();
    for_each_program_return(sp, words, scratch, |w| {
        out[found] = w;
        found += 1;
        found < out.len()
    });
    found
}

/// Whether `addr` is in the main executable's code.
pub fn in_main_executable(addr: usize) -> bool {
    RANGES[..MAIN_RANGES.load(Relaxed)].iter().any(|(s, e, _)| addr >= s.load(Relaxed) && addr < e.load(Relaxed))
}

/// Whether the instruction before `ret` (in the program's code) is a call
/// ([`crate::base::arch::is_call_before`]). A stack also holds code addresses that are
/// no return address (function pointers, registers saved by a variadic function such
/// as `syscall`).
fn follows_a_call(ret: usize) -> bool {
    use crate::base::arch::{is_call_before, CALL_LOOKBACK};
    let n = NUM_RANGES.load(Relaxed);
    let Some(start) = RANGES[..n].iter().map(|(s, e, _)| (s.load(Relaxed), e.load(Relaxed))).find(|(s, e)| ret > *s && ret <= *e)
    else {
        return false;
    };
    if ret - start.0 < CALL_LOOKBACK {
        return false;
    }
    // SAFETY: the CALL_LOOKBACK bytes before `ret` lie in a mapped executable segment of
    // a loaded object (checked above), which is readable.
    let b = unsafe { core::slice::from_raw_parts((ret - CALL_LOOKBACK) as *const u8, CALL_LOOKBACK) };
    is_call_before(b)
}
