//! A donor that takes signals during a blocking call, and the senders that aim at it.
//!
//! While its fiber makes a blocking call on it (`crate::signal::on_donor`), a donor
//! unblocks the program's signals that the fiber accepts. The kernel then delivers the
//! process's signals to it by itself; a sender in the library (a worker's trampoline
//! with a signal of the process that no fiber on a worker takes, `pthread_kill` on the
//! fiber) may also send one straight to the donor's thread with `tgkill`, so that the
//! handler runs there and ends or restarts the call, as natively. The sender must
//! never send after the donor blocked everything again and looked for what is left:
//! the signal would stay pending on the donor, blocked, until some later call.
//!
//! ```text
//!   donor                                      sender (any thread)
//!   unblock `accepted`                         enter(bit): senders += 1 (SeqCst)
//!   open(accepted): state |= OPEN                 OPEN and bit accepted? ── no ─> senders -= 1, not sent
//!   ... the call ...                              │ yes
//!   block every signal                            tgkill(donor, sig)
//!   close(): state &= !OPEN (SeqCst)           leave(): senders -= 1 (Release)
//!            wait until senders == 0 (Acquire)
//!   drain: take what is pending on the donor
//!          and hold it for the fiber
//! ```
//!
//! A sender that saw `OPEN` finishes its `tgkill` before `close` returns: its signal is
//! then either delivered while the donor still took it, or pending on the donor when
//! the drain looks. A sender that comes after `close` cleared `OPEN` sends nothing and
//! the caller takes another way (the fiber is on its way back to the pool).
//! `enter`'s increment and `close`'s clear are read-modify-writes of one word, so one
//! of them sees the other. The wait in `close` is as long as one `tgkill`.
//! Model: `donor_signals_never_strand_a_signal` in `libfiberize/tests/loom_protocols.rs`.

use crate::base::loom::{spin_hint, AtomicU32, AtomicU64, Ordering};

/// `state`: bit 31 set while the donor takes signals; the low bits count senders
/// between [`DonorSignals::enter`] and [`DonorSignals::leave`].
const OPEN: u32 = 1 << 31;

pub struct DonorSignals {
    state: AtomicU32,
    /// The signals the donor takes while open (written before `OPEN` is set).
    accepted: AtomicU64,
}

impl DonorSignals {
    pub fn new() -> DonorSignals {
        DonorSignals { state: AtomicU32::new(0), accepted: AtomicU64::new(0) }
    }

    /// The donor, after it unblocked `accepted`: senders may send those to its thread.
    pub fn open(&self, accepted: u64) {
        self.accepted.store(accepted, Ordering::Relaxed);
        // Release (in SeqCst): a sender that sees OPEN sees `accepted`.
        self.state.fetch_or(OPEN, Ordering::SeqCst);
    }

    /// A sender of the signal whose bit is `bit`: true if the donor takes it now; the
    /// caller then sends it to the donor's thread and calls [`Self::leave`].
    pub fn enter(&self, bit: u64) -> bool {
        let state = self.state.fetch_add(1, Ordering::SeqCst);
        if state & OPEN != 0 && self.accepted.load(Ordering::Relaxed) & bit != 0 {
            return true;
        }
        self.state.fetch_sub(1, Ordering::Release);
        false
    }

    /// Whether the donor takes the signal whose bit is `bit` now: a hint for choosing
    /// a fiber, read without ordering ([`Self::enter`] decides).
    pub fn takes(&self, bit: u64) -> bool {
        self.state.load(Ordering::Relaxed) & OPEN != 0 && self.accepted.load(Ordering::Relaxed) & bit != 0
    }

    /// A sender, after its `tgkill` returned.
    pub fn leave(&self) {
        self.state.fetch_sub(1, Ordering::Release);
    }

    /// The donor, after it blocked every signal again: no sender sends from now on, and
    /// every signal sent before is delivered or pending on the donor when this returns.
    pub fn close(&self) {
        self.state.fetch_and(!OPEN, Ordering::SeqCst);
        while self.state.load(Ordering::Acquire) != 0 {
            spin_hint();
        }
    }
}

impl Default for DonorSignals {
    fn default() -> Self {
        Self::new()
    }
}
