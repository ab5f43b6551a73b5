//! Long blocking calls that a fiber runs on its donor thread (docs/DESIGN.md §2.2, §2.10): the worker
//! goes on with other fibers while the donor, which owns the fiber's stack and TLS,
//! blocks in the kernel. Plain threads call them directly.

use libc::{c_int, c_void, pid_t, siginfo_t};

use fiberize_rt::signal::on_donor::run_on_donor_taking_signals;

/// Declares the real functions (module `real`) and, for each, an export that runs the
/// real call on the donor when the caller is a fiber and the runtime is enabled. For a
/// POSIX cancellation point (marked `#[cancellation_point]`) a cancellation that came
/// while the donor waited, where it cannot reach, acts when the call returns.
macro_rules! on_donor {
    ($($(#[$cp:ident])? fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        mod real {
            use super::*;
            fiberize_rt::real_fns! { $(fn $name($($arg: $ty),*) -> $ret;)* }
        }
        $(
            /// # Safety
            /// As the libc function of the same name.
            #[cfg_attr(not(test), no_mangle)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
                if crate::gate::fiber().is_some() {
                    // SAFETY: the program's arguments are what the libc function requires (this fn's # Safety);
                    // the real function gets them on the donor thread, which owns this fiber's TLS and stack, so
                    // it runs as on a plain thread.
                    let r = run_on_donor_taking_signals(|| unsafe { real::$name($($arg),*) });
                    $( let _ = stringify!($cp); fiberize_rt::signal::cancel::testcancel(); )?
                    return r;
                }
                // SAFETY: a plain thread: the real function gets the program's arguments, valid per its
                // contract.
                unsafe { real::$name($($arg),*) }
            }
        )*
    };
}

on_donor! {
    #[cancellation_point] fn waitpid(p: pid_t, st: *mut c_int, o: c_int) -> pid_t;
    #[cancellation_point] fn wait(st: *mut c_int) -> pid_t;
    fn wait4(p: pid_t, st: *mut c_int, o: c_int, ru: *mut libc::rusage) -> pid_t;
    #[cancellation_point] fn waitid(t: libc::idtype_t, id: libc::id_t, info: *mut siginfo_t, o: c_int) -> c_int;
    fn flock(fd: c_int, op: c_int) -> c_int;
    #[cancellation_point] fn lockf(fd: c_int, cmd: c_int, len: libc::off_t) -> c_int;
    fn getaddrinfo(n: *const libc::c_char, s: *const libc::c_char, h: *const libc::addrinfo, r: *mut *mut libc::addrinfo) -> c_int;
    fn sync_file_range(fd: c_int, off: libc::off64_t, n: libc::off64_t, flags: libc::c_uint) -> c_int;
    #[cancellation_point] fn msync(a: *mut c_void, n: libc::size_t, flags: c_int) -> c_int;
    fn syncfs(fd: c_int) -> c_int;
}
