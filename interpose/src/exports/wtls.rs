//! WTLS exports for `fiberize.h` (`fiberize_rt::runtime::fibers::wtls`). The header declares
//! them weak: without the preload they are null and the macros fall back to plain TLS.

use libc::{c_int, c_void, size_t};

/// `WTLS_ADDR_OF`: the address of the caller's static-TLS variable at `addr` in the
/// block of the worker running the caller; `addr` itself for plain threads.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn fiberize_wtls_addr_of(addr: *mut c_void) -> *mut c_void {
    if !crate::gate::enabled() {
        return addr;
    }
    fiberize_rt::runtime::fibers::wtls::addr_of(addr as usize) as *mut c_void
}

/// `WTLS_REGISTER`: 0, or `EINVAL` (over 256 bytes, or not a static-TLS variable).
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn fiberize_wtls_register(addr: *mut c_void, size: size_t) -> c_int {
    if !crate::gate::enabled() {
        return 0;
    }
    fiberize_rt::runtime::fibers::wtls::register(addr as usize, size)
}

/// `AT_FIBER_DESTROY`: 0 when `cb` will run at the calling fiber's end, before its
/// destructors; 1 when the caller is not a fiber (the header then uses the thread's
/// own exit hook); `EINVAL` for a null callback.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn fiberize_at_fiber_destroy(cb: Option<extern "C" fn()>) -> c_int {
    let Some(cb) = cb else { return libc::EINVAL };
    if !crate::gate::enabled() {
        return 1;
    }
    if fiberize_rt::runtime::fibers::wtls::at_fiber_destroy(cb) {
        0
    } else {
        1
    }
}
