//! What a parked fiber waits for, noted for the fiber dump (and asynchronous
//! cancellation, which does not act while a wait is noted): the kind and address of
//! the wait, where on the stack it began, and for a futex the value it expected.

use core::sync::atomic::{AtomicU32, AtomicU8, AtomicUsize, Ordering};

/// What a parked fiber waits for, for the fiber dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum WaitKind {
    None = 0,
    Mutex = 1,
    Cond = 2,
    Futex = 3,
    Sleep = 4,
    RwLock = 5,
    Other = 6,
    Semaphore = 7,
    Barrier = 8,
    Once = 9,
    Io = 10,
    Join = 11,
}

/// What a parked fiber waits for (the dump prints it; asynchronous cancellation does
/// not act while a wait is noted). Relaxed: only a diagnostic and a hint read by the
/// fiber itself.
pub struct WaitNote {
    kind: AtomicU32,
    addr: AtomicUsize,
    /// The stack pointer where the wait began: the dump finds the program's frames
    /// above it (the stack stays as it is while the fiber waits).
    sp: AtomicUsize,
    /// For a futex wait: the value the caller expected the word to hold (the dump
    /// shows it beside the word's value now: a waiter whose value is long gone and
    /// that nobody woke is a lost wake-up).
    expected: AtomicU32,
    /// Descriptor waits left during which the fiber still counts as coordinating: set
    /// by a condition or futex wait, counted down by each descriptor wait (see
    /// [`WaitNote::coordinates`]). Written only by the fiber itself.
    coordinating: AtomicU8,
    /// The words of the fiber's last few futex waits (their parking keys), a ring
    /// written at `futex_ring_next`, so that its own `FUTEX_WAKE` can tell a word it
    /// contends for from one it only signals ([`WaitNote::waited_on_futex`]).
    futex_keys: [AtomicUsize; RECENT_FUTEX_WORDS],
    futex_ring_next: AtomicU8,
}

/// How many futex words [`WaitNote::waited_on_futex`] remembers. Origin: a guess, the
/// latches an InnoDB statement holds at once are a handful; four compares per wake.
const RECENT_FUTEX_WORDS: usize = 4;

impl WaitNote {
    pub const fn new() -> WaitNote {
        WaitNote {
            kind: AtomicU32::new(WaitKind::None as u32),
            addr: AtomicUsize::new(0),
            sp: AtomicUsize::new(0),
            expected: AtomicU32::new(0),
            coordinating: AtomicU8::new(0),
            futex_keys: [const { AtomicUsize::new(0) }; RECENT_FUTEX_WORDS],
            futex_ring_next: AtomicU8::new(0),
        }
    }
    /// The fiber is about to wait on the futex word of parking key `key`.
    #[inline]
    pub fn note_futex_wait(&self, key: usize) {
        if self.waited_on_futex(key) {
            return;
        }
        let at = self.futex_ring_next.load(Ordering::Relaxed) as usize % RECENT_FUTEX_WORDS;
        self.futex_keys[at].store(key, Ordering::Relaxed);
        self.futex_ring_next.store((at + 1) as u8, Ordering::Relaxed);
    }
    /// Whether the fiber waited on the word of parking key `key` in one of its last
    /// [`RECENT_FUTEX_WORDS`] futex waits on distinct words: a waker that did is a
    /// contender of a lock word, one that did not signals a word others wait on (a
    /// condition, a thread's parking word).
    #[inline]
    pub fn waited_on_futex(&self, key: usize) -> bool {
        self.futex_keys.iter().any(|k| k.load(Ordering::Relaxed) == key)
    }
    /// A futex wait is about to begin, expecting `value` in its word.
    #[inline]
    pub fn expect(&self, value: u32) {
        self.expected.store(value, Ordering::Relaxed);
    }
    /// The value noted by [`WaitNote::expect`].
    #[inline]
    pub fn expected(&self) -> u32 {
        self.expected.load(Ordering::Relaxed)
    }
    /// The fiber starts waiting for `kind` on `addr` (0: no address).
    #[inline]
    pub fn begin(&self, kind: WaitKind, addr: usize) {
        self.kind.store(kind as u32, Ordering::Relaxed);
        self.addr.store(addr, Ordering::Relaxed);
        self.sp.store(crate::base::arch::stack_pointer(), Ordering::Relaxed);
        match kind {
            WaitKind::Cond | WaitKind::Futex => {
                self.coordinating.store(crate::runtime::scheduler::policy::COORDINATING_WAITS, Ordering::Relaxed)
            }
            WaitKind::Io => {
                let left = self.coordinating.load(Ordering::Relaxed);
                if left != 0 {
                    self.coordinating.store(left - 1, Ordering::Relaxed);
                }
            }
            _ => {}
        }
    }

    /// Whether the fiber coordinates with others: it waited on a condition variable or
    /// a futex within its last `scheduler::policy::COORDINATING_WAITS` descriptor waits. Others are
    /// likely to wait for what it does next (a transaction holding row locks between
    /// two statements), so its turns come round more often
    /// (`scheduler::worker::pick_coordinating`). A hint, read by its wakers with a race.
    #[inline]
    pub fn coordinates(&self) -> bool {
        self.coordinating.load(Ordering::Relaxed) != 0
    }
    /// The stack pointer where the noted wait began (0: none noted yet).
    #[inline]
    pub fn sp(&self) -> usize {
        self.sp.load(Ordering::Relaxed)
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

impl Default for WaitNote {
    fn default() -> Self {
        Self::new()
    }
}
