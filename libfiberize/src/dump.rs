//! The fiber dump: every live fiber with its state, what it waits on, where it was
//! created (its start routine) and which worker runs it — like Go's goroutine dump.
//! Triggered by `FIBERIZE_DUMP_SIGNAL=N` (the monitor thread prints it, not the signal
//! handler) and printed at exit with `FIBERIZE_DUMP_AT_EXIT=1`.

use core::fmt::Write;
use core::sync::atomic::Ordering;
use std::collections::BTreeMap;

use crate::fiber::{Fiber, FiberRef};
use crate::rawlock::RawLock;
use crate::scheduler::WorkerShared;
use crate::{scheduler, sys, timer};

static REGISTRY: RawLock<BTreeMap<u64, FiberRef>> = RawLock::new(BTreeMap::new());
/// Live fibers by `pthread_t`, for `pthread_kill` and friends.
static BY_PTHREAD: RawLock<BTreeMap<usize, FiberRef>> = RawLock::new(BTreeMap::new());

pub fn register(f: &FiberRef) {
    REGISTRY.lock().insert(f.id, f.clone());
    register_pthread_early(f, f.pthread.load(Ordering::Relaxed));
}

/// Makes a new fiber findable by its `pthread_t` as soon as `pthread_create` returns to
/// its creator, before its donor has run: a `pthread_cancel` or `pthread_kill` right
/// after creation must reach the fiber, not glibc's view of the donor. The donor
/// registers it too; whichever comes second is a no-op, and nothing is added once
/// the donor unregistered it.
pub fn register_pthread_early(f: &FiberRef, pthread: usize) {
    let mut m = BY_PTHREAD.lock();
    if !f.unregistered.load(Ordering::Relaxed) {
        f.pthread.store(pthread, Ordering::Relaxed);
        m.insert(pthread, f.clone());
    }
}

pub fn unregister(f: &Fiber) {
    let removed = REGISTRY.lock().remove(&f.id);
    let pt = f.pthread.load(Ordering::Relaxed);
    let removed2 = {
        let mut m = BY_PTHREAD.lock();
        f.unregistered.store(true, Ordering::Release);
        match m.get(&pt) {
            Some(g) if g.id == f.id => m.remove(&pt),
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

/// # Safety
/// `f` points to a live fiber.
pub unsafe fn unregister_ptr(f: *const Fiber) {
    // SAFETY: caller's contract.
    unregister(unsafe { &*f });
}

pub fn live_fibers() -> usize {
    REGISTRY.lock().len()
}

fn symbol(addr: usize) -> String {
    // SAFETY: dladdr only reads loader tables; `info` is a valid out-parameter.
    unsafe {
        let mut info: libc::Dl_info = core::mem::zeroed();
        if libc::dladdr(addr as *const libc::c_void, &mut info) != 0 && !info.dli_sname.is_null() {
            let name = core::ffi::CStr::from_ptr(info.dli_sname).to_string_lossy();
            return format!("{}+{:#x}", name, addr - info.dli_saddr as usize);
        }
        if libc::dladdr(addr as *const libc::c_void, &mut info) != 0 && !info.dli_fname.is_null() {
            let file = core::ffi::CStr::from_ptr(info.dli_fname).to_string_lossy();
            return format!("{:#x} in {}", addr - info.dli_fbase as usize, file);
        }
    }
    format!("{addr:#x}")
}

const LIFE: [&str; 6] = ["starting", "runnable", "running", "parked", "on-donor", "finished"];
const WAIT: [&str; 12] = ["-", "mutex", "cond", "futex", "sleep", "rwlock", "other", "semaphore", "barrier", "once", "io", "join"];

/// Renders the dump.
pub fn render() -> String {
    let fibers: Vec<FiberRef> = REGISTRY.lock().values().cloned().collect();
    let mut s = String::new();
    let _ = writeln!(s, "fiberize: ---- fiber dump: {} fibers, {} armed timers ----", fibers.len(), timer::pending());
    let st = &crate::stats::STATS;
    let _ = writeln!(s, "fiberize: preemptions {} preempt-refused {} preempt-fallbacks {}", st.preemptions.get(),
        st.preempt_refused.get(), st.preempt_fallbacks.get());
    if let Some(rt) = scheduler::try_runtime() {
        for w in rt.workers() {
            let _ = writeln!(s, "fiberize: worker {} tid {} {} running fiber {} switches {} deferred-signals {:#x}", w.index,
                w.tid.load(Ordering::Relaxed), w.state_name(), w.running.load(Ordering::Relaxed),
                w.progress.load(Ordering::Relaxed), w.deferred_signals());
        }
    }
    for f in &fibers {
        let life = LIFE.get(f.life.load(Ordering::Relaxed) as usize).copied().unwrap_or("?");
        let wait = WAIT.get(f.wait_kind.load(Ordering::Relaxed) as usize).copied().unwrap_or("?");
        let w = f.worker.load(Ordering::Relaxed) as *const WorkerShared;
        // SAFETY: non-null `worker` points into the leaked runtime.
        let worker = if w.is_null() { "-".to_string() } else { unsafe { (*w).index }.to_string() };
        let _ = write!(s, "fiberize: fiber {} pthread {:#x} {}", f.id, f.pthread.load(Ordering::Relaxed), life);
        if wait != "-" {
            let _ = write!(s, " waits on {} {:#x}", wait, f.wait_addr.load(Ordering::Relaxed));
        }
        let held = f.pending_signals.load(Ordering::Relaxed);
        if held != 0 {
            let _ = write!(s, " held-signals {:#x}", held);
        }
        if f.cancel_requested.load(Ordering::Relaxed) {
            let _ = write!(s, " cancel-requested");
        }
        let _ = writeln!(s, " worker {} created for {}", worker, symbol(f.start_routine));
    }
    let _ = writeln!(s, "fiberize: ---- end of dump ----");
    drop(fibers);
    s
}

pub fn dump_all() {
    sys::write_stderr(render().as_bytes());
}
