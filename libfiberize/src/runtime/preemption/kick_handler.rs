//! The handler of the kick ([`crate::runtime::preemption::kick`]): it looks at the fiber the
//! worker runs now, for held signals or an asynchronous cancel (through
//! [`crate::runtime::fibers::hooks`]) and for a preemption request
//! ([`crate::runtime::preemption::preempt`]). Kept apart from the kick's send side, which
//! `preempt` uses.

use core::sync::atomic::Ordering;

use libc::c_int;

use crate::base::sys;
use crate::runtime::preemption::kick::{KICK_INSTALLED, KICK_SIGNAL};

/// Handler of [`KICK_SIGNAL`]: runs on a worker, in whatever context it interrupted.
/// `fiber::current()` reads the running fiber through its own TLS, so a pending
/// signal is only ever delivered to the fiber it was sent to. The kick has two
/// reasons, both looked at: signals held for the fiber (and an asynchronous
/// cancellation), and a preemption request of the monitor (`crate::runtime::preemption::preempt`, which
/// may suspend the fiber right here, inside the handler). Async-signal-safe: TLS
/// reads, atomics, raw system calls and the fiber switch.
extern "C" fn on_kick(_: c_int, _info: *mut libc::siginfo_t, uc: *mut libc::c_void) {
    if let Some(f) = crate::runtime::fibers::fiber::current() {
        let saved_errno = sys::errno();
        let hooks = crate::runtime::fibers::hooks::get();
        if f.signals.held() != 0 {
            (hooks.deliver_signals)(f);
        }
        if f.cancel.is_asynchronous() {
            (hooks.act_on_async_cancel)(f);
        }
        crate::runtime::preemption::preempt::on_kick(f, uc);
        sys::set_errno(saved_errno);
    }
}

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
