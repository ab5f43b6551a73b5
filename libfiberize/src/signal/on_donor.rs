//! Blocking calls that a fiber makes on its donor thread take the process's signals
//! there, as the fiber's own thread would.
//!
//! A fiber hands a call that the library cannot turn into a park to its donor
//! (`runtime::fibers::switch::run_on_donor`): `waitpid`, `flock`, `lockf`, `getaddrinfo`, a
//! process-shared semaphore, condition variable, rwlock or barrier, a join of a plain
//! thread, `fsync`, `O_DIRECT` I/O, a `poll` the reactor cannot take. Natively the
//! thread waiting there is one the kernel may pick for a signal sent to the process:
//! the handler runs on it at once, and the call returns `EINTR` or restarts, as the
//! call and the handler's `SA_RESTART` decide. The donor is that thread (it owns the
//! fiber's TCB and stack), but it blocks every signal while its fiber lives.
//!
//! So for the length of the call the donor takes the fiber's mask for the program's
//! signals ([`run_on_donor_taking_signals`]): what the fiber lets through, the kernel
//! may deliver to the donor, which runs the program's handler on the fiber's TLS and
//! stack (or its alternate stack) and ends or restarts the call itself. The library's
//! kick signal and glibc's internal signals stay blocked. The mask goes back to
//! "every signal" before the fiber returns to the pool: a signal that arrives after
//! that goes to another thread, or waits for the process.
//!
//! ```text
//!   fiber on a worker                  donor (blocks all)           kernel
//!   accepted = !fiber's mask ─────────> mask: all - accepted
//!                                      waitpid(...) ·············· kill(pid, SIGTERM):
//!                                                     <── handler   a thread that takes it
//!                                      EINTR / restart
//!                                      mask: all
//!   <──────────────────────────────── back to the pool
//! ```
//!
//! A sender in the library may aim at such a donor too: a worker's trampoline with a
//! signal of the process that no fiber on a worker takes, and `pthread_kill` on the
//! fiber (`signal::delivery::send_to_open_donor`). It sends the signal to the donor's
//! thread with `tgkill` while the donor is open (`runtime::signals::donor_signals` has the
//! protocol): the handler runs there and ends or restarts the call, as natively.
//! Whatever a sender or the kernel left pending on the donor after it blocked every
//! signal again is taken and held for the fiber, which runs it when it is back on a
//! worker. The monitor's and the workers' choice of a fiber to hold a process signal
//! for (`signal::delivery::accepting_fiber`) passes such a fiber over: a held signal
//! would wait until the call returns.
//!
//! *Rejected:* holding the signal for the fiber and interrupting the call with the
//! kick, as the waits on the donor that look for held signals do
//! (`donor_waits::wait_on_donor`): a `waitpid` or `flock` cannot look, so the kick could
//! only make it return `EINTR` where `SA_RESTART` asks for a restart, and the
//! handler would run after the call instead of during it.
//!
//! Not covered: the fiber's alternate signal stack (`sigaltstack`) is not installed on
//! the donor; a handler with `SA_ONSTACK` runs on the fiber's stack there.

use crate::base::sys;
use crate::runtime::fibers::fiber;

/// The signals a program may take on a donor: all but the kick signal and glibc's
/// internal ones.
const PROGRAM_SIGNALS: u64 = !(crate::runtime::preemption::kick::KICK_BIT | sys::GLIBC_INTERNAL_SIGNALS);

/// Runs `call` on the calling fiber's donor thread with the program's signals that the
/// fiber's mask lets through unblocked there (module docs); for a plain thread, runs
/// `call` directly. For blocking calls that nothing in the library interrupts.
pub fn run_on_donor_taking_signals<R>(call: impl FnOnce() -> R) -> R {
    let Some(f) = fiber::current() else { return call() };
    // Read on the worker, where the fiber's mask is known (its own, or the worker's).
    let accepted = !crate::signal::delivery::intended_mask(f) & PROGRAM_SIGNALS;
    crate::runtime::fibers::switch::run_on_donor(|| {
        if accepted == 0 {
            return call();
        }
        let every_signal = sys::sigmask_get();
        sys::sigmask_set(every_signal & !accepted);
        f.donor.signals.open(accepted);
        let r = call();
        // Raw system calls from here on: errno, the call's answer, is untouched.
        sys::sigmask_set(every_signal);
        f.donor.signals.close();
        hold_what_is_pending(f, accepted);
        r
    })
}

/// On the donor, after [`DonorSignals::close`](crate::runtime::signals::donor_signals::DonorSignals::close):
/// takes the signals of `accepted` left pending on it (a sender's `tgkill` that came
/// as it blocked them, or one of the process that came then) and holds them for fiber
/// `f`, which runs them when it is back on a worker (its mask cannot change before:
/// the worker delivers held signals as it resumes the fiber). Held as sent to the
/// thread: the donor cannot tell the two kinds apart, and the fiber takes either.
fn hold_what_is_pending(f: &fiber::Fiber, accepted: u64) {
    let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    loop {
        // SAFETY: no siginfo is asked for; a zero timeout only takes what is pending.
        let sig = unsafe { sys::rt_sigtimedwait(accepted, core::ptr::null_mut(), Some(&zero)) };
        if sig <= 0 {
            return;
        }
        f.signals.hold(sig as i32);
    }
}
