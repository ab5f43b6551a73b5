//! **Layer 3 — signals and cancellation.** Thread-directed signals ([`delivery`]),
//! per-fiber masks and the raising of held signals they let through ([`mask`]), the
//! program's handlers behind the runtime's trampoline
//! ([`handlers`]), signals sent to the process handed to a fiber ([`process`]),
//! deferred cancellation ([`cancel`]). They take part in a fiber's
//! switch through [`crate::runtime::fibers::hooks`].

pub mod cancel;
pub mod delivery;
pub mod donor_waits;
pub mod handlers;
pub mod mask;
pub mod on_donor;
pub mod process;
