//! Emulation of private futex operations reached through `syscall(SYS_futex, …)`.
//!
//! Rust's std (Mutex, Condvar, RwLock, park, Once), libstdc++'s `atomic::wait` and
//! InnoDB wait through `syscall(SYS_futex, …)`; a fiber must park there, not block its
//! worker. Private futexes are process-local, so while the runtime is enabled *every*
//! private futex operation that reaches our `syscall` is served by the parking lot —
//! fibers and plain threads alike — keyed by the futex address. A futex without the
//! private flag is served the same way when its word lies in process-private memory
//! (`sync::futex_shared` decides, and tags its key apart, as the kernel keeps the two
//! kinds apart); one in memory shared with other processes, and operations we do not
//! model, go to the kernel. A two-word operation with one word on each side is split
//! between the lot and the kernel (`sync::futex_split`).
//!
//! Limitation: a program that waits on a private futex with an inline `syscall`
//! instruction (bypassing libc's `syscall`) and wakes it through libc's `syscall`, or
//! the reverse, is not supported while the runtime is enabled.

use core::sync::atomic::{AtomicU32, Ordering};

use libc::{c_int, timespec};

use crate::base::stats::{bump, STATS};
use crate::base::time;
use crate::runtime::fibers::fiber::WaitKind;
use crate::sync::futex_op::{wake_op_apply, wake_op_compare, FUTEX_CMD_MASK};
use crate::sync::futex_shared;
use crate::sync::futex_split::{self, Route};
use crate::sync::parking::{self, ParkResult};

// The kernel's operation codes, from `libc` (base::sys uses the same ones).
pub use libc::{
    FUTEX_CLOCK_REALTIME, FUTEX_CMP_REQUEUE, FUTEX_PRIVATE_FLAG, FUTEX_REQUEUE, FUTEX_WAIT, FUTEX_WAIT_BITSET, FUTEX_WAKE,
    FUTEX_WAKE_BITSET, FUTEX_WAKE_OP,
};

/// Whether we serve `op` on `uaddr` (and `uaddr2` for the two-word operations); else
/// the caller passes it to the kernel.
#[inline]
pub fn emulated(uaddr: usize, op: c_int, uaddr2: usize) -> bool {
    let cmd = op & FUTEX_CMD_MASK;
    if !matches!(
        cmd,
        FUTEX_WAIT | FUTEX_WAKE | FUTEX_REQUEUE | FUTEX_CMP_REQUEUE | FUTEX_WAKE_OP | FUTEX_WAIT_BITSET | FUTEX_WAKE_BITSET
    ) {
        return false;
    }
    if op & FUTEX_PRIVATE_FLAG != 0 {
        return true;
    }
    let served = if matches!(cmd, FUTEX_REQUEUE | FUTEX_CMP_REQUEUE | FUTEX_WAKE_OP) {
        match futex_split::route(uaddr, uaddr2) {
            Route::Lot => true,
            Route::Split { .. } => {
                bump(&STATS.futex_split);
                true
            }
            Route::Kernel => false,
        }
    } else {
        futex_shared::emulate(uaddr)
    };
    if !served {
        bump(&STATS.futex_shared_to_kernel);
    }
    served
}

/// Performs an emulated futex operation. Ok(value) or Err(errno), as the kernel would.
///
/// # Safety
/// `uaddr` (and `uaddr2` for the two-address operations) must be valid futex words, and
/// `timeout` null or a valid timespec, as for the real system call.
pub unsafe fn futex(
    uaddr: *const u32,
    op: c_int,
    val: u32,
    timeout: *const timespec,
    uaddr2: *const u32,
    val3: u32,
) -> Result<isize, c_int> {
    if uaddr.is_null() {
        return Err(libc::EFAULT);
    }
    if !(uaddr as usize).is_multiple_of(4) {
        return Err(libc::EINVAL);
    }
    // SAFETY: aligned, non-null futex word (caller).
    let word = unsafe { &*(uaddr as *const AtomicU32) };
    // Non-private waiters queue apart from private ones on the same word, as in the kernel.
    let tag = if op & FUTEX_PRIVATE_FLAG != 0 { 0 } else { futex_shared::KEY_TAG };
    let key = uaddr as usize | tag;
    let key2 = uaddr2 as usize | tag;
    let cmd = op & FUTEX_CMD_MASK;
    let two_words = matches!(cmd, FUTEX_REQUEUE | FUTEX_CMP_REQUEUE | FUTEX_WAKE_OP);
    if two_words {
        // As the kernel: no clock flag outside the waits, and a second word that is a
        // futex word (checked before any word is touched).
        if op & FUTEX_CLOCK_REALTIME != 0 {
            return Err(libc::ENOSYS);
        }
        if uaddr2.is_null() {
            return Err(libc::EFAULT);
        }
        if !(uaddr2 as usize).is_multiple_of(4) {
            return Err(libc::EINVAL);
        }
    }
    // A non-private two-word operation with one word on each side (`emulated` counted it).
    let split = if tag != 0 && two_words {
        match futex_split::route(uaddr as usize, uaddr2 as usize) {
            Route::Split { first_private } => Some(first_private),
            _ => None,
        }
    } else {
        None
    };
    match cmd {
        FUTEX_WAIT | FUTEX_WAIT_BITSET => {
            let bitset = if cmd == FUTEX_WAIT { u32::MAX } else { val3 };
            if bitset == 0 {
                return Err(libc::EINVAL);
            }
            let deadline = if timeout.is_null() {
                None
            } else {
                // SAFETY: non-null timespec (caller).
                let ts = unsafe { &*timeout };
                Some(if cmd == FUTEX_WAIT {
                    time::relative_deadline(ts)?
                } else {
                    let clock = if op & FUTEX_CLOCK_REALTIME != 0 { libc::CLOCK_REALTIME } else { libc::CLOCK_MONOTONIC };
                    time::absolute_deadline(clock, ts)?
                })
            };
            bump(&STATS.futex_waits);
            if let Some(f) = crate::runtime::fibers::fiber::owner_of_tcb() {
                f.wait.expect(val);
                f.wait.note_futex_wait(key);
            }
            match parking::park(key, bitset, WaitKind::Futex, || word.load(Ordering::SeqCst) == val, || {}, |_| {}, deadline) {
                ParkResult::Unparked(_) => Ok(0),
                ParkResult::Invalid => Err(libc::EAGAIN),
                ParkResult::TimedOut => Err(libc::ETIMEDOUT),
                ParkResult::Interrupted => Err(libc::EINTR),
            }
        }
        FUTEX_WAKE | FUTEX_WAKE_BITSET => {
            let bitset = if cmd == FUTEX_WAKE { u32::MAX } else { val3 };
            if bitset == 0 {
                return Err(libc::EINVAL);
            }
            bump(&STATS.futex_wakes);
            // A contender's wake of one (an unlock of a lock it waited for before) gives
            // the wakee its worker (`parking::unpark_one_handing_off`); a signal (a
            // condition's notify, a thread's unpark) queues it as any wake-up.
            if val == 1
                && bitset == u32::MAX
                && crate::runtime::fibers::fiber::owner_of_tcb().is_some_and(|f| f.wait.waited_on_futex(key))
            {
                return Ok(parking::unpark_one_handing_off(key) as isize);
            }
            Ok(parking::unpark_some_quick(key, bitset, val as usize) as isize)
        }
        FUTEX_REQUEUE | FUTEX_CMP_REQUEUE => {
            // For requeue, the kernel reads the "timeout" argument as val2 (a count), and
            // both counts as `int`s that must not be negative.
            let max_requeue = timeout as usize as u32;
            if (val as i32) < 0 || (max_requeue as i32) < 0 {
                return Err(libc::EINVAL);
            }
            if let Some(first_private) = split {
                // SAFETY: both words are mapped and aligned (their routes say so; checked above).
                return unsafe {
                    futex_split::requeue(uaddr as usize, op, val, max_requeue, uaddr2 as usize, val3, first_private)
                };
            }
            let check = cmd == FUTEX_CMP_REQUEUE;
            match parking::unpark_requeue(key, key2, val as usize, max_requeue as usize, || {
                !check || word.load(Ordering::SeqCst) == val3
            }) {
                None => Err(libc::EAGAIN),
                // Both return woken + requeued (the kernel's count for either).
                Some((w, r)) => Ok((w + r) as isize),
            }
        }
        FUTEX_WAKE_OP => {
            if let Some(first_private) = split {
                // SAFETY: both words are mapped and aligned (their routes say so; checked above).
                return unsafe {
                    futex_split::wake_op(uaddr as usize, op, val, timeout as usize, uaddr2 as usize, val3, first_private)
                };
            }
            // SAFETY: non-null, aligned futex word (checked above; caller).
            let word2 = unsafe { &*(uaddr2 as *const AtomicU32) };
            let old = wake_op_apply(word2, val3)?;
            let mut n = parking::unpark_some(key, u32::MAX, val as usize, |_| {});
            if wake_op_compare(old, val3) {
                let val2 = (timeout as usize).min(i32::MAX as usize);
                n += parking::unpark_some(key2, u32::MAX, val2, |_| {});
            }
            Ok(n as isize)
        }
        _ => Err(libc::ENOSYS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::futex_split::route;

    /// An anonymous shared page, unmapped on drop.
    struct SharedPage(*mut libc::c_void);
    impl SharedPage {
        fn new() -> SharedPage {
            let p = crate::sync::futex_maps::anonymous_page(0, libc::MAP_SHARED);
            // As the library's `mmap` export does (another test may have left the
            // table holding this range as private).
            futex_shared::after_mmap(libc::MAP_SHARED | libc::MAP_ANONYMOUS);
            SharedPage(p)
        }
        fn word(&self) -> &AtomicU32 {
            // SAFETY: the page is mapped, aligned, and lives as long as `self`.
            unsafe { &*(self.0 as *const AtomicU32) }
        }
    }
    impl Drop for SharedPage {
        fn drop(&mut self) {
            // SAFETY: the page mapped in `new`.
            unsafe { libc::munmap(self.0, 4096) };
            futex_shared::after_munmap(self.0 as usize, 4096);
        }
    }

    fn call(uaddr: &AtomicU32, op: c_int, val: u32, val2: usize, uaddr2: &AtomicU32, val3: u32) -> Result<isize, c_int> {
        // SAFETY: two live, aligned words; the two-word operations read `val2` as a count.
        unsafe { futex(uaddr.as_ptr(), op, val, val2 as *const libc::timespec, uaddr2.as_ptr(), val3) }
    }

    /// FUTEX_OP(FUTEX_OP_ADD, 1, FUTEX_OP_CMP_EQ, 0).
    const ADD_ONE_IF_ZERO: u32 = (1 << 28) | (1 << 12);

    #[test]
    fn one_private_one_shared_word_is_split_either_way() {
        let private = AtomicU32::new(0);
        let shared = SharedPage::new();
        let (p, s) = (private.as_ptr() as usize, shared.word().as_ptr() as usize);
        assert_eq!(route(p, s), Route::Split { first_private: true });
        assert_eq!(route(s, p), Route::Split { first_private: false });
        let private2 = AtomicU32::new(0);
        assert_eq!(route(p, private2.as_ptr() as usize), Route::Lot);
        assert_eq!(route(s, s), Route::Kernel);
        assert_eq!(route(p, 0x10), Route::Kernel, "an unmapped word: the kernel's EFAULT");
    }

    #[test]
    fn split_operations_act_on_the_words_as_the_kernel_does() {
        let private = AtomicU32::new(0);
        let shared = SharedPage::new();
        let max = i32::MAX as usize;
        // WAKE_OP's operation lands on the second word, whichever side does it.
        assert_eq!(call(&private, FUTEX_WAKE_OP, 1, 1, shared.word(), ADD_ONE_IF_ZERO), Ok(0));
        assert_eq!(shared.word().load(Ordering::SeqCst), 1);
        assert_eq!(call(shared.word(), FUTEX_WAKE_OP, 1, 1, &private, ADD_ONE_IF_ZERO), Ok(0));
        assert_eq!(private.load(Ordering::SeqCst), 1);
        // An invalid operation changes nothing (the kernel's ENOSYS).
        assert_eq!(call(shared.word(), FUTEX_WAKE_OP, 1, 1, &private, 7 << 28), Err(libc::ENOSYS));
        assert_eq!(call(&private, FUTEX_WAKE_OP, 1, 1, shared.word(), 7 << 28), Err(libc::ENOSYS));
        assert_eq!(private.load(Ordering::SeqCst), 1);
        // CMP_REQUEUE compares the first word on either side; nobody waits, nobody wakes.
        assert_eq!(call(&private, FUTEX_CMP_REQUEUE, 1, max, shared.word(), 0), Err(libc::EAGAIN));
        assert_eq!(call(&private, FUTEX_CMP_REQUEUE, 1, max, shared.word(), 1), Ok(0));
        assert_eq!(call(shared.word(), FUTEX_CMP_REQUEUE, 1, max, &private, 0), Err(libc::EAGAIN));
        assert_eq!(call(shared.word(), FUTEX_CMP_REQUEUE, 1, max, &private, 1), Ok(0));
        assert_eq!(call(&private, FUTEX_REQUEUE, 1, max, shared.word(), 0), Ok(0));
        // Negative counts: EINVAL, as the kernel.
        assert_eq!(call(&private, FUTEX_REQUEUE, 1, u32::MAX as usize, shared.word(), 0), Err(libc::EINVAL));
        assert_eq!(call(shared.word(), FUTEX_CMP_REQUEUE, u32::MAX, 1, &private, 1), Err(libc::EINVAL));
    }
}
