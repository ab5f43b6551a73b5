//! A fiber's alternate signal stack (`sigaltstack`), kept per fiber and never on a
//! kernel thread the fiber does not own.
//!
//! The kernel keeps one alternate stack per kernel thread. A fiber runs on workers that
//! other fibers share, so a `sigaltstack` made there would give the worker (and every
//! fiber it runs next) a stack that belongs to one fiber and may be unmapped when that
//! fiber ends (Rust's standard library maps one per thread and unmaps it at thread
//! exit). So a fiber's `sigaltstack` reads and writes this record, checked as the kernel
//! checks a thread's call (`do_sigaltstack`): the program reads back what it set, with
//! the kernel's errors. What uses the record (docs/DESIGN.md, "Per-thread kernel state"):
//!
//! * the library's own signal delivery runs a program handler in the fiber's context on
//!   the stack the fiber is on; `SA_ONSTACK` is not acted on for a fiber;
//! * a signal the kernel delivers to a worker (a fault in the fiber's code) finds the
//!   worker without an alternate stack, as workers have none;
//! * a fiber handed to its donor for good ([`AltStack::hand_to_kernel`]) takes the
//!   record with it: the donor, now the fiber's only kernel thread, gets it from then on.

use core::sync::atomic::{AtomicI32, AtomicUsize, Ordering::Relaxed};

use libc::{c_int, stack_t};

/// The kernel's `SS_AUTODISARM` (linux/signal.h): a flag bit or-ed into the mode.
const SS_AUTODISARM: c_int = 1 << 31;

/// One fiber's alternate signal stack: `[sp, sp + size)`, and the flags it was set with.
/// Only the fiber itself reads and writes it (Relaxed: one logical thread).
pub struct AltStack {
    sp: AtomicUsize,
    size: AtomicUsize,
    flags: AtomicI32,
}

impl Default for AltStack {
    fn default() -> Self {
        AltStack { sp: AtomicUsize::new(0), size: AtomicUsize::new(0), flags: AtomicI32::new(libc::SS_DISABLE) }
    }
}

impl AltStack {
    /// `sigaltstack(new, &old)` as the kernel does it for the thread whose record this
    /// is, the caller's stack pointer being `sp`: the settings before the call, or the
    /// error number (`EPERM` while on the stack, `EINVAL` for an unknown mode, `ENOMEM`
    /// for a stack under `MINSIGSTKSZ`); nothing changes on an error.
    pub fn exchange(&self, new: Option<&stack_t>, sp: usize) -> Result<stack_t, c_int> {
        let (cur_sp, size, flags) = (self.sp.load(Relaxed), self.size.load(Relaxed), self.flags.load(Relaxed));
        // The kernel's on_sig_stack(): never while SS_AUTODISARM is set.
        let on_stack = flags & SS_AUTODISARM == 0 && sp > cur_sp && sp - cur_sp <= size;
        let mode = if size == 0 {
            libc::SS_DISABLE
        } else if on_stack {
            libc::SS_ONSTACK
        } else {
            0
        };
        let old = stack_t { ss_sp: cur_sp as *mut libc::c_void, ss_flags: mode | (flags & SS_AUTODISARM), ss_size: size };
        let Some(new) = new else { return Ok(old) };
        if on_stack {
            return Err(libc::EPERM);
        }
        let (sp, size) = match new.ss_flags & !SS_AUTODISARM {
            libc::SS_DISABLE => (0, 0),
            0 | libc::SS_ONSTACK if new.ss_size < libc::MINSIGSTKSZ => return Err(libc::ENOMEM),
            0 | libc::SS_ONSTACK => (new.ss_sp as usize, new.ss_size),
            _ => return Err(libc::EINVAL),
        };
        self.sp.store(sp, Relaxed);
        self.size.store(size, Relaxed);
        self.flags.store(new.ss_flags, Relaxed);
        Ok(old)
    }

    /// Installs the record on the calling kernel thread (the fiber's donor, which runs
    /// the fiber from now on), if the fiber set one.
    pub fn hand_to_kernel(&self) {
        let size = self.size.load(Relaxed);
        if size == 0 {
            return;
        }
        let ss = stack_t { ss_sp: self.sp.load(Relaxed) as *mut libc::c_void, ss_flags: self.flags.load(Relaxed), ss_size: size };
        crate::base::sys::sigaltstack(&ss);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(sp: usize, size: usize, flags: c_int) -> stack_t {
        stack_t { ss_sp: sp as *mut libc::c_void, ss_flags: flags, ss_size: size }
    }

    #[test]
    fn set_read_back_and_errors_as_the_kernel() {
        let a = AltStack::default();
        let old = a.exchange(None, 0x9000).unwrap();
        assert_eq!((old.ss_sp as usize, old.ss_size, old.ss_flags), (0, 0, libc::SS_DISABLE));
        assert_eq!(a.exchange(Some(&st(0x1000, 100, 0)), 0x9000).unwrap_err(), libc::ENOMEM);
        assert_eq!(a.exchange(Some(&st(0x1000, 0x4000, 7)), 0x9000).unwrap_err(), libc::EINVAL);
        a.exchange(Some(&st(0x1000, 0x4000, 0)), 0x9000).unwrap();
        let old = a.exchange(None, 0x9000).unwrap();
        assert_eq!((old.ss_sp as usize, old.ss_size, old.ss_flags), (0x1000, 0x4000, 0));
        // On the stack: reported, and no change allowed.
        assert_eq!(a.exchange(None, 0x2000).unwrap().ss_flags, libc::SS_ONSTACK);
        assert_eq!(a.exchange(Some(&st(0, 0, libc::SS_DISABLE)), 0x2000).unwrap_err(), libc::EPERM);
        let old = a.exchange(Some(&st(0x1234, 0, libc::SS_DISABLE)), 0x9000).unwrap();
        assert_eq!(old.ss_size, 0x4000);
        let now = a.exchange(None, 0x9000).unwrap();
        assert_eq!((now.ss_sp as usize, now.ss_size, now.ss_flags), (0, 0, libc::SS_DISABLE));
        a.exchange(Some(&st(0x1000, 0x4000, SS_AUTODISARM)), 0x9000).unwrap();
        assert_eq!(a.exchange(None, 0x2000).unwrap().ss_flags, SS_AUTODISARM);
    }
}
