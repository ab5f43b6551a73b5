//! Time slicing ([`preempt`]) and the kick, the runtime's own signal that makes a
//! worker look at the fiber it runs now ([`kick`], its handler [`kick_handler`]).

pub mod kick;
pub mod kick_handler;
pub mod preempt;
