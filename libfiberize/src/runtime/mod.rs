//! **Layer 1 — the core runtime.** Fibers and their donors ([`fiber`], switched out
//! and handed to their donors by [`switch`]), the workers,
//! their queues, idle sleep and the monitor ([`scheduler`]), per-worker timers
//! ([`timer`]), the epoll set idle workers sleep in ([`poller`]), time slicing
//! ([`preempt`]), giving a long sleeper's dead stack pages back ([`stack_release`]), the registry of live fibers ([`registry`]) and the hooks through which
//! the layers above take part in a switch, a fiber's end and the pool's start
//! ([`hooks`]), and worker-thread-local storage for fiber-aware code ([`wtls`]).
//!
//! Imports only [`crate::base`]. What the upper layers do at a switch (deliver a
//! signal, act on a cancel request) reaches the core through [`hooks`], never by an
//! import.

pub mod altstack;
pub mod donor_signals;
pub mod fiber;
pub mod fiber_state;
pub mod hooks;
pub mod kick;
pub mod kick_handler;
pub mod park_state;
pub mod poller;
pub mod preempt;
pub mod queue_delay;
pub mod queued_signals;
pub mod registry;
pub mod scheduler;
pub mod signal_state;
pub mod sleep_state;
pub mod stack_release;
pub mod switch;
pub mod timer;
pub mod wait_note;
pub mod wtls;
