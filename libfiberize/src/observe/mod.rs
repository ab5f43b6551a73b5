//! **Layer 2 — observation.** The fiber dump ([`dump`]) and the stall watchdog
//! ([`watchdog`]). They read the core's state (workers, the fiber registry, the
//! runtime lock's long-wait table) and change nothing in it.

pub mod dump;
pub mod watchdog;
