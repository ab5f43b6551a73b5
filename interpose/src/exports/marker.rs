//! Introspection exports: let tests and tools see that the preload took effect.

use libc::c_int;

/// 1 when the runtime is enabled in this process, else 0.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn fiberize_active() -> c_int {
    fiberize_rt::base::config::enabled() as c_int
}

/// The number of worker threads (the pool starts on the first `pthread_create`).
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn fiberize_worker_count() -> c_int {
    if !fiberize_rt::base::config::enabled() {
        return 0;
    }
    fiberize_rt::base::config::config().workers as c_int
}

/// 1 if the caller runs as a fiber.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn fiberize_is_fiber() -> c_int {
    crate::gate::fiber().is_some() as c_int
}

/// Prints the fiber dump to stderr now.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn fiberize_dump() {
    fiberize_rt::observe::dump::dump_all();
}
