//! The parking lot: one waiter-queue design for every blocking primitive, serving fibers and plain OS threads alike
//! (docs/DESIGN.md §2.6).
//!
//! A waiter parks on an address (`key`): a mutex, a condition variable, a futex word. Queues live in a fixed table of buckets
//! hashed by address, each a [`RawMutex`] and an intrusive doubly linked list of [`Waiter`]s that sit on the waiters' own
//! stacks; nothing is allocated. This is the design of WebKit's and Rust's `parking_lot`; ours differs in what "sleep" means:
//!
//! * a **fiber** waiter parks through the scheduler (`scheduler::park_current`): its
//!   worker goes on with other fibers;
//! * a **thread** waiter (main thread, donor in zombie phase, foreign thread, forked
//!   child) sleeps on a futex on its own `woken` word.
//!
//! # Wake-up hand-over
//!
//! An unparker, *under the bucket lock*, unlinks the waiter, reads what it needs from it (a strong reference to the fiber),
//! stores the token and sets `woken = 1` (Release). From that instant the waiter may return and its stack frame vanish, so
//! the unparker touches the waiter no more, except for a futex wake on the `woken` address, which is harmless on a dead
//! address. A waiter that times out takes the bucket lock and removes itself only if `woken` is still 0; otherwise the
//! wake-up won the race and the waiter reports it (no wake-up is ever lost to a timeout).
//!
//! [`unpark_some_quick`] skips the bucket lock when the bucket is empty: a Dekker pair
//! with `park`, explained and model-checked in [`crate::sync::parking_quick`].
//!
//! [`unpark_one_fair`] (the mutex's contended unlock) also tells its caller whether to
//! hand the lock over this time: [`crate::sync::parking_fair`].

use core::cell::Cell;
use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

use crate::base::rawlock::RawMutex;
use crate::base::sys;
use crate::runtime::fibers::fiber::{Fiber, WaitKind};
use crate::runtime::scheduler;
pub use crate::sync::lock_word::Place;
use crate::sync::parking_fair::FairTimer;
use crate::sync::parking_quick::{self, BucketLock};
use crate::sync::parking_wake::{self, Wake, WakeBatch};
use crate::sync::wait_loop::{self, Queued};
pub use crate::sync::wait_loop::{Deadline, ParkResult};

/// log2 of the bucket count. Origin: thousands of parked I/O fibers, whose keys walked
/// long chains with fewer (docs/RESULTS.md#parking-table-size).
const BUCKET_BITS: u32 = 12;
/// Buckets of the address-keyed table (each a lock and a waiter list).
const BUCKETS: usize = 1 << BUCKET_BITS;

/// Token passed from unparker to waiter.
pub const TOKEN_NORMAL: usize = 0;
/// The unparker handed ownership of the lock directly to the waiter.
pub const TOKEN_HANDOFF: usize = 1;

#[repr(align(64))]
struct Bucket {
    lock: RawMutex,
    /// Written only under `lock`; atomic so that [`unpark_some_quick`] may peek at it
    /// without the lock (see "Lock-free emptiness check" above).
    head: AtomicPtr<Waiter>,
    tail: Cell<*const Waiter>,
    /// When [`unpark_one_fair`] is fair next.
    fair: FairTimer,
}

// SAFETY: `head`/`tail`, the fairness cells and the waiters they link are only touched
// under `lock`.
unsafe impl Sync for Bucket {}

impl BucketLock for RawMutex {
    fn lock(&self) {
        RawMutex::lock(self)
    }
    fn unlock(&self) {
        RawMutex::unlock(self)
    }
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_BUCKET: Bucket =
    Bucket { lock: RawMutex::new(), head: AtomicPtr::new(ptr::null_mut()), tail: Cell::new(ptr::null()), fair: FairTimer::new() };
static TABLE: [Bucket; BUCKETS] = [EMPTY_BUCKET; BUCKETS];

/// In a forked child: every queue empty and unlocked. No waiter of the parent exists in the child (the forking thread
/// was not waiting), and a bucket lock held by another thread at the fork would never be released.
///
/// # Safety
/// Only from the atfork child hook (one thread, nothing else running).
pub unsafe fn forget_all_waiters_in_forked_child() {
    for b in TABLE.iter() {
        b.lock.reset_in_forked_child();
        b.head.store(ptr::null_mut(), Ordering::Relaxed);
        b.tail.set(ptr::null());
    }
}

#[inline]
fn bucket(key: usize) -> &'static Bucket {
    // Fibonacci hashing of the address.
    let h = (key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - BUCKET_BITS);
    &TABLE[h as usize]
}

pub struct Waiter {
    /// Changed only by requeue, under the locks of both buckets.
    key: AtomicUsize,
    bitset: u32,
    prev: Cell<*const Waiter>,
    next: Cell<*const Waiter>,
    /// The parked fiber, or null for a thread waiter.
    fiber: *const Fiber,
    woken: AtomicU32,
    token: Cell<usize>,
    /// Real-time priority of a thread waiter (0: none), see [`REALTIME_IN_USE`].
    rt_priority: i32,
    /// Queued with `Place::Front` (woken, it lost the lock): the only kind [`unpark_one_fair`] may call fair.
    at_front: bool,
    /// `scheduler::monitor_ticks()` when a fiber queued on a mutex (0 otherwise).
    parked_tick: u64,
}

/// Set once the program created a SCHED_FIFO/SCHED_RR thread. From then on thread waiters record their real-time
/// priority and [`unpark_one`] wakes the highest first, as the kernel's futex does for real-time tasks (fibers: 0).
pub static REALTIME_IN_USE: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// The calling thread's real-time priority (0 under SCHED_OTHER and friends).
fn own_rt_priority() -> i32 {
    let policy = sys::sched_getscheduler() as i32;
    if policy != libc::SCHED_FIFO && policy != libc::SCHED_RR {
        return 0;
    }
    let mut p = libc::sched_param { sched_priority: 0 };
    sys::sched_getparam(&mut p);
    p.sched_priority
}

impl Waiter {
    fn new(key: usize, bitset: u32, fiber: *const Fiber, at_front: bool, kind: WaitKind) -> Waiter {
        Waiter {
            key: AtomicUsize::new(key),
            bitset,
            prev: Cell::new(ptr::null()),
            next: Cell::new(ptr::null()),
            fiber,
            woken: AtomicU32::new(0),
            token: Cell::new(TOKEN_NORMAL),
            rt_priority: if fiber.is_null() && REALTIME_IN_USE.load(Ordering::Relaxed) { own_rt_priority() } else { 0 },
            at_front,
            parked_tick: if kind == WaitKind::Mutex && !fiber.is_null() { scheduler::monitor_ticks() } else { 0 },
        }
    }
}

impl Bucket {
    fn push_back(&self, w: &Waiter) {
        w.prev.set(self.tail.get());
        w.next.set(ptr::null());
        if self.tail.get().is_null() {
            parking_quick::set_first(&self.head, w as *const Waiter as *mut Waiter);
        } else {
            // SAFETY: list members are live waiters (they do not leave without unlinking).
            unsafe { (*self.tail.get()).next.set(w) };
        }
        self.tail.set(w);
    }

    fn push_front(&self, w: &Waiter) {
        let old_first = self.head.load(Ordering::Relaxed) as *const Waiter;
        w.prev.set(ptr::null());
        w.next.set(old_first);
        if old_first.is_null() {
            self.tail.set(w);
        } else {
            // SAFETY: list members are live waiters (they do not leave without unlinking).
            unsafe { (*old_first).prev.set(w) };
        }
        parking_quick::set_first(&self.head, w as *const Waiter as *mut Waiter);
    }

    fn unlink(&self, w: *const Waiter) {
        // SAFETY: `w` is on this list, so it and its neighbours are live.
        unsafe {
            let (p, n) = ((*w).prev.get(), (*w).next.get());
            if p.is_null() {
                parking_quick::set_first(&self.head, n as *mut Waiter)
            } else {
                (*p).next.set(n)
            }
            if n.is_null() {
                self.tail.set(p)
            } else {
                (*n).prev.set(p)
            }
        }
    }

    fn any_with_key(&self, key: usize) -> bool {
        let mut p = self.head.load(Ordering::Relaxed) as *const Waiter;
        while !p.is_null() {
            // SAFETY: list members are live.
            unsafe {
                if (*p).key.load(Ordering::Relaxed) == key {
                    return true;
                }
                p = (*p).next.get();
            }
        }
        false
    }
}

/// Parks the caller on `key`, behind the waiters already queued.
///
/// * `validate` runs under the bucket lock before queueing; if false, returns Invalid.
/// * `before_sleep` runs after queueing and unlocking the bucket (e.g. release a mutex).
/// * `timed_out(key_still_has_waiters)` runs under the bucket lock if the deadline won.
pub fn park(
    key: usize,
    bitset: u32,
    kind: WaitKind,
    validate: impl FnOnce() -> bool,
    before_sleep: impl FnOnce(),
    timed_out: impl FnOnce(bool),
    deadline: Deadline,
) -> ParkResult {
    park_in(Place::Back, key, bitset, kind, validate, before_sleep, timed_out, deadline)
}

/// [`park`], queueing at `place`.
#[allow(clippy::too_many_arguments)]
pub fn park_in(
    place: Place,
    key: usize,
    bitset: u32,
    kind: WaitKind,
    validate: impl FnOnce() -> bool,
    before_sleep: impl FnOnce(),
    timed_out: impl FnOnce(bool),
    deadline: Deadline,
) -> ParkResult {
    // The report's lock waits (`crate::base::sites`): one entry per lock, named by the
    // call site of its first contended wait (captured at the end, while the program's
    // frames are still above ours on the stack).
    let report_kind = match kind {
        _ if !crate::base::sites::on() => None,
        WaitKind::Mutex => Some(crate::base::sites::Kind::Mutex),
        WaitKind::RwLock => Some(crate::base::sites::Kind::RwLock),
        WaitKind::Cond => Some(crate::base::sites::Kind::Cond),
        _ => None,
    };
    let since = if report_kind.is_some() { crate::base::sites::now() } else { 0 };
    let me = crate::runtime::fibers::switch::current_or_demote();
    let waiter = Waiter::new(key, bitset, me.map_or(ptr::null(), |f| f as *const Fiber), place == Place::Front, kind);
    let b = bucket(key);
    // Queue first, then validate (with a SeqCst fence between): the mirror image of
    // a waker that changes the state, fences, then peeks at the queue without the lock.
    let link = || match place {
        Place::Back => b.push_back(&waiter),
        Place::Front => b.push_front(&waiter),
    };
    if !parking_quick::queue_then_validate(&b.lock, link, validate, || b.unlink(&waiter)) {
        return ParkResult::Invalid;
    }
    before_sleep();
    let queued = InBucket { waiter: &waiter, key, timed_out: Cell::new(Some(timed_out)) };
    let result = wait_loop::sleep_queued(me, kind, key, deadline, &queued);
    if let Some(e) = report_kind.and_then(|k| crate::base::sites::entry(k, key, crate::base::sites::program_call_site)) {
        e.add(crate::base::sites::now().saturating_sub(since));
    }
    result
}

/// A waiter on a bucket's list, for the wait loop (`crate::sync::wait_loop`).
struct InBucket<'a, T: FnOnce(bool)> {
    waiter: &'a Waiter,
    /// The key it parked on (a requeue may have moved it since).
    key: usize,
    /// The caller's `timed_out`, run if it leaves the key it parked on.
    timed_out: Cell<Option<T>>,
}

impl<T: FnOnce(bool)> Queued for InBucket<'_, T> {
    fn taken(&self) -> Option<usize> {
        (self.waiter.woken.load(Ordering::Acquire) != 0).then(|| self.waiter.token.get())
    }

    fn withdraw(&self) -> bool {
        // A requeue may have moved us to another key: lock the bucket of the key we
        // are on now, and re-check it under that lock.
        let (cur_bucket, cur_key) = loop {
            let k = self.waiter.key.load(Ordering::Relaxed);
            let cb = bucket(k);
            cb.lock.lock();
            if self.waiter.key.load(Ordering::Relaxed) == k {
                break (cb, k);
            }
            cb.lock.unlock();
        };
        let left = self.waiter.woken.load(Ordering::Acquire) == 0;
        if left {
            cur_bucket.unlink(self.waiter);
            let more = cur_bucket.any_with_key(cur_key);
            if cur_key == self.key {
                if let Some(f) = self.timed_out.take() {
                    f(more);
                }
            }
        }
        cur_bucket.lock.unlock();
        left
    }

    fn sleep_thread(&self, deadline: Deadline) -> bool {
        sys::futex_wait(&self.waiter.woken, 0, deadline) == -(libc::EINTR as isize)
    }
}

/// What an unparker learns, under the bucket lock, before the waiter is released.
#[derive(Debug, Clone, Copy)]
pub struct UnparkInfo {
    /// A waiter was dequeued.
    pub unparked: bool,
    /// More waiters remain on the key.
    pub have_more: bool,
    /// [`unpark_one_fair`] only: the dequeued waiter had queued at the front and the
    /// bucket's fairness interval has passed: hand it what it waits for.
    pub be_fair: bool,
}

/// Unlinks `w` and prepares its wake-up (under the bucket lock).
fn take(b: &Bucket, w: *const Waiter, token: usize) -> Wake {
    b.unlink(w);
    // SAFETY: `w` was on the list, hence live until we set `woken`.
    unsafe {
        let wake = if (*w).fiber.is_null() {
            Wake::Thread(&(*w).woken)
        } else {
            // The fiber is alive: it is parked in `park`, and its donor holds an Arc.
            Wake::Fiber(scheduler::arc_from_ref(&*(*w).fiber))
        };
        (*w).token.set(token);
        (*w).woken.store(1, Ordering::Release);
        wake
    }
}

/// Wakes the first waiter on `key`. `callback` runs under the bucket lock and returns
/// the token for the waiter (TOKEN_HANDOFF to pass a lock directly).
pub fn unpark_one(key: usize, callback: impl FnOnce(UnparkInfo) -> usize) -> bool {
    unpark_one_with(key, Handing::Never, callback)
}

/// [`unpark_one`] for a mutex: `UnparkInfo::be_fair` is set when the waiter it dequeues queued at the front (it was
/// woken before and lost) and the bucket's fairness interval has passed ([`crate::sync::parking_fair`]); a waiter
/// others queue behind that parked long is woken with [`scheduler::unpark_lock_waiter`].
pub fn unpark_one_fair(key: usize, callback: impl FnOnce(UnparkInfo) -> usize) -> bool {
    unpark_one_with(key, Handing::Convoy, callback)
}

/// A program's wake of one waiter on its own lock word (`FUTEX_WAKE` of 1, the unlock of
/// a futex-based lock such as InnoDB's `srw_mutex`), by a fiber that contends for that
/// word itself (`sync::futex`: it waited on it lately): the waker gives the wakee its
/// worker ([`scheduler::unpark_lock_waiter`]), as the kernel's wake-up preemption runs a
/// thread that slept. Returns how many it woke (0 or 1).
///
/// Queued instead, a woken InnoDB latch waiter stayed counted in the latch word until its
/// turn came, and every unlock meanwhile woke again, to nobody: thousands of wakes a
/// TPC-C transaction. A waker that never waits on the word signals it (a condition's
/// notify, a thread's unpark): handing off there made a producer that notifies a
/// consumer at every push run a round trip between two fibers per item, below native,
/// and did not pay on TPC-C. Rejected: handing off only behind a long queue (did not pay
/// on TPC-C), yielding at a second wake to nobody (livelocked MariaDB), and handing a
/// signal's wakee the worker after a long wait (did not pay);
/// docs/RESULTS.md#futex-wake-handoff and #futex-wake-contender.
pub fn unpark_one_handing_off(key: usize) -> usize {
    if !parking_quick::anybody_queued_after_publishing(&bucket(key).head) {
        return 0;
    }
    usize::from(unpark_one_with(key, Handing::Always, |_| TOKEN_NORMAL))
}

/// When `unpark_one_with` gives the wakee the waker's worker.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Handing {
    /// A mutex's wake: only out of a convoy (and fairness is looked at).
    Convoy,
    /// Never.
    Never,
    /// Always (from a fiber).
    Always,
}

fn unpark_one_with(key: usize, handing: Handing, callback: impl FnOnce(UnparkInfo) -> usize) -> bool {
    let b = bucket(key);
    b.lock.lock();
    let mut p = b.head.load(Ordering::Relaxed) as *const Waiter;
    // SAFETY: list members are live under the lock.
    unsafe {
        while !p.is_null() && (*p).key.load(Ordering::Relaxed) != key {
            p = (*p).next.get();
        }
    }
    if p.is_null() {
        callback(UnparkInfo { unparked: false, have_more: false, be_fair: false });
        b.lock.unlock();
        return false;
    }
    let first = p;
    if REALTIME_IN_USE.load(Ordering::Relaxed) {
        // The highest real-time priority first; FIFO among equals.
        // SAFETY: list members are live under the lock.
        unsafe {
            let mut q = (*p).next.get();
            while !q.is_null() {
                if (*q).key.load(Ordering::Relaxed) == key && (*q).rt_priority > (*p).rt_priority {
                    p = q;
                }
                q = (*q).next.get();
            }
        }
    }
    // Another waiter on the key remains: `first`, if we chose a later one, else any
    // after it.
    // SAFETY: `p` is live under the lock.
    let have_more = p != first
        || unsafe {
            let mut q = (*p).next.get();
            while !q.is_null() && (*q).key.load(Ordering::Relaxed) != key {
                q = (*q).next.get();
            }
            !q.is_null()
        };
    // SAFETY: `p` is live under the lock.
    let (at_front, parked_tick) = unsafe { ((*p).at_front, (*p).parked_tick) };
    let be_fair = handing == Handing::Convoy && at_front && b.fair.be_fair(sys::now_ns(), key);
    let token = callback(UnparkInfo { unparked: true, have_more, be_fair });
    let hand_off = match handing {
        Handing::Always => true,
        Handing::Convoy => have_more && scheduler::parked_long(parked_tick),
        Handing::Never => false,
    };
    let wake = take(b, p, token);
    b.lock.unlock();
    wake.run_as(hand_off);
    true
}

/// Wakes up to `max` waiters on `key` whose bitset intersects `bitset`. Returns how many.
/// `callback(n)` runs under the bucket lock with the number dequeued.
pub fn unpark_some(key: usize, bitset: u32, max: usize, callback: impl FnOnce(usize)) -> usize {
    if max == 0 {
        let b = bucket(key);
        b.lock.lock();
        callback(0);
        b.lock.unlock();
        return 0;
    }
    let b = bucket(key);
    let mut callback = Some(callback);
    let mut wakes = WakeBatch::new();
    let mut total = 0;
    loop {
        b.lock.lock();
        let mut p = b.head.load(Ordering::Relaxed) as *const Waiter;
        while !p.is_null() && wakes.has_room() && total + wakes.len() < max {
            // SAFETY: list members are live under the lock.
            let next = unsafe { (*p).next.get() };
            // SAFETY: as above.
            if unsafe { (*p).key.load(Ordering::Relaxed) == key && (*p).bitset & bitset != 0 } {
                wakes.push(take(b, p, TOKEN_NORMAL));
            }
            p = next;
        }
        let n = wakes.len();
        let more = !p.is_null() && total + n < max && b.any_with_key(key);
        if !more {
            if let Some(cb) = callback.take() {
                cb(total + n);
            }
        }
        b.lock.unlock();
        parking_wake::run(&mut wakes);
        total += n;
        if !more {
            return total;
        }
    }
}

/// Moves up to `max_requeue` waiters of `from` (after waking `max_wake` of them) to
/// `to`. Returns (woken, requeued). Used by FUTEX_REQUEUE / CMP_REQUEUE.
pub fn unpark_requeue(
    from: usize,
    to: usize,
    max_wake: usize,
    max_requeue: usize,
    validate: impl FnOnce() -> bool,
) -> Option<(usize, usize)> {
    let b1 = bucket(from);
    let b2 = bucket(to);
    // Lock both buckets in address order.
    let (first, second) = if (b1 as *const Bucket) <= (b2 as *const Bucket) { (b1, b2) } else { (b2, b1) };
    first.lock.lock();
    let same = core::ptr::eq(b1, b2);
    if !same {
        second.lock.lock();
    }
    let unlock = || {
        if !same {
            second.lock.unlock();
        }
        first.lock.unlock();
    };
    if !validate() {
        unlock();
        return None;
    }
    let mut wakes = Vec::new();
    let mut moved = Vec::new();
    let mut p = b1.head.load(Ordering::Relaxed) as *const Waiter;
    while !p.is_null() && (wakes.len() < max_wake || moved.len() < max_requeue) {
        // SAFETY: list members are live under the lock.
        let next = unsafe { (*p).next.get() };
        // SAFETY: as above.
        if unsafe { (*p).key.load(Ordering::Relaxed) } == from {
            if wakes.len() < max_wake {
                wakes.push(take(b1, p, TOKEN_NORMAL));
            } else {
                b1.unlink(p);
                moved.push(p);
            }
        }
        p = next;
    }
    for &w in &moved {
        // SAFETY: `w` is live (unlinked but not woken) and we hold both locks.
        unsafe {
            (*w).key.store(to, Ordering::Relaxed);
            b2.push_back(&*w);
        }
    }
    unlock();
    let n = wakes.len();
    for w in wakes {
        w.run_as(false);
    }
    Some((n, moved.len()))
}

/// [`unpark_some`] without a callback, skipping the bucket lock when nobody waits in the key's bucket. The caller must
/// have published the state change that waiters validate against before calling (see the module docs).
pub fn unpark_some_quick(key: usize, bitset: u32, max: usize) -> usize {
    if !parking_quick::anybody_queued_after_publishing(&bucket(key).head) {
        return 0;
    }
    unpark_some(key, bitset, max, |_| {})
}
