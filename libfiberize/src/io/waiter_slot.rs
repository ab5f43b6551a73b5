//! A descriptor's waiter slot: the one fiber that waits for one direction of its
//! readiness, held in a word of the descriptor's own state instead of a queue of the
//! hashed parking lot (the idea of tokio's `ScheduledIo` waker slots).
//!
//! Nearly always one fiber waits for a descriptor's readability (its connection's
//! thread) and nobody for its writability; the parking lot's bucket lock, intrusive
//! list and batch of wake-ups are more than that needs. The slot serves the first
//! waiter; a second one at the same time (a listening socket's many acceptors, two
//! readers of one pipe) parks in the lot as before, counted in `lot` so that a waker
//! looks there only while somebody does.
//!
//! `word`:
//!
//! | value      | meaning                                                               |
//! |------------|-----------------------------------------------------------------------|
//! | 0          | empty: the next waiter may take it                                    |
//! | `p` (≠ 0)  | a waiter is in it: `p` is its strong reference (`Arc::into_raw` of its |
//! |            | fiber), owned by whoever takes `p` out of the word                    |
//!
//! ```text
//!   waiter                                  waker
//!   occupy: CAS 0 → p (else: the lot)       publish the change (sequence += 1)
//!   fence(SeqCst) ◄──── pairs with ────►    fence(SeqCst)
//!   validate: does the sequence still       word == 0 and lot == 0?  yes: nobody, return
//!     say "wait"?  no: withdraw             word != 0: swap 0 → p, wake p's fiber, drop p
//!   sleep until word != p (taken),          lot != 0: wake the lot's waiters on the key
//!     or withdraw (deadline, signal):
//!     CAS p → 0; failed: a waker took p,
//!     its wake-up is coming: take it
//! ```
//!
//! The Dekker pair is `parking_quick`'s: whichever fence comes first in their single
//! total order, either the waiter's validation sees the new sequence (it does not
//! sleep) or the waker's load sees the word (or the lot count) it published. Only the
//! waiter puts `p` into the word and only while it is empty, so once the word no
//! longer holds `p` a waker took it: the wake-up belongs to this wait (no ABA). Whoever
//! takes `p` out (the waker by its swap, the waiter by its withdrawing CAS) owns the
//! reference: the fiber cannot vanish under a waker that is about to unpark it.
//!
//! # Model-checked
//!
//! This file takes its atomics only from `crate::base::loom`: the model checks in
//! `libfiberize/tests/loom_protocols.rs` (`waiter_slot_*`) compile it as it is.

use crate::base::loom::{fence, AtomicU32, AtomicUsize, Ordering};

/// One direction's waiter slot of a descriptor (the module docs). Made empty by
/// `WaiterSlot::new`, a `const fn` of `io::slot_park` (loom's atomics have none).
pub struct WaiterSlot {
    /// 0, or the waiting fiber's strong reference (the table above).
    pub(super) word: AtomicUsize,
    /// Waiters of this direction parked in the parking lot (the slot was taken).
    pub(super) lot: AtomicU32,
}

/// What a waker found after publishing its change ([`WaiterSlot::take_after_publishing`]).
pub struct Found {
    /// The slot's waiter, taken out of it (0: none): the waker owns its reference.
    pub taken: usize,
    /// Somebody waits in the parking lot too (or did a moment ago).
    pub lot: bool,
}

impl WaiterSlot {
    /// The waiter: puts `me` (non-zero) into the slot, fences, then `validate`s. `None`:
    /// the slot holds another waiter (wait in the lot). `Some(true)`: it is in the slot
    /// and must sleep. `Some(false)`: the state no longer says "wait", and it left the
    /// slot again, or a waker took it meanwhile ([`WaiterSlot::withdraw`] tells which).
    #[inline]
    pub fn occupy_then_validate(&self, me: usize, validate: impl FnOnce() -> bool) -> Option<bool> {
        // Relaxed on failure: another waiter's reference is nothing this one reads.
        if self.word.compare_exchange(0, me, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            return None;
        }
        // SeqCst fence: pairs with the one in `take_after_publishing` (see the module).
        fence(Ordering::SeqCst);
        Some(validate())
    }

    /// The waiter, leaving without a wake-up (it did not sleep, or a deadline or a
    /// signal ended the wait): true if it took `me` back out of the slot (it owns its
    /// reference again), false if a waker took it first (the waker's wake-up is on its
    /// way: the wait ended by it).
    #[inline]
    pub fn withdraw(&self, me: usize) -> bool {
        self.word.compare_exchange(me, 0, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// The waiter, after any wake-up: whether a waker took `me` out of the slot.
    /// Acquire: pairs with the waker's swap, so what it published before is visible.
    #[inline]
    pub fn taken(&self, me: usize) -> bool {
        self.word.load(Ordering::Acquire) != me
    }

    /// The waker, after it published the change waiters validate against: takes the
    /// slot's waiter, if any, and says whether the lot needs a look.
    #[inline]
    pub fn take_after_publishing(&self) -> Found {
        // SeqCst fence: pairs with the one in `occupy_then_validate` and the parking
        // lot's (a lot waiter counts itself in `lot` before it queues and validates).
        fence(Ordering::SeqCst);
        let lot = self.lot.load(Ordering::Relaxed) != 0;
        if self.word.load(Ordering::Relaxed) == 0 {
            return Found { taken: 0, lot };
        }
        Found { taken: self.word.swap(0, Ordering::AcqRel), lot }
    }

    /// A waiter that found the slot taken is about to park in the lot (before it
    /// queues there and validates: the lot's fence orders this count before that).
    #[inline]
    pub fn enter_lot(&self) {
        self.lot.fetch_add(1, Ordering::Relaxed);
    }

    /// The lot waiter's park returned.
    #[inline]
    pub fn leave_lot(&self) {
        self.lot.fetch_sub(1, Ordering::Relaxed);
    }

    /// In a forked child: empty (the waiters were the parent's fibers, which do not
    /// run in the child; their references are left, not dropped).
    pub fn forget_in_forked_child(&self) {
        self.word.store(0, Ordering::Relaxed);
        self.lot.store(0, Ordering::Relaxed);
    }
}
