//! The in-place overlays of glibc's pthread objects (from the `glibc-layout` crate).
//! TEMPORARY local definitions until glibc-layout lands.
#![allow(missing_docs)]
use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64};

pub const INIT_READY: u32 = 2;
pub const INIT_DESTROYED: u32 = 3;

#[repr(C)]
pub struct MutexOverlay {
    pub lock: AtomicU32,
    pub count: AtomicU32,
    pub owner: AtomicU64,
    pub kind: AtomicI32,
    pub init_state: AtomicU32,
    pub reserved: [AtomicU64; 2],
}
impl MutexOverlay {
    /// # Safety
    /// p points to a pthread_mutex_t.
    pub unsafe fn from_ptr<'a>(p: *mut libc::pthread_mutex_t) -> &'a MutexOverlay {
        // SAFETY: caller.
        unsafe { &*(p as *const MutexOverlay) }
    }
}
#[repr(C)]
pub struct CondOverlay {
    pub waiters: AtomicU32,
    pub seq: AtomicU32,
    pub reserved: [AtomicU32; 7],
    pub flags: AtomicU32,
    pub reserved2: [AtomicU32; 2],
}
impl CondOverlay {
    /// # Safety
    /// p points to a pthread_cond_t.
    pub unsafe fn from_ptr<'a>(p: *mut libc::pthread_cond_t) -> &'a CondOverlay {
        // SAFETY: caller.
        unsafe { &*(p as *const CondOverlay) }
    }
}
