//! Program signal handlers behind the runtime's trampoline.
//!
//! Runtime code that touches non-reentrant state runs *shielded*
//! ([`crate::base::shield`], which explains why and how a signal is deferred).
//!
//! The library installs its own [`trampoline`] for every handler the program
//! installs (`sigaction`, `signal`, … are interposed; the program keeps seeing its own
//! handler, flags and mask). The trampoline runs the program's handler at once when
//! the interrupted context is not shielded. Otherwise it **defers** the signal:
//!
//! Synchronous signals (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS) are never
//! wrapped: they must run where they happen, and runtime code does not raise them.
//!
//! # Children
//!
//! A forked child has its own copy of the table; the atfork hooks hold `TABLE_LOCK`
//! across the fork, so the copy is never half-written. A **vfork child** (or any child
//! made with `CLONE_VM` that did not go through `fork`'s hooks) shares the parent's
//! memory but has its own kernel dispositions: its `sigaction` (spawning code resets
//! every handler before `exec`) must change the kernel's action only and leave the
//! table, which is the parent's, alone ([`program_sigaction`]).
use core::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};

use libc::{c_int, c_void, siginfo_t};

use crate::base::rawlock::RawMutex;
use crate::base::shield::{self, Shield};
use crate::base::sys;

// ---------------------------------------------------------------------------------
// The program's handlers
// ---------------------------------------------------------------------------------

/// The program's view of one signal's action (what `sigaction` reports back).
struct ProgramAction {
    /// `sa_sigaction` as the program gave it (0 = SIG_DFL, 1 = SIG_IGN).
    handler: AtomicUsize,
    /// The program's `sa_flags`.
    flags: AtomicI32,
    /// The program's `sa_mask` (kernel part).
    mask: AtomicU64,
    /// Whether the kernel holds our trampoline for this signal.
    wrapped: AtomicI32,
}

// A template for the table initializer only: each slot gets its own copy.
#[allow(clippy::declare_interior_mutable_const)]
const NO_ACTION: ProgramAction =
    ProgramAction { handler: AtomicUsize::new(0), flags: AtomicI32::new(0), mask: AtomicU64::new(0), wrapped: AtomicI32::new(0) };
static ACTIONS: [ProgramAction; 65] = [NO_ACTION; 65];
/// Serializes `sigaction` calls (table + kernel update as one step).
static TABLE_LOCK: RawMutex = RawMutex::new();
/// A superset of [`handled_signals`], kept by `sigaction` under `TABLE_LOCK` so that the
/// monitor's look at pending signals each tick reads one word instead of the table. A
/// one-shot handler's reset (in the trampoline, without the lock) leaves its bit set:
/// the look re-checks the table for the signals it finds pending.
static MAYBE_HANDLED: AtomicU64 = AtomicU64::new(0);

/// Whether the library wraps handlers of `sig`.
fn wrappable(sig: c_int) -> bool {
    (1..=64).contains(&sig)
        && !matches!(
            sig,
            libc::SIGKILL | libc::SIGSTOP | libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE | libc::SIGTRAP | libc::SIGSYS
        )
        && sig != crate::runtime::preemption::kick::KICK_SIGNAL
        // glibc's internal signals (SIGCANCEL, SIGSETXID): its sigaction refuses them.
        && !(32..=33).contains(&sig)
}

fn kernel_mask_of(set: &libc::sigset_t) -> u64 {
    // SAFETY: glibc's sigset_t starts with the kernel's 64-bit mask (x86_64).
    unsafe { *(set as *const libc::sigset_t as *const u64) }
}

fn set_kernel_mask(set: &mut libc::sigset_t, mask: u64) {
    // SAFETY: as above; sigemptyset clears the rest.
    unsafe {
        libc::sigemptyset(set);
        *(set as *mut libc::sigset_t as *mut u64) = mask;
    }
}

/// `sigaction` as the program sees it: its own handler, flags and mask come back, the
/// kernel holds [`trampoline`] instead. Returns 0 or -1 with errno set (by glibc).
///
/// # Safety
/// As glibc's `sigaction`: `act`/`old` null or valid.
pub unsafe fn program_sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    if !wrappable(sig) {
        // SAFETY: a signal we do not wrap: glibc's sigaction gets `act`/`old`, null or valid (this
        // fn's # Safety).
        return unsafe { crate::base::real::sigaction(sig, act, old) };
    }
    if crate::runtime::fibers::fiber::in_vfork_child() || crate::base::config::in_unannounced_child() {
        // SAFETY: `act`/`old` are null or valid (sigaction's contract, this fn's # Safety), which is
        // `child_sigaction`'s contract.
        return unsafe { child_sigaction(sig, act, old) };
    }
    // Before any handler of the program is wrapped (and so before any deferral).
    shield::set_still_blocked(still_blocked_at_shield_exit);
    let _shield = Shield::new();
    TABLE_LOCK.lock();
    // SAFETY: `act`/`old` are null or valid (this fn's # Safety), `program_sigaction_locked`'s
    // contract; TABLE_LOCK is released on every path below.
    let r = unsafe { program_sigaction_locked(sig, act, old) };
    // Recomputed from the table, under the lock, after every change (also a failed one:
    // the slot may have been written before the kernel refused).
    MAYBE_HANDLED.store(handled_signals(), Ordering::Release);
    TABLE_LOCK.unlock();
    r
}

/// The deferred signals that stay blocked when a shield is left: those the current
/// fiber's mask blocks (they wait for that fiber to unblock them) and the kick signal
/// (never in a program mask).
fn still_blocked_at_shield_exit() -> u64 {
    crate::runtime::fibers::fiber::current().map_or(0, crate::signal::delivery::intended_mask)
        | crate::runtime::preemption::kick::KICK_BIT
}

/// The kernel's action for `sig`, with our trampoline replaced by the program's own
/// handler, flags and mask when we wrapped it (None if the query failed).
fn current_action_as_program_sees_it(sig: c_int) -> Option<libc::sigaction> {
    let slot = &ACTIONS[sig as usize];
    // SAFETY: a zeroed sigaction is a valid out-parameter.
    let mut prev: libc::sigaction = unsafe { core::mem::zeroed() };
    // SAFETY: query only.
    if unsafe { crate::base::real::sigaction(sig, core::ptr::null(), &mut prev) } != 0 {
        return None;
    }
    if slot.wrapped.load(Ordering::Relaxed) != 0 && prev.sa_sigaction == trampoline as *const () as usize {
        prev.sa_sigaction = slot.handler.load(Ordering::Relaxed);
        prev.sa_flags = slot.flags.load(Ordering::Relaxed);
        set_kernel_mask(&mut prev.sa_mask, slot.mask.load(Ordering::Relaxed));
    }
    Some(prev)
}

/// `sigaction` in a child that shares the parent's memory: the kernel's action changes,
/// the table does not. The previous action reads as the program's own while the kernel
/// still holds our trampoline (inherited from the parent).
///
/// # Safety
/// As glibc's `sigaction`.
unsafe fn child_sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    let Some(prev) = current_action_as_program_sees_it(sig) else { return -1 };
    // SAFETY: `act` is null or valid (caller's contract).
    if !act.is_null() && unsafe { crate::base::real::sigaction(sig, act, core::ptr::null_mut()) } != 0 {
        return -1;
    }
    // SAFETY: `old` is null or valid (caller's contract).
    if let Some(o) = unsafe { old.as_mut() } {
        *o = prev;
    }
    0
}

/// Atfork prepare: no `sigaction` is half-way through the table when the child's copy
/// is taken. Released by [`unlock_table_after_fork`] in the parent and in the child.
pub fn lock_table_for_fork() {
    TABLE_LOCK.lock();
}

pub fn unlock_table_after_fork() {
    TABLE_LOCK.unlock();
}

unsafe fn program_sigaction_locked(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    let slot = &ACTIONS[sig as usize];
    // The previous action: from the table when we wrapped it, else the kernel's.
    let Some(prev) = current_action_as_program_sees_it(sig) else { return -1 };
    // SAFETY: `act` is null or valid (caller's contract).
    if let Some(a) = unsafe { act.as_ref() } {
        let h = a.sa_sigaction;
        if h == libc::SIG_DFL || h == libc::SIG_IGN {
            // SAFETY: forwarded, valid `act`.
            if unsafe { crate::base::real::sigaction(sig, a, core::ptr::null_mut()) } != 0 {
                return -1;
            }
            slot.wrapped.store(0, Ordering::Release);
            slot.handler.store(h, Ordering::Release);
        } else {
            slot.handler.store(h, Ordering::Release);
            slot.flags.store(a.sa_flags, Ordering::Release);
            slot.mask.store(kernel_mask_of(&a.sa_mask), Ordering::Release);
            let mut ours = *a;
            ours.sa_sigaction = trampoline as *const () as usize;
            // SA_RESETHAND is emulated (a deferred signal must find the trampoline
            // still installed when it comes back); SA_SIGINFO gives us the siginfo and
            // context to hand on.
            ours.sa_flags = (a.sa_flags | libc::SA_SIGINFO) & !libc::SA_RESETHAND;
            slot.wrapped.store(1, Ordering::Release);
            // SAFETY: a valid sigaction whose handler is our trampoline.
            if unsafe { crate::base::real::sigaction(sig, &ours, core::ptr::null_mut()) } != 0 {
                return -1;
            }
        }
    }
    // SAFETY: `old` is null or valid (caller's contract).
    if let Some(o) = unsafe { old.as_mut() } {
        *o = prev;
    }
    0
}

/// `signal()` with glibc's BSD semantics (restart, the signal blocked in its handler).
/// Returns the previous handler or SIG_ERR.
///
/// # Safety
/// `handler` is SIG_DFL, SIG_IGN or a valid handler.
pub unsafe fn program_signal(sig: c_int, handler: libc::sighandler_t, flags: c_int, block_self: bool) -> libc::sighandler_t {
    // SAFETY: zeroed sigaction is valid; sigemptyset/sigaddset on it.
    let mut act: libc::sigaction = unsafe { core::mem::zeroed() };
    act.sa_sigaction = handler;
    act.sa_flags = flags;
    // SAFETY: valid sigset.
    unsafe {
        libc::sigemptyset(&mut act.sa_mask);
        if block_self && (1..=64).contains(&sig) {
            libc::sigaddset(&mut act.sa_mask, sig);
        }
    }
    // SAFETY: as above.
    let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
    if !(1..=64).contains(&sig) || handler == libc::SIG_ERR {
        sys_set_errno(libc::EINVAL);
        return libc::SIG_ERR;
    }
    // SAFETY: valid pointers.
    if unsafe { program_sigaction(sig, &act, &mut old) } != 0 {
        return libc::SIG_ERR;
    }
    old.sa_sigaction
}

fn sys_set_errno(e: c_int) {
    // SAFETY: __errno_location returns the caller's errno slot.
    unsafe { *libc::__errno_location() = e };
}

type InfoHandler = extern "C" fn(c_int, *mut siginfo_t, *mut c_void);
type PlainHandler = extern "C" fn(c_int);

/// A superset of [`handled_signals`] in one load: 0 when the program installed no
/// handler. Async-signal-safe.
#[inline]
pub fn maybe_handled_signals() -> u64 {
    MAYBE_HANDLED.load(Ordering::Acquire)
}

/// The signals with a program handler behind the trampoline (not `SIG_IGN`, not
/// `SIG_DFL`), as a kernel mask. Async-signal-safe (64 atomic loads).
pub fn handled_signals() -> u64 {
    let mut set = 0u64;
    for (sig, slot) in ACTIONS.iter().enumerate().skip(1) {
        if slot.wrapped.load(Ordering::Acquire) != 0
            && !matches!(slot.handler.load(Ordering::Acquire), libc::SIG_DFL | libc::SIG_IGN)
        {
            set |= 1u64 << (sig - 1);
        }
    }
    set
}

/// The handler the kernel holds for every signal with a program handler.
extern "C" fn trampoline(sig: c_int, info: *mut siginfo_t, uc: *mut c_void) {
    if shield::depth() != 0 {
        // SAFETY: errno slot of this context; saved and restored around our calls.
        let saved_errno = unsafe { *libc::__errno_location() };
        // SAFETY: `info` and `uc` are the kernel's, for this delivery.
        let bit = unsafe { shield::defer(sig, info, uc) };
        crate::runtime::scheduler::note_deferred_signal(sys::gettid() as u32, bit);
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = saved_errno };
        return;
    }
    // A signal sent to the process that the kernel gave a worker's scheduler context
    // (at its safe point: the shield deferred it there) belongs to a thread of the
    // program that does not block it: a fiber, which gets it as from pthread_kill
    // (crate::signal::process).
    // SAFETY: `info` is the kernel's siginfo for this delivery.
    if crate::runtime::scheduler::in_worker_context() && unsafe { crate::signal::delivery::process_directed(info) } {
        // SAFETY: errno slot of this context; saved and restored around the routing.
        let saved_errno = unsafe { *libc::__errno_location() };
        let routed = crate::signal::delivery::route_from_worker(sig);
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = saved_errno };
        if routed {
            return;
        }
    }
    let slot = &ACTIONS[sig as usize];
    let flags = slot.flags.load(Ordering::Acquire);
    let mut handler = slot.handler.load(Ordering::Acquire);
    if flags & libc::SA_RESETHAND != 0 {
        // One-shot: the first delivery resets the action, as the kernel would have.
        if slot.handler.compare_exchange(handler, libc::SIG_DFL, Ordering::AcqRel, Ordering::Acquire).is_err() {
            handler = slot.handler.load(Ordering::Acquire);
        } else {
            slot.wrapped.store(0, Ordering::Release);
            reset_to_default(sig);
        }
    }
    match handler {
        libc::SIG_IGN => {}
        libc::SIG_DFL => {
            // The program reset the action while this signal was on its way: take the
            // default action now.
            reset_to_default(sig);
            // To ourselves; the signal is blocked until we return.
            sys::tgkill(sys::gettid(), sig);
        }
        h if flags & libc::SA_SIGINFO != 0 => {
            // SAFETY: the program installed `h` with SA_SIGINFO, so it has this type.
            let f: InfoHandler = unsafe { core::mem::transmute::<usize, InfoHandler>(h) };
            f(sig, info, uc);
            crate::signal::delivery::note_handler_ran(flags & libc::SA_RESTART != 0);
        }
        h => {
            // SAFETY: the program installed `h` as a plain handler.
            let f: PlainHandler = unsafe { core::mem::transmute::<usize, PlainHandler>(h) };
            f(sig);
            crate::signal::delivery::note_handler_ran(flags & libc::SA_RESTART != 0);
        }
    }
}

/// Whether the kernel holds a handler for `sig` that is not our trampoline (installed
/// with the raw system call, or a signal the library does not wrap): it runs without
/// telling the fiber it ran. Async-signal-safe (the `sigaction` system call).
pub fn has_unwrapped_handler(sig: c_int) -> bool {
    if wrappable(sig) && ACTIONS[sig as usize].wrapped.load(Ordering::Acquire) != 0 {
        return false;
    }
    // SAFETY: a zeroed sigaction is a valid out-parameter; a query only.
    let mut cur: libc::sigaction = unsafe { core::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { crate::base::real::sigaction(sig, core::ptr::null(), &mut cur) } != 0 {
        return false;
    }
    cur.sa_sigaction != libc::SIG_DFL && cur.sa_sigaction != libc::SIG_IGN && cur.sa_sigaction != trampoline as *const () as usize
}

fn reset_to_default(sig: c_int) {
    // SAFETY: zeroed sigaction = SIG_DFL with an empty mask; sigaction is
    // async-signal-safe.
    unsafe {
        let dfl: libc::sigaction = core::mem::zeroed();
        crate::base::real::sigaction(sig, &dfl, core::ptr::null_mut());
    }
}
