//! **Layer 6 — thread and process lifecycle.** `pthread_create`/`join`/`exit` with
//! donors and their zombie phase ([`pthread`]); `fork`, `vfork`, the dump signal and the
//! exit-time reports ([`process`]); thread ids ([`tid`]), timers aimed at a fiber's
//! thread id ([`timers`]) and the
//! per-thread kernel state that calls name implicitly ([`kernel_state`]). This layer starts the pool and installs the
//! [`crate::runtime::hooks`].

pub mod donor_sleep;
pub mod kernel_state;
pub mod process;
pub mod pthread;
pub mod tid;
pub mod timers;

use crate::runtime::hooks::Hooks;

/// The upper layers' part in the core's protocols ([`crate::runtime::hooks`]),
/// installed by [`pthread::create`] when it starts the pool.
pub static LAYER_HOOKS: Hooks = Hooks {
    deliver_signals: crate::signal::delivery::deliver_pending,
    act_on_async_cancel: crate::signal::cancel::act_on_async_cancel,
    fiber_ended: pthread::fiber_ended,
    resume_donor_in_forked_child: donor_sleep::resume_donor_in_forked_child,
    exit_if_main_left_and_all_done: pthread::exit_if_main_left_and_all_done,
    route_process_signals: crate::signal::process::route_pending,
    after_pool_started: process::after_pool_started,
    dispatch_readiness: crate::io::reactor::dispatch,
    exit_thread: pthread::exit,
    demoted: crate::signal::cancel::hand_cancellation_to_glibc,
};
