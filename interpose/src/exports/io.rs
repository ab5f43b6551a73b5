//! I/O exports. Each checks the gate and hands over to `fiberize_rt::io::ops`, which
//! decides per descriptor (owned or not) and per caller (fiber or thread).
//! With the runtime disabled they are the real functions.

use libc::{c_int, c_long, c_uint, c_ulong, c_void, nfds_t, pollfd, size_t, sockaddr, socklen_t, ssize_t};

/// The runtime's I/O paths apply: enabled, and not a vfork child (which shares our
/// memory, so it must not change the fd table or the parent's epoll set: its `close`
/// and `dup2` before `exec` go straight to the kernel).
#[inline]
pub(crate) fn enabled() -> bool {
    crate::gate::enabled() && !fiberize_rt::runtime::fibers::fiber::in_vfork_child()
}
use fiberize_rt::io::ops::{self, lifecycle, readiness, transfer};

/// Defines an export that calls `$ours` when enabled, else the real function.
macro_rules! export {
    ($(#[$m:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty => $ours:expr) => {
        $(#[$m])*
        /// # Safety
        /// As the libc function of the same name.
        #[cfg_attr(not(test), no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            // SAFETY (both arms): the program's descriptors, buffers and lengths are valid as the libc
            // function requires (this fn's # Safety: "as the libc function of the same name"); our
            // `$ours` and `ops::$name` (the real call) take the same contract.
            unsafe { if enabled() { $ours } else { ops::$name($($arg),*) } }
        }
    };
}

export!(fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t => transfer::read(fd, buf, n));
export!(fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t => transfer::write(fd, buf, n));
export!(fn pread64(fd: c_int, buf: *mut c_void, n: size_t, off: libc::off64_t) -> ssize_t => transfer::pread64(fd, buf, n, off));
export!(fn pwrite64(fd: c_int, buf: *const c_void, n: size_t, off: libc::off64_t) -> ssize_t => transfer::pwrite64(fd, buf, n, off));
/// # Safety
/// As `pread64` (`pread` is its alias on 64-bit glibc).
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pread(fd: c_int, buf: *mut c_void, n: size_t, off: libc::off_t) -> ssize_t {
    // SAFETY: `buf` has `n` writable bytes (pread's contract, this fn's # Safety), which is
    // what pread64 needs; off_t and off64_t are the same 64-bit type here.
    unsafe { pread64(fd, buf, n, off as libc::off64_t) }
}
/// # Safety
/// As `pwrite64`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, n: size_t, off: libc::off_t) -> ssize_t {
    // SAFETY: `buf` has `n` readable bytes (pwrite's contract, this fn's # Safety), which is
    // what pwrite64 needs; off_t and off64_t are the same 64-bit type here.
    unsafe { pwrite64(fd, buf, n, off as libc::off64_t) }
}
export!(fn readv(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t => transfer::readv(fd, iov, n));
export!(fn writev(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t => transfer::writev(fd, iov, n));
export!(fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t => transfer::recv(fd, buf, n, flags));
export!(fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t => transfer::send(fd, buf, n, flags));
export!(fn recvfrom(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int, a: *mut sockaddr, l: *mut socklen_t) -> ssize_t
    => transfer::recvfrom(fd, buf, n, flags, a, l));
export!(fn sendto(fd: c_int, buf: *const c_void, n: size_t, flags: c_int, a: *const sockaddr, l: socklen_t) -> ssize_t
    => transfer::sendto(fd, buf, n, flags, a, l));
export!(fn recvmsg(fd: c_int, m: *mut libc::msghdr, flags: c_int) -> ssize_t => transfer::recvmsg(fd, m, flags));
export!(fn sendmsg(fd: c_int, m: *const libc::msghdr, flags: c_int) -> ssize_t => transfer::sendmsg(fd, m, flags));
export!(fn accept4(fd: c_int, a: *mut sockaddr, l: *mut socklen_t, flags: c_int) -> c_int => transfer::accept4(fd, a, l, flags));
export!(fn connect(fd: c_int, a: *const sockaddr, l: socklen_t) -> c_int => transfer::connect(fd, a, l));
export!(fn poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int => readiness::poll(fds, n, timeout));
export!(fn ppoll(fds: *mut pollfd, n: nfds_t, ts: *const libc::timespec, m: *const libc::sigset_t) -> c_int
    => readiness::ppoll(fds, n, ts, m));
export!(fn select(n: c_int, r: *mut libc::fd_set, w: *mut libc::fd_set, e: *mut libc::fd_set, t: *mut libc::timeval) -> c_int
    => readiness::select(n, r, w, e, t));
export!(fn pselect(n: c_int, r: *mut libc::fd_set, w: *mut libc::fd_set, e: *mut libc::fd_set, t: *const libc::timespec, m: *const libc::sigset_t) -> c_int
    => readiness::pselect(n, r, w, e, t, m));
export!(fn epoll_wait(ep: c_int, ev: *mut libc::epoll_event, max: c_int, timeout: c_int) -> c_int
    => readiness::epoll_pwait(ep, ev, max, timeout, core::ptr::null()));
export!(fn epoll_pwait(ep: c_int, ev: *mut libc::epoll_event, max: c_int, timeout: c_int, m: *const libc::sigset_t) -> c_int
    => readiness::epoll_pwait(ep, ev, max, timeout, m));
export!(fn socket(d: c_int, t: c_int, p: c_int) -> c_int => lifecycle::socket(d, t, p));
export!(fn socketpair(d: c_int, t: c_int, p: c_int, sv: *mut c_int) -> c_int => lifecycle::socketpair(d, t, p, sv));
export!(fn pipe2(fds: *mut c_int, flags: c_int) -> c_int => lifecycle::pipe2(fds, flags));
export!(fn eventfd(init: c_uint, flags: c_int) -> c_int => lifecycle::eventfd(init, flags));
export!(fn epoll_create1(flags: c_int) -> c_int => lifecycle::epoll_create1(flags));
export!(fn close(fd: c_int) -> c_int => lifecycle::close(fd));
export!(fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int => lifecycle::close_range(first, last, flags));
export!(fn fclose(f: *mut libc::FILE) -> c_int => lifecycle::fclose(f));
export!(fn dup(fd: c_int) -> c_int => lifecycle::dup(fd));
export!(fn dup2(a: c_int, b: c_int) -> c_int => lifecycle::dup3(a, b, None));
export!(fn dup3(a: c_int, b: c_int, flags: c_int) -> c_int => lifecycle::dup3(a, b, Some(flags)));
export!(fn setsockopt(fd: c_int, level: c_int, name: c_int, v: *const c_void, l: socklen_t) -> c_int
    => lifecycle::setsockopt(fd, level, name, v, l));
export!(fn fsync(fd: c_int) -> c_int => lifecycle::fsync(fd, false));
export!(fn fdatasync(fd: c_int) -> c_int => lifecycle::fsync(fd, true));

/// # Safety
/// As `accept`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn accept(fd: c_int, a: *mut sockaddr, l: *mut socklen_t) -> c_int {
    // SAFETY: `accept` is `accept4` with no flags.
    unsafe { accept4(fd, a, l, 0) }
}

/// # Safety
/// As `pipe`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pipe(fds: *mut c_int) -> c_int {
    // SAFETY: `pipe` is `pipe2` with no flags.
    unsafe { pipe2(fds, 0) }
}

/// # Safety
/// As `epoll_create` (the size hint is ignored by Linux, but must be positive).
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn epoll_create(size: c_int) -> c_int {
    if size <= 0 {
        crate::gate::set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: epoll_create1(0) takes no pointers; `size` was only checked, as epoll_create does.
    unsafe { epoll_create1(0) }
}

/// `fcntl(int fd, int cmd, ...)`: variadic in C; on x86_64 the optional third argument
/// arrives in the same register whether it is an int, a long or a pointer, so taking
/// it as a `c_long` receives any of them (see the ABI note in `syscall.rs`).
///
/// # Safety
/// As `fcntl`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_long) -> c_int {
    // SAFETY: `arg` is what `cmd` requires (an int, or a pointer to the struct the command reads
    // or writes: fcntl's contract), which `lifecycle::fcntl` and the real fcntl pass on
    // unchanged.
    unsafe {
        if enabled() {
            lifecycle::fcntl(fd, cmd, arg)
        } else {
            ops::fcntl(fd, cmd, arg)
        }
    }
}

/// glibc's LFS alias of `fcntl` (what programs built with _FILE_OFFSET_BITS=64 call).
///
/// # Safety
/// As `fcntl`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_long) -> c_int {
    // SAFETY: fcntl64 is fcntl's alias, with fcntl's contract on `arg`.
    unsafe { fcntl(fd, cmd, arg) }
}

/// `ioctl(int fd, unsigned long request, ...)`, variadic as `fcntl`.
///
/// # Safety
/// As `ioctl`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn ioctl(fd: c_int, req: c_ulong, arg: c_long) -> c_int {
    // SAFETY: `arg` is what `req` requires (ioctl's contract: usually a pointer to the request's
    // structure), which `lifecycle::ioctl` and the real ioctl pass on.
    unsafe {
        if enabled() {
            lifecycle::ioctl(fd, req, arg)
        } else {
            ops::ioctl(fd, req, arg)
        }
    }
}

/// # Safety
/// As `closefrom`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn closefrom(low: c_int) {
    // SAFETY: closefrom takes no pointers; both arms make the program's call.
    unsafe {
        if enabled() {
            lifecycle::closefrom(low)
        } else {
            ops::closefrom(low)
        }
    }
}
