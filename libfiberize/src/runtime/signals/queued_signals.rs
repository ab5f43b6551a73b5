//! The siginfo of signals queued to a fiber's thread: `pthread_sigqueue`,
//! `rt_tgsigqueueinfo`, a POSIX timer aimed at the fiber's thread id
//! (`crate::signal::delivery::queue_to_fiber`, `crate::thread::timers`).
//!
//! A fiber's held signals are one bit per signal (`SignalState`), which is all that
//! `pthread_kill` needs: the kernel writes its siginfo itself (`SI_TKILL`, the sender's
//! pid and uid). A queued signal carries the sender's own siginfo (`SI_QUEUE` with its
//! `si_value`, or a timer's `SI_TIMER` with its timer id, overrun and `si_value`), and
//! a real-time signal queues: each instance sent is delivered once, in the order sent.
//! Those siginfos wait here, in one table for the process, beside the held bit, until
//! the fiber raises the signal on the kernel thread that runs it with
//! `rt_tgsigqueueinfo` (a thread may give itself any siginfo) or takes it with
//! `sigtimedwait`; a fiber that went to its donor for good sends them all there.
//!
//! **The bit and its entries.** A sender adds the entry and sets the held bit of the
//! thread in one step, under the table's lock ([`hold`]). Whoever takes that bit
//! (`SignalState::take_sent_to_thread`, `take_all`) then takes the oldest entry of that
//! signal ([`take`]) and, when more are left, sets the bit again in the same step: so
//! each entry is taken by exactly one taker of the bit, and the bit is set while an
//! entry waits. The taker's test of [`STORED`] comes after its take of the bit, which
//! read the sender's SeqCst set: the sender's entry, stored before, is seen. Signals
//! held as sent to the process (`SignalState`'s other word) never have an entry.
//!
//! **As the kernel queues.** A standard signal does not queue: one sent while the
//! fiber holds it already is merged into the held one, whose siginfo stays (the kernel
//! keeps the first). A timer's signal still held when the timer fires again is not
//! queued twice: its overrun count grows, as the kernel's does. The table is bounded
//! ([`CAPACITY`] entries for the process); when it is full a queued signal is refused
//! with `EAGAIN`, as the kernel refuses one over `RLIMIT_SIGPENDING`.

use core::sync::atomic::{AtomicUsize, Ordering};

use libc::{c_int, siginfo_t};

use crate::base::rawlock::RawLock;
use crate::base::sys;
use crate::runtime::fibers::fiber::{Fiber, Life};

/// Queued siginfos the table holds at most, for all fibers together. Origin: the
/// kernel's default `RLIMIT_SIGPENDING` is thousands per user; a program queues a
/// handful to a thread between two deliveries, so 1024 covers it with room, and the
/// table (all zeros at the start: no page of it is touched before the first queued
/// signal) scans in about a microsecond.
pub const CAPACITY: usize = 1024;

/// The first real-time signal of the kernel: signals below it do not queue.
const FIRST_REALTIME: c_int = 32;

/// One queued signal: for fiber `fiber` (its id; 0: a free entry), signal `sig`, sent
/// `seq`-th, with siginfo `info`.
#[derive(Clone, Copy)]
struct Entry {
    fiber: u64,
    sig: c_int,
    seq: u64,
    info: Info,
}

/// A siginfo as plain words (libc's `siginfo_t` holds a pointer, so it is not `Send`).
#[derive(Clone, Copy)]
struct Info([u64; 16]);

const _: () = assert!(core::mem::size_of::<siginfo_t>() == core::mem::size_of::<Info>());

impl Info {
    fn of(info: &siginfo_t) -> Info {
        // SAFETY: both are 128 bytes (asserted above) of plain data; siginfo_t is 8-aligned.
        Info(unsafe { core::mem::transmute_copy::<siginfo_t, [u64; 16]>(info) })
    }
    fn get(&self) -> siginfo_t {
        // SAFETY: as in `of`; any bytes are a valid siginfo_t.
        unsafe { core::mem::transmute_copy::<[u64; 16], siginfo_t>(&self.0) }
    }
}

const FREE: Entry = Entry { fiber: 0, sig: 0, seq: 0, info: Info([0; 16]) };

struct Table {
    entries: [Entry; CAPACITY],
    next_seq: u64,
}

static TABLE: RawLock<Table> = RawLock::new(Table { entries: [FREE; CAPACITY], next_seq: 0 });
/// Entries in use: the takers' lock-free test (module docs).
static STORED: AtomicUsize = AtomicUsize::new(0);

// siginfo_t's union at byte 16 (x86_64, aarch64): `_timer` is { si_tid, si_overrun,
// si_sigval }, `_rt` is { si_pid, si_uid, si_sigval }.
const UNION_OFFSET: usize = 16;

fn union_int(info: &siginfo_t, index: usize) -> c_int {
    // SAFETY: the union lies within the 128-byte siginfo_t, at an int-aligned offset.
    unsafe { *((info as *const siginfo_t as *const u8).add(UNION_OFFSET) as *const c_int).add(index) }
}

fn set_union_int(info: &mut siginfo_t, index: usize, value: c_int) {
    // SAFETY: as in `union_int`, and `info` is writable.
    unsafe { *((info as *mut siginfo_t as *mut u8).add(UNION_OFFSET) as *mut c_int).add(index) = value };
}

/// A timer signal's kernel timer id (`si_timerid`).
pub fn timer_id(info: &siginfo_t) -> c_int {
    union_int(info, 0)
}

/// Sets a siginfo's `si_pid` and `si_uid` (or a timer's `si_timerid` and `si_overrun`).
pub fn set_sender(info: &mut siginfo_t, pid_or_timer: c_int, uid_or_overrun: c_int) {
    set_union_int(info, 0, pid_or_timer);
    set_union_int(info, 1, uid_or_overrun);
}

/// Sets a siginfo's `si_value`.
pub fn set_value(info: &mut siginfo_t, value: libc::sigval) {
    // SAFETY: si_value lies at bytes 24..32 of the 128-byte siginfo_t, 8-aligned.
    unsafe { *((info as *mut siginfo_t as *mut u8).add(UNION_OFFSET + 8) as *mut libc::sigval) = value };
}

/// What [`hold`] did with a queued signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queued {
    /// Held for the fiber with its siginfo: the caller wakes the fiber.
    Held,
    /// Merged into a signal held already (a standard signal, a timer's next expiry).
    Merged,
}

/// Holds signal `sig` (1..=64) for fiber `f` with the siginfo `info` (module docs).
/// `Err(EAGAIN)` when the table is full. A fiber that finished takes nothing: its end
/// ([`forget`], under the same lock, after `Life::Finished`) leaves no entry behind.
pub fn hold(f: &Fiber, sig: c_int, info: &siginfo_t) -> Result<Queued, c_int> {
    let bit = 1u64 << (sig - 1);
    let fid = f.id();
    let mut t = TABLE.lock();
    if f.life() == Life::Finished {
        return Ok(Queued::Merged);
    }
    if info.si_code == libc::SI_TIMER {
        let same_timer = |e: &Entry| {
            let held = e.info.get();
            e.fiber == fid && e.sig == sig && held.si_code == libc::SI_TIMER && timer_id(&held) == timer_id(info)
        };
        if let Some(e) = t.entries.iter_mut().find(|e| same_timer(e)) {
            let mut held = e.info.get();
            let overrun = union_int(&held, 1).saturating_add(1).saturating_add(union_int(info, 1).max(0));
            set_union_int(&mut held, 1, overrun);
            e.info = Info::of(&held);
            return Ok(Queued::Merged);
        }
    }
    if sig < FIRST_REALTIME && f.signals.held_sent_to_thread() & bit != 0 {
        return Ok(Queued::Merged);
    }
    let Some(slot) = t.entries.iter().position(|e| e.fiber == 0) else { return Err(libc::EAGAIN) };
    let seq = t.next_seq;
    t.next_seq += 1;
    t.entries[slot] = Entry { fiber: fid, sig, seq, info: Info::of(info) };
    STORED.fetch_add(1, Ordering::SeqCst);
    f.signals.hold(sig);
    Ok(Queued::Held)
}

/// After its caller took fiber `f`'s held bit of `sig`: the oldest siginfo queued with
/// it, if any. With `hold_rest`, the bit is set again when more are queued (they are
/// the next deliveries); without, the caller takes them all.
pub fn take(f: &Fiber, sig: c_int, hold_rest: bool) -> Option<siginfo_t> {
    if STORED.load(Ordering::SeqCst) == 0 {
        return None;
    }
    take_slow(f, sig, hold_rest)
}

#[cold]
fn take_slow(f: &Fiber, sig: c_int, hold_rest: bool) -> Option<siginfo_t> {
    let fid = f.id();
    let mut t = TABLE.lock();
    let mine = |e: &Entry| e.fiber == fid && e.sig == sig;
    let oldest = t.entries.iter().enumerate().filter(|(_, e)| mine(e)).min_by_key(|(_, e)| e.seq).map(|(i, _)| i)?;
    let info = t.entries[oldest].info.get();
    t.entries[oldest].fiber = 0;
    STORED.fetch_sub(1, Ordering::SeqCst);
    if hold_rest && t.entries.iter().any(mine) {
        f.signals.hold(sig);
    }
    Some(info)
}

/// Whether the oldest instance or every one of a taken signal is sent ([`send_taken`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Instances {
    /// The oldest; the others stay held (a fiber raises each in turn).
    Oldest,
    /// All of them (to a plain thread, where the kernel queues them).
    All,
}

/// Sends signal `sig`, whose held bit the caller took for fiber `f`, to kernel thread
/// `tid` of this process (the worker that runs the fiber, or the donor of a fiber that
/// went there for good), with the siginfo queued with it; without one, as `tgkill`
/// sends it. Returns the last system call's result (0 or -errno).
pub fn send_taken(f: &Fiber, sig: c_int, tid: i32, instances: Instances) -> isize {
    let mut result = None;
    while let Some(info) = take(f, sig, instances == Instances::Oldest) {
        result = Some(send_with_info(tid, sig, &info));
        if instances == Instances::Oldest {
            break;
        }
    }
    result.unwrap_or_else(|| sys::tgkill(tid, sig))
}

/// [`send_taken`] of every instance to the calling kernel thread: a fiber that became
/// a plain thread raises what was held for it, on its donor.
pub fn send_all_here(f: &Fiber, sig: c_int) -> isize {
    send_taken(f, sig, sys::gettid(), Instances::All)
}

/// `rt_tgsigqueueinfo` to `tid`; the kernel lets a thread forge the siginfo of `kill`
/// or `tgkill` (`si_code >= 0`, `SI_TKILL`) only for itself, so to another thread
/// such a signal goes as `tgkill` sends it.
fn send_with_info(tid: i32, sig: c_int, info: &siginfo_t) -> isize {
    if (info.si_code >= 0 || info.si_code == libc::SI_TKILL) && tid != sys::gettid() {
        return sys::tgkill(tid, sig);
    }
    sys::rt_tgsigqueueinfo(tid, sig, info)
}

/// Fiber `f` ended (its `Life::Finished` published): what was queued for it is
/// dropped, as a thread's pending signals end with it.
pub fn forget(f: &Fiber) {
    if STORED.load(Ordering::SeqCst) == 0 {
        return;
    }
    let fid = f.id();
    let mut t = TABLE.lock();
    for e in t.entries.iter_mut().filter(|e| e.fiber == fid) {
        e.fiber = 0;
        STORED.fetch_sub(1, Ordering::SeqCst);
    }
}

/// In a forked child: no fiber of the parent exists there.
///
/// # Safety
/// Only from the atfork child hook (one thread, nothing else running).
pub unsafe fn reset_in_forked_child() {
    // SAFETY: the child's one thread, before anything uses the table (this fn's # Safety).
    unsafe { TABLE.unlock_in_forked_child() };
    // Emptied in place: a new table would be built on this thread's stack first.
    TABLE.lock().entries.iter_mut().for_each(|e| e.fiber = 0);
    STORED.store(0, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue_info(value: c_int, code: c_int) -> siginfo_t {
        // SAFETY: all-zero is a valid siginfo_t.
        let mut info: siginfo_t = unsafe { core::mem::zeroed() };
        info.si_code = code;
        set_sender(&mut info, 7, 0);
        set_union_int(&mut info, 2, value);
        info
    }

    #[test]
    fn real_time_signals_queue_in_order_and_standard_ones_merge() {
        let f = Fiber::new(0);
        let rt = 40;
        assert_eq!(hold(&f, rt, &queue_info(1, libc::SI_QUEUE)), Ok(Queued::Held));
        assert_eq!(hold(&f, rt, &queue_info(2, libc::SI_QUEUE)), Ok(Queued::Held));
        let bit = 1u64 << (rt - 1);
        assert!(f.signals.take_sent_to_thread(bit));
        assert_eq!(take(&f, rt, true).map(|i| union_int(&i, 2)), Some(1));
        assert!(f.signals.held() & bit != 0, "the second instance keeps the bit");
        assert!(f.signals.take_sent_to_thread(bit));
        assert_eq!(take(&f, rt, true).map(|i| union_int(&i, 2)), Some(2));
        assert_eq!(f.signals.held() & bit, 0);
        assert!(take(&f, rt, true).is_none());

        let usr1 = libc::SIGUSR1;
        assert_eq!(hold(&f, usr1, &queue_info(3, libc::SI_QUEUE)), Ok(Queued::Held));
        assert_eq!(hold(&f, usr1, &queue_info(4, libc::SI_QUEUE)), Ok(Queued::Merged));
        assert!(f.signals.take_sent_to_thread(1u64 << (usr1 - 1)));
        assert_eq!(take(&f, usr1, true).map(|i| union_int(&i, 2)), Some(3));
        assert!(take(&f, usr1, true).is_none());
    }

    #[test]
    fn a_timer_held_still_counts_an_overrun() {
        let f = Fiber::new(0);
        let sig = 45;
        let mut tick = queue_info(9, libc::SI_TIMER);
        set_sender(&mut tick, 3, 0);
        assert_eq!(hold(&f, sig, &tick), Ok(Queued::Held));
        assert_eq!(hold(&f, sig, &tick), Ok(Queued::Merged));
        assert_eq!(hold(&f, sig, &tick), Ok(Queued::Merged));
        assert!(f.signals.take_sent_to_thread(1u64 << (sig - 1)));
        let got = take(&f, sig, true).expect("queued");
        assert_eq!((timer_id(&got), union_int(&got, 1), union_int(&got, 2)), (3, 2, 9));
        forget(&f);
    }
}
