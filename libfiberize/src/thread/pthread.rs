//! Thread lifecycle under the preload: `pthread_create` makes a donor and a fiber,
//! `pthread_join`/`pthread_exit` follow glibc, and the donor's zombie phase runs the
//! destructors.
//!
//! # Donor protocol
//!
//! ```text
//!  creator                donor OS thread                         workers
//!  -------                ---------------                         -------
//!  real pthread_create -> donor_main:
//!  returns the donor's      block all signals
//!  pthread_t (= the         carve the fiber stack, set CURRENT
//!  fiber's pthread_self)    build the coroutine
//!                           ---- TLS-free from here ----
//!                           push_from_donor(fiber) ------------> run it ...
//!                           futex-wait donor word (Idle)          ... until it
//!                                 <------- Run ------------------ RunOnDonor, or
//!                           resume the coroutine itself
//!                           (blocking call runs here)
//!                           push_from_donor on BackToPool ------> run it ...
//!                                 <------- Finish --------------- it returned
//!                           ---- zombie: TLS is ours again ----
//!                           clear CURRENT, return the value:
//!                           glibc runs thread_local and pthread_key
//!                           destructors, then the thread exits and
//!                           a real pthread_join returns.
//! ```
//!
//! `pthread_join` from a fiber runs the real `pthread_join` on the joiner's own donor
//! ([`crate::runtime::fibers::switch::run_on_donor`]); so "join returns after the destructors ran" is
//! glibc's own guarantee, and no worker blocks.
//!
//! # Fork: the child's thread goes back to its donor's frames
//!
//! A fiber that calls `fork` runs on a worker, so the child's only OS thread is a copy
//! of that worker, in the middle of the fiber's coroutine, with FS on the donor's TCB
//! (which glibc, after `fork`, counts as the child's one thread). The child has no
//! other worker, no monitor and no donor thread. Two ways were possible:
//!
//! * **a fresh runtime in the child** (new pool, queues, reactor, timers): every static
//!   of the runtime would need a reset path, ghost fibers copied from the parent would
//!   still sit in the queues and tables, and the fiber's coroutine would still return
//!   into the copied worker's frames — not into glibc's `start_thread`, which is what
//!   runs the thread-exit protocol (TLS and key destructors, "last thread: exit(0)")
//!   and what `pthread_exit`'s unwinding must end in;
//! * **the child's thread becomes a plain thread on its donor's frames**, which is
//!   what it is natively. This is the one we use.
//!
//! The donor's frames are in the child's memory, frozen where the donor slept; only its
//! registers are missing. So the donor sleeps through [`donor_sleep`](super::donor_sleep), a few
//! instructions of assembly that push the callee-saved registers (and the SSE/x87
//! control words) and publish the stack pointer in the fiber's `DonorHandoff` before the
//! futex system call. In the child (`crate::thread::process`'s atfork child hook, which runs
//! on the forking fiber) the fiber suspends with `RunOnDonor`; the worker code that
//! receives it sees the forked child and calls [`resume_donor_in_forked_child`](super::donor_sleep::resume_donor_in_forked_child), which
//! points FS at the donor's TCB and loads that stack pointer: the donor's copy returns
//! from `donor_sleep` with "woken in a forked child" and resumes the coroutine like a
//! `DonorCommand::Run`. From there on the fiber runs on its donor for good (a `BackToPool`
//! resumes it again at once), every call takes its plain-thread path, and the end of
//! the start routine (or `pthread_exit`, which unwinds into `start_thread` exactly as
//! it does for a fiber on its donor in the parent) ends the child as glibc does.
//!
//! The atfork prepare hook waits until the forking fiber's donor has published its
//! stack pointer (it may still be on its way to sleep right after handing the fiber to
//! the pool); a donor asleep there is woken only by a hand-off, which cannot come
//! while its fiber runs on a worker, so the snapshot the child gets is consistent.

use core::ptr;
use core::sync::atomic::Ordering;
use std::sync::Arc;

use libc::{c_int, c_void, pthread_attr_t, pthread_t};

use crate::base::stats::{bump, STATS};
use crate::base::sys;
use crate::runtime::fibers::fiber::{self, DonorStack, Fiber, FiberRef, Life, Switch};
use crate::runtime::fibers::fiber_state::DonorCommand;
use crate::runtime::fibers::hooks::Hooks;
use crate::runtime::scheduler;
use crate::thread::donor_sleep;

/// The upper layers' part in the core's protocols ([`crate::runtime::fibers::hooks`]),
/// installed by [`create`] when it starts the pool.
pub static LAYER_HOOKS: Hooks = Hooks {
    deliver_signals: crate::signal::mask::deliver_pending,
    act_on_async_cancel: crate::signal::cancel::act_on_async_cancel,
    fiber_ended,
    resume_donor_in_forked_child: donor_sleep::resume_donor_in_forked_child,
    exit_if_main_left_and_all_done,
    route_process_signals: crate::signal::process::route_pending,
    after_pool_started: crate::thread::process::after_pool_started,
    dispatch_readiness: crate::io::fdtable::dispatch,
    exit_thread: exit,
    demoted: crate::signal::cancel::hand_cancellation_to_glibc,
};

pub type StartRoutine = extern "C" fn(*mut c_void) -> *mut c_void;

crate::real_fns! {
    fn pthread_join(t: pthread_t, ret: *mut *mut c_void) -> c_int;
    fn pthread_timedjoin_np(t: pthread_t, ret: *mut *mut c_void, abstime: *const libc::timespec) -> c_int;
    fn pthread_clockjoin_np(t: pthread_t, ret: *mut *mut c_void, clock: libc::clockid_t, abstime: *const libc::timespec) -> c_int;
    fn pthread_exit(v: *mut c_void) -> ();
    fn pthread_getattr_np(t: pthread_t, a: *mut pthread_attr_t) -> c_int;
    fn pthread_attr_getstack(a: *const pthread_attr_t, addr: *mut *mut c_void, size: *mut libc::size_t) -> c_int;
    fn pthread_attr_destroy(a: *mut pthread_attr_t) -> c_int;
    fn pthread_attr_getdetachstate(a: *const pthread_attr_t, state: *mut c_int) -> c_int;
    fn pthread_attr_getinheritsched(a: *const pthread_attr_t, inherit: *mut c_int) -> c_int;
    fn pthread_attr_getschedpolicy(a: *const pthread_attr_t, policy: *mut c_int) -> c_int;
}

/// Room left between the donor's live frames and the top of the fiber's stack, for
/// the donor's own calls after it lent the stack (futex waits, resume, exit path).
/// Origin: the deepest of those paths (glibc's thread exit with unwinding) stays under
/// 4 KiB in practice; doubled.
const DONOR_MARGIN: usize = 8 * 1024;
/// Below this much usable stack we do not make a fiber: the thread runs natively.
const MIN_FIBER_STACK: usize = 16 * 1024;

/// Donor threads that have not yet returned from `donor_main`.
static DONORS_ALIVE: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
/// The main thread called `pthread_exit`: the process must end when the last of the
/// program's threads does (glibc's rule), although our workers never exit.
static MAIN_EXITED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Called by the monitor each tick: after `pthread_exit` in `main`, once no fiber and
/// no donor is left, the process exits with status 0, as it would natively when its
/// last thread ends.
pub fn exit_if_main_left_and_all_done() {
    if MAIN_EXITED.load(Ordering::Acquire)
        && DONORS_ALIVE.load(Ordering::Acquire) == 0
        && crate::runtime::fibers::registry::live_fibers() == 0
    {
        // SAFETY: exit runs atexit handlers and flushes stdio, as the end of the last
        // thread would.
        unsafe { libc::exit(0) };
    }
}

struct DonorBoot {
    fiber: FiberRef,
    start: StartRoutine,
    arg: *mut c_void,
}

/// The attribute asks for an explicit real-time scheduling policy.
///
/// # Safety
/// `attr` is null or an initialized attribute object.
unsafe fn wants_realtime_policy(attr: *const pthread_attr_t) -> bool {
    if attr.is_null() {
        return false;
    }
    let (mut inherit, mut policy) = (libc::PTHREAD_INHERIT_SCHED, libc::SCHED_OTHER);
    // SAFETY: caller's contract; out-parameters are valid ints.
    unsafe {
        pthread_attr_getinheritsched(attr, &mut inherit);
        pthread_attr_getschedpolicy(attr, &mut policy);
    }
    inherit == libc::PTHREAD_EXPLICIT_SCHED && (policy == libc::SCHED_FIFO || policy == libc::SCHED_RR)
}

/// `pthread_create` under the preload.
///
/// # Safety
/// Same contract as `pthread_create`.
pub unsafe fn create(thread: *mut pthread_t, attr: *const pthread_attr_t, start: StartRoutine, arg: *mut c_void) -> c_int {
    // SAFETY: `attr` is null or the program's initialized attribute object.
    if unsafe { wants_realtime_policy(attr) } {
        // SCHED_FIFO/SCHED_RR priorities only mean something to the kernel's
        // scheduler: such a thread stays a plain thread (glibc's checks and errors).
        bump(&STATS.fibers_native_fallback);
        crate::sync::parking::REALTIME_IN_USE.store(true, Ordering::Relaxed);
        // SAFETY: `thread` is writable, `attr` null or initialised, `start` takes `arg`
        // (pthread_create's contract, this fn's # Safety): exactly what glibc's pthread_create needs
        // for this plain thread.
        return unsafe { crate::base::real::pthread_create(thread, attr, start, arg) };
    }
    scheduler::start(&LAYER_HOOKS); // start the pool before the first fiber needs it
    let fiber = Arc::new(Fiber::new(start as usize));
    // A new thread starts with its creator's signal mask (a program that blocks signals
    // before it creates threads, then waits for them in one sigwait thread, relies on
    // it). The kick signal stays open on workers.
    let inherited = match fiber::current() {
        Some(creator) => crate::signal::delivery::intended_mask(creator),
        None => sys::sigmask_get(),
    } & !crate::runtime::preemption::kick::KICK_BIT;
    fiber.signals.set_mask(inherited);
    let boot = Box::into_raw(Box::new(DonorBoot { fiber: fiber.clone(), start, arg }));
    // SAFETY: the program's arguments are passed through; `boot` is reclaimed by the
    // donor, or here if no donor was created.
    let r = unsafe { crate::base::real::pthread_create(thread, attr, donor_main, boot.cast()) };
    if r != 0 {
        // SAFETY: no donor took ownership.
        drop(unsafe { Box::from_raw(boot) });
        return r;
    }
    // SAFETY: pthread_create succeeded, so it wrote the new thread's id.
    crate::runtime::fibers::registry::register_pthread_early(&fiber, unsafe { *thread } as usize);
    bump(&STATS.fibers_created);
    0
}

extern "C" fn donor_main(boot: *mut c_void) -> *mut c_void {
    // SAFETY: `boot` came from Box::into_raw in `create` and is handed to us alone.
    let DonorBoot { fiber, start, arg } = *unsafe { Box::from_raw(boot as *mut DonorBoot) };
    DONORS_ALIVE.fetch_add(1, Ordering::AcqRel);
    let r = donor_main_inner(fiber, start, arg);
    DONORS_ALIVE.fetch_sub(1, Ordering::AcqRel);
    r
}

fn donor_main_inner(fiber: FiberRef, start: StartRoutine, arg: *mut c_void) -> *mut c_void {
    // The fiber runs under its creator's signal mask on the worker (set in `create`);
    // the donor itself must never take an asynchronous signal while the fiber runs
    // elsewhere on its TLS.
    // SAFETY: valid sigset pointers.
    unsafe {
        let mut all: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        crate::base::real::pthread_sigmask(libc::SIG_BLOCK, &all, ptr::null_mut());
    }

    let Some((limit, base)) = fiber_stack_bounds() else {
        // Too little stack to share: run the thread natively, as glibc would.
        bump(&STATS.fibers_native_fallback);
        crate::runtime::fibers::registry::unregister(&fiber); // it never becomes a fiber
        fiber_ended(&fiber);
        // SAFETY: restoring an empty block set is always valid.
        unsafe {
            let mut none: libc::sigset_t = core::mem::zeroed();
            libc::sigemptyset(&mut none);
            crate::base::real::pthread_sigmask(libc::SIG_SETMASK, &none, ptr::null_mut());
        }
        return start(arg);
    };

    fiber.identity.set_donor(sys::thread_pointer(), sys::gettid() as u32);
    // SAFETY: pthread_self has no preconditions (and is not shadowed).
    fiber.identity.set_pthread(unsafe { libc::pthread_self() } as usize);
    fiber::set_current(Arc::as_ptr(&fiber));
    crate::runtime::fibers::registry::register(&fiber);

    // SAFETY: `fiber_stack_bounds` returns 16-aligned bounds of this donor's own stack
    // below its live frames (leaving a margin), above glibc's guard page; the donor
    // does not touch that region again until the fiber finished (it sleeps, then
    // exits).
    let stack = unsafe { DonorStack::new(base, limit) };
    fiber.set_stack_bounds(limit, base);
    let co = fiber::FiberCoroutine::with_stack(stack, move |yielder, ()| {
        // First resume: we run on a worker with FS = our donor's TCB.
        if let Some(me) = fiber::current() {
            me.set_yielder(yielder as *const _);
        }
        crate::base::shield::exit(); // entered by the donor before the hand-off
        let r = start(arg) as usize;
        // AT_FIBER_DESTROY callbacks, in the fiber, before the donor's destructors.
        if let Some(me) = fiber::owner_of_tcb() {
            crate::runtime::fibers::wtls::run_destroy_callbacks(me);
        }
        // Shielded until the worker has switched away for good (crate::signal::handlers).
        crate::base::shield::enter();
        r
    });
    // SAFETY: the fiber is not visible to any worker yet.
    unsafe { fiber.install_coroutine(co) };
    fiber.set_life(Life::Runnable);

    // The fiber's switch in is shielded; its first resume leaves the shield.
    crate::base::shield::set_depth(1);
    // ---- TLS-free from here until donor_serve returns (see module docs) ----
    scheduler::push_from_donor(fiber.clone());
    let retval = donor_serve(&fiber);
    // ---- zombie phase: the fiber is gone, our TLS is ours again ----

    fiber::set_current(ptr::null());
    crate::base::shield::set_depth(0);
    crate::runtime::fibers::registry::unregister(&fiber);
    // SAFETY: the coroutine completed; nobody else will touch it.
    unsafe { fiber.discard_coroutine() };
    bump(&STATS.fibers_finished);
    retval as *mut c_void
}

/// The donor's service loop: sleep until a worker hands the fiber back, run it here
/// when asked, return its value when it finished. TLS-free.
fn donor_serve(fiber: &FiberRef) -> usize {
    // Set when the fiber must run here at once: woken in a forked child, or asked to
    // go back to a pool that a forked child does not have.
    let mut run_here = false;
    loop {
        let command = if run_here { DonorCommand::Run } else { fiber.donor.command() };
        match command {
            DonorCommand::Idle => {
                // SAFETY: the hand-off belongs to our own fiber, which we keep alive.
                if unsafe { donor_sleep::donor_sleep(&fiber.donor) } == donor_sleep::WOKEN_IN_FORKED_CHILD {
                    run_here = true;
                }
            }
            DonorCommand::Run => {
                run_here = false;
                fiber.donor.take_run();
                // SAFETY: the worker handed the fiber to us (`DonorCommand::Run`) and let go of
                // it; FS already is this TCB, so no switch of the thread pointer.
                let r = unsafe { fiber.coroutine_mut().resume(()) };
                match r {
                    corosensei::CoroutineResult::Yield(Switch::BackToPool) if crate::base::config::in_forked_child() => {
                        // No pool in a forked child (it forked while on its donor):
                        // the fiber stays here as the child's plain thread.
                        run_here = true;
                    }
                    corosensei::CoroutineResult::Yield(Switch::BackToPool) => {
                        fiber.set_life(Life::Runnable);
                        scheduler::push_from_donor(fiber.clone());
                    }
                    corosensei::CoroutineResult::Yield(_) => {
                        crate::fatal(&["fiber parked while running on its donor"]);
                    }
                    corosensei::CoroutineResult::Return(v) => return v,
                }
            }
            DonorCommand::Finish => return fiber.donor.retval(),
        }
    }
}

/// `[limit, base)` for the fiber: from the donor stack's low bound up to just below
/// the donor's current frame. None if that is too small.
fn fiber_stack_bounds() -> Option<(usize, usize)> {
    // SAFETY: attr is initialized by pthread_getattr_np before use and destroyed after.
    unsafe {
        let mut attr: pthread_attr_t = core::mem::zeroed();
        if pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut c_void = ptr::null_mut();
        let mut size: libc::size_t = 0;
        let r = pthread_attr_getstack(&attr, &mut addr, &mut size);
        pthread_attr_destroy(&mut attr);
        if r != 0 {
            return None;
        }
        let marker = 0u8;
        let sp = &marker as *const u8 as usize;
        let base = (sp.saturating_sub(DONOR_MARGIN)) & !63;
        let limit = (addr as usize + 15) & !15;
        if base <= limit || base - limit < MIN_FIBER_STACK {
            return None;
        }
        Some((limit, base))
    }
}

/// `pthread_join` (and the timed variants, through `join_with`) from any caller.
///
/// # Safety
/// Same contract as `pthread_join`.
pub unsafe fn join(t: pthread_t, retval: *mut *mut c_void) -> c_int {
    if !wait_for_fiber_end(t) {
        if let Some(me) = fiber::current().filter(|f| !f.cancel.is_disabled()) {
            // A plain-thread target: glibc's join on the donor, in slices, so that a
            // cancellation of the joining fiber is seen within one slice.
            // SAFETY: `t` is a joinable thread and `retval` null or writable (pthread_join's contract),
            // which `join_in_slices` passes to glibc's clockjoin.
            let r = crate::signal::on_donor::run_on_donor_taking_signals(|| unsafe { join_in_slices(me, t, retval) });
            if r == JOIN_CANCELLED {
                crate::signal::cancel::act_on_cancel(me);
            }
            return r;
        }
    }
    // SAFETY: `t` is a joinable thread and `retval` null or writable (pthread_join's contract),
    // as glibc's join requires; on a fiber it runs on the donor OS thread.
    crate::signal::on_donor::run_on_donor_taking_signals(|| unsafe { pthread_join(t, retval) })
}

/// How long a fiber's join of a plain thread waits in glibc before it looks for a
/// cancellation request.
const JOIN_SLICE_NS: u64 = crate::signal::cancel::DONOR_WAIT_SLICE_NS;
const JOIN_CANCELLED: c_int = -1;

/// # Safety
/// As `pthread_join`.
unsafe fn join_in_slices(me: &Fiber, t: pthread_t, retval: *mut *mut c_void) -> c_int {
    loop {
        let deadline = sys::ns_to_timespec(sys::now_ns() + JOIN_SLICE_NS);
        // SAFETY: `t` joinable and `retval` null or writable (this fn's # Safety, pthread_join's
        // contract); `deadline` is our own CLOCK_MONOTONIC timespec.
        let r = unsafe { pthread_clockjoin_np(t, retval, libc::CLOCK_MONOTONIC, &deadline) };
        if r != libc::ETIMEDOUT {
            return r;
        }
        if me.cancel_pending() {
            return JOIN_CANCELLED;
        }
    }
}

/// `pthread_join` is a cancellation point. A fiber joining another fiber first waits
/// here, parked and cancellable, until the target's start routine has returned or
/// it called `pthread_exit`; glibc's join on the donor then only waits out the
/// target donor's zombie phase (TLS destructors), which is short. Without this the
/// wait would happen inside glibc on the donor, where our cancellation cannot reach.
/// Joins that glibc refuses at once (self, detached threads) skip the wait.
/// Returns whether the target is a fiber (then it has ended, or the join is refused).
fn wait_for_fiber_end(t: pthread_t) -> bool {
    let Some(me) = fiber::current() else { return false };
    let Some(target) = crate::runtime::fibers::registry::find_by_pthread(t as usize) else { return false };
    if me.cancel.is_disabled() || core::ptr::eq(me, &*target) || is_detached(t) {
        return true;
    }
    let key = Arc::as_ptr(&target) as usize;
    // Ended: finished, or unregistered (also: it ran as a plain thread after all).
    let ended = || target.life() == Life::Finished || target.identity.is_unregistered();
    loop {
        if ended() {
            // Unregistered without finishing: it ran as a plain thread after all.
            return target.life() == Life::Finished;
        }
        let r = crate::sync::parking::park(
            key,
            u32::MAX,
            crate::runtime::fibers::fiber::WaitKind::Join,
            || !ended(),
            || {},
            |_| {},
            None,
        );
        if r == crate::sync::parking::ParkResult::Interrupted {
            crate::signal::cancel::testcancel();
        }
    }
}

/// Wakes the fibers waiting in [`wait_for_fiber_end`] for `f`, which just finished.
pub fn fiber_ended(f: &Fiber) {
    // Signals of the process handed to it that it did not take are the process's again.
    crate::signal::delivery::give_back_to_process(f, u64::MAX);
    // Signals queued to it with their siginfo end with it, as a thread's pending ones.
    crate::runtime::signals::queued_signals::forget(f);
    crate::sync::parking::unpark_some(f as *const Fiber as usize, u32::MAX, usize::MAX, |_| {});
}

fn is_detached(t: pthread_t) -> bool {
    // SAFETY: attr is initialized by pthread_getattr_np before use and destroyed after.
    unsafe {
        let mut attr: pthread_attr_t = core::mem::zeroed();
        if pthread_getattr_np(t, &mut attr) != 0 {
            return false;
        }
        let mut state = 0;
        pthread_attr_getdetachstate(&attr, &mut state);
        pthread_attr_destroy(&mut attr);
        state == libc::PTHREAD_CREATE_DETACHED
    }
}

/// # Safety
/// Same contract as `pthread_timedjoin_np`.
pub unsafe fn timedjoin(t: pthread_t, retval: *mut *mut c_void, abstime: *const libc::timespec) -> c_int {
    // SAFETY: `t` joinable, `retval` null or writable, `abstime` a timespec pointer
    // (pthread_timedjoin_np's contract), as glibc requires; run on the donor.
    crate::signal::on_donor::run_on_donor_taking_signals(|| unsafe { pthread_timedjoin_np(t, retval, abstime) })
}

/// # Safety
/// Same contract as `pthread_clockjoin_np`.
pub unsafe fn clockjoin(t: pthread_t, retval: *mut *mut c_void, clock: libc::clockid_t, abstime: *const libc::timespec) -> c_int {
    // SAFETY: `t` joinable, `retval` null or writable, `abstime` a timespec pointer
    // (pthread_clockjoin_np's contract), as glibc requires; run on the donor.
    crate::signal::on_donor::run_on_donor_taking_signals(|| unsafe { pthread_clockjoin_np(t, retval, clock, abstime) })
}

/// `pthread_exit`: a fiber moves to its donor and exits there with glibc's real
/// `pthread_exit`, which unwinds the fiber's frames (running C++ destructors and
/// cleanup handlers on the fiber's own stack, which is part of the donor's) and
/// longjmps to the donor's `start_thread` frame above it.
///
/// # Safety
/// Same contract as `pthread_exit`.
pub unsafe fn exit(v: *mut c_void) -> ! {
    // SAFETY: getpid has no preconditions.
    if fiber::current().is_none() && sys::gettid() == unsafe { libc::getpid() } && scheduler::try_runtime().is_some() {
        MAIN_EXITED.store(true, Ordering::Release);
    }
    // AT_FIBER_DESTROY callbacks, before unwinding runs any destructor (also for a
    // fiber that runs on its donor now).
    if let Some(f) = fiber::owner_of_tcb().filter(|_| !fiber::in_vfork_child()) {
        crate::runtime::fibers::wtls::run_destroy_callbacks(f);
    }
    if let Some(f) = fiber::current() {
        let fp = f as *const Fiber;
        if crate::runtime::fibers::switch::become_plain_thread() {
            // Now on the donor. The donor's frames (and its Arc) are about to be
            // discarded by the longjmp, so settle the fiber's bookkeeping here.
            // SAFETY: `fp` is alive: donor_main's Arc still exists (we release it below).
            let f = unsafe { &*fp };
            f.set_life(Life::Finished);
            fiber_ended(f);
            // SAFETY: `fp` is alive (see above).
            unsafe { crate::runtime::fibers::registry::unregister_ptr(fp) };
            // SAFETY: we run on the coroutine's stack and will never resume it: forget
            // the coroutine object without unwinding it.
            unsafe { f.discard_coroutine() };
            fiber::set_current(ptr::null());
            bump(&STATS.fibers_finished);
            // SAFETY: releases donor_main's strong reference, which the longjmp skips.
            unsafe { Arc::decrement_strong_count(fp) };
            // donor_main's own bookkeeping is skipped by the longjmp too.
            DONORS_ALIVE.fetch_sub(1, Ordering::AcqRel);
        }
    }
    // SAFETY: pthread_exit's contract (a thread of the program; `v` any value) is all that glibc's
    // pthread_exit needs; we are a plain thread now (moved to the donor above, or one already).
    unsafe { pthread_exit(v) };
    crate::fatal(&["pthread_exit returned"])
}

/// The target of `setpriority`/`getpriority(which, who)` called by the current thread:
/// for a fiber, `PRIO_PROCESS` with `who` meaning "the calling thread" — 0, or the
/// worker's tid that a raw `gettid` system call returns — names its donor, since the
/// worker is shared with other fibers and the donor is the thread the program created
/// (`gettid()` already returns the donor's tid: `thread::tid`). Everything else
/// (plain threads, other tids, process groups, users) is left as it is.
pub fn priority_target(which: c_int, who: libc::id_t) -> libc::id_t {
    let Some(f) = fiber::current().filter(|_| which == libc::PRIO_PROCESS as c_int) else { return who };
    let donor = f.identity.donor_tid();
    if donor != 0 && (who == 0 || who == sys::gettid() as u32) {
        donor
    } else {
        who
    }
}
