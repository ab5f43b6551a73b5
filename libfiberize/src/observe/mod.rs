//! **Layer 2 — observation.** The fiber dump ([`dump`]), the stall watchdog
//! ([`watchdog`]), the report of where the program waits ([`report`]) and the
//! Prometheus metrics file ([`metrics`]). They read the core's state (workers, the fiber registry, the
//! runtime lock's long-wait table) and change nothing in it.

pub mod dump;
pub mod metrics;
pub mod report;
pub mod symbols;
pub mod watchdog;
