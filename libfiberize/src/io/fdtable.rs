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
//! The state of one descriptor is a [`ScheduledIo`] (its kind, its registration, its
//! readiness and its waiters: `io::scheduled_io`) and what we cached about its file
//! (`O_DIRECT`).

use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

pub use crate::io::scheduled_io::{
    ScheduledIo, EPOLL_FD, LOCAL_SOCKET, OWNED, REGISTERED, REG_BUSY, SOCKET, STREAM, URGENT_SEEN, USER_NONBLOCK, WATCH_WRITE,
};

/// One descriptor's state: a [`ScheduledIo`] (which it derefs to) and the `O_DIRECT`
/// cache of its file.
pub struct FdState {
    pub io: ScheduledIo,
    /// Whether the descriptor was opened with `O_DIRECT`, as last seen by `F_GETFL`:
    /// `epoch << 2 | kind` (see [`FdState::cached_direct_io`]). 0: not known.
    file_io: AtomicU32,
}

impl core::ops::Deref for FdState {
    type Target = ScheduledIo;
    #[inline]
    fn deref(&self) -> &ScheduledIo {
        &self.io
    }
}

impl FdState {
    const fn new() -> FdState {
        FdState { io: ScheduledIo::new(), file_io: AtomicU32::new(0) }
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

/// In a forked child: no descriptor has a waiter (they were the parent's fibers, which
/// never run in the child); a waker must not unpark one.
pub fn forget_waiters_in_forked_child() {
    for_each_in(0, u32::MAX, |_, s| {
        s.io.read_waiter.forget_in_forked_child();
        s.io.write_waiter.forget_in_forked_child();
    });
}

/// Forgets everything about `fd` (it is being closed or replaced).
pub fn reset(fd: i32) -> Option<u32> {
    let s = lookup(fd)?;
    let old = s.io.reset();
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

/// One event a poller harvested (`runtime::sleep::poller::poll`, through the core's
/// hooks): the descriptor its cookie names handles it ([`ScheduledIo::dispatch`]).
/// Returns whether it was a live descriptor's event.
pub fn dispatch(cookie: u64, events: u32) -> bool {
    lookup(crate::io::scheduled_io::cookie_fd(cookie)).is_some_and(|st| st.io.dispatch(cookie, events))
}
