//! Parking and sleeping: the park protocol of a fiber ([`park_state`]), an idle
//! worker's sleep against a producer's notify and a donor's wait ([`sleep_state`]),
//! per-worker timers ([`timer`]), the readiness sets idle workers sleep in
//! ([`poller`]) and giving a long-sleeping fiber's dead stack pages back
//! ([`stack_release`]).

pub mod park_state;
pub mod poller;
pub mod sleep_state;
pub mod stack_release;
pub mod timer;
