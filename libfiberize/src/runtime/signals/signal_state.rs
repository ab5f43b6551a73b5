//! A fiber's signal mask and the signals held for it: who sends, who takes, and why
//! each signal is taken exactly once.
//!
//! Masks and signal sets are kernel sigsets: bit n-1 for signal n.
//!
//! # The two held sets
//!
//! The kernel keeps two pending sets per thread: the signals sent to the thread
//! (`tgkill`, `pthread_kill`) and those sent to the process (`kill`, `sigqueue`, a
//! timer), which stay the process's until a thread takes them. A fiber holds the same
//! two, in two words:
//!
//! | word | set by | taken by |
//! |---|---|---|
//! | `to_thread` | [`SignalState::hold`] (`pthread_kill`, `tgkill` to the fiber's id, a blocked `raise`) | a delivery and `sigwait` ([`SignalState::take_sent_to_thread`]), [`SignalState::take_all`] |
//! | `to_process` | [`SignalState::hold_from_process`] (a signal of the process handed to this fiber, `crate::signal::process`) | a delivery and `sigwait` ([`SignalState::take_sent_to_process`]), [`SignalState::take_from_process`] (given back to the process when the fiber blocks it or leaves), [`SignalState::take_all`] |
//!
//! Each word is changed only by single read-modify-writes, so a bit is taken by
//! exactly one taker and a taker always knows which kind it took. A signal held in
//! both words is two signals, as a standard signal pending for both the thread and the
//! process is delivered twice by the kernel.
//!
//! *Rejected:* one `held` word with `from_process` as a subset of it, marked before
//! `held` and cleared after it. Two words cannot be swapped at once, so `take_all`
//! could take a process signal as the thread's (swapping `from_process` before the
//! sender marked it and `held` after it set the bit, then the signal stayed pending on
//! the plain thread instead of going back to the process) or lose it (the other
//! order), and `take` cleared a mark set by a new sender of the same signal. Every
//! order of the two swaps has such a window; disjoint words have none.
//!
//! # The plain-thread hand-over
//!
//! `plain_thread`: the fiber went to its donor for good (demoted, or on its way out in
//! `pthread_exit`): signals for it go to the donor's kernel thread. A sender holds the
//! signal, then looks at the flag; the fiber sets the flag, then (on its donor) takes
//! what is held ([`SignalState::take_all`]): a Dekker pair, SeqCst on both sides, so
//! that a signal held during the hand-over is seen by at least one of them, and taken
//! by exactly one (the read-modify-writes above). `tests/loom_protocols.rs` checks it
//! with both kinds of sender and a concurrent delivery.
//!
//! The mask is written only by the fiber itself (or its creator before it runs) and
//! published with Release on `has_mask`, read with Acquire by the worker that installs
//! it.

use crate::base::loom::{AtomicBool, AtomicU64, Ordering};

/// A fiber's signal mask (its own, once it set or inherited one) and the signals held
/// for it (module docs).
pub struct SignalState {
    mask: AtomicU64,
    has_mask: AtomicBool,
    to_thread: AtomicU64,
    to_process: AtomicU64,
    plain_thread: AtomicBool,
}

impl SignalState {
    pub fn new() -> SignalState {
        SignalState {
            mask: AtomicU64::new(0),
            has_mask: AtomicBool::new(false),
            to_thread: AtomicU64::new(0),
            to_process: AtomicU64::new(0),
            plain_thread: AtomicBool::new(false),
        }
    }
    /// The fiber's own mask, if it has one.
    #[inline]
    pub fn own_mask(&self) -> Option<u64> {
        self.has_mask.load(Ordering::Acquire).then(|| self.mask.load(Ordering::Relaxed))
    }
    /// Gives the fiber its own mask.
    #[inline]
    pub fn set_mask(&self, mask: u64) {
        self.mask.store(mask, Ordering::Relaxed);
        self.has_mask.store(true, Ordering::Release);
    }
    /// The signals held for the fiber, of either kind.
    #[inline]
    pub fn held(&self) -> u64 {
        self.to_thread.load(Ordering::Acquire) | self.to_process.load(Ordering::Acquire)
    }
    /// Holds signal `sig` (1..=64), sent to the fiber's thread.
    #[inline]
    pub fn hold(&self, sig: i32) {
        self.to_thread.fetch_or(1u64 << (sig - 1), Ordering::SeqCst);
    }
    /// Holds signal `sig`, sent to the process, for the fiber (SeqCst: the sender's
    /// side of the pair with the fiber's new mask, see
    /// `crate::signal::delivery::hand_process_signal`, and of the plain-thread pair).
    #[inline]
    pub fn hold_from_process(&self, sig: i32) {
        self.to_process.fetch_or(1u64 << (sig - 1), Ordering::SeqCst);
    }
    /// Takes the signal whose bit is `bit` if it is held as sent to the thread.
    #[inline]
    pub fn take_sent_to_thread(&self, bit: u64) -> bool {
        self.to_thread.fetch_and(!bit, Ordering::AcqRel) & bit != 0
    }
    /// Takes the signal whose bit is `bit` if it is held as sent to the process.
    #[inline]
    pub fn take_sent_to_process(&self, bit: u64) -> bool {
        self.to_process.fetch_and(!bit, Ordering::AcqRel) & bit != 0
    }
    /// The signals held as sent to the thread (a queued siginfo goes with these:
    /// `crate::runtime::signals::queued_signals`).
    #[inline]
    pub fn held_sent_to_thread(&self) -> u64 {
        self.to_thread.load(Ordering::Acquire)
    }
    /// Takes the held signals of `set` that were sent to the process, to give them
    /// back to it; each is taken once, by this or by a delivery. SeqCst: the fiber's
    /// side of the pair with the sender (after its new mask or its end is published).
    #[inline]
    pub fn take_from_process(&self, set: u64) -> u64 {
        self.to_process.fetch_and(!set, Ordering::SeqCst) & set
    }
    /// Takes every held signal (SeqCst: the fiber's side of the pair with the senders,
    /// after [`Self::mark_plain_thread`]): those sent to the thread, and those sent to
    /// the process.
    #[inline]
    pub fn take_all(&self) -> (u64, u64) {
        (self.to_thread.swap(0, Ordering::SeqCst), self.to_process.swap(0, Ordering::SeqCst))
    }
    /// The fiber leaves the pool for good: from now on it is a plain thread on its
    /// donor, which takes signals from the kernel.
    #[inline]
    pub fn mark_plain_thread(&self) {
        self.plain_thread.store(true, Ordering::SeqCst);
    }
    /// Whether the fiber went to its donor for good ([`Self::mark_plain_thread`]).
    #[inline]
    pub fn is_plain_thread(&self) -> bool {
        self.plain_thread.load(Ordering::SeqCst)
    }
}

impl Default for SignalState {
    fn default() -> Self {
        Self::new()
    }
}
