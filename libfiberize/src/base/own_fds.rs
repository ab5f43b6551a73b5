//! The runtime's own descriptors: the reactor's epoll sets, the wake-up eventfds, the
//! files it keeps open (`/proc` task files, cgroup limits, `/proc/self/maps`) and the
//! ones it opens for a moment (a tz file, a `/proc` read).
//!
//! The program never opened them, so in its view their numbers are not open, and a
//! program that closes what it does not know of (`close_range(3, ~0U, 0)` in varnishd,
//! `closefrom`, a loop of `close` over every number: the classic daemon start) must
//! not close them: the workers would then wait on a closed epoll set (spinning on
//! EBADF), and worse, wake one another by writing 8 bytes into whatever the program
//! opened next under the same number. The io layer asks [`is_own`] before it closes.
//!
//! A bitmap over the first [`LIMIT`] numbers (the runtime makes what it keeps from
//! number 512 up, [`move_out_of_the_way`]); a descriptor above it is not protected.
//!
//! # The gate
//!
//! A descriptor's number exists before its mark: `openat` returns it, then the mark
//! is set. A program's `close_range` between the two closed the runtime's file, the
//! program's next `open` took the number, and the runtime read (and later closed) the
//! program's file. So the runtime makes, marks, moves and closes its descriptors
//! *alone* ([`runtime_alone`]), and the program's calls that close or replace numbers
//! (`close`, `close_range`, `closefrom`, `dup2`, `dup3`) ask [`is_own`] and make the
//! call inside [`program_closing`]: the two never overlap, so the program's call sees
//! each of the runtime's descriptors either not yet made or already marked. Program
//! calls share the gate among themselves (a counter per shard of numbers); the runtime
//! waits for the ones inside to leave and keeps new ones out for the few system calls
//! it makes (where one inside takes long, a lingering close, it lets the others in
//! again and retries a little later). Both sides are shielded (`base::shield`): a holder is never switched out
//! for a preemption nor interrupted by a program handler that closes.
//!
//! # Moving out of the way
//!
//! A program may `dup2` onto a number that is the runtime's (natively it is free).
//! [`program_replaces`] then moves the runtime's descriptor to another number above
//! the floor first and points every [`hold`]er cell at the new number; a descriptor
//! with no holder is one opened for a moment, and the call waits for its close.

use core::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::base::rawlock::RawMutex;
use crate::base::shield;
use crate::base::sys;

/// Descriptors below this are covered.
pub const LIMIT: usize = 1 << 16;
const WORDS: usize = LIMIT / 64;

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
static BITS: [AtomicU64; WORDS] = [ZERO; WORDS];

/// Notes `fd` as the runtime's (ignores -1 and numbers beyond [`LIMIT`]).
pub fn mark(fd: i32) {
    if (0..LIMIT as i32).contains(&fd) {
        BITS[fd as usize / 64].fetch_or(1 << (fd % 64), Ordering::Release);
    }
}

/// `fd` is closed by the runtime (before the close: the number may be reused at once).
pub fn unmark(fd: i32) {
    if (0..LIMIT as i32).contains(&fd) {
        BITS[fd as usize / 64].fetch_and(!(1 << (fd % 64)), Ordering::Release);
    }
}

/// Whether `fd` is one of the runtime's own descriptors.
#[inline]
pub fn is_own(fd: i32) -> bool {
    (0..LIMIT as i32).contains(&fd) && BITS[fd as usize / 64].load(Ordering::Acquire) & 1 << (fd % 64) != 0
}

/// The lowest of the runtime's descriptors from `first` to `last` inclusive.
pub fn first_in(first: u32, last: u32) -> Option<u32> {
    let last = (last as usize).min(LIMIT - 1);
    let mut n = first as usize;
    while n <= last {
        let word = BITS[n / 64].load(Ordering::Acquire) >> (n % 64);
        if word != 0 {
            let fd = n + word.trailing_zeros() as usize;
            return (fd <= last).then_some(fd as u32);
        }
        n = (n / 64 + 1) * 64;
    }
    None
}

// ---------------------------------------------------------------------------------
// The gate
// ---------------------------------------------------------------------------------

/// Shards of the program's side of the gate, by descriptor number: closes of different
/// numbers on different threads touch different cache lines.
const SHARDS: usize = 16;

#[repr(align(64))]
struct Shard(AtomicU32);

/// Program calls inside the gate, per shard.
static INSIDE: [Shard; SHARDS] = [const { Shard(AtomicU32::new(0)) }; SHARDS];
/// The runtime is making or closing one of its descriptors: program calls wait.
static RUNTIME_AT_WORK: AtomicBool = AtomicBool::new(false);
/// One runtime thread at a time, and the kernel thread id of the one inside (0: none),
/// so that a nested [`runtime_alone`] runs at once.
static RUNTIME_TURN: RawMutex = RawMutex::new();
static RUNTIME_OWNER: AtomicI32 = AtomicI32::new(0);

/// Waits a moment: a few spins, then the CPU is offered to others.
fn pause(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        sys::cpu_relax();
    } else {
        sys::sched_yield_raw();
    }
}

/// A program call inside the gate ([`program_closing`]); leaves it when dropped.
pub struct ProgramClosing {
    shard: usize,
}

/// Enters the program's side of the gate for a call that closes or replaces `fd` (a
/// range: its first number): until the guard drops, the runtime neither makes nor
/// closes a descriptor, so [`is_own`] stays true of the call's numbers.
#[inline]
pub fn program_closing(fd: u32) -> ProgramClosing {
    shield::enter();
    let shard = fd as usize % SHARDS;
    let inside = &INSIDE[shard].0;
    loop {
        // Dekker with `runtime_alone`: our count, then its flag; its flag, then our count.
        inside.fetch_add(1, Ordering::SeqCst);
        if !RUNTIME_AT_WORK.load(Ordering::SeqCst) {
            return ProgramClosing { shard };
        }
        inside.fetch_sub(1, Ordering::SeqCst);
        wait_for_runtime();
    }
}

#[cold]
fn wait_for_runtime() {
    let mut spins = 0;
    while RUNTIME_AT_WORK.load(Ordering::Acquire) {
        pause(&mut spins);
    }
}

impl Drop for ProgramClosing {
    #[inline]
    fn drop(&mut self) {
        INSIDE[self.shard].0.fetch_sub(1, Ordering::Release);
        shield::exit();
    }
}

/// Runs `f` (which makes, marks, moves or closes the runtime's descriptors) while no
/// program call is inside the gate. Nests. `f` must be short: program closes wait.
pub fn runtime_alone<R>(f: impl FnOnce() -> R) -> R {
    let me = sys::gettid();
    if RUNTIME_OWNER.load(Ordering::Relaxed) == me {
        return f();
    }
    RUNTIME_TURN.lock();
    RUNTIME_OWNER.store(me, Ordering::Relaxed);
    let mut backoff_ns = DRAIN_WAIT_NS;
    while !program_calls_drained() {
        // A program close that takes long (a lingering socket's, a slow file system's)
        // must not hold up the program's other closes behind our flag: let them in,
        // and try again a little later.
        RUNTIME_AT_WORK.store(false, Ordering::SeqCst);
        let word = AtomicU32::new(0);
        sys::futex_wait(&word, 0, Some(sys::now_ns() + backoff_ns));
        backoff_ns = (backoff_ns * 2).min(MAX_BACKOFF_NS);
    }
    let r = f();
    RUNTIME_AT_WORK.store(false, Ordering::Release);
    RUNTIME_OWNER.store(0, Ordering::Relaxed);
    RUNTIME_TURN.unlock();
    r
}

/// How long the runtime waits for the program's calls inside the gate to leave before
/// it lets new ones in again, and its first pause then. Origin: a close is a few
/// microseconds; this is a hundred of them.
const DRAIN_WAIT_NS: u64 = 200_000;
/// The longest pause between tries. Origin: a round number, short beside the monitor's
/// tick.
const MAX_BACKOFF_NS: u64 = 10_000_000;

/// Raises the runtime's flag and waits (at most [`DRAIN_WAIT_NS`]) until no program
/// call is inside the gate: whether none is (the flag then stays up).
fn program_calls_drained() -> bool {
    RUNTIME_AT_WORK.store(true, Ordering::SeqCst);
    let deadline = sys::now_ns() + DRAIN_WAIT_NS;
    for shard in &INSIDE {
        let mut spins = 0;
        while shard.0.load(Ordering::SeqCst) != 0 {
            if sys::now_ns() > deadline {
                return false;
            }
            pause(&mut spins);
        }
    }
    true
}

// ---------------------------------------------------------------------------------
// Making and closing the runtime's descriptors
// ---------------------------------------------------------------------------------

/// A new non-blocking, close-on-exec eventfd (raw: `eventfd` is one of our exports),
/// or -1; one of the runtime's own descriptors, made and marked alone
/// ([`runtime_alone`]).
pub fn eventfd_new() -> i32 {
    made_alone(|| sys::eventfd2(libc::EFD_NONBLOCK | libc::EFD_CLOEXEC))
}

/// A new close-on-exec epoll set, one of the runtime's own descriptors, or -1 (made as
/// [`eventfd_new`] is).
pub fn epoll_new() -> i32 {
    made_alone(|| sys::epoll_create1(libc::EPOLL_CLOEXEC))
}

/// `make()`'s descriptor, marked, with the program's closes kept out; -1 on failure.
fn made_alone(make: impl FnOnce() -> isize) -> i32 {
    runtime_alone(|| {
        let r = make();
        if r < 0 {
            -1
        } else {
            mark(r as i32);
            r as i32
        }
    })
}

/// [`eventfd_new`] for a descriptor the runtime keeps: moved out of the way of the low
/// numbers, to the lowest free one from `sys::late_fd_floor`. POSIX gives `open`,
/// `socket`, `dup` the lowest free number, and programs count on it: one that closes a
/// descriptor and opens another expects the same number back (varnishd's `close_range`
/// then `open`; `test-apps/c/io_fdreuse.c`), and one that opens files after its first
/// `pthread_create` expects the numbers it would get natively (`io_fdnumbers.c`). Where
/// no higher number is allowed it stays where it is.
pub fn eventfd_new_out_of_the_way() -> i32 {
    runtime_alone(|| move_out_of_the_way(eventfd_new()))
}

/// [`epoll_new`], moved out of the way as [`eventfd_new_out_of_the_way`] says.
pub fn epoll_new_out_of_the_way() -> i32 {
    runtime_alone(|| move_out_of_the_way(epoll_new()))
}

/// [`open_nul`] for a descriptor the runtime keeps while the program runs (a worker's
/// `/proc` task files, cgroup limits, `/proc/self/maps`): moved out of the way as
/// [`eventfd_new_out_of_the_way`] says, and for the same reason. Opened, marked and
/// moved alone, so a program's `close_range` finds it either not yet made or marked; a
/// program's `open` at that instant gets the number above it (there is no way to open
/// at a chosen number), which is why what the runtime keeps is opened where no program
/// thread can open, when the pool starts, wherever it can be.
pub fn open_nul_out_of_the_way(path_nul: &[u8], flags: i32) -> Option<i32> {
    runtime_alone(|| open_nul(path_nul, flags).map(move_out_of_the_way))
}

/// Moves the runtime's descriptor `fd` to the lowest free number from
/// `sys::late_fd_floor`, giving the low number back; `fd` itself where no higher
/// number is allowed (or `fd` is -1).
fn move_out_of_the_way(fd: i32) -> i32 {
    let floor = sys::late_fd_floor();
    if fd < 0 || fd >= floor {
        return fd;
    }
    runtime_alone(|| {
        let high = sys::fcntl_dupfd_cloexec(fd, floor);
        if high < 0 {
            return fd;
        }
        mark(high as i32);
        close(fd); // also gives the low number up as the runtime's
        high as i32
    })
}

/// `close(fd)` of one of the runtime's descriptors: no longer its own ([`unmark`],
/// before the close: the number may be reused at once), then closed, alone (a
/// program's close between the two would find the number neither the runtime's nor
/// the program's, and close it).
pub fn close(fd: i32) -> isize {
    runtime_alone(|| {
        unmark(fd);
        sys::close_unmarked(fd)
    })
}

/// Opens `path` (no NUL needed) for appending, creating it (mode 0644), with raw system
/// calls (`open` may be one of our exports). The descriptor, or None.
pub fn open_append(path: &[u8]) -> Option<i32> {
    open_path(path, libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND)
}

/// Opens `path` (no NUL needed) for reading, with raw system calls.
pub fn open_read(path: &[u8]) -> Option<i32> {
    open_path(path, libc::O_RDONLY)
}

fn open_path(path: &[u8], flags: i32) -> Option<i32> {
    let mut buf = Vec::with_capacity(path.len() + 1);
    buf.extend_from_slice(path);
    buf.push(0);
    open_nul(&buf, flags)
}

/// Opens the NUL-terminated `path_nul` with `flags | O_CLOEXEC` (mode 0644 if it
/// creates the file) by a raw system call: `open` may be one of our exports. No
/// allocation, so the monitor and the tz cache can use it. One of the runtime's
/// descriptors until [`close`]d.
pub fn open_nul(path_nul: &[u8], flags: i32) -> Option<i32> {
    open_nul_or_errno(path_nul, flags).ok()
}

/// [`open_nul`], with the errno of a failure.
pub fn open_nul_or_errno(path_nul: &[u8], flags: i32) -> Result<i32, i32> {
    // The runtime's while it is open: the program's `close_range(3, ~0U, 0)` or
    // `closefrom` between this open and its close (a monitor's read of /proc, once a
    // tick) closed it, the program's next descriptor got the number, and the runtime's
    // close closed that: a thread of `io_fdreuse from3` then waited in a read for good.
    // Opened and marked alone: no such call lands between the two.
    let fd = runtime_alone(|| {
        let fd = sys::openat(path_nul, flags);
        if fd >= 0 {
            mark(fd as i32);
        }
        fd
    });
    if fd < 0 {
        Err(-fd as i32)
    } else {
        Ok(fd as i32)
    }
}

/// Reads the start of the small file `path_nul` (NUL-terminated) into `buf` with one
/// raw `read`; the length read, or None if it cannot be opened or is empty.
pub fn read_file_nul(path_nul: &[u8], buf: &mut [u8]) -> Option<usize> {
    let fd = open_nul(path_nul, libc::O_RDONLY)?;
    let n = sys::read(fd, buf);
    close(fd);
    (n > 0).then_some(n as usize)
}

// ---------------------------------------------------------------------------------
// Holders, and moving a descriptor the program wants
// ---------------------------------------------------------------------------------

/// Cells that hold a descriptor the runtime keeps (workers' eventfds and task files,
/// the readiness sets, the kept maps file). Origin: 4 cells for each of up to 1024
/// workers, with room.
const HOLDERS: usize = 4096;
static HOLDER_CELLS: [AtomicPtr<AtomicI32>; HOLDERS] = [const { AtomicPtr::new(core::ptr::null_mut()) }; HOLDERS];
static HOLDERS_USED: AtomicUsize = AtomicUsize::new(0);

/// Registers `cell` as holding one of the runtime's descriptors for good: when the
/// program takes the number, the descriptor moves and the cell is pointed at its new
/// number. Each cell once (a cell registered twice is harmless, only wasted).
pub fn hold(cell: &'static AtomicI32) {
    register(cell, 0);
}

/// [`hold`] for a wake-up eventfd: when it moves, it is also signalled once, which ends
/// a direct wait that published the old number to its wakers (the waiter then looks
/// again, and publishes the new number next time).
pub fn hold_eventfd(cell: &'static AtomicI32) {
    register(cell, EVENTFD_TAG);
}

/// Set in a registered cell's address (cells are 4-aligned): the cell holds an eventfd.
const EVENTFD_TAG: usize = 1;

fn register(cell: &'static AtomicI32, tag: usize) {
    let k = HOLDERS_USED.fetch_add(1, Ordering::AcqRel);
    if k < HOLDERS {
        let tagged = (cell as *const AtomicI32 as usize | tag) as *mut AtomicI32;
        HOLDER_CELLS[k].store(tagged, Ordering::Release);
    }
}

/// The registered cells, each with whether it holds an eventfd.
fn holders() -> impl Iterator<Item = (&'static AtomicI32, bool)> {
    let used = HOLDERS_USED.load(Ordering::Acquire).min(HOLDERS);
    HOLDER_CELLS[..used].iter().filter_map(|c| {
        let p = c.load(Ordering::Acquire) as usize;
        // SAFETY: registered cells are 'static (`hold`); the tag is the low bit only.
        (p != 0).then(|| (unsafe { &*((p & !EVENTFD_TAG) as *const AtomicI32) }, p & EVENTFD_TAG != 0))
    })
}

/// How long a program call waits for the close of a descriptor the runtime opened
/// for a moment before it fails with EBUSY (which Linux's `dup2` may return).
const TRANSIENT_WAIT_NS: u64 = 2_000_000_000;

/// Makes the program's call `call` that replaces number `fd` (`dup2`, `dup3`), with
/// `fd` free of the runtime's: a descriptor of the runtime's under it is first moved
/// ([`sys::fcntl_dupfd_cloexec`] above the floor) and its holders told; one opened for
/// a moment is waited for. `Err(errno)` where it cannot be moved.
pub fn program_replaces<R>(fd: i32, call: impl FnOnce() -> R) -> Result<R, i32> {
    let mut call = Some(call);
    let mut run = || call.take().map(|c| c());
    if fd < 0 || fd as usize >= LIMIT {
        return Ok(run().expect("called once"));
    }
    let deadline = sys::now_ns() + TRANSIENT_WAIT_NS;
    let mut spins = 0;
    loop {
        {
            let _inside = program_closing(fd as u32);
            if !is_own(fd) {
                return Ok(run().expect("called once"));
            }
        }
        let moved = runtime_alone(|| {
            if !is_own(fd) {
                return Some(Ok(run().expect("called once")));
            }
            match move_held(fd) {
                Ok(true) => Some(Ok(run().expect("called once"))),
                Ok(false) => None,
                Err(e) => Some(Err(e)),
            }
        });
        if let Some(r) = moved {
            return r;
        }
        if sys::now_ns() > deadline {
            return Err(libc::EBUSY);
        }
        pause(&mut spins);
    }
}

/// Moves the runtime's `fd`, if a cell holds it, and points its holders at the new
/// number: whether it was held (a descriptor opened for a moment is not).
#[cold]
fn move_held(fd: i32) -> Result<bool, i32> {
    if !holders().any(|(cell, _)| cell.load(Ordering::Acquire) == fd) {
        return Ok(false);
    }
    let high = sys::fcntl_dupfd_cloexec(fd, sys::late_fd_floor().max(fd + 1));
    if high < 0 {
        return Err(libc::EBUSY);
    }
    let high = high as i32;
    mark(high);
    let mut eventfd = false;
    for (cell, is_eventfd) in holders() {
        if cell.compare_exchange(fd, high, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            eventfd |= is_eventfd;
        }
    }
    if eventfd {
        sys::eventfd_signal(high);
    }
    crate::base::stats::bump(&crate::base::stats::STATS.own_fds_moved);
    // The program's call replaces (closes) the old number.
    unmark(fd);
    Ok(true)
}

// ---------------------------------------------------------------------------------
// Fork
// ---------------------------------------------------------------------------------

/// In a forked child (its only thread, inside `fork`): the gate starts open, whatever
/// the parent's other threads held.
pub fn reset_gate_in_forked_child() {
    RUNTIME_TURN.reset_in_forked_child();
    RUNTIME_OWNER.store(0, Ordering::Relaxed);
    RUNTIME_AT_WORK.store(false, Ordering::Relaxed);
    for shard in &INSIDE {
        shard.0.store(0, Ordering::Relaxed);
    }
}

/// In a forked child of a pool (its only thread, inside `fork`): the parent's
/// descriptors are not the child's runtime's (it runs no pool), so each one still
/// marked is closed and forgotten (natively the child has none of them: its `dup2`
/// onto such a number and the `close` after it succeed), and so are the holders.
pub fn close_all_in_forked_child() {
    HOLDERS_USED.store(0, Ordering::Relaxed);
    for (w, word) in BITS.iter().enumerate() {
        let mut bits = word.swap(0, Ordering::AcqRel);
        while bits != 0 {
            let fd = w * 64 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            sys::close_unmarked(fd as i32);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// The runtime's turn waits for a program call inside the gate, and a program call
    /// that takes long (80 ms here) holds up neither the program's other calls nor, for
    /// more than its own length, the runtime.
    #[test]
    fn the_runtime_waits_for_program_calls_and_a_long_one_blocks_no_other() {
        let inside = Arc::new(AtomicBool::new(false));
        let long_call = {
            let inside = inside.clone();
            std::thread::spawn(move || {
                let _g = program_closing(7);
                inside.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(80));
                inside.store(false, Ordering::SeqCst);
            })
        };
        while !inside.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        let runtime = {
            let inside = inside.clone();
            std::thread::spawn(move || runtime_alone(|| inside.load(Ordering::SeqCst)))
        };
        std::thread::sleep(Duration::from_millis(5));
        let t = Instant::now();
        for fd in 0..100 {
            drop(program_closing(fd));
        }
        assert!(t.elapsed() < Duration::from_millis(60), "other program calls waited {:?}", t.elapsed());
        assert!(!runtime.join().unwrap(), "the runtime ran while a program call was inside");
        long_call.join().unwrap();
    }
}
