//! The report's raw material (`FIBERIZE_REPORT`, rendered by `crate::observe::report`):
//! a fixed table of places where the program waited, and the capture of the
//! program's call site.
//!
//! # Cost
//!
//! Off by default: every recording path starts with [`on`], one relaxed load. On, a
//! record is a few relaxed atomic adds on the entry's line; the call site is captured
//! (a frame-pointer walk, no symbol lookup) only when an entry is made, and names are
//! looked up (`dladdr`) only when the report is written.
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
//! [`caller_outside_library`] walks the frame-pointer chain from its caller up to the
//! first return address outside libfiberize.so: the instruction after the program's
//! call into an export (the library is built with frame pointers, `.cargo/config.toml`;
//! the program need not be). [`first_program_return`] finds the program's return
//! address on a stack it does not run on (a blocked worker's, read through
//! `process_vm_readv`, which fails instead of faulting on unmapped memory): the first
//! word that points into the executable code of an object that is not the C library,
//! the loader, the C++ runtime or libfiberize.

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
    pub count: AtomicU64,
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
    /// Adds one more of what the entry counts, `ns` long.
    pub fn add(&self, ns: u64) {
        self.count.fetch_add(1, Relaxed);
        self.add_time(ns);
    }
    pub fn add_time(&self, ns: u64) {
        self.total_ns.fetch_add(ns, Relaxed);
        self.max_ns.fetch_max(ns, Relaxed);
    }
}

/// Entries in the table. Origin: a program's distinct contended locks and blocking
/// call sites are tens to a few hundred (MariaDB under sysbench: under 200).
pub const SLOTS: usize = 2048;

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Entry = Entry {
    tag: AtomicUsize::new(0),
    site: AtomicUsize::new(0),
    pc: AtomicUsize::new(0),
    detail: AtomicU64::new(0),
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
    ON.store(true, Relaxed);
}

/// The entry for (kind, key), made if new; `site` is called to name a new entry.
/// None when the table is full.
pub fn entry(kind: Kind, key: usize, site: impl FnOnce() -> usize) -> Option<&'static Entry> {
    let tag = (kind as usize) | (key << 3);
    let mut i = (tag.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) % SLOTS;
    for _ in 0..SLOTS {
        let e = &TABLE[i];
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
const MAX_RANGES: usize = 256;
static RANGES: [(AtomicUsize, AtomicUsize, AtomicBool); MAX_RANGES] =
    [const { (AtomicUsize::new(0), AtomicUsize::new(0), AtomicBool::new(false)) }; MAX_RANGES];
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
    for (s, e) in ranges {
        let n = NUM_RANGES.load(Relaxed);
        if n == MAX_RANGES {
            break;
        }
        RANGES[n].0.store(s, Relaxed);
        RANGES[n].1.store(e, Relaxed);
        RANGES[n].2.store(library, Relaxed);
        NUM_RANGES.store(n + 1, Relaxed);
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

/// libfiberize's own code (the range holding this function).
fn in_own_code(addr: usize) -> bool {
    static OWN: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];
    if OWN[1].load(Relaxed) == 0 {
        let me = in_own_code as *const () as usize;
        let n = NUM_RANGES.load(Relaxed);
        if let Some((s, e, _)) = RANGES[..n].iter().find(|(s, e, _)| me >= s.load(Relaxed) && me < e.load(Relaxed)) {
            OWN[0].store(s.load(Relaxed), Relaxed);
            OWN[1].store(e.load(Relaxed), Relaxed);
        }
    }
    addr >= OWN[0].load(Relaxed) && addr < OWN[1].load(Relaxed)
}

/// The return address into the first caller outside libfiberize, found by walking the
/// frame pointers from here (0 if the chain breaks first). Called from inside the
/// library, on the calling thread's own stack.
#[inline(never)]
pub fn caller_outside_library() -> usize {
    let mut fp: usize;
    // SAFETY: reads the frame-pointer register; no memory access, no side effects.
    unsafe { core::arch::asm!("mov {}, rbp", out(reg) fp, options(nomem, nostack, preserves_flags)) };
    let stack_low = &fp as *const usize as usize;
    for _ in 0..32 {
        // A frame of ours lies above the current stack pointer, within 1 MiB, aligned.
        if fp < stack_low || fp - stack_low > (1 << 20) || !fp.is_multiple_of(8) {
            return 0;
        }
        // SAFETY: `fp` is a frame pointer of a live frame of ours on this stack
        // (checked to lie just above our own frame): [fp] is the caller's frame
        // pointer, [fp + 8] the return address.
        let (next, ret) = unsafe { (*(fp as *const usize), *((fp + 8) as *const usize)) };
        if !in_own_code(ret) {
            return ret;
        }
        if next <= fp {
            return 0;
        }
        fp = next;
    }
    0
}

/// The first word on the stack above `sp` (up to `words` words) that points into the
/// program's executable code: the return address into the program of a thread blocked
/// in a library call. Reads with `process_vm_readv` on our own process, so an
/// unmapped page ends the search instead of faulting. 0 if none.
pub fn first_program_return(sp: usize, words: usize) -> usize {
    let mut buf = [0usize; 512];
    let words = words.min(buf.len());
    let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: words * 8 };
    let remote = libc::iovec { iov_base: sp as *mut libc::c_void, iov_len: words * 8 };
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    // SAFETY: one local and one remote iovec; the kernel checks the remote range.
    let n = unsafe {
        crate::base::sys::syscall6(
            libc::SYS_process_vm_readv as usize,
            pid as usize,
            &local as *const libc::iovec as usize,
            1,
            &remote as *const libc::iovec as usize,
            1,
            0,
        )
    };
    if n <= 0 {
        return 0;
    }
    buf[..n as usize / 8].iter().copied().find(|&w| is_program_code(w) && follows_a_call(w)).unwrap_or(0)
}

/// Whether the instruction before `ret` (in the program's code) is a call: `e8` with a
/// 32-bit displacement, or an indirect `ff /2` of 2, 3, 6 or 7 bytes. A stack also
/// holds code addresses that are no return address (function pointers, registers
/// saved by a variadic function such as `syscall`).
fn follows_a_call(ret: usize) -> bool {
    let n = NUM_RANGES.load(Relaxed);
    let Some(start) = RANGES[..n].iter().map(|(s, e, _)| (s.load(Relaxed), e.load(Relaxed))).find(|(s, e)| ret > *s && ret <= *e)
    else {
        return false;
    };
    if ret - start.0 < 7 {
        return false;
    }
    // SAFETY: the 7 bytes before `ret` lie in a mapped executable segment of a loaded
    // object (checked above), which is readable.
    let b = unsafe { core::slice::from_raw_parts((ret - 7) as *const u8, 7) };
    let indirect = |at: usize| b[at] == 0xff && (b[at + 1] >> 3) & 7 == 2;
    b[2] == 0xe8 || indirect(5) || indirect(4) || indirect(1) || indirect(0)
}
