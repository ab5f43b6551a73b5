//! Descriptor lifecycle: creating sockets, pipes, eventfds and epoll fds (tracked as
//! owned, `O_NONBLOCK` underneath), `dup`/`dup3`, `close`, `fcntl`/`ioctl` (the program's
//! own view of `O_NONBLOCK`), `setsockopt` (socket timeouts), and `fsync` run on the
//! donor. `super::socket` and the like are the real functions.

use super::*;

/// Starts tracking a freshly created fd.
pub(super) fn adopt_kind(fd: c_int, user_nonblock: bool, stream: bool, socket: bool) {
    if let Some(st) = fdtable::slot(fd) {
        fdtable::reset(fd);
        let f = OWNED
            | if user_nonblock { USER_NONBLOCK } else { 0 }
            | if stream { STREAM } else { 0 }
            | if socket { SOCKET } else { 0 };
        st.flags.store(f, Ordering::Release);
    }
}

/// Whether socket `fd` is SOCK_STREAM.
pub(super) fn is_stream_socket(fd: c_int) -> bool {
    let mut ty: c_int = 0;
    let mut len = core::mem::size_of::<c_int>() as socklen_t;
    // SAFETY: valid out-parameters.
    let r = unsafe { getsockopt(fd, libc::SOL_SOCKET, libc::SO_TYPE, &mut ty as *mut c_int as *mut c_void, &mut len) };
    r == 0 && ty == libc::SOCK_STREAM
}

/// Forgets `fd` before it is closed or replaced.
fn release(fd: c_int) {
    if let Some(st) = fdtable::lookup(fd) {
        if let Some(old) = fdtable::reset(fd) {
            if old & OWNED != 0 {
                reactor::forget(fd, old & REGISTERED != 0, st);
            }
        }
    }
}

/// A duplicate shares the open file description, hence our O_NONBLOCK underneath.
fn copy_state(from: c_int, to: c_int) {
    if to < 0 || to == from {
        return;
    }
    if let Some(dst) = fdtable::lookup(to) {
        dst.forget_direct_io();
    }
    if let Some(src) = fdtable::owned(from) {
        let f = src.flags.load(Ordering::Acquire) & (OWNED | USER_NONBLOCK | EPOLL_FD | STREAM | SOCKET);
        if let Some(dst) = fdtable::slot(to) {
            fdtable::reset(to);
            dst.rcvtimeo_ns.store(src.rcvtimeo_ns.load(Ordering::Relaxed), Ordering::Relaxed);
            dst.sndtimeo_ns.store(src.sndtimeo_ns.load(Ordering::Relaxed), Ordering::Relaxed);
            dst.flags.store(f, Ordering::Release);
        }
    }
}

/// # Safety
/// As `socket`.
pub unsafe fn socket(d: c_int, t: c_int, p: c_int) -> c_int {
    // SAFETY: socket takes no pointers; the real socket gets the program's domain, type and
    // protocol.
    let fd = unsafe { super::socket(d, t, p) };
    if fd >= 0 {
        let ty = t & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
        adopt_kind(fd, t & libc::SOCK_NONBLOCK != 0, ty == libc::SOCK_STREAM, true);
    }
    fd
}

/// # Safety
/// As `socketpair`.
pub unsafe fn socketpair(d: c_int, t: c_int, p: c_int, sv: *mut c_int) -> c_int {
    // SAFETY: `sv` points to two writable ints (socketpair's contract, this fn's # Safety),
    // where the real socketpair writes the pair.
    let r = unsafe { super::socketpair(d, t, p, sv) };
    if r == 0 {
        // SAFETY: on success the kernel wrote two fds.
        unsafe {
            let stream = t & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) == libc::SOCK_STREAM;
            adopt_kind(*sv, t & libc::SOCK_NONBLOCK != 0, stream, true);
            adopt_kind(*sv.add(1), t & libc::SOCK_NONBLOCK != 0, stream, true);
        }
    }
    r
}

/// `pipe` (flags 0) and `pipe2`.
///
/// # Safety
/// As `pipe2`.
pub unsafe fn pipe2(fds: *mut c_int, flags: c_int) -> c_int {
    // SAFETY: `fds` points to two writable ints (pipe2's contract), where the real pipe2 writes
    // the pipe's ends.
    let r = unsafe { super::pipe2(fds, flags) };
    if r == 0 {
        // SAFETY: on success the kernel wrote two fds.
        unsafe {
            // O_DIRECT makes a pipe packet-oriented: then a short read proves nothing.
            let stream = flags & libc::O_DIRECT == 0;
            adopt_kind(*fds, flags & libc::O_NONBLOCK != 0, stream, false);
            adopt_kind(*fds.add(1), flags & libc::O_NONBLOCK != 0, stream, false);
        }
    }
    r
}

/// # Safety
/// As `eventfd`.
pub unsafe fn eventfd(init: libc::c_uint, flags: c_int) -> c_int {
    // SAFETY: eventfd takes no pointers; the real eventfd gets the program's value and flags.
    let fd = unsafe { super::eventfd(init, flags) };
    if fd >= 0 {
        adopt_kind(fd, flags & libc::EFD_NONBLOCK != 0, false, false);
    }
    fd
}

/// `epoll_create1` (and `epoll_create`): the program's epoll fd, kept blocking.
///
/// # Safety
/// As `epoll_create1`.
pub unsafe fn epoll_create1(flags: c_int) -> c_int {
    // SAFETY: epoll_create1 takes no pointers; the real call gets the program's flags.
    let fd = unsafe { super::epoll_create1(flags) };
    if fd >= 0 {
        if let Some(st) = fdtable::slot(fd) {
            fdtable::reset(fd);
            st.flags.store(OWNED | EPOLL_FD, Ordering::Release);
        }
    }
    fd
}

/// # Safety
/// As `close`.
pub unsafe fn close(fd: c_int) -> c_int {
    release(fd);
    // SAFETY: close takes no pointers; the real close gets the program's descriptor, as its
    // contract has it.
    unsafe { super::close(fd) }
}

/// # Safety
/// As `dup`.
pub unsafe fn dup(fd: c_int) -> c_int {
    // SAFETY: dup takes no pointers; the real dup gets the program's descriptor.
    let r = unsafe { super::dup(fd) };
    copy_state(fd, r);
    r
}

/// `dup2` (flags None) and `dup3`.
///
/// # Safety
/// As `dup3`.
pub unsafe fn dup3(a: c_int, b: c_int, flags: Option<c_int>) -> c_int {
    if a != b {
        release(b);
    }
    // SAFETY: dup2/dup3 take no pointers; the real calls get the program's descriptors and
    // flags.
    let r = unsafe {
        match flags {
            None => super::dup2(a, b),
            Some(f) => super::dup3(a, b, f),
        }
    };
    if r >= 0 {
        copy_state(a, r);
    }
    r
}

/// `fcntl`: passes through, noting the program's `O_NONBLOCK` and duplicates.
///
/// # Safety
/// As `fcntl` (the variadic argument passed as a long).
pub unsafe fn fcntl(fd: c_int, cmd: c_int, arg: libc::c_long) -> c_int {
    // SAFETY: `arg` is what `cmd` requires (an int, or a pointer to the struct the command uses:
    // fcntl's contract), passed on unchanged to the real fcntl.
    let r = unsafe { super::fcntl(fd, cmd, arg) };
    match cmd {
        libc::F_SETFL if r == 0 => {
            if let Some(st) = fdtable::owned(fd) {
                st.set_user_nonblock(arg & libc::O_NONBLOCK as libc::c_long != 0);
            }
            fdtable::file_status_flags_set(fd, arg as c_int);
        }
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => copy_state(fd, r),
        _ => {}
    }
    r
}

/// `ioctl`: passes through, noting `FIONBIO`.
///
/// # Safety
/// As `ioctl` (the variadic argument passed as a long).
pub unsafe fn ioctl(fd: c_int, req: libc::c_ulong, arg: libc::c_long) -> c_int {
    // SAFETY: `arg` is what `req` requires (ioctl's contract), passed on unchanged to the real
    // ioctl.
    let r = unsafe { super::ioctl(fd, req, arg) };
    if r == 0 && req == libc::FIONBIO {
        if let Some(st) = fdtable::owned(fd) {
            // SAFETY: FIONBIO took a valid int pointer (the kernel accepted it).
            st.set_user_nonblock(unsafe { *(arg as *const c_int) } != 0);
        }
    }
    r
}

/// `setsockopt`: remembers SO_RCVTIMEO / SO_SNDTIMEO for our own waits.
///
/// # Safety
/// As `setsockopt`.
pub unsafe fn setsockopt(fd: c_int, level: c_int, name: c_int, v: *const c_void, l: socklen_t) -> c_int {
    // SAFETY: `v` points to `l` readable bytes of option value (setsockopt's contract), which
    // the real setsockopt reads.
    let r = unsafe { super::setsockopt(fd, level, name, v, l) };
    if r == 0
        && level == libc::SOL_SOCKET
        && (name == libc::SO_RCVTIMEO || name == libc::SO_SNDTIMEO)
        && l as usize >= core::mem::size_of::<libc::timeval>()
    {
        if let Some(st) = fdtable::owned(fd) {
            // SAFETY: the kernel accepted it as a timeval.
            let tv = unsafe { &*(v as *const libc::timeval) };
            let ns = (tv.tv_sec.max(0) as u64).saturating_mul(1_000_000_000).saturating_add(tv.tv_usec.max(0) as u64 * 1000);
            if name == libc::SO_RCVTIMEO { &st.rcvtimeo_ns } else { &st.sndtimeo_ns }.store(ns, Ordering::Relaxed);
        }
    }
    r
}

/// `fsync`/`fdatasync` for a fiber run on its donor (they can take milliseconds).
///
/// # Safety
/// As `fsync`.
pub unsafe fn fsync(fd: c_int, data_only: bool) -> c_int {
    // SAFETY: fsync/fdatasync take only the program's descriptor; no pointer to keep valid on
    // the donor.
    let call = || unsafe {
        if data_only {
            fdatasync(fd)
        } else {
            super::fsync(fd)
        }
    };
    if crate::base::config::config().sync_inline {
        return call();
    }
    fiber::run_on_donor(call)
}
