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
//!                           futex-wait donor_word                 ... until it
//!                                 <------- DONOR_RUN ------------ RunOnDonor, or
//!                           resume the coroutine itself
//!                           (blocking call runs here)
//!                           push_from_donor on BackToPool ------> run it ...
//!                                 <------- DONOR_FINISH --------- it returned
//!                           ---- zombie: TLS is ours again ----
//!                           clear CURRENT, return the value:
//!                           glibc runs thread_local and pthread_key
//!                           destructors, then the thread exits and
//!                           a real pthread_join returns.
//! ```
//!
//! `pthread_join` from a fiber runs the real `pthread_join` on the joiner's own donor
//! ([`crate::fiber::run_on_donor`]); so "join returns after the destructors ran" is
//! glibc's own guarantee, and no worker blocks.

use core::ptr;
use core::sync::atomic::Ordering;
use std::sync::Arc;

use libc::{c_int, c_void, pthread_attr_t, pthread_t};

use crate::fiber::{self, DonorStack, Fiber, FiberRef, Life, Switch, DONOR_FINISH, DONOR_IDLE, DONOR_RUN};
use crate::stats::{bump, STATS};
use crate::{scheduler, sys};

pub type StartRoutine = extern "C" fn(*mut c_void) -> *mut c_void;

crate::real_fns! {
    fn pthread_create(t: *mut pthread_t, a: *const pthread_attr_t, f: StartRoutine, arg: *mut c_void) -> c_int;
    fn pthread_join(t: pthread_t, ret: *mut *mut c_void) -> c_int;
    fn pthread_timedjoin_np(t: pthread_t, ret: *mut *mut c_void, abstime: *const libc::timespec) -> c_int;
    fn pthread_clockjoin_np(t: pthread_t, ret: *mut *mut c_void, clock: libc::clockid_t, abstime: *const libc::timespec) -> c_int;
    fn pthread_exit(v: *mut c_void) -> ();
    fn pthread_getattr_np(t: pthread_t, a: *mut pthread_attr_t) -> c_int;
    fn pthread_attr_getstack(a: *const pthread_attr_t, addr: *mut *mut c_void, size: *mut libc::size_t) -> c_int;
    fn pthread_attr_destroy(a: *mut pthread_attr_t) -> c_int;
    fn pthread_sigmask(how: c_int, set: *const libc::sigset_t, old: *mut libc::sigset_t) -> c_int;
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
        && crate::dump::live_fibers() == 0
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

/// `pthread_create` under the preload.
///
/// # Safety
/// Same contract as `pthread_create`.
pub unsafe fn create(thread: *mut pthread_t, attr: *const pthread_attr_t, start: StartRoutine, arg: *mut c_void) -> c_int {
    scheduler::runtime(); // start the pool before the first fiber needs it
    let fiber = Arc::new(Fiber::new(start as usize));
    let boot = Box::into_raw(Box::new(DonorBoot { fiber, start, arg }));
    // SAFETY: the program's arguments are passed through; `boot` is reclaimed by the
    // donor, or here if no donor was created.
    let r = unsafe { pthread_create(thread, attr, donor_main, boot.cast()) };
    if r != 0 {
        // SAFETY: no donor took ownership.
        drop(unsafe { Box::from_raw(boot) });
        return r;
    }
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

    // The fiber inherits the creator's signal mask on the worker; the donor itself must
    // never take an asynchronous signal while the fiber runs elsewhere on its TLS.
    // SAFETY: valid sigset pointers.
    unsafe {
        let mut all: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        pthread_sigmask(libc::SIG_BLOCK, &all, ptr::null_mut());
    }

    let Some((limit, base)) = fiber_stack_bounds() else {
        // Too little stack to share: run the thread natively, as glibc would.
        bump(&STATS.fibers_native_fallback);
        // SAFETY: restoring an empty block set is always valid.
        unsafe {
            let mut none: libc::sigset_t = core::mem::zeroed();
            libc::sigemptyset(&mut none);
            pthread_sigmask(libc::SIG_SETMASK, &none, ptr::null_mut());
        }
        return start(arg);
    };

    fiber.tp.store(sys::thread_pointer(), Ordering::Relaxed);
    // SAFETY: pthread_self has no preconditions (and is not shadowed).
    fiber.pthread.store(unsafe { libc::pthread_self() } as usize, Ordering::Relaxed);
    fiber::set_current(Arc::as_ptr(&fiber));
    crate::dump::register(&fiber);

    let co = fiber::FiberCoroutine::with_stack(DonorStack::new(base, limit), move |yielder, ()| {
        // First resume: we run on a worker with FS = our donor's TCB.
        if let Some(me) = fiber::current() {
            me.set_yielder(yielder as *const _);
        }
        crate::handlers::exit(); // entered by the donor before the hand-off
        let r = start(arg) as usize;
        // Shielded until the worker has switched away for good (crate::handlers).
        crate::handlers::enter();
        r
    });
    // SAFETY: the fiber is not visible to any worker yet.
    unsafe { fiber.install_coroutine(co) };
    fiber.set_life(Life::Runnable);

    // The fiber's switch in is shielded; its first resume leaves the shield.
    crate::handlers::set_depth(1);
    // ---- TLS-free from here until donor_serve returns (see module docs) ----
    scheduler::push_from_donor(fiber.clone());
    let retval = donor_serve(&fiber);
    // ---- zombie phase: the fiber is gone, our TLS is ours again ----

    fiber::set_current(ptr::null());
    crate::handlers::set_depth(0);
    crate::dump::unregister(&fiber);
    // SAFETY: the coroutine completed; nobody else will touch it.
    unsafe { fiber.discard_coroutine() };
    bump(&STATS.fibers_finished);
    retval as *mut c_void
}

/// The donor's service loop: sleep until a worker hands the fiber back, run it here
/// when asked, return its value when it finished. TLS-free.
fn donor_serve(fiber: &FiberRef) -> usize {
    loop {
        match fiber.donor_word.load(Ordering::Acquire) {
            DONOR_IDLE => {
                sys::futex_wait(&fiber.donor_word, DONOR_IDLE, None);
            }
            DONOR_RUN => {
                fiber.donor_word.store(DONOR_IDLE, Ordering::Relaxed);
                // SAFETY: the worker handed the fiber to us (DONOR_RUN) and let go of
                // it; FS already is this TCB, so no switch of the thread pointer.
                let r = unsafe { fiber.coroutine_mut().resume(()) };
                match r {
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
            DONOR_FINISH => return fiber.retval.load(Ordering::Relaxed),
            _ => crate::fatal(&["corrupt donor word"]),
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
    // SAFETY: forwarded contract. On a fiber this runs on its donor OS thread.
    fiber::run_on_donor(|| unsafe { pthread_join(t, retval) })
}

/// # Safety
/// Same contract as `pthread_timedjoin_np`.
pub unsafe fn timedjoin(t: pthread_t, retval: *mut *mut c_void, abstime: *const libc::timespec) -> c_int {
    // SAFETY: forwarded contract.
    fiber::run_on_donor(|| unsafe { pthread_timedjoin_np(t, retval, abstime) })
}

/// # Safety
/// Same contract as `pthread_clockjoin_np`.
pub unsafe fn clockjoin(t: pthread_t, retval: *mut *mut c_void, clock: libc::clockid_t, abstime: *const libc::timespec) -> c_int {
    // SAFETY: forwarded contract.
    fiber::run_on_donor(|| unsafe { pthread_clockjoin_np(t, retval, clock, abstime) })
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
    if let Some(f) = fiber::current() {
        let fp = f as *const Fiber;
        if fiber::become_plain_thread() {
            // Now on the donor. The donor's frames (and its Arc) are about to be
            // discarded by the longjmp, so settle the fiber's bookkeeping here.
            // SAFETY: `fp` is alive: donor_main's Arc still exists (we release it below).
            let f = unsafe { &*fp };
            f.set_life(Life::Finished);
            // SAFETY: `fp` is alive (see above).
            unsafe { crate::dump::unregister_ptr(fp) };
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
    // SAFETY: forwarded contract; never returns.
    unsafe { pthread_exit(v) };
    crate::fatal(&["pthread_exit returned"])
}
