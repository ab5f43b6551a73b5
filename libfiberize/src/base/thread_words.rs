//! The runtime's per-thread words, reached the initial-exec way.
//!
//! Every export asks "is the caller a fiber?" and every shielded stretch counts its
//! depth: both are thread-local reads on the hottest paths of the library. A Rust
//! `thread_local!` in a shared object uses the general-dynamic TLS model, so each of
//! those reads is a call to `__tls_get_addr` in ld.so (a generation check and a table
//! walk), and stable Rust has no switch for the model. So the handful of words the hot
//! paths need live in one block that [`crate::base::arch`] defines in assembly, in
//! `.tbss`, and reaches as a C compiler does for `__thread` with
//! `-ftls-model=initial-exec`: the block's offset from the thread pointer is read from
//! the GOT, and the word is one load relative to the thread pointer (`fs:[off]`,
//! `TPIDR_EL0 + off`).
//!
//! ```text
//!   thread pointer (FS base / TPIDR_EL0) of the TCB running now
//!        │  + offset of fiberize_thread_words (GOT entry, written once by ld.so)
//!        ▼
//!   ┌──────────────┬──────────────┬──────────────┬──────────────┬───────────┐
//!   │ CURRENT_FIBER│    WORKER    │ SHIELD_DEPTH │ DEFERRED_SIGS│ HELD_DUE …│  one cache line
//!   └──────────────┴──────────────┴──────────────┴──────────────┴───────────┘
//! ```
//!
//! **Same semantics as the `thread_local!`s they replace.** The words belong to the TCB
//! the thread pointer names, so they follow a fiber the way every `__thread` does: in
//! fiber context they are the donor's copy, in scheduler context the worker's. Each
//! access recomputes the address (the asm is not `pure`), so no address survives a
//! switch.
//!
//! **What initial-exec requires.** The block must be in the static TLS of every
//! thread, which it is when the library is loaded at start (`LD_PRELOAD`, a
//! `DT_NEEDED` entry); a `dlopen` after start gets it from glibc's static TLS
//! surplus, and fails cleanly if that is exhausted. The linker marks the library
//! `DF_STATIC_TLS`.
//!
//! **Rejected:** `-Z tls-model=initial-exec` (nightly only); keeping the fiber pointer
//! in a spare field of glibc's `struct pthread` (glibc's layout, not ours, and the
//! field would have to be free in every glibc release); caching the address per call
//! (a fiber switch moves the thread pointer under a cached address).

use crate::base::arch::{load_thread_word, store_thread_word, THREAD_WORDS};

/// One word of the block: an index into it.
#[derive(Clone, Copy)]
pub struct ThreadWord(usize);

/// The fiber this TCB belongs to, with two flag bits (`runtime::fiber`'s `CURRENT`).
pub const CURRENT_FIBER: ThreadWord = ThreadWord(0);
/// The worker whose scheduler loop runs on this OS thread (scheduler context only).
pub const WORKER: ThreadWord = ThreadWord(1);
/// The shield's nesting depth ([`crate::base::shield`]).
pub const SHIELD_DEPTH: ThreadWord = ThreadWord(2);
/// Signals the shield deferred, to unblock at its exit.
pub const DEFERRED_SIGNALS: ThreadWord = ThreadWord(3);
/// Held signals came due while shielded (0 or 1).
pub const HELD_DUE: ThreadWord = ThreadWord(4);

const _: () = assert!(HELD_DUE.0 < THREAD_WORDS);

impl ThreadWord {
    /// This TCB's value of the word.
    #[inline(always)]
    pub fn get(self) -> usize {
        load_thread_word(self.0)
    }

    /// Sets this TCB's value of the word.
    #[inline(always)]
    pub fn set(self, value: usize) {
        store_thread_word(self.0, value)
    }

    /// Sets the word and returns its previous value (not atomic: only the context that
    /// owns the TCB touches it).
    #[inline(always)]
    pub fn replace(self, value: usize) -> usize {
        let old = self.get();
        self.set(value);
        old
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_thread_has_its_own_words_starting_at_zero() {
        SHIELD_DEPTH.set(7);
        DEFERRED_SIGNALS.set(1 << 40);
        let other = std::thread::spawn(|| {
            let fresh = (SHIELD_DEPTH.get(), DEFERRED_SIGNALS.get(), HELD_DUE.get());
            SHIELD_DEPTH.set(3);
            (fresh, SHIELD_DEPTH.get())
        })
        .join()
        .unwrap();
        assert_eq!(other, ((0, 0, 0), 3));
        assert_eq!(SHIELD_DEPTH.replace(0), 7);
        assert_eq!(DEFERRED_SIGNALS.replace(0), 1 << 40);
        assert_eq!(SHIELD_DEPTH.get(), 0);
    }
}
