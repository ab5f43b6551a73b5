//! The registry of live fibers: by id (for the dump, the watchdog and the monitor)
//! and by `pthread_t` (for `pthread_kill`, `pthread_cancel` and friends, which name a
//! fiber by the `pthread_t` of its donor; `tgkill` by its donor's tid).
//!
//! Both maps sit behind a [`RawLock`]: registration happens once per thread creation
//! and exit, lookups once per `pthread_kill`/`pthread_cancel` or per dump, so one lock
//! is not a bottleneck (a `pthread_create`/`join` pair costs ~10 µs, the lock ~50 ns).

use std::collections::BTreeMap;

use crate::base::rawlock::RawLock;
use crate::runtime::fibers::fiber::{Fiber, FiberRef};

static REGISTRY: RawLock<BTreeMap<u64, FiberRef>> = RawLock::new(BTreeMap::new());
/// Live fibers by `pthread_t`, for `pthread_kill` and friends.
static BY_PTHREAD: RawLock<BTreeMap<usize, FiberRef>> = RawLock::new(BTreeMap::new());

/// In a forked child: no fiber of the parent exists here.
///
/// # Safety
/// Only from the atfork child hook (one thread, nothing else running).
pub unsafe fn reset_in_forked_child() {
    // SAFETY: we are the atfork child hook (this fn's # Safety): the child's one thread, before
    // anything uses the maps, as their reset requires.
    unsafe {
        REGISTRY.reset_in_forked_child(BTreeMap::new());
        BY_PTHREAD.reset_in_forked_child(BTreeMap::new());
    }
}

pub fn register(f: &FiberRef) {
    REGISTRY.lock().insert(f.id(), f.clone());
    register_pthread_early(f, f.identity.pthread());
}

/// Makes a new fiber findable by its `pthread_t` as soon as `pthread_create` returns to
/// its creator, before its donor has run: a `pthread_cancel` or `pthread_kill` right
/// after creation must reach the fiber, not glibc's view of the donor. The donor
/// registers it too; whichever comes second is a no-op, and nothing is added once
/// the donor unregistered it.
pub fn register_pthread_early(f: &FiberRef, pthread: usize) {
    let mut m = BY_PTHREAD.lock();
    if !f.identity.is_unregistered() {
        f.identity.set_pthread(pthread);
        m.insert(pthread, f.clone());
    }
}

pub fn unregister(f: &Fiber) {
    let removed = REGISTRY.lock().remove(&f.id());
    let pt = f.identity.pthread();
    let removed2 = {
        let mut m = BY_PTHREAD.lock();
        f.identity.mark_unregistered();
        match m.get(&pt) {
            Some(g) if g.id() == f.id() => m.remove(&pt),
            _ => None,
        }
    };
    drop((removed, removed2)); // outside the locks
}

/// The live fiber with this id.
pub fn find_by_id(id: u64) -> Option<FiberRef> {
    REGISTRY.lock().get(&id).cloned()
}

/// The live fiber whose `pthread_self()` is `t`.
pub fn find_by_pthread(t: usize) -> Option<FiberRef> {
    BY_PTHREAD.lock().get(&t).cloned()
}

/// The live fiber whose donor's kernel thread id is `tid` (`tgkill`/`tkill` name a
/// fiber by it). A walk over the live fibers: these calls are rare.
pub fn find_by_donor_tid(tid: u32) -> Option<FiberRef> {
    BY_PTHREAD.lock().values().find(|f| f.identity.donor_tid() == tid).cloned()
}

/// A live fiber for which `pred` holds, the lowest id first. `pred` runs under the
/// registry's lock: it may only read the fiber.
pub fn find(pred: impl Fn(&Fiber) -> bool) -> Option<FiberRef> {
    REGISTRY.lock().values().find(|f| pred(f)).cloned()
}

/// # Safety
/// `f` points to a live fiber.
pub unsafe fn unregister_ptr(f: *const Fiber) {
    // SAFETY: caller's contract.
    unregister(unsafe { &*f });
}

/// How many live fibers are in lifecycle state `life` (for the watchdog).
pub fn count_in_life(life: crate::runtime::fibers::fiber::Life) -> usize {
    REGISTRY.lock().values().filter(|f| f.life() == life).count()
}

pub fn live_fibers() -> usize {
    REGISTRY.lock().len()
}

/// Every live fiber (a snapshot; the dump prints it without holding the lock).
pub fn all() -> Vec<FiberRef> {
    REGISTRY.lock().values().cloned().collect()
}
