//! What the layers above the core do at the core's own moments, registered instead of
//! imported: the core (fibers, the scheduler, the kick signal) never names the signal,
//! cancellation or thread modules.
//!
//! ```text
//!   thread::pthread::create ── scheduler::start(&pthread::LAYER_HOOKS) ── installs ─┐
//!                                                                                   v
//!   Fiber::suspend returns ──────── pending signals? ── hooks().deliver_signals(f)
//!   (and the kick handler,          async cancel?  ──── hooks().act_on_async_cancel(f)
//!    scheduler::park_current)
//!   worker: coroutine returned ───────────────────────── hooks().fiber_ended(f)
//!   worker in a forked child: donor's frames ─────────── hooks().resume_donor_in_forked_child(f)
//!   monitor tick ─────────────────────────────────────── hooks().exit_if_main_left_and_all_done()
//!                  ─────────────────────────────────────── hooks().route_process_signals()
//!   pool started ─────────────────────────────────────── hooks().after_pool_started()
//!   idle epoll harvested an fd event ─────────────────── hooks().dispatch_readiness(cookie, events)
//!   (and from the signal layer, which may not import the thread layer either:)
//!   a cancel request acted on ────────────────────────── hooks().exit_thread(PTHREAD_CANCELED)
//!   a fiber demoted to its donor ─────────────────────── hooks().demoted(f)
//! ```
//!
//! The table is installed once, before the pool starts, and never changes; until then
//! [`get`] returns [`NO_HOOKS`], whose entries do nothing (no fiber exists before the
//! pool does, so none of them can be needed). The core checks the cheap conditions
//! itself (a fiber's pending-signal word, its asynchronous-cancellation flag) and calls through
//! the table only when there is something to do.

use core::sync::atomic::{AtomicPtr, Ordering};

use crate::runtime::fibers::fiber::Fiber;

/// The upper layers' part in the core's protocols (see the module docs).
pub struct Hooks {
    /// Runs the handlers of the signals pending for `f` that its mask lets through,
    /// in `f`'s context (`signal::mask::deliver_pending`).
    pub deliver_signals: fn(&Fiber),
    /// Ends `f` now if it has an asynchronous cancel request it can act on
    /// (`signal::cancel::act_on_async_cancel`).
    pub act_on_async_cancel: fn(&Fiber),
    /// `f`'s coroutine returned on a worker: hand its end to its donor
    /// (`thread::pthread::fiber_ended`).
    pub fiber_ended: fn(&Fiber),
    /// In a forked child, the worker found `f` (the forking fiber): continue as its
    /// donor, a plain thread (`thread::pthread::resume_donor_in_forked_child`).
    pub resume_donor_in_forked_child: fn(&Fiber) -> !,
    /// Once a monitor tick: exit the process if `main` returned and no fiber is left
    /// (`thread::pthread::exit_if_main_left_and_all_done`).
    pub exit_if_main_left_and_all_done: fn(),
    /// Once a monitor tick, on the monitor (which blocks every signal): hand the
    /// signals pending for the process that a fiber does not block to such a fiber
    /// (`signal::process::route_pending`).
    pub route_process_signals: fn(),
    /// Right after the workers and the monitor were started (`thread::process`).
    pub after_pool_started: fn(),
    /// One event harvested from the idle epoll set (`runtime::sleep::poller`), whose cookie
    /// the I/O layer registered: wake the fd's waiters; false for a stale event
    /// (`io::fdtable::dispatch`).
    pub dispatch_readiness: fn(u64, u32) -> bool,
    /// Ends the calling thread with `retval`, as `pthread_exit` (the cancellation layer
    /// acts on a cancel request this way; `thread::pthread::exit`).
    ///
    /// # Safety
    /// As `pthread_exit`: called by the thread that ends.
    pub exit_thread: unsafe fn(*mut libc::c_void) -> !,
    /// `f` was demoted: it runs on its donor for good, a plain thread that glibc
    /// cancels (`signal::cancel::hand_cancellation_to_glibc`).
    pub demoted: fn(&Fiber),
}

fn nothing_for(_: &Fiber) {}
fn nothing() {}
fn no_descriptors(_: u64, _: u32) -> bool {
    false
}
/// # Safety
/// None (it aborts); the signature is the hook's.
unsafe fn no_thread_layer(_: *mut libc::c_void) -> ! {
    crate::fatal(&["a thread exit before the runtime's hooks were installed"])
}
fn no_donor_to_resume(_: &Fiber) -> ! {
    crate::fatal(&["a forked child resumed a donor before the runtime's hooks were installed"])
}

/// The table before [`install`]: nothing to do.
pub static NO_HOOKS: Hooks = Hooks {
    deliver_signals: nothing_for,
    act_on_async_cancel: nothing_for,
    fiber_ended: nothing_for,
    resume_donor_in_forked_child: no_donor_to_resume,
    exit_if_main_left_and_all_done: nothing,
    route_process_signals: nothing,
    after_pool_started: nothing,
    dispatch_readiness: no_descriptors,
    exit_thread: no_thread_layer,
    demoted: nothing_for,
};

static HOOKS: AtomicPtr<Hooks> = AtomicPtr::new(core::ptr::null_mut());

/// Installs the table (the pool's starter does, before it starts the pool). Release:
/// pairs with the Acquire in [`get`], so whoever sees the pointer sees the table.
pub fn install(hooks: &'static Hooks) {
    HOOKS.store(hooks as *const Hooks as *mut Hooks, Ordering::Release);
}

/// The installed table, or [`NO_HOOKS`].
#[inline]
pub fn get() -> &'static Hooks {
    let p = HOOKS.load(Ordering::Acquire);
    if p.is_null() {
        &NO_HOOKS
    } else {
        // SAFETY: only `install` stores here, a `&'static Hooks`.
        unsafe { &*p }
    }
}
