//! **Layer 1 — the core runtime**, in five folders:
//!
//! * [`fibers`]: fibers and their donors ([`fibers::fiber`], their per-party states,
//!   switched out and handed to their donors by [`fibers::switch`]), the registry of
//!   live fibers, what a parked fiber waits for, the hooks through which the layers
//!   above take part in a switch, a fiber's end and the pool's start
//!   ([`fibers::hooks`]), worker-thread-local storage for fiber-aware code
//!   ([`fibers::wtls`]) and the run-queue wait statistics.
//! * [`scheduler`]: the workers, their queues, idle sleep and the monitor.
//! * [`sleep`]: parking and sleeping: the park protocol, an idle worker's sleep,
//!   per-worker timers, the epoll set idle workers sleep in ([`sleep::poller`]) and
//!   giving a long sleeper's dead stack pages back ([`sleep::stack_release`]).
//! * [`preemption`]: time slicing ([`preemption::preempt`]) and the kick signal that
//!   carries it and held signals to a running fiber.
//! * [`signals`]: the signals held for fibers: a fiber's mask and held set, the siginfo
//!   of queued ones, a donor that takes signals during a blocking call, and a fiber's
//!   alternate signal stack.
//!
//! Imports only [`crate::base`]. What the upper layers do at a switch (deliver a
//! signal, act on a cancel request) reaches the core through [`fibers::hooks`], never
//! by an import.

pub mod fibers;
pub mod preemption;
pub mod scheduler;
pub mod signals;
pub mod sleep;
