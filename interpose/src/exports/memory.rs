//! `mmap`, `mmap64`, `munmap`, `mremap`, `shmat`, `shmdt`: glibc's, then a note to
//! `fiberize_rt::sync::futex_shared` that the mappings changed, so that non-private
//! futex words in memory shared with other processes keep going to the kernel.
//!
//! ABI note: `mremap` is variadic in C (`new_address` only with `MREMAP_FIXED`); on
//! x86_64 and aarch64 Linux a variadic call passes integer arguments in the same
//! registers as a fixed one, so the five-argument definition receives what any caller
//! passes, as `syscall`'s does (see `syscall.rs`).

use libc::{c_int, c_void, off_t, size_t};

use fiberize_rt::sync::futex_shared;

mod real {
    use super::*;
    fiberize_rt::real_fns! {
        fn mmap(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void;
        fn mmap64(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void;
        fn munmap(addr: *mut c_void, len: size_t) -> c_int;
        fn mremap(old: *mut c_void, old_len: size_t, new_len: size_t, flags: c_int, new_addr: *mut c_void) -> *mut c_void;
        fn shmat(id: c_int, addr: *const c_void, flags: c_int) -> *mut c_void;
        fn shmdt(addr: *const c_void) -> c_int;
    }
}

/// # Safety
/// As glibc's `mmap`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn mmap(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void {
    // SAFETY: the program's arguments, forwarded unchanged (mmap's contract).
    let p = unsafe { real::mmap(addr, len, prot, flags, fd, off) };
    if p != libc::MAP_FAILED {
        futex_shared::after_mmap(flags);
    }
    p
}

/// # Safety
/// As glibc's `mmap64`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn mmap64(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void {
    // SAFETY: the program's arguments, forwarded unchanged (mmap64's contract).
    let p = unsafe { real::mmap64(addr, len, prot, flags, fd, off) };
    if p != libc::MAP_FAILED {
        futex_shared::after_mmap(flags);
    }
    p
}

/// # Safety
/// As glibc's `munmap`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: size_t) -> c_int {
    // SAFETY: the program's arguments, forwarded unchanged (munmap's contract).
    let r = unsafe { real::munmap(addr, len) };
    if r == 0 {
        futex_shared::after_munmap(addr as usize, len);
    }
    r
}

/// # Safety
/// As glibc's `mremap`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn mremap(
    old: *mut c_void,
    old_len: size_t,
    new_len: size_t,
    flags: c_int,
    new_addr: *mut c_void,
) -> *mut c_void {
    // SAFETY: the program's arguments, forwarded unchanged (mremap's contract; `new_addr`
    // is read only with MREMAP_FIXED, as glibc's own variadic reading does).
    let p = unsafe { real::mremap(old, old_len, new_len, flags, new_addr) };
    if p != libc::MAP_FAILED {
        futex_shared::mapping_changed();
    }
    p
}

/// # Safety
/// As glibc's `shmat`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn shmat(id: c_int, addr: *const c_void, flags: c_int) -> *mut c_void {
    // SAFETY: the program's arguments, forwarded unchanged (shmat's contract).
    let p = unsafe { real::shmat(id, addr, flags) };
    if p as isize != -1 {
        futex_shared::mapping_changed();
    }
    p
}

/// # Safety
/// As glibc's `shmdt`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn shmdt(addr: *const c_void) -> c_int {
    // SAFETY: the program's argument, forwarded unchanged (shmdt's contract).
    let r = unsafe { real::shmdt(addr) };
    if r == 0 {
        futex_shared::mapping_changed();
    }
    r
}
