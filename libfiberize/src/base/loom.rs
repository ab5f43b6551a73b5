//! The atomics of the model-checked protocols.
//!
//! The lock-free hand-shakes that the runtime's correctness rests on live in small
//! files that take their atomics from here and nothing else from the crate but this
//! module: [`crate::runtime::sleep::park_state`] (park/unpark of a fiber),
//! [`crate::runtime::sleep::sleep_state`] (an idle worker's sleep against a producer's
//! notify, and the monitor's doze against a worker's wake-up),
//! [`crate::sync::lock_word`] (the mutex word with one wake-up in flight and
//! its hand-offs, over the parking lot seen through a trait), [`crate::sync::rwlock::word`] (the
//! rwlock's state word and its unlocks' wake-up decisions, likewise) and
//! [`crate::sync::parking_quick`] (the parking lot's lock-free emptiness check against
//! a waiter's link and validation), [`crate::io::epoll_membership`] (a direct
//! waiter's removal of an fd from the epoll set against a fiber parking through it) and
//! [`crate::io::waiter_slot`] (a descriptor's one waiter against a readiness edge).
//! In the library these names are `core`'s atomics. The model checks
//! (`libfiberize/tests/loom_protocols.rs`) compile **the same files** with a `base::loom`
//! of their own that re-exports loom's atomics, and drive their real functions from
//! loom threads: what is checked is the code that runs, not a copy of it.
//!
//! A protocol file may import only this module (and `core`), so that it compiles in both
//! crates; `scripts/layers.py` and the loom test's build enforce that.

pub use core::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// A busy-wait hint (`pause`); the model makes it a yield to the other loom threads.
#[inline]
pub fn spin_hint() {
    core::hint::spin_loop();
}

/// Busy-waits `iterations` spin hints; the model makes it one yield (a loop of yields
/// would multiply the interleavings loom explores without checking anything more).
#[inline]
pub fn spin_wait(iterations: u32) {
    for _ in 0..iterations {
        core::hint::spin_loop();
    }
}

/// Gives the CPU away (`sched_yield`) while another thread finishes a short critical
/// section; the model makes it a yield to the other loom threads.
#[inline]
pub fn yield_thread() {
    crate::base::sys::sched_yield_raw();
}
