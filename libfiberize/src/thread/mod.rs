//! **Layer 6 — thread and process lifecycle.** `pthread_create`/`join`/`exit` with
//! donors and their zombie phase ([`pthread`]); `fork`, `vfork`, the dump signal and the
//! exit-time reports ([`process`]); thread ids ([`tid`]), timers aimed at a fiber's
//! thread id ([`timers`]) and the
//! per-thread kernel state that calls name implicitly ([`kernel_state`]). This layer starts the pool and installs the
//! [`crate::runtime::fibers::hooks`].

pub mod donor_sleep;
pub mod kernel_state;
pub mod process;
pub mod pthread;
pub mod tid;
pub mod timers;
