//! The kick: the runtime's own signal ([`KICK_SIGNAL`]), sent to one worker to make it look
//! at the fiber it runs *now*, without waiting for that fiber to switch.
//!
//! Two reasons, both looked at by the handler ([`on_kick`]) in the fiber's own context:
//! signals or an asynchronous cancel request held for that fiber (the signal layer
//! records them and kicks; their delivery goes through [`crate::runtime::hooks`]), and
//! a preemption request of the monitor ([`crate::runtime::preempt`]).
//!
//! Workers never block the kick signal; fibers' masks never contain it
//! ([`KICK_BIT`] is removed from every mask the runtime installs), and the program's
//! `sigaction` cannot take it (`signal::handlers` refuses to wrap it).

use core::sync::atomic::{AtomicBool, Ordering};

use libc::c_int;

use crate::base::sys;
use crate::runtime::fiber::Fiber;

/// A running fiber may not switch for a long time (a spin, a loop of uncontended
/// locks): kick the worker that runs it; the kick handler acts in the fiber's own
/// context (or finds another context and leaves the request pending).
pub fn kick(target: &Fiber) {
    if target.life() == crate::runtime::fiber::Life::Running {
        if let Some(w) = crate::runtime::scheduler::worker_of(target) {
            let tid = w.tid.load(Ordering::Relaxed);
            sys::tgkill(tid as i32, KICK_SIGNAL);
        }
    }
}

/// The signal the library uses to make a worker deliver a fiber's pending signals
/// now: a high real-time signal (glibc reserves the lowest ones for itself); SIGRTMAX
/// on x86_64, see [`crate::base::arch::KICK_SIGNAL`].
pub const KICK_SIGNAL: c_int = crate::base::arch::KICK_SIGNAL;

/// Handler of [`KICK_SIGNAL`]: runs on a worker, in whatever context it interrupted.
/// `fiber::current()` reads the running fiber through its own TLS, so a pending
/// signal is only ever delivered to the fiber it was sent to. The kick has two
/// reasons, both looked at: signals held for the fiber (and an asynchronous
/// cancellation), and a preemption request of the monitor (`crate::runtime::preempt`, which
/// may suspend the fiber right here, inside the handler). Async-signal-safe: TLS
/// reads, atomics, raw system calls and the fiber switch.
extern "C" fn on_kick(_: c_int, _info: *mut libc::siginfo_t, uc: *mut libc::c_void) {
    if let Some(f) = crate::runtime::fiber::current() {
        let saved_errno = sys::errno();
        let hooks = crate::runtime::hooks::get();
        if f.signals.held() != 0 {
            (hooks.deliver_signals)(f);
        }
        if f.cancel.is_asynchronous() {
            (hooks.act_on_async_cancel)(f);
        }
        crate::runtime::preempt::on_kick(f, uc);
        sys::set_errno(saved_errno);
    }
}

/// Set once the kick handler is installed: before that a kick would kill the process
/// (the default action of a real-time signal).
pub static KICK_INSTALLED: AtomicBool = AtomicBool::new(false);

/// Installs the kick handler (once, when the pool starts).
pub fn install_kick_handler() {
    // SAFETY: installing an SA_SIGINFO handler of the matching type with a valid
    // sigaction.
    unsafe {
        let mut sa: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = on_kick as *const () as usize;
        sa.sa_flags = libc::SA_RESTART | libc::SA_SIGINFO;
        libc::sigemptyset(&mut sa.sa_mask);
        if crate::base::real::sigaction(KICK_SIGNAL, &sa, core::ptr::null_mut()) == 0 {
            KICK_INSTALLED.store(true, Ordering::Release);
        }
    }
}

/// The kernel mask bit of the kick signal, which workers never block.
pub const KICK_BIT: u64 = 1u64 << (KICK_SIGNAL - 1);
