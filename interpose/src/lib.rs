//! # libfiberize.so
//!
//! The `LD_PRELOAD` face of the fiberize runtime. Every `#[no_mangle]` function of the
//! library lives in [`exports`], one file per family, and does only three things:
//!
//! 1. ask the gate whether the runtime handles this call (`gate`): enabled, not a
//!    forked child, and for calls that only differ for fibers, whether the caller
//!    is a fiber;
//! 2. translate the C ABI (pointers, `errno` conventions) and call `fiberize_rt`;
//! 3. otherwise pass through to the real libc function (`fiberize_rt::base::real`).
//!
//! Exports are compiled out under `cfg(test)` so that unit tests of this crate do not
//! shadow libc in the test binary.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod exports;

/// Decisions shared by every export.
pub(crate) mod gate {
    /// The runtime's implementations are in use for this process (not `FIBERIZE=off`).
    #[inline]
    pub fn enabled() -> bool {
        fiberize_rt::base::config::enabled()
    }

    /// The caller is a fiber scheduled by a worker (it must park, not block).
    #[inline]
    pub fn fiber() -> Option<&'static fiberize_rt::runtime::fibers::fiber::Fiber> {
        if !enabled() {
            return None;
        }
        fiberize_rt::runtime::fibers::switch::current_or_demote()
    }

    /// Sets the calling thread's (or fiber's) errno.
    pub use fiberize_rt::base::sys::set_errno;
}
