//! Per-fiber states that other layers change: what the fiber waits on, whether a
//! signal handler interrupted its wait, and its cancellation state. Each is a small
//! type with named transitions, so that the orderings are chosen once, here, and no
//! layer writes a `Fiber`'s atomics directly.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::runtime::fiber::WaitKind;

/// What a parked fiber waits for (the dump prints it; asynchronous cancellation does
/// not act while a wait is noted). Relaxed: only a diagnostic and a hint read by the
/// fiber itself.
pub struct WaitNote {
    kind: AtomicU32,
    addr: AtomicUsize,
}

impl WaitNote {
    pub const fn new() -> WaitNote {
        WaitNote { kind: AtomicU32::new(WaitKind::None as u32), addr: AtomicUsize::new(0) }
    }
    /// The fiber starts waiting for `kind` on `addr` (0: no address).
    #[inline]
    pub fn begin(&self, kind: WaitKind, addr: usize) {
        self.kind.store(kind as u32, Ordering::Relaxed);
        self.addr.store(addr, Ordering::Relaxed);
    }
    /// The wait is over.
    #[inline]
    pub fn end(&self) {
        self.kind.store(WaitKind::None as u32, Ordering::Relaxed);
        self.addr.store(0, Ordering::Relaxed);
    }
    /// Whether a wait is noted.
    #[inline]
    pub fn is_waiting(&self) -> bool {
        self.kind.load(Ordering::Relaxed) != WaitKind::None as u32
    }
    /// The noted wait as raw `(WaitKind as u32, address)`, for the dump.
    #[inline]
    pub fn raw(&self) -> (u32, usize) {
        (self.kind.load(Ordering::Relaxed), self.addr.load(Ordering::Relaxed))
    }
}

/// A program signal handler ran on the fiber (so its current or next wait returns
/// EINTR, as the kernel interrupts a thread's system call), and whether one of those
/// handlers lacked SA_RESTART. Set from the handler trampoline or the delivering
/// fiber (Release), taken by the waiting fiber (Acquire), so the handler's effects are
/// visible when the wait reports EINTR.
pub struct Interruption {
    interrupted: AtomicBool,
    no_restart: AtomicBool,
}

impl Interruption {
    pub const fn new() -> Interruption {
        Interruption { interrupted: AtomicBool::new(false), no_restart: AtomicBool::new(false) }
    }
    /// A handler ran; `sa_restart`: it was installed with SA_RESTART.
    #[inline]
    pub fn mark(&self, sa_restart: bool) {
        if !sa_restart {
            self.no_restart.store(true, Ordering::Release);
        }
        self.interrupted.store(true, Ordering::Release);
    }
    /// Forgets handlers that ran before a wait begins (they did not interrupt it).
    #[inline]
    pub fn clear(&self) {
        self.interrupted.store(false, Ordering::Relaxed);
        self.no_restart.store(false, Ordering::Relaxed);
    }
    /// Whether a handler ran since the last `clear`/`take`.
    #[inline]
    pub fn is_set(&self) -> bool {
        self.interrupted.load(Ordering::Acquire)
    }
    /// Takes the interruption: `None` if no handler ran, else `Some(no_restart)`.
    #[inline]
    pub fn take(&self) -> Option<bool> {
        if !self.interrupted.swap(false, Ordering::AcqRel) {
            return None;
        }
        Some(self.no_restart.swap(false, Ordering::AcqRel))
    }
}

/// The fiber's cancellation state (glibc keeps the same three facts in its
/// `cancelhandling` word). A request is published with Release and read with
/// Acquire, so the canceller's writes before `pthread_cancel` are visible to the
/// target that acts on it.
pub struct Cancellation {
    requested: AtomicBool,
    disabled: AtomicBool,
    asynchronous: AtomicBool,
}

impl Cancellation {
    pub const fn new() -> Cancellation {
        Cancellation { requested: AtomicBool::new(false), disabled: AtomicBool::new(false), asynchronous: AtomicBool::new(false) }
    }
    /// `pthread_cancel` reached the fiber.
    #[inline]
    pub fn request(&self) {
        self.requested.store(true, Ordering::Release);
    }
    /// Whether cancellation was requested (whatever the state).
    #[inline]
    pub fn is_requested(&self) -> bool {
        self.requested.load(Ordering::Acquire)
    }
    /// A request is there and cancellation is enabled.
    #[inline]
    pub fn is_pending(&self) -> bool {
        self.is_requested() && !self.is_disabled()
    }
    /// `PTHREAD_CANCEL_DISABLE` (true) or `ENABLE`; returns whether it was disabled.
    #[inline]
    pub fn set_disabled(&self, disabled: bool) -> bool {
        self.disabled.swap(disabled, Ordering::AcqRel)
    }
    #[inline]
    pub fn is_disabled(&self) -> bool {
        self.disabled.load(Ordering::Acquire)
    }
    /// `PTHREAD_CANCEL_ASYNCHRONOUS` (true) or `DEFERRED`; returns whether it was async.
    #[inline]
    pub fn set_asynchronous(&self, asynchronous: bool) -> bool {
        self.asynchronous.swap(asynchronous, Ordering::AcqRel)
    }
    #[inline]
    pub fn is_asynchronous(&self) -> bool {
        self.asynchronous.load(Ordering::Acquire)
    }
}

/// A fiber's signal mask (its own, once it set or inherited one) and the signals held
/// for it (sent with `pthread_kill`/`raise` while blocked or not yet delivered). Masks
/// and signal sets are kernel sigsets: bit n-1 for signal n.
///
/// The mask is written only by the fiber itself (or its creator before it runs) and
/// published with Release on `has_mask`, read with Acquire by the worker that installs
/// it. Held signals are set by any thread and taken by the fiber with AcqRel
/// read-modify-writes, so each is delivered once.
pub struct SignalState {
    mask: AtomicU64,
    has_mask: AtomicBool,
    held: AtomicU64,
}

impl SignalState {
    pub const fn new() -> SignalState {
        SignalState { mask: AtomicU64::new(0), has_mask: AtomicBool::new(false), held: AtomicU64::new(0) }
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
    /// The signals held for the fiber.
    #[inline]
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Acquire)
    }
    /// Holds signal `sig` (1..=64) for the fiber.
    #[inline]
    pub fn hold(&self, sig: i32) {
        self.held.fetch_or(1u64 << (sig - 1), Ordering::AcqRel);
    }
    /// Takes the held signal whose bit is `bit`; false if another taker got it first.
    #[inline]
    pub fn take(&self, bit: u64) -> bool {
        self.held.fetch_and(!bit, Ordering::AcqRel) & bit != 0
    }
}

impl Default for SignalState {
    fn default() -> Self {
        Self::new()
    }
}

impl Default for WaitNote {
    fn default() -> Self {
        Self::new()
    }
}

impl Default for Interruption {
    fn default() -> Self {
        Self::new()
    }
}

impl Default for Cancellation {
    fn default() -> Self {
        Self::new()
    }
}
