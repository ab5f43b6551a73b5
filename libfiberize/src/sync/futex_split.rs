//! Two-word futex operations without the private flag (`FUTEX_WAKE_OP`,
//! `FUTEX_REQUEUE`, `FUTEX_CMP_REQUEUE`) whose words lie on the two sides of the line
//! `sync::futex_shared` draws: one word in process-private memory, whose waiters the
//! parking lot holds (fibers and plain threads alike), the other in memory shared with
//! other processes, whose waiters the kernel holds. Neither side can do the whole
//! operation: the kernel does not see the lot's waiters, and the lot cannot reach the
//! kernel's. So the operation is split, and each word is served where its waiters are.
//!
//! # `FUTEX_WAKE_OP`
//!
//! The kernel's order is kept: the operation on the second word, then the wake of the
//! first word, then, if the comparison of the second word's old value holds, the wake
//! of the second. The result is the number woken on both sides.
//!
//! * First word private, second shared: the kernel is given the whole operation; it
//!   finds none of its own waiters on the first word (they are all in the lot), does
//!   the operation and the conditional wake on the second, and the lot then wakes the
//!   first word's waiters. A kernel error (an invalid operation, a fault) wakes nobody,
//!   as natively.
//! * First word shared, second private: the library does the operation on the second
//!   word (an atomic read-modify-write, as the kernel's), the kernel wakes the first
//!   word, and the lot wakes the second if the comparison holds.
//!
//! # `FUTEX_REQUEUE`, `FUTEX_CMP_REQUEUE`
//!
//! A waiter cannot move between the lot and the kernel: a lot waiter requeued to a
//! word the kernel serves would never be woken by the kernel, and a kernel waiter
//! requeued to a word the lot serves would never be woken by the lot. So the waiters
//! that would be requeued are **woken instead**: up to `nr_wake + nr_requeue` of the
//! first word's waiters wake, and the result is the count the kernel gives (woken plus
//! requeued). A futex wait may return 0 without the wake its caller waited for
//! (futex(2): callers "should always conservatively assume that a return value of 0
//! can mean a spurious wake-up"), so a waiter checks its condition and waits again,
//! now on whichever word it chooses. This costs a wake-up; nothing is lost.
//!
//! * First word private: the lot wakes them, after `FUTEX_CMP_REQUEUE`'s comparison
//!   under its bucket lock (`EAGAIN` when it fails, as the kernel).
//! * First word shared: the kernel is asked for the same operation with
//!   `nr_wake + nr_requeue` to wake and none to requeue; it compares for itself.
//!
//! A word in no mapping (or one the table cannot tell, [`Class::Unknown`]) sends the
//! whole operation to the kernel, which answers as natively (`EFAULT`).

use core::sync::atomic::{AtomicU32, Ordering};

use libc::{c_int, FUTEX_CMP_REQUEUE, FUTEX_WAKE};

use crate::base::sys;
use crate::sync::futex_maps::Class;
use crate::sync::futex_op::{wake_op_apply, wake_op_compare, FUTEX_CMD_MASK};
use crate::sync::futex_shared::{self, KEY_TAG};
use crate::sync::parking;

/// Who serves a non-private two-word operation.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Route {
    /// Both words private: the parking lot alone.
    Lot,
    /// Both shared, or one in no mapping: the kernel alone.
    Kernel,
    /// One private, one shared: split (this module). `first_private`: `uaddr` is the
    /// private one.
    Split { first_private: bool },
}

/// The route of a non-private two-word operation on `uaddr` and `uaddr2`.
pub fn route(uaddr: usize, uaddr2: usize) -> Route {
    match (futex_shared::class(uaddr), futex_shared::class(uaddr2)) {
        (Class::Private, Class::Private) => Route::Lot,
        (Class::Private, Class::Shared) => Route::Split { first_private: true },
        (Class::Shared, Class::Private) => Route::Split { first_private: false },
        _ => Route::Kernel,
    }
}

/// The kernel's result as the emulation's: Ok(value) or Err(errno).
fn kernel_result(r: isize) -> Result<isize, c_int> {
    if r < 0 {
        Err(-r as c_int)
    } else {
        Ok(r)
    }
}

/// `FUTEX_WAKE_OP` (non-private `op`) split between the lot and the kernel.
/// `nr_wake2` is the raw count read in the timeout's place.
///
/// # Safety
/// Both words are mapped and 4-aligned (their class is `Private` or `Shared`).
#[cold]
pub unsafe fn wake_op(
    uaddr: usize,
    op: c_int,
    nr_wake: u32,
    nr_wake2: usize,
    uaddr2: usize,
    encoded: u32,
    first_private: bool,
) -> Result<isize, c_int> {
    let lot_max2 = nr_wake2.min(i32::MAX as usize);
    if first_private {
        // SAFETY: the program's arguments (this function's contract); WAKE_OP never blocks.
        let n = kernel_result(unsafe { sys::futex_op(uaddr, op, nr_wake, nr_wake2, uaddr2, encoded) })?;
        let woken = parking::unpark_some(uaddr | KEY_TAG, u32::MAX, nr_wake as usize, |_| {});
        return Ok(n + woken as isize);
    }
    // SAFETY: a mapped, aligned word (this function's contract).
    let word2 = unsafe { &*(uaddr2 as *const AtomicU32) };
    let old = wake_op_apply(word2, encoded)?;
    // `op` is non-private and without FUTEX_CLOCK_REALTIME (`sync::futex` refused it).
    // SAFETY: FUTEX_WAKE on the program's word (this function's contract).
    let mut n = kernel_result(unsafe { sys::futex_op(uaddr, FUTEX_WAKE, nr_wake, 0, 0, 0) })?;
    if wake_op_compare(old, encoded) {
        n += parking::unpark_some(uaddr2 | KEY_TAG, u32::MAX, lot_max2, |_| {}) as isize;
    }
    Ok(n)
}

/// `FUTEX_REQUEUE` / `FUTEX_CMP_REQUEUE` (non-private `op`, counts already checked)
/// split between the lot and the kernel: the waiters to requeue are woken instead.
///
/// # Safety
/// Both words are mapped and 4-aligned (their class is `Private` or `Shared`).
#[cold]
pub unsafe fn requeue(
    uaddr: usize,
    op: c_int,
    nr_wake: u32,
    nr_requeue: u32,
    uaddr2: usize,
    expected: u32,
    first_private: bool,
) -> Result<isize, c_int> {
    let cmd = op & FUTEX_CMD_MASK;
    let wake_all = nr_wake.saturating_add(nr_requeue).min(i32::MAX as u32);
    if first_private {
        // SAFETY: a mapped, aligned word (this function's contract).
        let word = unsafe { &*(uaddr as *const AtomicU32) };
        let check = cmd == FUTEX_CMP_REQUEUE;
        let key = uaddr | KEY_TAG;
        return match parking::unpark_requeue(key, key, wake_all as usize, 0, || !check || word.load(Ordering::SeqCst) == expected)
        {
            None => Err(libc::EAGAIN),
            Some((woken, _)) => Ok(woken as isize),
        };
    }
    // SAFETY: the program's operation with no requeue (this function's contract); it never blocks.
    kernel_result(unsafe { sys::futex_op(uaddr, op, wake_all, 0, uaddr2, expected) })
}
