//! The shield: runtime code that must not be interrupted by a program signal handler.
//!
//! # The problem
//!
//! An asynchronous signal runs its handler on whatever kernel thread the kernel picks,
//! in the middle of whatever that thread was doing. Natively that is fine for the
//! async-signal-safe functions a handler may call (`sem_post`, `write`, `raise`, …):
//! glibc implements them with single atomic operations and system calls. Under the
//! preload those calls enter the runtime, which keeps non-reentrant state: a worker's
//! local run queue and lifo slot, the parking-lot buckets and the timer heap (behind
//! [`RawMutex`](crate::base::rawlock::RawMutex)es), the switch between a fiber and its
//! worker. A handler that interrupts a worker inside `schedule()` and itself calls
//! `sem_post` pushes into the same deque concurrently with the interrupted push and
//! loses a fiber (LTP `pthread_cond_signal/4-2` hung that way); one that interrupts the
//! holder of a bucket lock and needs the same bucket deadlocks.
//!
//! # The shield
//!
//! Every stretch of runtime code that touches such state runs *shielded*: a per-context
//! depth counter (`SHIELD`, a thread-local, so it follows the fiber: in fiber context
//! FS is the fiber's donor TCB) is non-zero. Shielded are: every `RawMutex` hold, the
//! enqueue in `scheduler::schedule`, a fiber's switch in and out (`Fiber::suspend`, the
//! first resume, the return), and the whole scheduler context of a worker, except
//! its safe point at the top of the worker loop.
//!
//! A signal whose handler would run in a shielded stretch is **deferred** (the handler
//! table and the trampoline are `crate::signal::handlers`; the deferral is here):
//!
//! ```text
//!   shielded code ──signal──> trampoline: add sig to the interrupted context's mask
//!        │                                (ucontext uc_sigmask: the thread resumes
//!        │                                 with sig blocked), queue sig to this kernel
//!        │                                 thread again with its siginfo
//!        │                                 (rt_tgsigqueueinfo), note it in DEFERRED
//!        │                                 (and in the worker's `deferred` word)
//!        v
//!   shield exit (depth 0) / worker safe point: unblock the deferred signals
//!        │   → the kernel delivers the queued signal now; the trampoline finds the
//!        v     context unshielded and runs the program's handler
//! ```
//!
//! The siginfo survives (the kernel queues it again; sending to one's own process may
//! use any `si_code`), standard signals merge while pending as they would natively,
//! and a deferral costs nothing until a signal actually arrives in a shielded stretch:
//! entering and leaving a shield is a thread-local increment and decrement.
//!
//! A deferral blocks the signal on the *kernel thread*; if that is a worker, the
//! fiber whose shield it was may resume on another worker, so the worker also notes
//! the signal in `WorkerShared::deferred` and unblocks it at its next safe point
//! ([`worker_safe_point`]); idle waits return with `EINTR` and reach it at once.
//!
//! A signal **held for a fiber** (`pthread_kill`, `crate::signal::delivery`) must not
//! take that road: its handler would run wherever the kernel thread goes next, not on
//! the fiber, while the fiber's wait already ended. The fiber therefore raises it only
//! unshielded; a kick that finds the fiber shielded leaves it held and marks it due
//! ([`postpone_held_signals`]), and the shield's exit raises it, on the fiber.
//!
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use libc::{c_int, c_void, siginfo_t};

use crate::base::sys;
use crate::base::thread_words::{self, ThreadWord};

// The shield's state lives in the runtime's initial-exec thread words (the hot paths
// enter and leave the shield on every call):
// - SHIELD: the shield depth of the context this TCB belongs to (a fiber, a worker's
//   scheduler context or a plain thread);
// - DEFERRED: signals deferred while shielded, to unblock at the shield's exit;
// - HELD_DUE: signals held for this context's fiber (`pthread_kill`) came due while it
//   was shielded: they are raised at the shield's exit ([`postpone_held_signals`]).
const SHIELD: ThreadWord = thread_words::SHIELD_DEPTH;
const DEFERRED: ThreadWord = thread_words::DEFERRED_SIGNALS;
const HELD_DUE: ThreadWord = thread_words::HELD_DUE;

/// Enters a shielded stretch (nests).
#[inline]
pub fn enter() {
    SHIELD.set(SHIELD.get() + 1);
}

/// Leaves a shielded stretch; at depth 0 delivers the signals deferred meanwhile.
#[inline]
pub fn exit() {
    let depth = SHIELD.get() - 1;
    SHIELD.set(depth);
    if depth == 0 && (DEFERRED.get() != 0 || HELD_DUE.get() != 0) {
        redeliver();
    }
}

/// The current shield depth of this context.
#[inline]
pub fn depth() -> u32 {
    SHIELD.get() as u32
}

/// Sets the depth outright: a worker's scheduler context lives at depth 1, a donor
/// hands its fiber over at depth 1 (the fiber's first resume leaves it) and resets it
/// to 0 in its zombie phase.
pub fn set_depth(depth: u32) {
    SHIELD.set(depth as usize);
    if depth == 0 {
        DEFERRED.set(0);
        HELD_DUE.set(0);
    }
}

/// A shielded scope.
pub struct Shield(());

impl Shield {
    #[inline]
    pub fn new() -> Shield {
        enter();
        Shield(())
    }
}

impl Default for Shield {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Shield {
    #[inline]
    fn drop(&mut self) {
        exit();
    }
}

/// The signals a context keeps blocked when its deferred ones are unblocked: the
/// signal layer installs it (`crate::signal::delivery`: the fiber's own mask, or its
/// worker's, and the runtime's kick signal). 0 (none installed): unblock them all.
static STILL_BLOCKED: AtomicUsize = AtomicUsize::new(0);

/// Installs the function that says which deferred signals stay blocked at a shield's
/// exit (once, by the signal layer, before any program handler is wrapped).
pub fn set_still_blocked(f: fn() -> u64) {
    STILL_BLOCKED.store(f as usize, Ordering::Release);
}

/// What raises the signals held for the current fiber (the signal layer installs it:
/// `crate::signal::mask::deliver_held_of_current`). 0: none installed.
static DELIVER_HELD: AtomicUsize = AtomicUsize::new(0);

/// Installs the function that raises the current fiber's held signals at a shield's
/// exit (the signal layer does, each time before it postpones them: a store of the
/// same value, on a path taken only when a kick lands in a shield).
pub fn set_deliver_held(f: fn()) {
    DELIVER_HELD.store(f as usize, Ordering::Release);
}

/// The signals held for the current fiber (`pthread_kill`) are due, but the context is
/// shielded: raising one now would only defer its handler, and a deferred handler may
/// run after the fiber has left this kernel thread, i.e. on another fiber or the
/// scheduler, while the fiber's wait already counts as interrupted. They stay held
/// and are raised when the shield is left, on the fiber, wherever it then runs.
pub fn postpone_held_signals() {
    HELD_DUE.set(1);
}

/// Unblocks this context's deferred signals and raises the held ones that were due;
/// the kernel delivers them on return.
///
/// The order matters. A handler that runs while a deferred signal is still blocked
/// here saves that mask in its frame, and its `sigreturn` puts it back. If such a
/// handler (a held signal raised first, or any signal that lands now, at depth 0)
/// itself left a shield, its nested `redeliver` took the deferred bits and unblocked
/// them, and its return blocked them again, with nobody left to unblock them: the
/// next instance of that signal queued to this thread waited there for good
/// (`sig_handlers`, a lost signal: docs/RESULTS.md#signal-fixes). So the deferred bits are
/// taken first and unblocked at once: a handler nested between the two restores a
/// mask that the unblock after it then clears. The held signals are raised after.
#[cold]
fn redeliver() {
    let bits = DEFERRED.replace(0) as u64;
    if bits != 0 {
        // Unblock only what the context means to accept: a fiber's own mask (or, for
        // a fiber without one, its worker's) may block a signal that was deferred on
        // another worker during a switch.
        let keep = match STILL_BLOCKED.load(Ordering::Acquire) {
            0 => 0,
            f => {
                // SAFETY: only `set_still_blocked` stores here, and it stores a `fn() -> u64`.
                let still_blocked = unsafe { core::mem::transmute::<usize, fn() -> u64>(f) };
                still_blocked()
            }
        };
        sys::sigmask_unblock(bits & !keep);
    }
    if HELD_DUE.replace(0) != 0 {
        match DELIVER_HELD.load(Ordering::Acquire) {
            0 => {}
            f => {
                // SAFETY: only `set_deliver_held` stores here, and it stores a `fn()`.
                let deliver_held = unsafe { core::mem::transmute::<usize, fn()>(f) };
                deliver_held();
            }
        }
    }
}

/// The worker loop's safe point: no queue operation or lock is in progress, so the
/// signals deferred on this kernel thread may run their handlers here (in scheduler
/// context, like a process-directed signal on any thread). `deferred` is the worker's
/// word; the worker's own mask is `base`.
#[inline]
pub fn worker_safe_point(deferred: &AtomicU64, base: u64) {
    if deferred.load(Ordering::Relaxed) == 0 && DEFERRED.get() == 0 {
        return;
    }
    worker_safe_point_slow(deferred, base);
}

#[cold]
fn worker_safe_point_slow(deferred: &AtomicU64, base: u64) {
    let bits = deferred.swap(0, Ordering::Relaxed) | DEFERRED.replace(0) as u64;
    // A signal the worker's own mask blocks was deferred here while a fiber that
    // accepts it was switching; it is queued to this thread and would wait for the
    // next such fiber on this worker. Take it back and send it to the process.
    let stranded = bits & base;
    if stranded != 0 {
        hand_to_process(stranded);
    }
    SHIELD.set(0);
    sys::sigmask_set(base);
    SHIELD.set(1);
}

/// Takes the signals `bits` pending on this thread and sends them to the process.
/// siginfo survives for sigqueue-style codes; for kill()'s and the kernel's codes
/// (which only the target thread may forge) the signal is re-sent with kill().
fn hand_to_process(bits: u64) {
    // One instance per signal: rt_sigtimedwait also takes process-pending signals, so
    // looping until it finds none would take back what we just re-sent, forever.
    let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    for bit in 0..64 {
        let one = 1u64 << bit;
        if bits & one == 0 {
            continue;
        }
        // SAFETY: all-zero is a valid siginfo_t.
        let mut info: siginfo_t = unsafe { core::mem::zeroed() };
        // SAFETY: `info` is a writable siginfo.
        let sig = unsafe { sys::rt_sigtimedwait(one, &mut info, Some(&zero)) };
        if sig <= 0 {
            continue;
        }
        if info.si_code < 0 && info.si_code != libc::SI_TKILL {
            sys::rt_sigqueueinfo(sig as i32, &info);
        } else {
            sys::kill(sig as i32);
        }
    }
}

/// Postpones `sig` until the interrupted context leaves its shield (module docs); returns its bit. The
/// caller also notes it for the worker (`runtime::scheduler::note_deferred_signal`)..
///
/// # Safety
/// `info` and `uc` are what the kernel passed to the SA_SIGINFO handler for this
/// delivery (or null).
pub unsafe fn defer(sig: c_int, info: *mut siginfo_t, uc: *mut c_void) -> u64 {
    let bit = 1u64 << (sig - 1);
    // Block it on this kernel thread first, so that queueing it again cannot re-enter
    // us at once (SA_NODEFER handlers), and keep it blocked after the handler returns.
    sys::sigmask_block(bit);
    if !uc.is_null() {
        // SAFETY: for an SA_SIGINFO handler the kernel passes the interrupted
        // context's ucontext_t; sigreturn installs its uc_sigmask.
        unsafe {
            let uc = &mut *(uc as *mut libc::ucontext_t);
            let m = &mut uc.uc_sigmask as *mut libc::sigset_t as *mut u64;
            *m |= bit;
        }
    }
    // Queue it again, with its siginfo, to this very thread: the kernel lets a thread
    // forge any si_code only when it is the target (rt_sigqueueinfo to the whole
    // process would fail with EPERM for kill()'s SI_USER on any thread but the main
    // one). A worker hands on what its own mask blocks at its safe point.
    // SAFETY: `info` is the kernel's siginfo for this delivery (valid for reading); a
    // null one would have made the kernel refuse the call (EFAULT), queueing nothing.
    if let Some(info) = unsafe { info.as_ref() } {
        sys::rt_tgsigqueueinfo(sys::gettid(), sig, info);
    }
    DEFERRED.set(DEFERRED.get() | bit as usize);
    crate::base::stats::bump(&crate::base::stats::STATS.signals_deferred);
    bit
}
