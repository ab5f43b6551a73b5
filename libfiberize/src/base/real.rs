//! The table of real libc functions.
//!
//! Every export of `libfiberize.so` shadows a libc symbol, and so does every call that
//! our own code (and `std`, `mio`, `libc`) makes through the PLT. The runtime therefore
//! never calls a shadowed function by name: it calls `real::NAME`, which is resolved once
//! with `dlsym(RTLD_NEXT, "NAME")` (or `dlvsym` for versioned symbols) and cached in an
//! atomic slot. Resolution is lazy, so it works before any constructor ran.

use core::sync::atomic::{AtomicUsize, Ordering};

/// Resolves `name` (NUL-terminated) in the objects after ours, and caches it in `slot`.
/// Aborts with a message if the symbol does not exist: a missing libc function is a
/// broken installation, not something a caller can handle.
#[cold]
pub fn resolve(name: &'static str, version: Option<&'static str>, slot: &AtomicUsize) -> usize {
    // The versions asked for are x86_64's compatibility splits (`pthread_cond_*` has
    // GLIBC_2.2.5 and GLIBC_2.3.2 there); aarch64's glibc begins at GLIBC_2.17 with one
    // version of each symbol, the default one.
    #[cfg(target_arch = "aarch64")]
    let version: Option<&'static str> = version.and(None);
    // SAFETY: `name` and `version` are NUL-terminated literals (built by `real_fns!`).
    let p = unsafe {
        match version {
            Some(v) => libc::dlvsym(libc::RTLD_NEXT, name.as_ptr().cast(), v.as_ptr().cast()),
            None => libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()),
        }
    };
    if p.is_null() {
        crate::fatal(&["cannot resolve real libc symbol ", name.trim_end_matches('\0')]);
    }
    slot.store(p as usize, Ordering::Release);
    p as usize
}

/// Declares real libc functions: `real_fns! { fn name(a: T) -> R; }` defines
/// `unsafe fn name(a: T) -> R` that calls the next definition of `name` after ours.
/// `@"GLIBC_2.3.2" fn name(..)` asks for a specific symbol version (on x86_64).
#[macro_export]
macro_rules! real_fns {
    ($( $(@$ver:literal)? fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty; )*) => {
        $(
            #[allow(clippy::missing_safety_doc)]
            /// The real libc function of this name (see [`crate::base::real`]).
            #[inline]
            pub unsafe fn $name($($arg: $ty),*) -> $ret {
                static SLOT: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
                let mut p = SLOT.load(core::sync::atomic::Ordering::Acquire);
                if p == 0 {
                    #[allow(unused_mut, unused_assignments)]
                    let mut version: Option<&'static str> = None;
                    $( version = Some(concat!($ver, "\0")); )?
                    p = $crate::base::real::resolve(concat!(stringify!($name), "\0"), version, &SLOT);
                }
                // SAFETY: `p` is the address of the libc function named `$name`, whose C
                // prototype is the one declared here; the caller upholds its contract.
                unsafe {
                    let f: unsafe extern "C" fn($($ty),*) -> $ret = core::mem::transmute(p);
                    f($($arg),*)
                }
            }
        )*
    };
}

// The real functions that more than one layer calls (one declaration each).
real_fns! {
    fn sigaction(sig: libc::c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> libc::c_int;
    fn pthread_sigmask(how: libc::c_int, set: *const libc::sigset_t, old: *mut libc::sigset_t) -> libc::c_int;
    fn pthread_create(t: *mut libc::pthread_t, a: *const libc::pthread_attr_t,
        f: extern "C" fn(*mut libc::c_void) -> *mut libc::c_void, arg: *mut libc::c_void) -> libc::c_int;
    fn pthread_detach(t: libc::pthread_t) -> libc::c_int;
    fn sched_yield() -> libc::c_int;
    fn timer_create(clock: libc::clockid_t, sev: *mut libc::sigevent, timer: *mut libc::timer_t) -> libc::c_int;
    fn timer_delete(timer: libc::timer_t) -> libc::c_int;
}
