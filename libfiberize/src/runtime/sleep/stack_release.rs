//! Giving a long-sleeping fiber's dead stack pages back to the kernel.
//!
//! # Why
//!
//! A fiber runs on its donor's stack ([`crate::runtime::fibers::fiber`], "Where a fiber lives").
//! Every page its deepest call ever touched stays resident until the thread ends, even
//! while the fiber sleeps for seconds with a shallow stack. A client with thousands of
//! terminals that each send a query (libmariadb and glibc's stdio go kilobytes deep) and
//! then sleep through keying and think times keeps all of those pages, as native threads
//! do (docs/RESULTS.md#donor-memory).
//!
//! # What
//!
//! Before a fiber parks in a sleep of at least [`RELEASE_AFTER_MS`], it calls
//! `madvise(MADV_DONTNEED)` itself on the whole pages of its stack that lie more than
//! [`LIVE_MARGIN`] below its own stack pointer, down to its stack's low bound. The next
//! deep call faults fresh zero pages in, as a new thread's first call does.
//!
//! # Why that range is dead
//!
//! * Everything below a thread's stack pointer is dead by the ABI, except the 128-byte
//!   red zone of a leaf function; the margin is far larger than that and than the frames
//!   of the `madvise` call itself, which run below the pointer read here.
//! * The fiber does it itself, on its own stack, while it runs: no other thread uses that
//!   stack meanwhile. A signal that arrives during the call is delivered when the call
//!   returns, so its frame is written into the fresh pages after the release, never
//!   before. The scheduler frames of the park that follows are written after it too.
//! * The donor's own sleeping frames, the TCB and static TLS lie above the fiber's stack
//!   base (`DONOR_MARGIN` above it, see `crate::thread::pthread`), never below its
//!   stack pointer.
//! * The range is whole pages inside `[limit, sp - LIVE_MARGIN)`: the low end is rounded
//!   up, so a program-supplied stack (`pthread_attr_setstack`) that shares its lowest page
//!   with other data keeps that page; glibc's guard page lies below `limit`.
//! * It is a raw system call: `errno` is not touched (a sleep that succeeds leaves it
//!   as it was, as glibc's does).
//!
//! # Cost, and when it is skipped
//!
//! One `madvise` per long sleep (the kernel skips page tables that map nothing and
//! flushes TLBs only when a page was actually unmapped), plus a zero-page fault for every
//! page the fiber touches again afterwards: a few microseconds against a sleep of
//! tens of milliseconds or more.
//!
//! A program whose sleepers never go deep between sleeps (a TPC-C terminal: query,
//! keying time, query, think time) paid that call at every sleep and gave nothing back.
//! So a sleep whose range ends where the fiber's last release ended, while the highest
//! page of that range still reads as all zero, skips it:
//!
//! ```text
//!   base ┌──────────────┐
//!        │ live frames  │
//!     sp ├──────────────┤
//!        │ LIVE_MARGIN  │   kept
//!    end ├──────────────┤ ← the last release ended here too
//!        │ checked page │   all zero: nothing wrote here since that release
//!        │ released     │   so nothing deeper is likely resident either
//!  limit └──────────────┘
//! ```
//!
//! Reading released pages maps the shared zero page (no memory is charged). A call
//! that went deeper meanwhile wrote its frames through the checked page (return
//! addresses, saved registers, locals); only a single frame larger than a page that
//! leaves that page unwritten can pass unseen, and then those pages stay resident until
//! a later sleep finds the page written or sleeps at another depth: memory held as a
//! native thread holds it, never data lost (skipping gives nothing back, it frees
//! nothing).

use crate::base::stats::{bump, STATS};
use crate::base::sys;
use crate::runtime::fibers::fiber::Fiber;

/// Sleeps at least this long release dead stack pages. Origin: a fault-in of a few pages and one system call cost a few microseconds, under
/// 0.1 % of such a sleep; shorter sleeps (polling loops) are left alone.
pub const RELEASE_AFTER_MS: u64 = 50;

/// Bytes below the stack pointer that are kept: far more than the red zone (128 bytes)
/// and the frames of the release itself. Origin: one page.
pub const LIVE_MARGIN: usize = 4096;

const PAGE: usize = 4096;

/// The whole pages of `[limit, sp - LIVE_MARGIN)`, as (start, length); None if empty or
/// if `sp` is not inside `(limit, base]`.
fn dead_range(limit: usize, base: usize, sp: usize) -> Option<(usize, usize)> {
    if limit == 0 || sp <= limit || sp > base {
        return None;
    }
    let start = limit.checked_add(PAGE - 1)? & !(PAGE - 1);
    let end = sp.checked_sub(LIVE_MARGIN)? & !(PAGE - 1);
    (end > start).then(|| (start, end - start))
}

/// Called by the fiber `f` itself, on its own stack, before it parks for `sleep_ns`:
/// gives the dead pages of its stack back when the sleep is long enough (see the module
/// docs for why the range is dead).
#[inline(never)]
pub fn release_dead_pages(f: &Fiber, sleep_ns: u64) {
    if sleep_ns < RELEASE_AFTER_MS * 1_000_000 {
        return;
    }
    let sp = crate::base::arch::stack_pointer();
    let (limit, base) = f.stack_bounds();
    let Some((start, len)) = dead_range(limit, base, sp) else { return };
    let end = start + len;
    // SAFETY: `[end - PAGE, end)` is a whole page inside `[start, end)` (both ends page
    // aligned, `end > start`), so inside this fiber's own mapped stack and more than
    // LIVE_MARGIN below its stack pointer: dead memory no other thread uses (module docs).
    if f.stack_released_to() == end && unsafe { page_reads_zero(end - PAGE) } {
        bump(&STATS.stack_releases_skipped);
        return;
    }
    // SAFETY: `[start, start + len)` is whole pages of this fiber's own stack, all of them
    // more than LIVE_MARGIN below the stack pointer of the running fiber (dead by the
    // ABI, and used by no other thread: module docs); MADV_DONTNEED on private anonymous
    // memory only makes them read as zero again. The raw call leaves errno alone.
    let r = unsafe { sys::madvise(start, len, libc::MADV_DONTNEED) };
    if r == 0 {
        bump(&STATS.stack_releases);
        f.set_stack_released_to(end);
    }
}

/// Whether the page at `page` holds only zero bytes (module docs: a released page that
/// nothing wrote since).
///
/// # Safety
/// `page` is a page-aligned page of mapped memory that no other thread writes meanwhile.
unsafe fn page_reads_zero(page: usize) -> bool {
    let words = page as *const usize;
    // SAFETY: every index is inside the page (caller), read volatile: the compiler must not
    // assume anything of dead stack memory.
    (0..PAGE / core::mem::size_of::<usize>()).all(|i| unsafe { words.add(i).read_volatile() } == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_is_whole_pages_below_the_margin() {
        let limit = 0x10_0010;
        let base = 0x20_0000;
        let sp = 0x18_1234;
        let (start, len) = dead_range(limit, base, sp).unwrap();
        assert_eq!(start, 0x10_1000, "the partial lowest page is kept");
        assert_eq!(start + len, 0x18_0000, "the page of sp - margin is kept");
        assert!(start + len <= sp - LIVE_MARGIN);
    }

    #[test]
    fn nothing_outside_the_stack_or_when_shallow() {
        assert_eq!(dead_range(0, 0x20_0000, 0x18_0000), None, "unknown bounds");
        assert_eq!(dead_range(0x10_0000, 0x20_0000, 0x20_1000), None, "sp above the base");
        assert_eq!(dead_range(0x10_0000, 0x20_0000, 0x0F_0000), None, "sp below the limit");
        assert_eq!(dead_range(0x10_0000, 0x20_0000, 0x10_1800), None, "less than a page below the margin");
    }
}
