//! The signals held for fibers, in the core: a fiber's mask and held set
//! ([`signal_state`]), the siginfo of signals queued to a fiber's thread
//! ([`queued_signals`]), a donor that takes signals during a blocking call
//! ([`donor_signals`]) and a fiber's alternate signal stack ([`altstack`]). Their
//! delivery and routing is the signal layer's (`crate::signal`).

pub mod altstack;
pub mod donor_signals;
pub mod queued_signals;
pub mod signal_state;
