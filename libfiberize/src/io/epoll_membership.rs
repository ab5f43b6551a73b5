//! Whether an fd is in the reactor's epoll set: the registration lock (`REG_BUSY`)
//! and the hand-shake between a direct waiter that takes the fd out of the set and a
//! fiber that is about to park on the fd's readiness through the set.
//!
//! A fiber that waits for readiness through the reactor counts itself in the fd's
//! `epoll_waiters` ([`count_waiter`]), then makes sure the fd is in the set
//! ([`ensure_registered`]) and parks. A fiber about to wait *directly* (in `ppoll` on
//! its worker, `scheduler::direct_wait`) takes the fd out of the set first
//! ([`leave_epoll_set`]) so that readiness does not wake idle workers for nothing; it
//! must not do so under a fiber that relies on the registration.
//!
//! ```text
//!   parker                                   direct waiter (leave_epoll_set)
//!   epoll_waiters += 1                       epoll_waiters != 0? yes: stay in
//!   fence(SeqCst)  ◄──── pairs with ────►    take REG_BUSY (CAS) unless not REGISTERED
//!   take REG_BUSY unless REGISTERED          fence(SeqCst)
//!     (waits while somebody holds it)        epoll_waiters != 0? yes: stay in
//!   EPOLL_CTL_ADD, set REGISTERED            EPOLL_CTL_DEL, clear REGISTERED
//!   drop REG_BUSY; park                      drop REG_BUSY
//! ```
//!
//! The two SeqCst fences are the whole pairing (every access around them is Relaxed,
//! or Acquire/Release for taking and dropping `REG_BUSY`, which is a lock).
//! Either the direct waiter's second look sees the count and leaves the fd in, or the
//! parker's look at the flags (after its count) sees `REG_BUSY` held (it waits for it)
//! or `REGISTERED` cleared, and adds the fd again after the DEL. The epoll_ctl calls
//! themselves happen under `REG_BUSY`, so an ADD and a DEL happen in the order the
//! flags say.
//!
//! # Model-checked
//!
//! This file takes its atomics only from `crate::base::loom` and sees the epoll set
//! only through [`EpollSet`], so `libfiberize/tests/loom_protocols.rs`
//! (`epoll_removal_never_strands_a_parked_waiter`) compiles it as it is and drives
//! [`count_waiter`] + [`ensure_registered`] against [`leave_epoll_set`].

use crate::base::loom::{fence, spin_hint, yield_thread, AtomicU32, Ordering};

/// In the runtime's epoll set (`FdState::flags`, bit 2).
pub const REGISTERED: u32 = 4;
/// Registered for write readiness as well (bit 6; see [`ensure_registered`]).
pub const WATCH_WRITE: u32 = 64;
/// Held (set by CAS) while a thread changes the fd's epoll registration, so that an
/// EPOLL_CTL_DEL and a concurrent EPOLL_CTL_ADD happen in the order their flags say
/// (bit 7).
pub const REG_BUSY: u32 = 128;

/// How many polite spins before a waiter for `REG_BUSY` yields its thread. Origin: the
/// holder runs one epoll_ctl (about a microsecond).
const BUSY_SPINS: u32 = 64;

/// The epoll set, as seen for one fd (the reactor's `epoll_ctl` calls).
pub trait EpollSet {
    /// Puts the fd in the set, or (`already_in`) changes it to watch writes too;
    /// Err(errno) if epoll refuses it.
    fn put(&self, already_in: bool, for_write: bool) -> Result<(), i32>;
    /// EPOLL_CTL_DEL (a failure, the fd already gone, leaves nothing registered).
    fn remove(&self);
}

/// Counts a fiber in (`true`) or out of the waiters on the fd through the epoll set.
/// In before its [`ensure_registered`] and park.
#[inline]
pub fn count_waiter(epoll_waiters: &AtomicU32, coming: bool) {
    if coming {
        // Relaxed: the fence below orders it before our look at the flags.
        epoll_waiters.fetch_add(1, Ordering::Relaxed);
        // SeqCst fence: pairs with the one in `leave_epoll_set` (count, then look at
        // the flags; there: REG_BUSY taken, then look at the count). Without it the
        // flags we read next may be from before the direct waiter's CAS while it reads
        // our count as 0: it removes the fd and we park relying on the registration.
        fence(Ordering::SeqCst);
    } else {
        // Relaxed: a stale count only keeps the fd in the set a little longer.
        epoll_waiters.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Puts the fd in the epoll set if it is not there yet, watching write readiness only
/// once a writer has to wait (`for_write`). Err(errno) if epoll refuses it. A caller
/// that parks afterwards has counted itself with [`count_waiter`] first.
pub fn ensure_registered(flags: &AtomicU32, for_write: bool, set: &impl EpollSet) -> Result<(), i32> {
    ensure_registered_or_move(flags, for_write, false, set)
}

/// [`ensure_registered`], and with `relocate` also when the fd is registered already:
/// `set.put(true, …)` then moves it to the caller's set (`crate::io::scheduled_io`, a set
/// per worker). The move happens under `REG_BUSY` like every other `epoll_ctl` here,
/// and the fd stays `REGISTERED` through it, so the hand-shake with
/// [`leave_epoll_set`] is the one above.
pub fn ensure_registered_or_move(flags: &AtomicU32, for_write: bool, relocate: bool, set: &impl EpollSet) -> Result<(), i32> {
    let want = REGISTERED | if for_write { WATCH_WRITE } else { 0 };
    let Some(f) = lock_registration(flags, |f| f & want == want && !relocate) else { return Ok(()) };
    // A move keeps write readiness watched if it was.
    let r = set.put(f & REGISTERED != 0, for_write || f & WATCH_WRITE != 0);
    let gained = if r.is_ok() { want } else { 0 };
    // Release: drops REG_BUSY (the registration lock) after our epoll_ctl.
    flags.fetch_update(Ordering::Release, Ordering::Relaxed, |x| Some((x | gained) & !REG_BUSY)).ok();
    r
}

/// Takes the fd out of the epoll set for a direct wait, unless a fiber waits on it
/// through the reactor. Returns whether it is out.
pub fn leave_epoll_set(flags: &AtomicU32, epoll_waiters: &AtomicU32, set: &impl EpollSet) -> bool {
    // A quick look (Relaxed): the decision is the second look, after the fence.
    if epoll_waiters.load(Ordering::Relaxed) != 0 {
        return false;
    }
    let Some(f) = lock_registration(flags, |f| f & REGISTERED == 0) else { return true };
    // SeqCst fence: pairs with the one in `count_waiter` (REG_BUSY taken, then the
    // count; there: the count, then the flags). Without it our load of the count may
    // be from before a parker's increment while that parker saw the flags from before
    // our REG_BUSY: we remove the fd under a fiber that parks relying on it.
    fence(Ordering::SeqCst);
    let out = epoll_waiters.load(Ordering::Relaxed) == 0;
    if out {
        set.remove();
    }
    let dropped = if out { REGISTERED | WATCH_WRITE } else { 0 };
    debug_assert!(f & REGISTERED != 0);
    // Release: drops REG_BUSY after our epoll_ctl.
    flags.fetch_and(!(dropped | REG_BUSY), Ordering::Release);
    out
}

/// Takes `REG_BUSY` and returns the flags it was taken from, or `None` without taking
/// it when `done(flags)` says there is nothing to change. Waits while another thread
/// holds it (for one epoll_ctl).
fn lock_registration(flags: &AtomicU32, done: impl Fn(u32) -> bool) -> Option<u32> {
    let mut spins = 0u32;
    loop {
        // Relaxed: the CAS below takes the lock (Acquire); in `count_waiter`'s pairing
        // the fence orders this load.
        let f = flags.load(Ordering::Relaxed);
        if f & REG_BUSY != 0 {
            spins += 1;
            if spins < BUSY_SPINS {
                spin_hint()
            } else {
                yield_thread()
            }
            continue;
        }
        if done(f) {
            return None;
        }
        if flags.compare_exchange(f, f | REG_BUSY, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            return Some(f);
        }
    }
}
