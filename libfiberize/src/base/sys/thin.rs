//! Thin wrappers, one per system call: the kernel's result, `-errno` on failure (the
//! rules of [`crate::base::sys`] apply: no exports reached by name, no TLS).

use crate::base::arch::syscall6;

/// The process id, asked of the kernel (a forked or cloned child gets its own).
#[inline]
pub fn getpid() -> i32 {
    // SAFETY: getpid has no arguments and cannot fail.
    unsafe { syscall6(libc::SYS_getpid as usize, 0, 0, 0, 0, 0, 0) as i32 }
}

/// `close(fd)` as a raw system call (the runtime's own descriptors are closed by
/// `base::own_fds::close`, which also forgets the mark).
#[inline]
pub fn close_unmarked(fd: i32) -> isize {
    // SAFETY: close takes no pointers; the caller names a descriptor it owns.
    unsafe { syscall6(libc::SYS_close as usize, fd as usize, 0, 0, 0, 0, 0) }
}

/// `openat(AT_FDCWD, path_nul, flags | O_CLOEXEC, 0644)`; `-EINVAL` for a path that is
/// not NUL-terminated.
#[inline]
pub fn openat(path_nul: &[u8], flags: i32) -> isize {
    if path_nul.last() != Some(&0) {
        return -(libc::EINVAL as isize); // not a C string: the kernel would read past it
    }
    // SAFETY: `path_nul` is NUL-terminated (checked) and outlives the call.
    unsafe {
        syscall6(
            libc::SYS_openat as usize,
            libc::AT_FDCWD as usize,
            path_nul.as_ptr() as usize,
            (flags | libc::O_CLOEXEC) as usize,
            0o644,
            0,
            0,
        )
    }
}

/// `eventfd2(0, flags)`.
#[inline]
pub fn eventfd2(flags: i32) -> isize {
    // SAFETY: eventfd2 takes no pointers.
    unsafe { syscall6(libc::SYS_eventfd2 as usize, 0, flags as usize, 0, 0, 0, 0) }
}

/// `getdents64(fd, buf, buf.len())`: directory entries into `buf`, the bytes written.
#[inline]
pub fn getdents64(fd: i32, buf: &mut [u8]) -> isize {
    // SAFETY: `buf` is writable for its length.
    unsafe { syscall6(libc::SYS_getdents64 as usize, fd as usize, buf.as_mut_ptr() as usize, buf.len(), 0, 0, 0) }
}

/// `lseek(fd, offset, SEEK_SET)`.
#[inline]
pub fn lseek_set(fd: i32, offset: u64) -> isize {
    // SAFETY: lseek takes no pointers.
    unsafe { syscall6(libc::SYS_lseek as usize, fd as usize, offset as usize, libc::SEEK_SET as usize, 0, 0, 0) }
}

/// `close_range(first, last, flags)`.
#[inline]
pub fn close_range(first: u32, last: u32, flags: u32) -> isize {
    // SAFETY: close_range takes no pointers.
    unsafe { syscall6(libc::SYS_close_range as usize, first as usize, last as usize, flags as usize, 0, 0, 0) }
}

/// `read(fd, buf, buf.len())`.
#[inline]
pub fn read(fd: i32, buf: &mut [u8]) -> isize {
    // SAFETY: `buf` is writable for its length.
    unsafe { syscall6(libc::SYS_read as usize, fd as usize, buf.as_mut_ptr() as usize, buf.len(), 0, 0, 0) }
}

/// `write(fd, bytes, bytes.len())`.
#[inline]
pub fn write(fd: i32, bytes: &[u8]) -> isize {
    // SAFETY: `bytes` is readable for its length.
    unsafe { syscall6(libc::SYS_write as usize, fd as usize, bytes.as_ptr() as usize, bytes.len(), 0, 0, 0) }
}

/// `pread64(fd, buf, buf.len(), offset)`.
#[inline]
pub fn pread64(fd: i32, buf: &mut [u8], offset: u64) -> isize {
    // SAFETY: `buf` is writable for its length.
    unsafe { syscall6(libc::SYS_pread64 as usize, fd as usize, buf.as_mut_ptr() as usize, buf.len(), offset as usize, 0, 0) }
}

/// `readv(fd, iov, count)`.
///
/// # Safety
/// `iov` must point to `count` iovecs describing writable buffers (or `count` be 0).
#[inline]
pub unsafe fn readv(fd: i32, iov: *const libc::iovec, count: i32) -> isize {
    // SAFETY: the caller vouches for the vector.
    unsafe { syscall6(libc::SYS_readv as usize, fd as usize, iov as usize, count as usize, 0, 0, 0) }
}

/// `writev(fd, iov, count)`.
///
/// # Safety
/// `iov` must point to `count` iovecs describing readable buffers (or `count` be 0).
#[inline]
pub unsafe fn writev(fd: i32, iov: *const libc::iovec, count: i32) -> isize {
    // SAFETY: the caller vouches for the vector.
    unsafe { syscall6(libc::SYS_writev as usize, fd as usize, iov as usize, count as usize, 0, 0, 0) }
}

/// `preadv2(fd, iov, count, offset, flags)` (offset -1: the file position).
///
/// # Safety
/// As [`readv`].
#[inline]
pub unsafe fn preadv2(fd: i32, iov: *const libc::iovec, count: i32, offset: i64, flags: i32) -> isize {
    // SAFETY: the caller vouches for the vector; the offset is one register on 64-bit.
    unsafe { syscall6(libc::SYS_preadv2 as usize, fd as usize, iov as usize, count as usize, offset as usize, 0, flags as usize) }
}

/// `pwritev2(fd, iov, count, offset, flags)` (offset -1: the file position).
///
/// # Safety
/// As [`writev`].
#[inline]
pub unsafe fn pwritev2(fd: i32, iov: *const libc::iovec, count: i32, offset: i64, flags: i32) -> isize {
    // SAFETY: the caller vouches for the vector; the offset is one register on 64-bit.
    unsafe {
        syscall6(libc::SYS_pwritev2 as usize, fd as usize, iov as usize, count as usize, offset as usize, 0, flags as usize)
    }
}

/// `fstat(fd, st)`.
#[inline]
pub fn fstat(fd: i32, st: &mut libc::stat) -> isize {
    // SAFETY: `st` is a writable struct stat.
    unsafe { syscall6(libc::SYS_fstat as usize, fd as usize, st as *mut libc::stat as usize, 0, 0, 0, 0) }
}

/// `fcntl(fd, F_GETFL)`: the descriptor's status flags.
#[inline]
pub fn fcntl_getfl(fd: i32) -> isize {
    // SAFETY: F_GETFL takes no argument and writes no memory.
    unsafe { syscall6(libc::SYS_fcntl as usize, fd as usize, libc::F_GETFL as usize, 0, 0, 0, 0) }
}

/// `fcntl(fd, F_DUPFD_CLOEXEC, floor)`: a close-on-exec copy of `fd` at the lowest free
/// number not below `floor`.
#[inline]
pub fn fcntl_dupfd_cloexec(fd: i32, floor: i32) -> isize {
    // SAFETY: F_DUPFD_CLOEXEC takes an integer and writes no memory.
    unsafe { syscall6(libc::SYS_fcntl as usize, fd as usize, libc::F_DUPFD_CLOEXEC as usize, floor as usize, 0, 0, 0) }
}

/// The soft limit on descriptor numbers (`RLIMIT_NOFILE`), or None.
pub fn nofile_soft_limit() -> Option<u64> {
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: prlimit64 on ourselves (pid 0) writes the old limit into `rl`, a valid
    // rlimit (the kernel's rlimit64 has the same two u64 fields on 64-bit targets).
    let r = unsafe {
        syscall6(libc::SYS_prlimit64 as usize, 0, libc::RLIMIT_NOFILE as usize, 0, &mut rl as *mut libc::rlimit as usize, 0, 0)
    };
    (r == 0).then_some(rl.rlim_cur)
}

/// `flock(fd, operation)`.
#[inline]
pub fn flock(fd: i32, operation: i32) -> isize {
    // SAFETY: flock takes no pointers.
    unsafe { syscall6(libc::SYS_flock as usize, fd as usize, operation as usize, 0, 0, 0, 0) }
}

/// `renameat(AT_FDCWD, old_nul, AT_FDCWD, new_nul)`; `-EINVAL` for a path that is not
/// NUL-terminated.
pub fn renameat(old_nul: &[u8], new_nul: &[u8]) -> isize {
    if old_nul.last() != Some(&0) || new_nul.last() != Some(&0) {
        return -(libc::EINVAL as isize); // not C strings: the kernel would read past them
    }
    // SAFETY: both paths are NUL-terminated (checked) and outlive the call.
    unsafe {
        syscall6(
            libc::SYS_renameat as usize,
            libc::AT_FDCWD as usize,
            old_nul.as_ptr() as usize,
            libc::AT_FDCWD as usize,
            new_nul.as_ptr() as usize,
            0,
            0,
        )
    }
}

/// `unlinkat(AT_FDCWD, path_nul, 0)`; `-EINVAL` for a path that is not NUL-terminated.
pub fn unlinkat(path_nul: &[u8]) -> isize {
    if path_nul.last() != Some(&0) {
        return -(libc::EINVAL as isize); // not a C string: the kernel would read past it
    }
    // SAFETY: `path_nul` is NUL-terminated (checked) and outlives the call.
    unsafe { syscall6(libc::SYS_unlinkat as usize, libc::AT_FDCWD as usize, path_nul.as_ptr() as usize, 0, 0, 0, 0) }
}

/// `epoll_create1(flags)`.
#[inline]
pub fn epoll_create1(flags: i32) -> isize {
    // SAFETY: epoll_create1 takes no pointers.
    unsafe { syscall6(libc::SYS_epoll_create1 as usize, flags as usize, 0, 0, 0, 0, 0) }
}

/// `epoll_ctl(ep, op, fd, event)` (`None`: a null event, for `EPOLL_CTL_DEL`).
#[inline]
pub fn epoll_ctl(ep: i32, op: i32, fd: i32, event: Option<&libc::epoll_event>) -> isize {
    let e = event.map_or(core::ptr::null(), |e| e as *const libc::epoll_event);
    // SAFETY: `e` is null or a live epoll_event, which the kernel only reads.
    unsafe { syscall6(libc::SYS_epoll_ctl as usize, ep as usize, op as usize, fd as usize, e as usize, 0, 0) }
}

/// `tgkill(getpid(), tid, sig)`: sends `sig` to thread `tid` of this process.
#[inline]
pub fn tgkill(tid: i32, sig: i32) -> isize {
    // SAFETY: tgkill takes no pointers.
    unsafe { syscall6(libc::SYS_tgkill as usize, getpid() as usize, tid as usize, sig as usize, 0, 0, 0) }
}

/// `prctl(PR_SET_NAME, name)`: names the calling kernel thread (`name` NUL-terminated;
/// the kernel keeps 15 bytes).
#[inline]
pub fn set_thread_name(name: &core::ffi::CStr) -> isize {
    // SAFETY: `name` is a live NUL-terminated string, which the kernel only reads.
    unsafe { syscall6(libc::SYS_prctl as usize, libc::PR_SET_NAME as usize, name.as_ptr() as usize, 0, 0, 0, 0) }
}

/// `sigaltstack(ss, NULL)`: sets the calling kernel thread's alternate signal stack.
#[inline]
pub fn sigaltstack(ss: &libc::stack_t) -> isize {
    // SAFETY: `ss` is a live stack_t, which the kernel only reads; no old settings wanted.
    unsafe { syscall6(libc::SYS_sigaltstack as usize, ss as *const libc::stack_t as usize, 0, 0, 0, 0, 0) }
}

/// `rt_sigtimedwait(set, info, timeout, 8)` (`None`: no timeout).
///
/// # Safety
/// `info` must be null or writable for a `siginfo_t`.
#[inline]
pub unsafe fn rt_sigtimedwait(set: u64, info: *mut libc::siginfo_t, timeout: Option<&libc::timespec>) -> isize {
    let ts = timeout.map_or(core::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `set` and `ts` live across the call; the caller vouches for `info`.
    unsafe { syscall6(libc::SYS_rt_sigtimedwait as usize, &set as *const u64 as usize, info as usize, ts as usize, 8, 0, 0) }
}

/// `kill(getpid(), sig)`: sends `sig` to this process.
#[inline]
pub fn kill(sig: i32) -> isize {
    // SAFETY: kill takes no pointers.
    unsafe { syscall6(libc::SYS_kill as usize, getpid() as usize, sig as usize, 0, 0, 0, 0) }
}

/// `rt_sigqueueinfo(getpid(), sig, info)`: queues `sig` with `info` to this process.
#[inline]
pub fn rt_sigqueueinfo(sig: i32, info: &libc::siginfo_t) -> isize {
    // SAFETY: `info` is a live siginfo, which the kernel only reads.
    unsafe {
        syscall6(
            libc::SYS_rt_sigqueueinfo as usize,
            getpid() as usize,
            sig as usize,
            info as *const libc::siginfo_t as usize,
            0,
            0,
            0,
        )
    }
}

/// `rt_tgsigqueueinfo(getpid(), tid, sig, info)`: queues `sig` with `info` to thread
/// `tid` of this process.
#[inline]
pub fn rt_tgsigqueueinfo(tid: i32, sig: i32, info: &libc::siginfo_t) -> isize {
    let info = info as *const libc::siginfo_t;
    // SAFETY: `info` is a live siginfo, which the kernel only reads.
    unsafe { syscall6(libc::SYS_rt_tgsigqueueinfo as usize, getpid() as usize, tid as usize, sig as usize, info as usize, 0, 0) }
}

/// `sched_getaffinity(0, size_of(set), set)`: the calling thread's CPU mask (the
/// kernel's result is the size it wrote).
#[inline]
pub fn sched_getaffinity(set: &mut libc::cpu_set_t) -> isize {
    // SAFETY: `set` is writable for the size we pass.
    unsafe {
        syscall6(
            libc::SYS_sched_getaffinity as usize,
            0,
            core::mem::size_of::<libc::cpu_set_t>(),
            set as *mut libc::cpu_set_t as usize,
            0,
            0,
            0,
        )
    }
}

/// `process_vm_readv(getpid(), local, 1, remote, 1, 0)`: copies from our own memory
/// at `remote` into `local`, the kernel checking that the remote range is mapped.
///
/// # Safety
/// `local` must describe a writable buffer.
#[inline]
pub unsafe fn process_vm_readv(local: &libc::iovec, remote: &libc::iovec) -> isize {
    // SAFETY: one local and one remote iovec; the caller vouches for the local buffer
    // and the kernel checks the remote range.
    unsafe {
        syscall6(
            libc::SYS_process_vm_readv as usize,
            getpid() as usize,
            local as *const libc::iovec as usize,
            1,
            remote as *const libc::iovec as usize,
            1,
            0,
        )
    }
}

/// `madvise(start, len, advice)`.
///
/// # Safety
/// The range must be whole pages the caller owns; an advice such as `MADV_DONTNEED`
/// discards their contents.
#[inline]
pub unsafe fn madvise(start: usize, len: usize, advice: i32) -> isize {
    // SAFETY: the caller vouches for the range and the advice.
    unsafe { syscall6(libc::SYS_madvise as usize, start, len, advice as usize, 0, 0, 0) }
}

/// `sched_getscheduler(0)`: the calling thread's scheduling policy.
#[inline]
pub fn sched_getscheduler() -> isize {
    // SAFETY: no pointers; pid 0 is the calling thread.
    unsafe { syscall6(libc::SYS_sched_getscheduler as usize, 0, 0, 0, 0, 0, 0) }
}

/// `sched_getparam(0, param)`: the calling thread's scheduling parameters.
#[inline]
pub fn sched_getparam(param: &mut libc::sched_param) -> isize {
    // SAFETY: `param` is a writable sched_param; pid 0 is the calling thread.
    unsafe { syscall6(libc::SYS_sched_getparam as usize, 0, param as *mut libc::sched_param as usize, 0, 0, 0, 0) }
}

/// Reads an `int` socket option of `fd` into `value` (getsockopt(2)): 0 or `-errno`.
#[inline]
pub fn getsockopt_int(fd: i32, level: i32, name: i32, value: &mut i32) -> isize {
    let mut len = core::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` (4) bytes into `value` and the length it
    // wrote into `len`, both valid for writes.
    unsafe {
        syscall6(
            libc::SYS_getsockopt as usize,
            fd as usize,
            level as usize,
            name as usize,
            value as *mut i32 as usize,
            &mut len as *mut libc::socklen_t as usize,
            0,
        )
    }
}

// The socket calls of a fiber's attempt with `MSG_DONTWAIT` (`crate::io::ops`): raw,
// because glibc's wrappers are cancellation points, whose bracket (two atomic
// read-modify-writes of the thread's cancel state) buys nothing for a call that never
// blocks, and a fiber's cancellation is the runtime's own.

/// `recvfrom` as a raw system call.
///
/// # Safety
/// `recvfrom`'s contract: `buf` has `n` writable bytes; `addr`/`len` are null or a
/// sockaddr buffer and its length.
#[inline]
pub unsafe fn recvfrom(
    fd: i32,
    buf: *mut libc::c_void,
    n: usize,
    flags: i32,
    addr: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
) -> isize {
    // SAFETY: the caller vouches for the buffers (this fn's # Safety).
    unsafe { syscall6(libc::SYS_recvfrom as usize, fd as usize, buf as usize, n, flags as usize, addr as usize, len as usize) }
}

/// `sendto` as a raw system call.
///
/// # Safety
/// `sendto`'s contract: `buf` has `n` readable bytes; `addr` is null or a sockaddr of
/// `len` bytes.
#[inline]
pub unsafe fn sendto(
    fd: i32,
    buf: *const libc::c_void,
    n: usize,
    flags: i32,
    addr: *const libc::sockaddr,
    len: libc::socklen_t,
) -> isize {
    // SAFETY: as above.
    unsafe { syscall6(libc::SYS_sendto as usize, fd as usize, buf as usize, n, flags as usize, addr as usize, len as usize) }
}

/// `recvmsg` as a raw system call.
///
/// # Safety
/// `recvmsg`'s contract: `m` points to a msghdr whose buffers are writable.
#[inline]
pub unsafe fn recvmsg(fd: i32, m: *mut libc::msghdr, flags: i32) -> isize {
    // SAFETY: as above.
    unsafe { syscall6(libc::SYS_recvmsg as usize, fd as usize, m as usize, flags as usize, 0, 0, 0) }
}

/// `sendmsg` as a raw system call.
///
/// # Safety
/// `sendmsg`'s contract: `m` points to a msghdr whose buffers are readable.
#[inline]
pub unsafe fn sendmsg(fd: i32, m: *const libc::msghdr, flags: i32) -> isize {
    // SAFETY: as above.
    unsafe { syscall6(libc::SYS_sendmsg as usize, fd as usize, m as usize, flags as usize, 0, 0, 0) }
}
