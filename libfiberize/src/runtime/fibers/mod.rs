//! Fibers and their donors: the fiber itself ([`fiber`]) and its per-party states
//! ([`fiber_state`], [`wait_note`]), switching it out and handing it to its donor
//! ([`switch`]), the registry of live fibers ([`registry`]), the hooks of the layers
//! above ([`hooks`]), worker-thread-local storage ([`wtls`]) and how long a runnable
//! fiber waits in the run queues ([`queue_delay`]).

pub mod fiber;
pub mod fiber_state;
pub mod hooks;
pub mod queue_delay;
pub mod registry;
pub mod switch;
pub mod wait_note;
pub mod wtls;
