//! Process-level hooks installed when the pool starts: `fork` handling, the dump
//! signal, and the exit-time stats line and dump.

use crate::stats::STATS;
use crate::{config, dump, sys};

extern "C" fn child_after_fork() {
    // Only the forking OS thread exists in the child: no worker will ever run a fiber
    // there. From now on new threads are plain glibc threads and every waiter blocks
    // as a thread (DESIGN §4).
    config::mark_forked_child();
}

extern "C" fn at_exit() {
    if config::in_forked_child() {
        return;
    }
    let cfg = config::config();
    if cfg.dump_at_exit {
        dump::dump_all();
    }
    if cfg.stats {
        let line = format!("fiberize: stats workers={} live_fibers={}{}\n", cfg.workers, dump::live_fibers(), STATS.render());
        sys::write_stderr(line.as_bytes());
    }
}

extern "C" fn on_dump_signal(_: libc::c_int) {
    // Async-signal-safe: an atomic increment and a futex wake (crate::dump).
    dump::request();
}

/// Called once, right after the worker pool started.
pub fn after_pool_started() {
    let cfg = config::config();
    // SAFETY: registering plain extern "C" callbacks with libc.
    unsafe {
        libc::pthread_atfork(None, None, Some(child_after_fork));
        libc::atexit(at_exit);
        crate::signal::install_kick_handler();
        crate::watchdog::start();
        if cfg.dump_signal > 0 {
            dump::start_dump_thread();
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = on_dump_signal as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            crate::handlers::sigaction(cfg.dump_signal, &sa, core::ptr::null_mut());
        }
    }
}
