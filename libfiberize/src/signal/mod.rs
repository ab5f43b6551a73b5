//! **Layer 3 — signals and cancellation.** Per-fiber masks and thread-directed signals
//! ([`delivery`]), the program's handlers behind the runtime's trampoline
//! ([`handlers`]), deferred cancellation ([`cancel`]). They take part in a fiber's
//! switch through [`crate::runtime::hooks`].

pub mod cancel;
pub mod delivery;
pub mod handlers;
