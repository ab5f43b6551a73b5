//! The in-place overlays of glibc's pthread objects, from the `glibc-layout` crate
//! (which checks their sizes and offsets against glibc's own headers).
pub use glibc_layout::{CondOverlay, MutexOverlay, RwlockOverlay, INIT_DESTROYED, INIT_READY};
