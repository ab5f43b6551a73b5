//! Process-level hooks: `fork` and `vfork` children, the dump signal, and the
//! exit-time stats line, metrics file and dump.
//!
//! # Children
//!
//! | child                         | memory  | what the runtime does there                 |
//! |-------------------------------|---------|---------------------------------------------|
//! | `fork` (also `daemon`, `system`'s and `popen`'s if they forked) | copied | the atfork hooks below: one plain thread, runtime tables reset; if the parent never started the pool, a fresh process that starts its own |
//! | `vfork`, `clone(CLONE_VM)`    | shared  | touch nothing that is the parent's: `vfork` is interposed and marks the TCB ([`crate::runtime::fibers::fiber::in_vfork_child`]); any other `CLONE_VM` child is seen by its pid ([`in_unannounced_child`]) |
//! | `posix_spawn` (and `system`, `popen`, which use it) | shared | nothing to do: glibc's child runs only glibc-internal calls, none of our exports |
//!
//! **fork.** The hooks are registered once, as early as possible (the library's
//! constructor), so that ours is the *last* prepare hook and the *first* child hook:
//!
//! * prepare (parent, on the forking thread, after the program's own prepare hooks,
//!   which may still park): a forking fiber waits until its donor sleeps with its
//!   registers published (`thread.rs`, "Fork"); the handler table is locked so that
//!   the child's copy is whole.
//! * child (first of all child hooks, so that the program's own child hooks already
//!   see a plain thread): from now on every thread is a plain thread and every waiter
//!   a thread (`config::mark_forked_child`); runtime state copied from the parent that
//!   refers to threads that do not exist here is dropped — parking-lot queues and their
//!   bucket locks (another thread may have held one at the fork), the fiber registry,
//!   the timer heap — and the parent's epoll set and the metrics file's lock are let
//!   go of (`reactor`, `observe::metrics`); then a forking fiber moves to its donor's frames and the child continues as a process of
//!   one plain thread, which ends as glibc's last thread does (exit status 0).
//!
//! A parent that never started the pool (a daemon forks before its first thread) has
//! nothing of the runtime to leave behind: its child is not marked, unlocks the
//! handler table, and starts its own pool at its first `pthread_create`.
//!
//! What stays as the parent left it, as it would natively: the program's locks (held
//! by a thread of the parent: still held in the child unless the program's atfork
//! hooks release them), the fd table (descriptors are inherited), the handler table
//! (dispositions are inherited), the statistics (not printed by a child).

use crate::base::config;
use crate::base::rawlock::RawOnce;
use crate::base::stats::STATS;
use crate::base::sys;
use crate::observe::dump;
use crate::runtime::fibers::fiber;

extern "C" fn prepare_fork() {
    if config::in_forked_child() {
        return; // a child forking again: plain threads only, nothing to prepare
    }
    if fiber::runs_on_worker() {
        if let Some(f) = fiber::owner_of_tcb() {
            crate::thread::donor_sleep::wait_for_donor_asleep(f);
        }
    }
    crate::signal::handlers::lock_table_for_fork();
}

extern "C" fn parent_after_fork() {
    if config::in_forked_child() {
        return;
    }
    crate::signal::handlers::unlock_table_after_fork();
}

extern "C" fn child_after_fork() {
    let was_forked_child = config::in_forked_child();
    // A thread of the parent may have been inside the descriptor gate at the fork.
    crate::base::own_fds::reset_gate_in_forked_child();
    crate::sync::futex_shared::reset_in_forked_child();
    config::record_pid();
    if !was_forked_child && crate::runtime::scheduler::pool_never_started() {
        // The parent never started the pool (the classic daemon: fork, setsid, then
        // threads): no worker, fiber, timer or epoll set was copied, so the child is
        // what a fresh process is and starts its own pool at its first thread. Only the
        // parking lot may hold waiters: plain threads (real-time ones) of the parent.
        crate::signal::handlers::unlock_table_after_fork();
        // SAFETY: we are the child's only thread, inside fork, before any other code.
        unsafe { crate::sync::parking::forget_all_waiters_in_forked_child() };
        return;
    }
    // Read before the fork state changes `fiber::current`'s answer.
    let forking_fiber = if fiber::runs_on_worker() { fiber::owner_of_tcb() } else { None };
    // Only the forking OS thread exists in the child: no worker will ever run a fiber
    // there. From now on new threads are plain glibc threads and every waiter blocks
    // as a thread (docs/DESIGN.md §2.14).
    config::mark_forked_child();
    fiber::mark_forked_child();
    if was_forked_child {
        // A grandchild: the tables were reset in its parent already; its maps file
        // (reopened there) names that parent.
        crate::base::own_fds::close_all_in_forked_child();
        crate::sync::futex_maps::reopen_in_forked_child();
        return;
    }
    crate::signal::handlers::unlock_table_after_fork();
    // SAFETY: we are the child's only thread, inside fork, before any other code.
    unsafe {
        crate::sync::parking::forget_all_waiters_in_forked_child();
        crate::runtime::fibers::registry::reset_in_forked_child();
        crate::runtime::signals::queued_signals::reset_in_forked_child();
        crate::thread::timers::reset_in_forked_child();
        if let Some(rt) = crate::runtime::scheduler::try_runtime() {
            rt.reset_timers_in_forked_child();
        }
    }
    crate::runtime::sleep::poller::detach_in_forked_child();
    crate::io::fdtable::forget_waiters_in_forked_child();
    crate::observe::metrics::let_go_in_forked_child();
    // The rest of the parent's descriptors (workers' eventfds, kept files) are not the
    // child's runtime's: closed and forgotten, so that the child's `dup2` onto such a
    // number and its `close` succeed as natively, and its maps file is its own.
    crate::base::own_fds::close_all_in_forked_child();
    crate::sync::futex_maps::reopen_in_forked_child();
    if let Some(f) = forking_fiber {
        crate::thread::donor_sleep::move_to_donor_in_forked_child(f);
    }
}

static FORK_HOOKS: RawOnce = RawOnce::new();

/// Registers the fork hooks (once). Called from the library's constructor, and again
/// (a no-op then) when the pool starts.
pub fn install_fork_hooks() {
    FORK_HOOKS.call_once(|| {
        config::record_pid();
        // SAFETY: registering plain extern "C" callbacks with libc.
        unsafe { libc::pthread_atfork(Some(prepare_fork), Some(parent_after_fork), Some(child_after_fork)) };
    });
}

/// The interposed `vfork`, just before the system call: this TCB is the child's until
/// the parent returns.
pub extern "C" fn vfork_enter() {
    fiber::set_vfork_child(true);
}

/// The interposed `vfork` in the parent, after the child exec'd or exited: the TCB is
/// ours again. `r` is the raw system call result; returns `vfork`'s (-1 with errno).
pub extern "C" fn vfork_leave(r: isize) -> isize {
    fiber::set_vfork_child(false);
    if r < 0 {
        sys::set_errno(-r as i32);
        return -1;
    }
    r
}

extern "C" fn at_exit() {
    // A child prints nothing of ours (a vfork child that calls exit() shares our
    // counters; a forked child's are the parent's copy).
    if config::in_forked_child() || fiber::in_vfork_child() || config::in_unannounced_child() {
        return;
    }
    let cfg = config::config();
    if cfg.dump_at_exit {
        dump::dump_all();
    }
    // Before the stats line: the file's counters are then at most the line's.
    crate::observe::metrics::write_at_exit();
    if cfg.stats {
        let line = format!(
            "fiberize: stats workers={} live_fibers={}{}{}\n",
            cfg.workers,
            crate::runtime::fibers::registry::live_fibers(),
            STATS.render(),
            crate::runtime::fibers::queue_delay::render()
        );
        crate::observe::report::emit(cfg.stats_to, &line);
    }
    crate::observe::report::write_if_wanted("at exit");
}

extern "C" fn on_dump_signal(_: libc::c_int) {
    // Async-signal-safe: an atomic increment and a futex wake (crate::observe::dump).
    dump::request();
}

/// Called once, right after the worker pool started.
pub fn after_pool_started() {
    install_fork_hooks();
    // Kept from now on, opened while no program thread can open (the program's first
    // `pthread_create` has not made its thread yet).
    crate::sync::futex_maps::keep_maps_open();
    let cfg = config::config();
    crate::observe::report::start_if_wanted();
    crate::observe::metrics::start_if_wanted();
    // SAFETY: registering plain extern "C" callbacks with libc.
    unsafe {
        libc::atexit(at_exit);
        crate::runtime::preemption::kick_handler::install_kick_handler();
        crate::observe::watchdog::start();
        if cfg.dump_signal > 0 {
            dump::start_dump_thread();
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = on_dump_signal as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            crate::base::real::sigaction(cfg.dump_signal, &sa, core::ptr::null_mut());
        }
    }
}
