//! Data transfer: `read`/`write` and their vector and socket forms, `accept4`,
//! `connect`, each made blocking for the program over a non-blocking descriptor (see
//! the module essay in `mod.rs`). `super::read` and the like are the real functions.

use super::lifecycle::{adopt_kind, socket_kind_of};
use super::*;

/// Whether `fd` is readable (or writable) right now, without waiting.
fn ready_now(fd: c_int, dir: Dir) -> bool {
    loop {
        let mut p = pollfd { fd, events: dir.poll_events(), revents: 0 };
        // SAFETY: one valid pollfd, zero timeout.
        let r = unsafe { poll(&mut p, 1, 0) };
        // A signal handler (or the runtime's kick) that interrupted the look is no
        // readiness: counted as one, a connect still in progress was reported as made
        // (SO_ERROR is 0 while it is) and a read of an empty pipe blocked its worker.
        // The handler's interruption is the caller's wait's to find.
        if r < 0 && errno() == libc::EINTR {
            continue;
        }
        // An error or hang-up counts as ready: the real call will report it.
        return r != 0;
    }
}

/// A non-blocking attempt for a descriptor whose file status stays blocking (a pipe,
/// an eventfd, a socket to accept on): when `fd` is not ready, returns -1/EAGAIN instead of blocking,
/// but only after [`kernel_refusal`] asked the kernel through `nowait` whether the call
/// fails at once for this descriptor (then that answer comes back, as natively).
fn probe_then(fd: c_int, dir: Dir, call: impl FnOnce() -> isize, nowait: impl FnOnce() -> isize) -> isize {
    if !ready_now(fd, dir) {
        return kernel_refusal(fd, dir, nowait);
    }
    call()
}

/// `fd` is not ready in `dir`: a readiness that never comes (the write end of a pipe
/// is never readable, its read end never writable, an eventfd never lets a 4-byte read
/// through) must not be waited for. `nowait` makes the program's call without blocking
/// (`RWF_NOWAIT`), so the kernel answers as it would natively: an error (EBADF,
/// EINVAL...), the data if it came meanwhile, or EAGAIN, the one answer the caller
/// waits on. A file without `RWF_NOWAIT` support (EOPNOTSUPP) gets a transfer of no
/// bytes instead, which checks the descriptor and its direction (EBADF, EINVAL) but
/// not the call's own arguments.
#[cold]
fn kernel_refusal(fd: c_int, dir: Dir, nowait: impl FnOnce() -> isize) -> isize {
    let r = nowait();
    // EOPNOTSUPP: no RWF_NOWAIT for this file; ENOSYS: no preadv2 (Linux before 4.6).
    if r >= 0 || !matches!(errno(), libc::EOPNOTSUPP | libc::ENOSYS) {
        return r;
    }
    // SAFETY: a vector of no buffers: the kernel checks the descriptor and returns 0.
    let r = unsafe {
        match dir {
            Dir::Read => sys::readv(fd, core::ptr::null(), 0),
            Dir::Write => sys::writev(fd, core::ptr::null(), 0),
        }
    };
    if raw_result(r) >= 0 {
        set_errno(libc::EAGAIN);
    }
    -1
}

/// `preadv2`/`pwritev2(fd, iov, cnt, -1, RWF_NOWAIT)`: the program's `readv`/`writev`
/// at the file position, failing with EAGAIN where it would block. A write of more than
/// `PIPE_BUF` bytes could be cut short, where the blocking write would not be: it asks
/// no more than a transfer of no bytes does (EOPNOTSUPP sends [`kernel_refusal`] there).
fn nowait_rw(fd: c_int, dir: Dir, iov: *const libc::iovec, cnt: c_int) -> isize {
    // SAFETY: the program's iovec array (write's or writev's contract).
    if dir == Dir::Write && unsafe { vector_bytes(iov, cnt) }.is_some_and(|t| t > libc::PIPE_BUF) {
        set_errno(libc::EOPNOTSUPP);
        return -1;
    }
    // SAFETY: `iov` and `cnt` are the program's (its call's contract), the offset -1 means the
    // file position and RWF_NOWAIT that the call never blocks.
    raw_result(unsafe {
        match dir {
            Dir::Read => sys::preadv2(fd, iov, cnt, -1, libc::RWF_NOWAIT),
            Dir::Write => sys::pwritev2(fd, iov, cnt, -1, libc::RWF_NOWAIT),
        }
    })
}

/// The kernel's limit on a vector's entries (`UIO_MAXIOV`, glibc's `IOV_MAX`).
const UIO_MAXIOV: c_int = 1024;

/// The bytes `cnt` iovecs at `iov` describe, or None where readv/writev fail at once
/// with EINVAL (no vector, or more than `IOV_MAX` entries).
///
/// # Safety
/// `iov` points to `cnt` iovecs when `cnt` is positive and it is not null.
unsafe fn vector_bytes(iov: *const libc::iovec, cnt: c_int) -> Option<usize> {
    if !(1..=UIO_MAXIOV).contains(&cnt) || iov.is_null() {
        return None;
    }
    // SAFETY: `cnt` iovecs at `iov` (this fn's # Safety).
    Some(unsafe { core::slice::from_raw_parts(iov, cnt as usize) }.iter().fold(0usize, |t, v| t.saturating_add(v.iov_len)))
}

/// A raw system call's result as libc returns it: -1 with errno set on an error.
fn raw_result(r: isize) -> isize {
    if r < 0 {
        set_errno(-r as c_int);
        return -1;
    }
    r
}

/// `recv` of a fiber's non-blocking attempt, as a raw system call (no cancellation
/// wrapper: the call never blocks), with libc's result convention.
///
/// # Safety
/// `recv`'s contract: `buf` has `n` writable bytes.
unsafe fn recv_nowait(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> isize {
    // SAFETY: the caller's contract; no address is asked for.
    raw_result(unsafe { sys::recvfrom(fd, buf, n, flags, core::ptr::null_mut(), core::ptr::null_mut()) })
}

/// `send` of a fiber's non-blocking attempt, as [`recv_nowait`].
///
/// # Safety
/// `send`'s contract: `buf` has `n` readable bytes.
unsafe fn send_nowait(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> isize {
    // SAFETY: the caller's contract; no address is given.
    raw_result(unsafe { sys::sendto(fd, buf, n, flags, core::ptr::null(), 0) })
}

/// A socket call on a number taken for a socket failed with ENOTSOCK: the socket was
/// closed out of our sight (an inline system call, a close inside glibc) and the number
/// now names something else (a file that `open`, which we do not see, gave it). The
/// number is forgotten, so that the program's `read`/`write` runs as it is. Keeps
/// errno when the answer is no.
#[cold]
fn no_longer_a_socket(fd: c_int) -> bool {
    if errno() != libc::ENOTSOCK {
        return false;
    }
    super::lifecycle::release(fd);
    true
}

/// Accept on a listening socket with nothing pending would block; on anything else
/// it fails at once (EINVAL, EOPNOTSUPP, ENOTSOCK), so `call` runs.
#[cold]
fn accept_refusal(fd: c_int, call: impl FnOnce() -> isize) -> isize {
    let mut listening: c_int = 0;
    let mut len = core::mem::size_of::<c_int>() as socklen_t;
    // SAFETY: valid out-parameters.
    let r =
        unsafe { getsockopt(fd, libc::SOL_SOCKET, libc::SO_ACCEPTCONN, &mut listening as *mut c_int as *mut c_void, &mut len) };
    if r == 0 && listening != 0 {
        set_errno(libc::EAGAIN);
        return -1;
    }
    call()
}

/// The rest of `iov` after its first `done` bytes.
fn iov_tail(iov: &[libc::iovec], mut done: usize) -> Vec<libc::iovec> {
    let mut out = Vec::with_capacity(iov.len());
    for v in iov {
        if done >= v.iov_len {
            done -= v.iov_len;
            continue;
        }
        // SAFETY: stays inside the program's buffer (done < iov_len).
        out.push(libc::iovec {
            iov_base: unsafe { (v.iov_base as *mut u8).add(done) } as *mut c_void,
            iov_len: v.iov_len - done,
        });
        done = 0;
    }
    out
}

/// A blocking send on a stream socket queues everything before it returns (unless an
/// error or a signal stops it): keep sending the rest, waiting for room between.
fn send_all(fd: c_int, st: &FdState, total: usize, mut send_from: impl FnMut(usize) -> isize) -> isize {
    let t = Dir::Write.timeout_ns(st);
    let deadline = if t > 0 { Some(sys::now_ns().saturating_add(t)) } else { None };
    let mut done = 0usize;
    begin_blocking_call();
    loop {
        let seq = st.write_seq.load(Ordering::Acquire);
        let r = send_from(done);
        if r >= 0 {
            done += r as usize;
            if done >= total || !st.has(STREAM) {
                return done as isize;
            }
            continue;
        }
        if !would_block() {
            return if done > 0 { done as isize } else { -1 };
        }
        match st.io.wait(fd, Dir::Write, seq, deadline, t == 0) {
            Waited::Ready => {}
            Waited::TimedOut if done > 0 => return done as isize,
            Waited::TimedOut => {
                set_errno(libc::EAGAIN);
                return -1;
            }
            Waited::Interrupted if done > 0 => return done as isize,
            Waited::Interrupted => {
                set_errno(libc::EINTR);
                return -1;
            }
        }
    }
}

const DW: c_int = libc::MSG_DONTWAIT;

/// # Safety
/// As `read`.
pub unsafe fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    // A read of no bytes never blocks (and must not take a datagram, as recv would).
    let Some(st) = needs_loop(fd).filter(|_| n > 0) else {
        // SAFETY: `buf` has `n` writable bytes (read's contract, this fn's # Safety), all the real
        // read needs.
        return super::noting_slow_file_io(|| unsafe { super::read(fd, buf, n) });
    };
    if st.has(SOCKET) {
        // SAFETY: read on a socket is recv with no flags.
        let r = blocking_sized(fd, st, Dir::Read, n, || unsafe { recv_nowait(fd, buf, n, DW) }) as ssize_t;
        if r < 0 && no_longer_a_socket(fd) {
            // SAFETY: this call again, now on an untracked descriptor.
            return unsafe { read(fd, buf, n) };
        }
        r
    } else {
        let iov = libc::iovec { iov_base: buf, iov_len: n };
        // SAFETY: `buf` has `n` writable bytes (read's contract), which the real read needs;
        // `probe_then` calls it once readable (`iov` is the same buffer, for `nowait_rw`).
        blocking(fd, st, Dir::Read, || {
            probe_then(fd, Dir::Read, || unsafe { super::read(fd, buf, n) as isize }, || nowait_rw(fd, Dir::Read, &iov, 1))
        }) as ssize_t
    }
}

/// # Safety
/// As `readv`.
pub unsafe fn readv(fd: c_int, iov: *const libc::iovec, cnt: c_int) -> ssize_t {
    // A vector the kernel refuses (EINVAL) or of no bytes: the real readv, which never waits.
    // SAFETY: the program's iovec array (readv's contract).
    let Some(st) = needs_loop(fd).filter(|_| unsafe { vector_bytes(iov, cnt) }.is_some_and(|t| t > 0)) else {
        // SAFETY: `iov` points to `cnt` iovecs of writable buffers (readv's contract), all the real
        // readv needs.
        return unsafe { super::readv(fd, iov, cnt) };
    };
    if st.has(SOCKET) {
        // SAFETY: readv on a socket is recvmsg with these buffers and no flags.
        let mut m: libc::msghdr = unsafe { core::mem::zeroed() };
        m.msg_iov = iov as *mut libc::iovec;
        m.msg_iovlen = cnt as _;
        // SAFETY: `m` describes the program's buffers.
        let r = blocking(fd, st, Dir::Read, || unsafe { raw_result(sys::recvmsg(fd, &mut m, DW)) }) as ssize_t;
        if r < 0 && no_longer_a_socket(fd) {
            // SAFETY: this call again, now on an untracked descriptor.
            return unsafe { readv(fd, iov, cnt) };
        }
        r
    } else {
        // SAFETY: `iov` points to `cnt` iovecs of writable buffers (readv's contract), as the real
        // readv requires; run once readable.
        blocking(fd, st, Dir::Read, || {
            probe_then(fd, Dir::Read, || unsafe { super::readv(fd, iov, cnt) as isize }, || nowait_rw(fd, Dir::Read, iov, cnt))
        }) as ssize_t
    }
}

/// # Safety
/// As `recv`.
pub unsafe fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
    match needs_loop(fd) {
        Some(st) if flags & DW == 0 && st.has(SOCKET) => {
            // Only plain reads prove emptiness (MSG_PEEK/WAITALL/OOB do not).
            let sized = if flags == 0 { n } else { 0 };
            // SAFETY: `buf` has `n` writable bytes (recv's contract), as the real recv requires;
            // MSG_DONTWAIT only makes this call non-blocking.
            blocking_sized(fd, st, Dir::Read, sized, || unsafe { recv_nowait(fd, buf, n, flags | DW) }) as ssize_t
        }
        // SAFETY: `buf` has `n` writable bytes (recv's contract), as the real recv requires (one
        // attempt: non-blocking or not ours).
        _ => nonblocking_read(
            fd,
            if flags & !DW == 0 { n } else { 0 },
            || unsafe { super::recv(fd, buf, n, flags) as isize },
            // SAFETY: as above; the same call without glibc's cancellation wrapper.
            || unsafe { recv_nowait(fd, buf, n, flags) },
        ) as ssize_t,
    }
}

/// # Safety
/// As `recvfrom`.
pub unsafe fn recvfrom(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int, a: *mut sockaddr, l: *mut socklen_t) -> ssize_t {
    match needs_loop(fd) {
        Some(st) if flags & DW == 0 && st.has(SOCKET) => {
            let sized = if flags == 0 { n } else { 0 };
            // SAFETY: `buf` has `n` writable bytes, `a`/`l` are null or a sockaddr buffer and its length
            // (recvfrom's contract), as the real recvfrom requires.
            blocking_sized(fd, st, Dir::Read, sized, || unsafe { raw_result(sys::recvfrom(fd, buf, n, flags | DW, a, l)) })
                as ssize_t
        }
        // SAFETY: `buf`, `a` and `l` are as recvfrom's contract has them (see above), for the real
        // recvfrom's one attempt.
        _ => nonblocking_read(
            fd,
            if flags & !DW == 0 { n } else { 0 },
            || unsafe { super::recvfrom(fd, buf, n, flags, a, l) as isize },
            // SAFETY: as above; the same call without glibc's cancellation wrapper.
            || unsafe { raw_result(sys::recvfrom(fd, buf, n, flags, a, l)) },
        ) as ssize_t,
    }
}

/// # Safety
/// As `recvmsg`.
pub unsafe fn recvmsg(fd: c_int, m: *mut libc::msghdr, flags: c_int) -> ssize_t {
    match needs_loop(fd) {
        Some(st) if flags & DW == 0 && st.has(SOCKET) => {
            // SAFETY: `m` points to a msghdr whose buffers are writable (recvmsg's contract), as the
            // real recvmsg requires; MSG_DONTWAIT for this call only.
            blocking(fd, st, Dir::Read, || unsafe { raw_result(sys::recvmsg(fd, m, flags | DW)) }) as ssize_t
        }
        // SAFETY: `m` points to a msghdr with writable buffers (recvmsg's contract), what the real
        // recvmsg needs.
        _ => unsafe { super::recvmsg(fd, m, flags) },
    }
}

/// # Safety
/// As `write`.
pub unsafe fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    let Some(st) = needs_loop(fd) else {
        // SAFETY: `buf` has `n` readable bytes (write's contract, this fn's # Safety), all the real
        // write needs.
        return super::noting_slow_file_io(|| unsafe { super::write(fd, buf, n) });
    };
    if st.has(SOCKET) {
        // write on a socket is send with no flags (SIGPIPE on EPIPE included).
        // SAFETY: the remainder of the program's buffer.
        let r =
            send_all(fd, st, n, |done| unsafe { send_nowait(fd, (buf as *const u8).add(done) as *const c_void, n - done, DW) })
                as ssize_t;
        if r < 0 && no_longer_a_socket(fd) {
            // SAFETY: this call again, now on an untracked descriptor.
            return unsafe { write(fd, buf, n) };
        }
        r
    } else {
        let iov = libc::iovec { iov_base: buf as *mut c_void, iov_len: n };
        // SAFETY: `buf` has `n` readable bytes (write's contract), as the real write requires; run
        // once writable (`iov` is the same buffer, for `nowait_rw`).
        blocking(fd, st, Dir::Write, || {
            probe_then(fd, Dir::Write, || unsafe { super::write(fd, buf, n) as isize }, || nowait_rw(fd, Dir::Write, &iov, 1))
        }) as ssize_t
    }
}

/// # Safety
/// As `writev`.
pub unsafe fn writev(fd: c_int, iov: *const libc::iovec, cnt: c_int) -> ssize_t {
    let Some(st) = needs_loop(fd) else {
        // SAFETY: `iov` points to `cnt` iovecs of readable buffers (writev's contract), all the real
        // writev needs.
        return unsafe { super::writev(fd, iov, cnt) };
    };
    // SAFETY: the program's iovec array (writev's contract).
    if let (true, Some(total)) = (st.has(SOCKET), unsafe { vector_bytes(iov, cnt) }) {
        // SAFETY: the program's iovec array of `cnt` entries (vector_bytes checked the count).
        let all = unsafe { core::slice::from_raw_parts(iov, cnt as usize) };
        let r = send_all(fd, st, total, |done| {
            let mut tail = iov_tail(all, done);
            // SAFETY: a zeroed msghdr is valid; it points at the remaining buffers.
            let mut m: libc::msghdr = unsafe { core::mem::zeroed() };
            m.msg_iov = tail.as_mut_ptr();
            m.msg_iovlen = tail.len() as _;
            // SAFETY: `m` describes live buffers.
            unsafe { raw_result(sys::sendmsg(fd, &m, DW)) }
        }) as ssize_t;
        if r < 0 && no_longer_a_socket(fd) {
            // SAFETY: this call again, now on an untracked descriptor.
            return unsafe { writev(fd, iov, cnt) };
        }
        r
    } else {
        // SAFETY: `iov` points to `cnt` iovecs of readable buffers (writev's contract), as the real
        // writev requires; run once writable.
        blocking(fd, st, Dir::Write, || {
            probe_then(fd, Dir::Write, || unsafe { super::writev(fd, iov, cnt) as isize }, || nowait_rw(fd, Dir::Write, iov, cnt))
        }) as ssize_t
    }
}

/// # Safety
/// As `send`.
pub unsafe fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t {
    match needs_loop(fd) {
        Some(st) if flags & DW == 0 && st.has(SOCKET) => {
            // SAFETY: the remainder of the program's buffer.
            send_all(fd, st, n, |done| unsafe {
                send_nowait(fd, (buf as *const u8).add(done) as *const c_void, n - done, flags | DW)
            }) as ssize_t
        }
        // Non-blocking (MSG_DONTWAIT, or a socket the program made non-blocking): as is,
        // a fiber's without glibc's cancellation wrapper (`super::nonblocking_read`).
        // SAFETY: `buf` has `n` readable bytes (send's contract), what the send needs.
        _ if fiber_on_tracked_stream(fd).is_some() => unsafe { send_nowait(fd, buf, n, flags) as ssize_t },
        // SAFETY: as above.
        _ => unsafe { super::send(fd, buf, n, flags) },
    }
}

/// # Safety
/// As `sendto`.
pub unsafe fn sendto(fd: c_int, buf: *const c_void, n: size_t, flags: c_int, a: *const sockaddr, l: socklen_t) -> ssize_t {
    match needs_loop(fd) {
        Some(st) if flags & DW == 0 && st.has(SOCKET) => {
            // SAFETY: the remainder of the program's buffer.
            send_all(fd, st, n, |done| unsafe {
                raw_result(sys::sendto(fd, (buf as *const u8).add(done) as *const c_void, n - done, flags | DW, a, l))
            }) as ssize_t
        }
        // SAFETY: `buf` has `n` readable bytes and `a` is null or a sockaddr of `l` bytes (sendto's
        // contract), what the sendto needs; a fiber's as `send`'s.
        _ if fiber_on_tracked_stream(fd).is_some() => unsafe { raw_result(sys::sendto(fd, buf, n, flags, a, l)) as ssize_t },
        // SAFETY: as above.
        _ => unsafe { super::sendto(fd, buf, n, flags, a, l) },
    }
}

/// # Safety
/// As `sendmsg`.
pub unsafe fn sendmsg(fd: c_int, m: *const libc::msghdr, flags: c_int) -> ssize_t {
    match needs_loop(fd) {
        Some(st) if flags & DW == 0 && st.has(SOCKET) && !m.is_null() => {
            // SAFETY: the program's msghdr.
            let hdr = unsafe { *m };
            let all: &[libc::iovec] = if hdr.msg_iov.is_null() {
                &[]
            } else {
                // SAFETY: the program's iovec array.
                unsafe { core::slice::from_raw_parts(hdr.msg_iov, hdr.msg_iovlen) }
            };
            let total: usize = all.iter().map(|v| v.iov_len).sum();
            send_all(fd, st, total, |done| {
                let mut tail = iov_tail(all, done);
                let mut h = hdr;
                h.msg_iov = tail.as_mut_ptr();
                h.msg_iovlen = tail.len() as _;
                if done > 0 {
                    // Ancillary data went with the first part.
                    h.msg_control = core::ptr::null_mut();
                    h.msg_controllen = 0;
                }
                // SAFETY: `h` describes live buffers.
                unsafe { raw_result(sys::sendmsg(fd, &h, flags | DW)) }
            }) as ssize_t
        }
        // SAFETY: `m` points to a msghdr with readable buffers (sendmsg's contract), what the real
        // sendmsg needs.
        _ => unsafe { super::sendmsg(fd, m, flags) },
    }
}

/// `accept` / `accept4`: waits for a pending connection by readiness, then accepts.
///
/// # Safety
/// As `accept4`.
pub unsafe fn accept4(fd: c_int, a: *mut sockaddr, l: *mut socklen_t, flags: c_int) -> c_int {
    // SAFETY (both calls): `a`/`l` are null or a sockaddr buffer and its length (accept4's
    // contract), which the real accept4 fills.
    let call = || unsafe { super::accept4(fd, a, l, flags) as isize };
    let r = match needs_loop(fd) {
        Some(st) => blocking(fd, st, Dir::Read, || probe_then(fd, Dir::Read, call, || accept_refusal(fd, call))),
        None => call(),
    } as c_int;
    if r >= 0 {
        adopt_kind(r, flags & libc::SOCK_NONBLOCK != 0, socket_kind_of(r));
    }
    r
}

/// `connect` on a blocking socket: made non-blocking for the duration of this
/// call only, then completion is awaited by readiness.
///
/// # Safety
/// As `connect`.
pub unsafe fn connect(fd: c_int, a: *const sockaddr, l: socklen_t) -> c_int {
    let Some(st) = needs_loop(fd).filter(|s| s.has(SOCKET)) else {
        // SAFETY: `a` points to a sockaddr of `l` bytes (connect's contract, this fn's # Safety), as
        // the real connect requires.
        return unsafe { super::connect(fd, a, l) };
    };
    // SAFETY: plain fcntl calls on the program's socket.
    let fl = unsafe { fcntl(fd, libc::F_GETFL, 0) };
    if fl < 0 || fiber::current().is_none() {
        // SAFETY: `a` points to a sockaddr of `l` bytes (connect's contract), as the real connect
        // requires.
        return unsafe { super::connect(fd, a, l) };
    }
    begin_blocking_call();
    // SAFETY: as above.
    unsafe { fcntl(fd, libc::F_SETFL, (fl | libc::O_NONBLOCK) as libc::c_long) };
    let mut seq = st.write_seq.load(Ordering::Acquire);
    // SAFETY: `a` points to a sockaddr of `l` bytes (connect's contract); the real connect reads
    // it once, the socket made non-blocking.
    let r = unsafe { super::connect(fd, a, l) };
    let e = errno();
    // SAFETY: restores the program's flags.
    unsafe { fcntl(fd, libc::F_SETFL, fl as libc::c_long) };
    if r == 0 || e != libc::EINPROGRESS {
        set_errno(e);
        return r;
    }
    let t = st.sndtimeo_ns.load(Ordering::Relaxed);
    let deadline = if t > 0 { Some(sys::now_ns().saturating_add(t)) } else { None };
    loop {
        if ready_now(fd, Dir::Write) {
            break;
        }
        match st.io.wait(fd, Dir::Write, seq, deadline, t == 0) {
            Waited::Ready => seq = st.write_seq.load(Ordering::Acquire),
            Waited::TimedOut => {
                set_errno(libc::EINPROGRESS);
                return -1;
            }
            Waited::Interrupted => {
                set_errno(libc::EINTR);
                return -1;
            }
        }
    }
    let mut err: c_int = 0;
    let mut len = core::mem::size_of::<c_int>() as socklen_t;
    // SAFETY: valid out-parameters.
    unsafe { getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut err as *mut c_int as *mut c_void, &mut len) };
    if err != 0 {
        set_errno(err);
        return -1;
    }
    0
}

/// `pread64` (`pread` is the same function): a fiber's read of a descriptor opened with
/// `O_DIRECT` runs on its donor, since it never hits the page cache and waits for the
/// device (InnoDB's page reads blocked a worker: docs/RESULTS.md#file-io-inline);
/// other reads run inline like `read` of a regular file.
///
/// # Safety
/// As `pread64`.
pub unsafe fn pread64(fd: c_int, buf: *mut c_void, n: size_t, off: libc::off64_t) -> ssize_t {
    // SAFETY: `buf` has `n` writable bytes (pread64's contract, this fn's # Safety), all
    // glibc's pread64 needs; the closure runs once, here or on the donor, while `buf` lives.
    let call = || unsafe { super::pread64(fd, buf, n, off) };
    if fiber::is_fiber() && is_direct_io(fd) {
        return crate::signal::on_donor::run_on_donor_taking_signals(call);
    }
    super::noting_slow_file_io(call)
}

/// `pwrite64` (`pwrite`): as [`pread64`], an `O_DIRECT` write on the donor.
///
/// # Safety
/// As `pwrite64`.
pub unsafe fn pwrite64(fd: c_int, buf: *const c_void, n: size_t, off: libc::off64_t) -> ssize_t {
    // SAFETY: `buf` has `n` readable bytes (pwrite64's contract, this fn's # Safety), all
    // glibc's pwrite64 needs; the closure runs once, here or on the donor, while `buf` lives.
    let call = || unsafe { super::pwrite64(fd, buf, n, off) };
    if fiber::is_fiber() && is_direct_io(fd) {
        return crate::signal::on_donor::run_on_donor_taking_signals(call);
    }
    super::noting_slow_file_io(call)
}

/// Whether `fd` was opened with `O_DIRECT` (its I/O always waits for the device). The
/// first call on a descriptor asks `fcntl(F_GETFL)` and the answer is kept in its slot
/// until the descriptor is closed, duplicated onto or has its flags set (`F_SETFL` can
/// add or remove `O_DIRECT`): one `fcntl` per read cost a large share of a `pread` that
/// hits the page cache (docs/RESULTS.md#file-io-inline).
fn is_direct_io(fd: c_int) -> bool {
    let slot = fdtable::slot(fd);
    if let Some(direct) = slot.and_then(|s| s.cached_direct_io()) {
        return direct;
    }
    let flags = sys::fcntl_getfl(fd);
    if flags < 0 {
        return false;
    }
    let direct = flags as c_int & libc::O_DIRECT != 0;
    if let Some(s) = slot {
        s.cache_direct_io(direct);
    }
    direct
}
