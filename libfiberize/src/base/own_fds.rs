//! The runtime's own descriptors: the reactor's epoll set and the wake-up eventfds.
//!
//! The program never opened them, so in its view their numbers are not open, and a
//! program that closes what it does not know of (`close_range(3, ~0U, 0)` in varnishd,
//! `closefrom`, a loop of `close` over every number: the classic daemon start) must
//! not close them: the workers would then wait on a closed epoll set (spinning on
//! EBADF), and worse, wake one another by writing 8 bytes into whatever the program
//! opened next under the same number. The io layer asks [`is_own`] before it closes.
//!
//! A bitmap over the first [`LIMIT`] numbers (the runtime makes its readiness sets when
//! the pool starts, among the program's first, and each worker's eventfd from number
//! 512 up, `sys::eventfd_new_out_of_the_way`); a descriptor above it is not protected.

use core::sync::atomic::{AtomicU64, Ordering};

/// Descriptors below this are covered.
pub const LIMIT: usize = 1 << 16;
const WORDS: usize = LIMIT / 64;

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
static BITS: [AtomicU64; WORDS] = [ZERO; WORDS];

/// Notes `fd` as the runtime's (ignores -1 and numbers beyond [`LIMIT`]).
pub fn mark(fd: i32) {
    if (0..LIMIT as i32).contains(&fd) {
        BITS[fd as usize / 64].fetch_or(1 << (fd % 64), Ordering::Release);
    }
}

/// `fd` is closed by the runtime (before the close: the number may be reused at once).
pub fn unmark(fd: i32) {
    if (0..LIMIT as i32).contains(&fd) {
        BITS[fd as usize / 64].fetch_and(!(1 << (fd % 64)), Ordering::Release);
    }
}

/// Whether `fd` is one of the runtime's own descriptors.
#[inline]
pub fn is_own(fd: i32) -> bool {
    (0..LIMIT as i32).contains(&fd) && BITS[fd as usize / 64].load(Ordering::Acquire) & 1 << (fd % 64) != 0
}

/// The lowest of the runtime's descriptors from `first` to `last` inclusive.
pub fn first_in(first: u32, last: u32) -> Option<u32> {
    let last = (last as usize).min(LIMIT - 1);
    let mut n = first as usize;
    while n <= last {
        let word = BITS[n / 64].load(Ordering::Acquire) >> (n % 64);
        if word != 0 {
            let fd = n + word.trailing_zeros() as usize;
            return (fd <= last).then_some(fd as u32);
        }
        n = (n / 64 + 1) * 64;
    }
    None
}
