//! The atomics of the model-checked protocols.
//!
//! The lock-free hand-shakes that the runtime's correctness rests on live in small
//! files that take their atomics from here and nothing else from the crate but this
//! module: [`crate::runtime::park_state`] (park/unpark of a fiber),
//! [`crate::runtime::sleep_state`] (an idle worker's sleep against a producer's
//! notify). The mutex word (`sync::mutex`) and the parking lot are not yet among them:
//! their models in the loom test are still hand-written copies.
//! In the library these names are `core`'s atomics. The model checks
//! (`libfiberize/tests/loom_protocols.rs`) compile **the same files** with a `base::loom`
//! of their own that re-exports loom's atomics, and drive their real functions from
//! loom threads: what is checked is the code that runs, not a copy of it.
//!
//! A protocol file may import only this module (and `core`), so that it compiles in both
//! crates; `scripts/layers.py` and the loom test's build enforce that.

pub use core::sync::atomic::{fence, AtomicU32, AtomicUsize, Ordering};

/// A busy-wait hint (`pause`); the model makes it a yield to the other loom threads.
#[inline]
pub fn spin_hint() {
    core::hint::spin_loop();
}
