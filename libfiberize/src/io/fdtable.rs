//! Per-file-descriptor state, in a lazily allocated two-level table indexed by fd.
//!
//! We never change a descriptor's file status flags: an `O_NONBLOCK` set behind the
//! program's back would leak into glibc's internal reads (stdio on `fdopen`,
//! `dprintf`), into `sendfile`/`splice`, and into children after `fork`+`exec`, which
//! all share the open file description. Instead, descriptors the program created
//! through our exports (`socket`, `accept`, `pipe`, `eventfd`, `socketpair`,
//! `epoll_create`, and their `dup`s) are *tracked*: their blocking calls are made
//! non-blocking one call at a time (`MSG_DONTWAIT` on sockets, a zero-timeout readiness
//! probe before calls on pipes and eventfds) and wait by readiness in between.
//! Inherited descriptors are not tracked; their blocking calls run as they are (and the
//! monitor replaces a worker that blocks).
//!
//! Every way a number is closed or replaced must reach [`reset`] (`close`, `dup2`,
//! `close_range`, `closefrom`, `fclose`, the same through `syscall`: `ops::lifecycle`),
//! or a number reused by a file we never see opened is taken for what it was.
//!
//! `flags` bits:
//!
//! | bit | name          | meaning                                                       |
//! |-----|---------------|---------------------------------------------------------------|
//! | 0   | OWNED         | created through us: blocking calls wait by readiness          |
//! | 1   | USER_NONBLOCK | the program set `O_NONBLOCK` (then every call is one attempt)  |
//! | 2   | REGISTERED    | in the reactor's epoll set                                    |
//! | 3   | EPOLL_FD      | the program's own epoll instance (never made non-blocking)    |
//! | 4   | STREAM        | byte stream: a short read proves the receive queue was empty  |
//! | 5   | SOCKET        | a socket: `MSG_DONTWAIT` makes single calls non-blocking      |
//! | 6   | WATCH_WRITE   | registered for EPOLLOUT too (a writer had to wait once)       |
//! | 7   | REG_BUSY      | somebody is adding or removing it in the epoll set right now  |
//! | 8   | LOCAL_SOCKET  | an `AF_UNIX` socket (`io::peer_cpu`)                          |
//! | 9   | URGENT_SEEN   | the reactor reported `EPOLLPRI` for it once (sticky)          |
//!
//! `read_seq`/`write_seq` count readiness edges reported by the reactor; a waiter reads
//! the sequence *before* its attempt and parks only while it is unchanged, so an edge
//! between the attempt and the park is never lost. Their addresses are the parking
//! keys of the fd's readers and writers.

use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

// `FdState::flags`:
/// We saw the descriptor created (socket, pipe, eventfd, accept…): its waits are ours.
pub const OWNED: u32 = 1;
/// The program itself set O_NONBLOCK: its calls return EAGAIN as natively.
pub const USER_NONBLOCK: u32 = 2;
// REGISTERED (4), WATCH_WRITE (64) and REG_BUSY (128) belong to the epoll-set
// protocol, a model-checked file of their own.
pub use crate::io::epoll_membership::{REGISTERED, REG_BUSY, WATCH_WRITE};
/// The program's own epoll descriptor (its waits park on readiness of that fd).
pub const EPOLL_FD: u32 = 8;
/// A byte stream (SOCK_STREAM socket, pipe): a short read means the queue was empty.
pub const STREAM: u32 = 16;
/// A socket: per-call MSG_DONTWAIT makes its reads and writes non-blocking.
pub const SOCKET: u32 = 32;
/// An AF_UNIX socket: the kernel records no CPU for what comes in on it
/// (`io::peer_cpu`).
pub const LOCAL_SOCKET: u32 = 256;
/// The reactor once reported `EPOLLPRI` (urgent data) for the descriptor since it was
/// registered; until then a `poll` for `POLLPRI` cannot find it pending (registering
/// reports a readiness that came before), so an empty receive queue is all a wait for
/// `POLLIN | POLLPRI` needs to know (`ops::readiness::poll`).
pub const URGENT_SEEN: u32 = 512;

pub struct FdState {
    pub flags: AtomicU32,
    /// Bumped whenever the fd number is closed or reused; part of the epoll cookie.
    pub gen: AtomicU32,
    pub read_seq: AtomicU32,
    pub write_seq: AtomicU32,
    /// The epoll events of the reactor's edge that last moved `read_seq`, stored before
    /// the move; 0 when something else moved it (a close, a direct wait): then nothing
    /// is known of the readiness and a waiter that woke must probe.
    pub read_events: AtomicU32,
    /// SO_RCVTIMEO / SO_SNDTIMEO in ns (0: none).
    pub rcvtimeo_ns: AtomicU64,
    pub sndtimeo_ns: AtomicU64,
    /// `1 << 32 | read_seq` when a read observed the receive queue empty at that
    /// readiness sequence (0: unknown). While `read_seq` has not moved, the next read
    /// would fail with EAGAIN, so a blocking read parks at once instead of trying.
    pub drained_at: AtomicU64,
    /// Fibers parked on this fd's readiness through the reactor (or about to): while
    /// non-zero the fd must stay in the epoll set (`reactor::leave_epoll_set`).
    pub epoll_waiters: AtomicU32,
    /// The readiness set (`runtime::sleep::poller`) the fd is registered in while `REGISTERED`:
    /// always 0 with one shared set; with a set per worker, the set of the worker whose
    /// fiber last registered or moved it (`crate::io::reactor`). Written under the
    /// registration lock (`REG_BUSY`).
    pub home_set: AtomicU32,
    /// Whether the descriptor was opened with `O_DIRECT`, as last seen by `F_GETFL`:
    /// `epoch << 2 | kind` (see [`FdState::cached_direct_io`]). 0: not known.
    file_io: AtomicU32,
}

impl FdState {
    const fn new() -> FdState {
        FdState {
            flags: AtomicU32::new(0),
            gen: AtomicU32::new(0),
            read_seq: AtomicU32::new(0),
            write_seq: AtomicU32::new(0),
            read_events: AtomicU32::new(0),
            rcvtimeo_ns: AtomicU64::new(0),
            sndtimeo_ns: AtomicU64::new(0),
            drained_at: AtomicU64::new(0),
            epoll_waiters: AtomicU32::new(0),
            home_set: AtomicU32::new(0),
            file_io: AtomicU32::new(0),
        }
    }

    /// Whether the descriptor's open file description has `O_DIRECT`, if known (a
    /// `pread`/`pwrite` asked `F_GETFL` since the descriptor was last closed, duplicated
    /// onto or had its flags set through us). It is a hint that only picks where a file
    /// read runs (the donor or the worker), never what it does: a descriptor closed
    /// behind our back (glibc's internal `close` in `fclose`) and reused keeps a stale
    /// answer until the next `F_SETFL` or close we see, which costs speed, not
    /// correctness. Hence `Relaxed`: nothing is published through it.
    #[inline]
    pub fn cached_direct_io(&self) -> Option<bool> {
        let v = self.file_io.load(Ordering::Relaxed);
        if v >> 2 != FILE_IO_EPOCH.load(Ordering::Relaxed) & FILE_IO_EPOCH_MASK {
            return None;
        }
        match v & 3 {
            FILE_IO_BUFFERED => Some(false),
            FILE_IO_DIRECT => Some(true),
            _ => None,
        }
    }

    /// The descriptor number now names another open file description (a duplicate).
    #[inline]
    pub fn forget_direct_io(&self) {
        self.file_io.store(0, Ordering::Relaxed);
    }

    /// Records what `F_GETFL` said (see [`FdState::cached_direct_io`]).
    #[inline]
    pub fn cache_direct_io(&self, direct: bool) {
        let kind = if direct { FILE_IO_DIRECT } else { FILE_IO_BUFFERED };
        let epoch = FILE_IO_EPOCH.load(Ordering::Relaxed) & FILE_IO_EPOCH_MASK;
        self.file_io.store(epoch << 2 | kind, Ordering::Relaxed);
    }

    #[inline]
    pub fn has(&self, bit: u32) -> bool {
        self.flags.load(Ordering::Acquire) & bit != 0
    }

    pub fn set_user_nonblock(&self, on: bool) {
        if on {
            self.flags.fetch_or(USER_NONBLOCK, Ordering::AcqRel);
        } else {
            self.flags.fetch_and(!USER_NONBLOCK, Ordering::AcqRel);
        }
    }
}

/// The table is a two-level array allocated a chunk at a time, so that a program with
/// few descriptors pays for one chunk: log2 of descriptors per chunk.
const CHUNK_BITS: usize = 10;
/// Descriptors per chunk.
const CHUNK: usize = 1 << CHUNK_BITS;
/// Chunks: descriptors up to 1 Mi (the usual hard `RLIMIT_NOFILE`); higher fds are
/// not tracked and behave as natively (blocking on the worker).
const CHUNKS: usize = 1024;
type Chunk = [FdState; CHUNK];

#[allow(clippy::declare_interior_mutable_const)]
const NO_CHUNK: AtomicPtr<Chunk> = AtomicPtr::new(ptr::null_mut());
static TABLE: [AtomicPtr<Chunk>; CHUNKS] = [NO_CHUNK; CHUNKS];

/// The state of `fd`, if a slot exists (never allocates).
#[inline]
pub fn lookup(fd: i32) -> Option<&'static FdState> {
    if fd < 0 {
        return None;
    }
    let fd = fd as usize;
    let c = TABLE.get(fd >> CHUNK_BITS)?.load(Ordering::Acquire);
    if c.is_null() {
        return None;
    }
    // SAFETY: chunks are allocated once and never freed.
    Some(unsafe { &(*c)[fd & (CHUNK - 1)] })
}

/// The state of an fd we own, if any.
#[inline]
pub fn owned(fd: i32) -> Option<&'static FdState> {
    lookup(fd).filter(|s| s.has(OWNED))
}

/// The state of `fd`, allocating its chunk on first use. None for fds beyond the table.
pub fn slot(fd: i32) -> Option<&'static FdState> {
    if let Some(s) = lookup(fd) {
        return Some(s);
    }
    if fd < 0 {
        return None;
    }
    let cell = TABLE.get(fd as usize >> CHUNK_BITS)?;
    #[allow(clippy::declare_interior_mutable_const)]
    const EMPTY: FdState = FdState::new();
    let fresh = Box::into_raw(Box::new([EMPTY; CHUNK]));
    if cell.compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire).is_err() {
        // SAFETY: we allocated `fresh` above and nobody else saw it.
        drop(unsafe { Box::from_raw(fresh) });
    }
    lookup(fd)
}

/// Calls `f(fd, state)` for every existing slot from `first` to `last` inclusive (the
/// chunks never allocated hold nothing to visit).
pub fn for_each_in(first: u32, last: u32, mut f: impl FnMut(i32, &'static FdState)) {
    let (first, last) = (first as usize, (last as usize).min(CHUNKS * CHUNK - 1));
    let mut fd = first;
    while fd <= last {
        let chunk_last = (fd | (CHUNK - 1)).min(last);
        let c = TABLE[fd >> CHUNK_BITS].load(Ordering::Acquire);
        if !c.is_null() {
            for n in fd..=chunk_last {
                // SAFETY: chunks are allocated once and never freed.
                f(n as i32, unsafe { &(*c)[n & (CHUNK - 1)] });
            }
        }
        fd = chunk_last + 1;
    }
}

/// Forgets everything about `fd` (it is being closed or replaced).
pub fn reset(fd: i32) -> Option<u32> {
    let s = lookup(fd)?;
    let old = s.flags.swap(0, Ordering::AcqRel);
    s.gen.fetch_add(1, Ordering::AcqRel);
    s.rcvtimeo_ns.store(0, Ordering::Relaxed);
    s.sndtimeo_ns.store(0, Ordering::Relaxed);
    s.drained_at.store(0, Ordering::Relaxed);
    s.read_events.store(0, Ordering::Relaxed);
    s.file_io.store(0, Ordering::Relaxed);
    Some(old)
}

/// `FdState::file_io`'s low two bits: `F_GETFL` said no `O_DIRECT`.
const FILE_IO_BUFFERED: u32 = 1;
/// `F_GETFL` said `O_DIRECT`.
const FILE_IO_DIRECT: u32 = 2;
/// The epoch fits above the two kind bits.
const FILE_IO_EPOCH_MASK: u32 = u32::MAX >> 2;
/// Bumped when a file's status flags may have changed (`F_SETFL` of an untracked
/// descriptor): `F_SETFL` changes the open file description, which its duplicates share
/// under other numbers, so every cached answer is dropped at once rather than one slot.
static FILE_IO_EPOCH: AtomicU32 = AtomicU32::new(0);

/// `fcntl(fd, F_SETFL, flags)` succeeded: drop cached `O_DIRECT` answers it may have
/// made wrong. Sockets, pipes and eventfds we track (`OWNED`) are never `pread`, so
/// their frequent `O_NONBLOCK` changes cost nothing here; for other descriptors only a
/// change that may add or remove `O_DIRECT` counts (the flags ask for it, or this
/// descriptor's answer was not "buffered").
pub fn file_status_flags_set(fd: i32, flags: i32) {
    let Some(s) = lookup(fd) else {
        // Never cached under this number; duplicates elsewhere may be.
        FILE_IO_EPOCH.fetch_add(1, Ordering::Relaxed);
        return;
    };
    if s.has(OWNED) {
        return;
    }
    if flags & libc::O_DIRECT != 0 || s.cached_direct_io() != Some(false) {
        FILE_IO_EPOCH.fetch_add(1, Ordering::Relaxed);
    }
}
