//! The decoding of a futex operation word, which the lot's emulation
//! (`sync::futex`) and the split of a two-word operation (`sync::futex_split`) share:
//! the command bits, and FUTEX_WAKE_OP's encoded operation and comparison.

use core::sync::atomic::{AtomicU32, Ordering};

use libc::{c_int, FUTEX_CLOCK_REALTIME, FUTEX_PRIVATE_FLAG};

/// The command bits of a futex operation (without the private and clock flags).
pub const FUTEX_CMD_MASK: c_int = !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME);

/// FUTEX_WAKE_OP's encoded operation on `*uaddr2`; returns the old value.
pub(crate) fn wake_op_apply(w: &AtomicU32, encoded: u32) -> Result<u32, c_int> {
    let op = (encoded >> 28) & 0xf;
    let mut oparg = (encoded >> 12) & 0xfff;
    if op & 8 != 0 {
        // FUTEX_OP_OPARG_SHIFT
        if oparg > 31 {
            return Err(libc::EINVAL);
        }
        oparg = 1 << oparg;
    } else {
        // sign-extend the 12-bit argument
        oparg = (((oparg as i32) << 20) >> 20) as u32;
    }
    let r = match op & 7 {
        0 => w.swap(oparg, Ordering::SeqCst),
        1 => w.fetch_add(oparg, Ordering::SeqCst),
        2 => w.fetch_or(oparg, Ordering::SeqCst),
        3 => w.fetch_and(!oparg, Ordering::SeqCst),
        4 => w.fetch_xor(oparg, Ordering::SeqCst),
        _ => return Err(libc::ENOSYS),
    };
    Ok(r)
}

/// Whether FUTEX_WAKE_OP's encoded comparison holds for the second word's old value.
pub(crate) fn wake_op_compare(old: u32, encoded: u32) -> bool {
    let cmp = (encoded >> 24) & 0xf;
    let cmparg = ((((encoded & 0xfff) as i32) << 20) >> 20) as i64;
    let old = old as i32 as i64;
    match cmp {
        0 => old == cmparg,
        1 => old != cmparg,
        2 => old < cmparg,
        3 => old <= cmparg,
        4 => old > cmparg,
        5 => old >= cmparg,
        _ => false,
    }
}
