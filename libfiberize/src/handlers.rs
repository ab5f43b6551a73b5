//! Program signal handlers versus the runtime's critical sections: the **shield**.
//!
//! # The problem
//!
//! An asynchronous signal runs its handler on whatever kernel thread the kernel picks,
//! in the middle of whatever that thread was doing. Natively that is fine for the
//! async-signal-safe functions a handler may call (`sem_post`, `write`, `raise`, …):
//! glibc implements them with single atomic operations and system calls. Under the
//! preload those calls enter the runtime, which keeps non-reentrant state: a worker's
//! local run queue and lifo slot, the parking-lot buckets and the timer heap (behind
//! [`RawMutex`](crate::rawlock::RawMutex)es), the switch between a fiber and its
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
//! The library installs its own [`trampoline`] for every handler the program
//! installs (`sigaction`, `signal`, … are interposed; the program keeps seeing its own
//! handler, flags and mask). The trampoline runs the program's handler at once when
//! the interrupted context is not shielded. Otherwise it **defers** the signal:
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

use core::cell::Cell;
use core::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};

use libc::{c_int, c_void, siginfo_t};

use crate::rawlock::RawMutex;
use crate::sys;

thread_local! {
    /// Shield depth of the context this TCB belongs to (a fiber, a worker's scheduler
    /// context or a plain thread).
    static SHIELD: Cell<u32> = const { Cell::new(0) };
    /// Signals deferred while shielded, to unblock at the shield's exit.
    static DEFERRED: Cell<u64> = const { Cell::new(0) };
}

/// Enters a shielded stretch (nests).
#[inline]
pub fn enter() {
    SHIELD.with(|s| s.set(s.get() + 1));
}

/// Leaves a shielded stretch; at depth 0 delivers the signals deferred meanwhile.
#[inline]
pub fn exit() {
    let depth = SHIELD.with(|s| {
        let d = s.get() - 1;
        s.set(d);
        d
    });
    if depth == 0 && DEFERRED.with(|d| d.get()) != 0 {
        redeliver();
    }
}

/// The current shield depth of this context.
#[inline]
pub fn depth() -> u32 {
    SHIELD.with(|s| s.get())
}

/// Sets the depth outright: a worker's scheduler context lives at depth 1, a donor
/// hands its fiber over at depth 1 (the fiber's first resume leaves it) and resets it
/// to 0 in its zombie phase.
pub fn set_depth(depth: u32) {
    SHIELD.with(|s| s.set(depth));
    if depth == 0 {
        DEFERRED.with(|d| d.set(0));
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

/// Unblocks this context's deferred signals; the kernel delivers them on return.
#[cold]
fn redeliver() {
    let bits = DEFERRED.with(|d| d.replace(0));
    // Unblock only what the context means to accept: a fiber's own mask (or, for a
    // fiber without one, its worker's) may block a signal that was deferred on
    // another worker during a switch.
    let intended = crate::fiber::current().map_or(0, crate::signal::intended_mask);
    sys::sigmask_unblock(bits & !intended & !crate::signal::KICK_BIT);
}

/// The worker loop's safe point: no queue operation or lock is in progress, so the
/// signals deferred on this kernel thread may run their handlers here (in scheduler
/// context, like a process-directed signal on any thread). `deferred` is the worker's
/// word; the worker's own mask is `base`.
#[inline]
pub fn worker_safe_point(deferred: &AtomicU64, base: u64) {
    if deferred.load(Ordering::Relaxed) == 0 && DEFERRED.with(|d| d.get()) == 0 {
        return;
    }
    worker_safe_point_slow(deferred, base);
}

#[cold]
fn worker_safe_point_slow(deferred: &AtomicU64, base: u64) {
    let bits = deferred.swap(0, Ordering::Relaxed) | DEFERRED.with(|d| d.replace(0));
    // A signal the worker's own mask blocks was deferred here while a fiber that
    // accepts it was switching; it is queued to this thread and would wait for the
    // next such fiber on this worker. Take it back and send it to the process.
    let stranded = bits & base;
    if stranded != 0 {
        hand_to_process(stranded);
    }
    SHIELD.with(|s| s.set(0));
    sys::sigmask_set(base);
    SHIELD.with(|s| s.set(1));
}

/// Takes the signals `bits` pending on this thread and sends them to the process.
/// siginfo survives for sigqueue-style codes; for kill()'s and the kernel's codes
/// (which only the target thread may forge) the signal is re-sent with kill().
fn hand_to_process(bits: u64) {
    // One instance per signal: rt_sigtimedwait also takes process-pending signals, so
    // looping until it finds none would take back what we just re-sent, forever.
    // SAFETY: rt_sigtimedwait with a valid 8-byte set, a zero timeout and a writable
    // siginfo; rt_sigqueueinfo/kill to our own process.
    unsafe {
        let pid = libc::getpid();
        let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        for bit in 0..64 {
            let one = 1u64 << bit;
            if bits & one == 0 {
                continue;
            }
            let mut info: siginfo_t = core::mem::zeroed();
            let sig = sys::syscall6(
                libc::SYS_rt_sigtimedwait as usize,
                &one as *const u64 as usize,
                &mut info as *mut siginfo_t as usize,
                &zero as *const libc::timespec as usize,
                8,
                0,
                0,
            );
            if sig <= 0 {
                continue;
            }
            if info.si_code < 0 && info.si_code != libc::SI_TKILL {
                sys::syscall6(
                    libc::SYS_rt_sigqueueinfo as usize,
                    pid as usize,
                    sig as usize,
                    &info as *const siginfo_t as usize,
                    0,
                    0,
                    0,
                );
            } else {
                sys::syscall6(libc::SYS_kill as usize, pid as usize, sig as usize, 0, 0, 0, 0);
            }
        }
    }
}

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

/// Whether the library wraps handlers of `sig`.
fn wrappable(sig: c_int) -> bool {
    (1..=64).contains(&sig)
        && !matches!(
            sig,
            libc::SIGKILL | libc::SIGSTOP | libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE | libc::SIGTRAP | libc::SIGSYS
        )
        && sig != crate::signal::KICK_SIGNAL
        // glibc's internal signals (SIGCANCEL, SIGSETXID): its sigaction refuses them.
        && !(32..=33).contains(&sig)
}

crate::real_fns! {
    fn sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int;
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
        // SAFETY: forwarded contract.
        return unsafe { sigaction(sig, act, old) };
    }
    if crate::fiber::in_vfork_child() || crate::lifecycle::in_unannounced_child() {
        // SAFETY: forwarded contract.
        return unsafe { child_sigaction(sig, act, old) };
    }
    let _shield = Shield::new();
    TABLE_LOCK.lock();
    // SAFETY: forwarded contract; TABLE_LOCK is released on every path below.
    let r = unsafe { program_sigaction_locked(sig, act, old) };
    TABLE_LOCK.unlock();
    r
}

/// The kernel's action for `sig`, with our trampoline replaced by the program's own
/// handler, flags and mask when we wrapped it (None if the query failed).
fn current_action_as_program_sees_it(sig: c_int) -> Option<libc::sigaction> {
    let slot = &ACTIONS[sig as usize];
    // SAFETY: a zeroed sigaction is a valid out-parameter.
    let mut prev: libc::sigaction = unsafe { core::mem::zeroed() };
    // SAFETY: query only.
    if unsafe { sigaction(sig, core::ptr::null(), &mut prev) } != 0 {
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
    if !act.is_null() && unsafe { sigaction(sig, act, core::ptr::null_mut()) } != 0 {
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
            if unsafe { sigaction(sig, a, core::ptr::null_mut()) } != 0 {
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
            if unsafe { sigaction(sig, &ours, core::ptr::null_mut()) } != 0 {
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

/// The handler the kernel holds for every signal with a program handler.
extern "C" fn trampoline(sig: c_int, info: *mut siginfo_t, uc: *mut c_void) {
    if SHIELD.with(|s| s.get()) != 0 {
        // SAFETY: errno slot of this context; saved and restored around our calls.
        let saved_errno = unsafe { *libc::__errno_location() };
        defer(sig, info, uc);
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = saved_errno };
        return;
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
            // SAFETY: tgkill to ourselves; the signal is blocked until we return.
            unsafe {
                sys::syscall6(libc::SYS_tgkill as usize, libc::getpid() as usize, sys::gettid() as usize, sig as usize, 0, 0, 0)
            };
        }
        h if flags & libc::SA_SIGINFO != 0 => {
            // SAFETY: the program installed `h` with SA_SIGINFO, so it has this type.
            let f: InfoHandler = unsafe { core::mem::transmute::<usize, InfoHandler>(h) };
            f(sig, info, uc);
            crate::signal::note_handler_ran(flags & libc::SA_RESTART != 0);
        }
        h => {
            // SAFETY: the program installed `h` as a plain handler.
            let f: PlainHandler = unsafe { core::mem::transmute::<usize, PlainHandler>(h) };
            f(sig);
            crate::signal::note_handler_ran(flags & libc::SA_RESTART != 0);
        }
    }
}

fn reset_to_default(sig: c_int) {
    // SAFETY: zeroed sigaction = SIG_DFL with an empty mask; sigaction is
    // async-signal-safe.
    unsafe {
        let dfl: libc::sigaction = core::mem::zeroed();
        sigaction(sig, &dfl, core::ptr::null_mut());
    }
}

/// Postpones `sig` until the interrupted context leaves its shield (module docs).
fn defer(sig: c_int, info: *mut siginfo_t, uc: *mut c_void) {
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
    // SAFETY: `info` is the kernel's siginfo for this delivery (valid for reading).
    unsafe {
        sys::syscall6(
            libc::SYS_rt_tgsigqueueinfo as usize,
            libc::getpid() as usize,
            sys::gettid() as usize,
            sig as usize,
            info as usize,
            0,
            0,
        );
    }
    DEFERRED.with(|d| d.set(d.get() | bit));
    crate::scheduler::note_deferred_signal(sys::gettid() as u32, bit);
    crate::stats::bump(&crate::stats::STATS.signals_deferred);
}
