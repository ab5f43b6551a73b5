//! Descriptor lifecycle: creating sockets, pipes, eventfds and epoll fds (tracked as
//! owned, `O_NONBLOCK` underneath), `dup`/`dup3`, `close`, `close_range`/`closefrom`/
//! `fclose` and their `syscall(2)` forms (every closed number forgotten, the runtime's
//! own descriptors left open), `fcntl`/`ioctl` (the program's
//! own view of `O_NONBLOCK`), `setsockopt` (socket timeouts), and `fsync` run on the
//! donor. `super::socket` and the like are the real functions.

use super::*;
use crate::base::own_fds;

/// Starts tracking a freshly created fd; `kind` is what it is (`STREAM`, `SOCKET`,
/// `LOCAL_SOCKET`).
pub(super) fn adopt_kind(fd: c_int, user_nonblock: bool, kind: u32) {
    if let Some(st) = fdtable::slot(fd) {
        fdtable::reset(fd);
        let f = OWNED | if user_nonblock { USER_NONBLOCK } else { 0 } | kind & (STREAM | SOCKET | LOCAL_SOCKET);
        st.flags.store(f, Ordering::Release);
    }
}

/// The kind (`adopt_kind`) of a socket of domain `domain` and type `ty` (the type
/// argument of `socket`, flags allowed).
pub(super) fn socket_kind(domain: c_int, ty: c_int) -> u32 {
    let ty = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    SOCKET | if ty == libc::SOCK_STREAM { STREAM } else { 0 } | if domain == libc::AF_UNIX { LOCAL_SOCKET } else { 0 }
}

/// The kind (`adopt_kind`) of socket `fd`, asked of the kernel (an accepted socket).
pub(super) fn socket_kind_of(fd: c_int) -> u32 {
    let option = |name| {
        let mut v: c_int = -1;
        if sys::getsockopt_int(fd, libc::SOL_SOCKET, name, &mut v) == 0 {
            v
        } else {
            -1
        }
    };
    socket_kind(option(libc::SO_DOMAIN), option(libc::SO_TYPE))
}

/// Forgets `fd` before it is closed or replaced (or once it was, out of our sight).
pub(super) fn release(fd: c_int) {
    if let Some(st) = fdtable::lookup(fd) {
        if let Some(old) = fdtable::reset(fd) {
            if old & OWNED != 0 {
                st.io.forget(fd, old & REGISTERED != 0);
            }
        }
    }
}

/// Forgets every number from `first` to `last` (they are being closed together).
fn release_range(first: libc::c_uint, last: libc::c_uint) {
    fdtable::for_each_in(first, last, |fd, st| {
        if st.flags.load(Ordering::Acquire) != 0 {
            release(fd);
        } else {
            st.forget_direct_io();
        }
    });
}

/// A duplicate shares the open file description, hence our O_NONBLOCK underneath.
/// Whatever the table still held under the new number is stale (the kernel handed it
/// out as free: it was closed where we could not see it), so it goes first.
fn copy_state(from: c_int, to: c_int) {
    if to < 0 || to == from {
        return;
    }
    release(to);
    if let Some(src) = fdtable::owned(from) {
        let f = src.flags.load(Ordering::Acquire) & (OWNED | USER_NONBLOCK | EPOLL_FD | STREAM | SOCKET | LOCAL_SOCKET);
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
        adopt_kind(fd, t & libc::SOCK_NONBLOCK != 0, socket_kind(d, t));
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
            let kind = socket_kind(d, t);
            adopt_kind(*sv, t & libc::SOCK_NONBLOCK != 0, kind);
            adopt_kind(*sv.add(1), t & libc::SOCK_NONBLOCK != 0, kind);
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
            let kind = if flags & libc::O_DIRECT == 0 { STREAM } else { 0 };
            adopt_kind(*fds, flags & libc::O_NONBLOCK != 0, kind);
            adopt_kind(*fds.add(1), flags & libc::O_NONBLOCK != 0, kind);
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
        adopt_kind(fd, flags & libc::EFD_NONBLOCK != 0, 0);
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
    // SAFETY: the real close gets the program's descriptor, as its contract has it.
    unsafe { close_with(fd, |fd| super::close(fd) as libc::c_long) as c_int }
}

/// [`close`] with the kernel call `close(fd)` (the real function, or `syscall`): a
/// number that is the runtime's is not open in the program's view (EBADF); the check
/// and the call are made inside the descriptor gate ([`own_fds::program_closing`]), so
/// that a descriptor the runtime is making cannot be closed before its mark.
///
/// # Safety
/// `close` is close.
unsafe fn close_with(fd: c_int, close: impl FnOnce(c_int) -> libc::c_long) -> libc::c_long {
    if own_fds::is_own(fd) {
        // Not open in the program's view.
        set_errno(libc::EBADF);
        return -1;
    }
    release(fd);
    let _inside = own_fds::program_closing(fd as u32);
    if own_fds::is_own(fd) {
        set_errno(libc::EBADF);
        return -1;
    }
    close(fd)
}

/// `close_range(first, last, flags)`: the numbers it closes are forgotten first, as
/// [`close`] does, so that a file opened later under one of them is not taken for the
/// socket it was (varnishd: `write` became `send`, ENOTSOCK; docs/RESULTS.md#fd-table-and-own-descriptors).
/// `CLOSE_RANGE_CLOEXEC` only marks the descriptors, which stay as they are.
/// `CLOSE_RANGE_UNSHARE` gives the calling thread a table of its own, which fibers
/// cannot have (a worker's table is every fiber's, and the workers run the threads
/// created later): from the program's only thread the range is closed in the one
/// table, which is what that thread would see; with other threads alive the call fails
/// with EINVAL, as on a kernel without the flag, and closes nothing.
///
/// # Safety
/// As `close_range`.
pub unsafe fn close_range(first: libc::c_uint, last: libc::c_uint, flags: c_int) -> c_int {
    // SAFETY: close_range takes no pointers; the real one gets the program's range (or pieces of
    // it) and flags.
    unsafe { close_range_with(first, last, flags, |a, b, f| super::close_range(a, b, f) as libc::c_long) as c_int }
}

/// [`close_range`] with the kernel call `close(first, last, flags)` (the real function,
/// or `syscall`). The runtime's own descriptors in the range stay open
/// ([`crate::base::own_fds`]): the range is closed in pieces around them.
///
/// # Safety
/// `close` is close_range.
pub unsafe fn close_range_with(
    first: libc::c_uint,
    last: libc::c_uint,
    flags: c_int,
    mut close: impl FnMut(libc::c_uint, libc::c_uint, c_int) -> libc::c_long,
) -> libc::c_long {
    let known = (libc::CLOSE_RANGE_UNSHARE | libc::CLOSE_RANGE_CLOEXEC) as c_int;
    let mut flags = flags;
    // Anything the kernel refuses (EINVAL) closes nothing.
    if flags & !known == 0 && first <= last {
        if flags & libc::CLOSE_RANGE_UNSHARE as c_int != 0 {
            if program_has_other_threads() {
                set_errno(libc::EINVAL);
                return -1;
            }
            // The program's only thread: the table every thread of ours shares is the one
            // it would keep, and a private one would part it from the workers that run the
            // threads it creates next.
            flags &= !(libc::CLOSE_RANGE_UNSHARE as c_int);
        }
        if flags & libc::CLOSE_RANGE_CLOEXEC as c_int == 0 {
            release_range(first, last);
        }
        // The runtime's descriptors are the marked ones for the length of the call.
        let _inside = own_fds::program_closing(first);
        let mut from = first;
        while let Some(own) = own_fds::first_in(from, last) {
            if own > from {
                let r = close(from, own - 1, flags);
                if r < 0 {
                    return r;
                }
            }
            if own == last {
                return 0;
            }
            from = own + 1;
        }
        return close(from, last, flags);
    }
    close(first, last, flags)
}

/// `closefrom(low)`: glibc's `close_range(max(low, 0), ~0U, 0)`, made as
/// [`close_range`] is.
///
/// # Safety
/// As `closefrom`.
pub unsafe fn closefrom(low: c_int) {
    // SAFETY: the close_range system call takes no pointers.
    let closed = unsafe {
        close_range_with(low.max(0) as libc::c_uint, libc::c_uint::MAX, 0, |a, b, f| {
            sys::close_range(a, b, f as u32) as libc::c_long
        })
    };
    if closed != 0 && !closefrom_by_walk(low.max(0)) {
        // No /proc: glibc's own way fails the same way (it ends the process) before it
        // closes anything.
        // SAFETY: closefrom takes no pointers.
        unsafe { super::closefrom(low) }
    }
}

/// `closefrom(low)` where `close_range` failed (a kernel before 5.9, a seccomp profile
/// that denies it): glibc's fallback walks `/proc/self/fd` and closes every number it
/// lists (its own internal `close`, which we do not see), the runtime's epoll sets,
/// eventfds and kept files among them. This walk is the same, but leaves those open: a
/// number is closed inside the descriptor gate, unless it is the runtime's (the
/// directory's own descriptor is). As glibc's: the listing is read again from the
/// start after a pass that closed something, and where no descriptor is left to open
/// the directory with, numbers from `low` up are closed until one was open. False if
/// `/proc/self/fd` cannot be read.
fn closefrom_by_walk(low: c_int) -> bool {
    crate::base::stats::bump(&crate::base::stats::STATS.closefrom_walks);
    const DIR: &[u8] = b"/proc/self/fd\0";
    let dir_flags = libc::O_RDONLY | libc::O_DIRECTORY;
    let dir = match crate::base::own_fds::open_nul_or_errno(DIR, dir_flags) {
        Ok(dir) => dir,
        Err(libc::EMFILE) => {
            for fd in low..c_int::MAX {
                let r = close_unless_own(fd);
                if r == 0 || (r < 0 && r != -(libc::EBADF as libc::c_long)) {
                    break;
                }
            }
            match crate::base::own_fds::open_nul(DIR, dir_flags) {
                Some(dir) => dir,
                None => return false,
            }
        }
        Err(_) => return false,
    };
    let mut buf = [0u8; 1024];
    let ok = loop {
        let n = sys::getdents64(dir, &mut buf);
        if n < 0 {
            break false;
        }
        if n == 0 {
            break true;
        }
        let mut closed = false;
        let mut at = 0usize;
        while at + 19 < n as usize {
            // struct linux_dirent64: d_ino u64, d_off i64, d_reclen u16, d_type u8, d_name.
            let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
            let name = &buf[at + 19..(at + reclen).min(n as usize)];
            at += reclen.max(1);
            let Some(fd) = parse_fd(name) else { continue };
            if fd < low || fd == dir {
                continue;
            }
            release(fd);
            // Errors are ignored, as glibc does: EBADF, EINTR and EIO all leave the
            // number closed.
            if close_unless_own(fd) != 1 {
                closed = true;
            }
        }
        if closed && sys::lseek_set(dir, 0) < 0 {
            break false;
        }
    };
    crate::base::own_fds::close(dir);
    ok
}

/// Closes the program's `fd` inside the descriptor gate: the kernel's result, or 1
/// where `fd` is the runtime's (left open).
fn close_unless_own(fd: c_int) -> libc::c_long {
    let _inside = own_fds::program_closing(fd as u32);
    if own_fds::is_own(fd) {
        return 1;
    }
    sys::close_unmarked(fd) as libc::c_long
}

/// The descriptor number a `/proc/self/fd` entry names (None for `.` and `..`).
fn parse_fd(name: &[u8]) -> Option<c_int> {
    let digits = name.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 9 {
        return None;
    }
    Some(name[..digits].iter().fold(0, |n, d| n * 10 + (d - b'0') as c_int))
}

/// `fclose`: glibc closes the stream's descriptor by itself, out of our sight, so it is
/// forgotten first (a socket or pipe the program `fdopen`ed).
///
/// # Safety
/// As `fclose`.
pub unsafe fn fclose(f: *mut libc::FILE) -> c_int {
    // SAFETY: `f` is an open stream (fclose's contract); fileno reads its descriptor (-1 for a
    // stream without one).
    let fd = unsafe { libc::fileno(f) };
    if fd >= 0 {
        release(fd);
    }
    // SAFETY: the program's open stream, as the real fclose requires.
    unsafe { super::fclose(f) }
}

/// `dup2` as a system call: x86_64 has one; aarch64 has only `dup3` (its glibc makes
/// `dup2` from `dup3` or `fcntl`), so no number matches there.
#[cfg(target_arch = "x86_64")]
const SYS_DUP2: libc::c_long = libc::SYS_dup2;
#[cfg(not(target_arch = "x86_64"))]
const SYS_DUP2: libc::c_long = -1;

/// `close`, `close_range`, `dup2` and `dup3` made through `syscall(2)` (`raw(a1, a2,
/// a3)`: the real `syscall` with the program's arguments, the first three as given):
/// the fd table follows them as it follows the functions. None for other system calls.
///
/// # Safety
/// As `syscall(nr, a1, a2, a3)`.
pub unsafe fn fd_syscall(
    nr: libc::c_long,
    a1: libc::c_long,
    a2: libc::c_long,
    a3: libc::c_long,
    mut raw: impl FnMut(libc::c_long, libc::c_long, libc::c_long) -> libc::c_long,
) -> Option<libc::c_long> {
    let (a, b) = (a1 as c_int, a2 as c_int);
    Some(match nr {
        // SAFETY: `raw` is the close system call of the arguments it is given.
        libc::SYS_close => unsafe { close_with(a, |_| raw(a1, a2, a3)) },
        // SAFETY: `raw` is the close_range system call of the arguments it is given.
        libc::SYS_close_range => unsafe {
            close_range_with(a1 as libc::c_uint, a2 as libc::c_uint, a3 as c_int, |a, b, f| {
                raw(a as libc::c_long, b as libc::c_long, f as libc::c_long)
            })
        },
        SYS_DUP2 | libc::SYS_dup3 => replace_with(a, b, || raw(a1, a2, a3)),
        _ => return None,
    })
}

/// Whether the program has a thread besides the caller: a fiber does (the main thread,
/// at least); a plain thread does while any fiber lives. (The program's threads that
/// run natively, not as fibers, are not counted.)
fn program_has_other_threads() -> bool {
    fiber::is_fiber() || crate::runtime::fibers::registry::live_fibers() > 0
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
    // SAFETY: dup2/dup3 take no pointers; the real calls get the program's descriptors and
    // flags.
    let call = || unsafe {
        match flags {
            None => super::dup2(a, b),
            Some(f) => super::dup3(a, b, f),
        }
    } as libc::c_long;
    replace_with(a, b, call) as c_int
}

/// `dup2(a, b)`/`dup3(a, b, …)` made by `call`: `a` must be the program's (the
/// runtime's is not open in its view: EBADF); a descriptor of the runtime's under `b`
/// is moved out of the way first (`own_fds::program_replaces`: natively `b` is free, and
/// the call succeeds), and what the fd table held under `b` is forgotten.
fn replace_with(a: c_int, b: c_int, call: impl FnOnce() -> libc::c_long) -> libc::c_long {
    if own_fds::is_own(a) {
        set_errno(libc::EBADF);
        return -1;
    }
    if a != b {
        release(b);
    }
    if own_fds::is_own(b) && (crate::runtime::fibers::fiber::in_vfork_child() || crate::base::config::in_unannounced_child()) {
        // A child that shares our memory but not our descriptor table: the runtime's
        // descriptor under `b` is the parent's and stays where it is, and the holders
        // (the parent's memory) must not be pointed at a number of the child's table.
        let r = call();
        if r >= 0 {
            copy_state(a, r as c_int);
        }
        return r;
    }
    match own_fds::program_replaces(b, call) {
        Ok(r) => {
            if r >= 0 {
                copy_state(a, r as c_int);
            }
            r
        }
        Err(e) => {
            set_errno(e);
            -1
        }
    }
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
    crate::signal::on_donor::run_on_donor_taking_signals(call)
}
