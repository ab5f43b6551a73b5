//! The kick: the runtime's own signal ([`KICK_SIGNAL`]), sent to one worker to make it look
//! at the fiber it runs *now*, without waiting for that fiber to switch.
//!
//! Two reasons, both looked at by the handler ([`crate::runtime::preemption::kick_handler`]) in the fiber's own context:
//! signals or an asynchronous cancel request held for that fiber (the signal layer
//! records them and kicks; their delivery goes through [`crate::runtime::fibers::hooks`]), and
//! a preemption request of the monitor ([`crate::runtime::preemption::preempt`]).
//!
//! Workers never block the kick signal; fibers' masks never contain it
//! ([`KICK_BIT`] is removed from every mask the runtime installs), and the program's
//! `sigaction` cannot take it (`signal::handlers` refuses to wrap it).

use core::sync::atomic::{AtomicBool, Ordering};

use libc::c_int;

use crate::base::sys;
use crate::runtime::fibers::fiber::Fiber;

/// A running fiber may not switch for a long time (a spin, a loop of uncontended
/// locks): kick the worker that runs it; the kick handler acts in the fiber's own
/// context (or finds another context and leaves the request pending).
pub fn kick(target: &Fiber) {
    if target.life() == crate::runtime::fibers::fiber::Life::Running {
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

/// Set once the kick handler is installed: before that a kick would kill the process
/// (the default action of a real-time signal).
pub static KICK_INSTALLED: AtomicBool = AtomicBool::new(false);

/// The kernel mask bit of the kick signal, which workers never block.
pub const KICK_BIT: u64 = 1u64 << (KICK_SIGNAL - 1);
