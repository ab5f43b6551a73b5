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
//! under a sequence lock (no lock, no allocation, no system call). Reading the file
//! and searching a table are in `sync::futex_maps`.
//!
//! The table may be wrong in two ways, and each has its remedy:
//!
//! * **A mapping changed through a call we see.** The library's `mmap`, `mmap64`,
//!   `munmap`, `mremap`, `shmat`, `shmdt` exports and `syscall()` with those numbers
//!   bump a generation counter ([`mapping_changed`]) after the real call, when the
//!   change can touch a shared range: every `mremap`, `shmat`, `shmdt`; an `mmap`
//!   whose type is `MAP_SHARED` or `MAP_SHARED_VALIDATE`, or that is `MAP_FIXED`
//!   (a non-fixed private mapping only fills a hole, which the table did not count as
//!   shared: [`mmap_may_touch_shared`]); a `munmap` that overlaps a shared
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
//! * A two-word operation (`FUTEX_WAKE_OP`, `FUTEX_REQUEUE`, `FUTEX_CMP_REQUEUE`) is
//!   emulated if both words are private, goes to the kernel if both are shared (or
//!   one is in no mapping), and is split between the two otherwise
//!   (`sync::futex_split`: a waiter that would be requeued across is woken instead).
//! * A shared mapping made by an inline system call in a range that the table holds
//!   as private (one unmapped by an inline `munmap`) looks private until the next
//!   tracked change.

use core::cell::UnsafeCell;
use core::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::base::rawlock::RawMutex;
use crate::base::stats::{bump, STATS};
use crate::base::sys;
use crate::sync::futex_maps::{read_maps, search, Class, Ranges, CAP, SHARED_BIT};

/// Set in the parking-lot key of a non-private futex (the word's address is 4-aligned).
pub const KEY_TAG: usize = 1;

/// Bumped by every mapping change that may touch a shared range.
static GENERATION: AtomicU64 = AtomicU64::new(1);
/// Odd while the published table is being rewritten.
static SEQ: AtomicU64 = AtomicU64::new(0);
/// The generation the published table was read at (0: never built).
static BUILT_AT: AtomicU64 = AtomicU64::new(0);
static LEN: AtomicUsize = AtomicUsize::new(0);
/// The published table holds only shared ranges (it overflowed [`CAP`]).
static SHARED_ONLY: AtomicBool = AtomicBool::new(false);
/// A rebuild is reading `/proc/self/maps`.
static BUILDING: AtomicBool = AtomicBool::new(false);
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
    class(addr) == Class::Private
}

/// Where the word at `addr` lives: [`Class::Unknown`] is an address in no mapping
/// (the kernel answers `EFAULT`), or one the table cannot tell since it froze.
#[inline]
pub fn class(addr: usize) -> Class {
    if addr < 4096 {
        return Class::Unknown; // the kernel answers EFAULT; no reason to reread the maps
    }
    match lookup(addr) {
        Some(c @ (Class::Private | Class::Shared)) => c,
        _ => class_slow(addr),
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

#[cold]
fn class_slow(addr: usize) -> Class {
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
    class
}

/// Rereads `/proc/self/maps` into the published table. Under [`BUILDER`].
fn rebuild() {
    bump(&STATS.futex_maps_reads);
    BUILDING.store(true, Ordering::SeqCst);
    let gen = GENERATION.load(Ordering::SeqCst);
    // SAFETY: we hold BUILDER, the scratch table's lock.
    let scratch = unsafe { &mut *SCRATCH.0.get() };
    let mut ok = read_maps(scratch, false);
    if ok && scratch.overflowed {
        ok = read_maps(scratch, true);
    }
    if !ok || scratch.overflowed {
        // Keep the old table's answers; nothing flips from now on.
        FROZEN.store(true, Ordering::Relaxed);
        BUILDING.store(false, Ordering::SeqCst);
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
    BUILDING.store(false, Ordering::SeqCst);
}

/// A mapping change may have touched a shared range (see the module's essay).
#[inline]
pub fn mapping_changed() {
    GENERATION.fetch_add(1, Ordering::Release);
}

/// After a successful `mmap` with `flags`.
#[inline]
pub fn after_mmap(flags: libc::c_int) {
    if mmap_may_touch_shared(flags) {
        mapping_changed();
    }
}

/// Whether an `mmap` with `flags` can change what the table holds as shared: a shared
/// mapping (its type, the low bits `MAP_TYPE`, is `MAP_SHARED` or
/// `MAP_SHARED_VALIDATE`), or a `MAP_FIXED` one of any type, which may replace a
/// shared range. A private (or droppable) mapping without `MAP_FIXED` only fills a
/// hole. The type is a value, not a set of bits: `MAP_SHARED_VALIDATE` (3) holds
/// `MAP_PRIVATE`'s bit (2), so testing bits would count every private mapping.
#[inline]
pub fn mmap_may_touch_shared(flags: libc::c_int) -> bool {
    const MAP_TYPE: libc::c_int = 0x0f;
    matches!(flags & MAP_TYPE, libc::MAP_SHARED | libc::MAP_SHARED_VALIDATE) || flags & libc::MAP_FIXED != 0
}

/// After a successful `munmap(addr, len)`.
#[inline]
pub fn after_munmap(addr: usize, len: usize) {
    let gen = GENERATION.load(Ordering::Acquire);
    // A table being read now may have seen the range before it went: it must not
    // come out current.
    if BUILDING.load(Ordering::SeqCst) {
        mapping_changed();
        return;
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
    BUILDING.store(false, Ordering::Relaxed);
    let s = SEQ.load(Ordering::Relaxed);
    if s & 1 != 0 {
        LEN.store(0, Ordering::Relaxed);
        BUILT_AT.store(0, Ordering::Relaxed);
        SEQ.store(s + 1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::futex_maps::anonymous_page;

    #[test]
    fn only_shared_or_fixed_mappings_count_as_changes() {
        use libc::{MAP_ANONYMOUS, MAP_FIXED, MAP_FIXED_NOREPLACE, MAP_NORESERVE, MAP_PRIVATE, MAP_SHARED, MAP_SHARED_VALIDATE};
        assert!(!mmap_may_touch_shared(MAP_PRIVATE | MAP_ANONYMOUS));
        assert!(!mmap_may_touch_shared(MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE));
        assert!(!mmap_may_touch_shared(MAP_PRIVATE | MAP_FIXED_NOREPLACE), "it fails rather than replace a mapping");
        assert!(mmap_may_touch_shared(MAP_SHARED | MAP_ANONYMOUS));
        assert!(mmap_may_touch_shared(MAP_SHARED_VALIDATE));
        assert!(mmap_may_touch_shared(MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS), "it may replace a shared range");
        assert!(mmap_may_touch_shared(MAP_SHARED | MAP_FIXED));
    }

    #[test]
    fn the_published_table_follows_mapping_changes() {
        let local = 0u32;
        assert!(emulate(&local as *const u32 as usize));
        let p = anonymous_page(0, libc::MAP_SHARED);
        // Not told of the mapping: it lands in a hole, and the lookup rereads the maps.
        assert!(!emulate(p as usize));
        // SAFETY: the page mapped above.
        unsafe { libc::munmap(p, 4096) };
        after_munmap(p as usize, 4096);
        // A private page at the same place if the kernel gives it.
        let q = anonymous_page(p as usize, libc::MAP_PRIVATE);
        assert!(emulate(q as usize));
        // SAFETY: the page mapped above.
        unsafe { libc::munmap(q, 4096) };
        assert!(!emulate(0x10), "an unmapped address goes to the kernel");
        assert!(!emulate(0x10000), "an unmapped address goes to the kernel");
    }
}
