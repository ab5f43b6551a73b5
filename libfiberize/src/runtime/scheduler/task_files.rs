//! A worker's `/proc/self/task/TID` files, which the monitor reads to tell a blocked
//! worker from a busy one (`monitor`, `stuck`, `preempt`): kept open, out of the way of
//! the program's descriptor numbers.

use core::sync::atomic::{AtomicI32, Ordering};

use crate::base::sys;

/// The files of `/proc/self/task/TID` the monitor reads.
#[derive(Clone, Copy)]
pub(crate) enum TaskFile {
    Stat,
    Schedstat,
    Syscall,
}

impl TaskFile {
    const ALL: [TaskFile; 3] = [TaskFile::Stat, TaskFile::Schedstat, TaskFile::Syscall];

    fn name(self) -> &'static [u8] {
        match self {
            TaskFile::Stat => b"stat",
            TaskFile::Schedstat => b"schedstat",
            TaskFile::Syscall => b"syscall",
        }
    }
}

/// A worker's `/proc/self/task/TID/{stat,schedstat,syscall}`, opened once, out of the
/// way of the program's numbers (`own_fds::open_nul_out_of_the_way`), and read by the
/// monitor with `pread` at offset 0, which makes the kernel format the file afresh.
/// Opening them at each look took the lowest free number for a moment, once a tick
/// while a worker looked stuck, and a program that made descriptors then got numbers
/// above it, which its `close_range` and `open` did not give back (`io_fdreuse`'s
/// `reused=0`: docs/RESULTS.md#fd-table-and-own-descriptors). The first workers' files are
/// opened by the thread that starts the pool, inside the program's first
/// `pthread_create`, when no other program thread can make a descriptor
/// ([`TaskFiles::open`]); a spare's by the monitor when it first looks at it. A
/// worker's thread lives as long as the process, so they are never closed. An open
/// that failed is not tried again, and the monitor opens that file by path at each
/// look, as before.
pub(crate) struct TaskFiles {
    /// -2: not opened yet; -1: could not be opened.
    fds: [AtomicI32; 3],
}

const NOT_OPENED: i32 = -2;

impl TaskFiles {
    pub(super) const fn new() -> TaskFiles {
        TaskFiles { fds: [AtomicI32::new(NOT_OPENED), AtomicI32::new(NOT_OPENED), AtomicI32::new(NOT_OPENED)] }
    }

    /// Opens the files of kernel thread `tid`. Only one thread at a time per worker:
    /// the pool's starter before it starts the monitor, then the monitor.
    pub(super) fn open(&self, tid: u32) {
        for (file, slot) in TaskFile::ALL.into_iter().zip(&self.fds) {
            let mut path = [0u8; 64];
            let fd = task_file_path(tid, file, &mut path)
                .and_then(|p| crate::base::own_fds::open_nul_out_of_the_way(p, libc::O_RDONLY))
                .unwrap_or(-1);
            slot.store(fd, Ordering::Release);
            if fd >= 0 {
                // SAFETY: a TaskFiles is a field of a worker of the runtime, which is
                // leaked (`start::start_pool`): the cell lives as long as the process.
                crate::base::own_fds::hold(unsafe { &*(slot as *const AtomicI32) });
            }
        }
    }

    /// Reads `file` of the worker's thread, `tid`, into `buf`; the length read.
    pub(super) fn read(&self, tid: u32, file: TaskFile, buf: &mut [u8]) -> Option<usize> {
        let mut fd = self.fds[file as usize].load(Ordering::Acquire);
        if fd == NOT_OPENED && tid != 0 {
            self.open(tid);
            fd = self.fds[file as usize].load(Ordering::Acquire);
        }
        if fd < 0 {
            return read_task_file(tid, file, buf);
        }
        let n = sys::pread64(fd, buf, 0);
        (n > 0).then_some(n as usize)
    }
}

/// `/proc/self/task/TID/<file>`, NUL-terminated, written into `path`.
fn task_file_path(tid: u32, file: TaskFile, path: &mut [u8; 64]) -> Option<&[u8]> {
    let file = file.name();
    let prefix = b"/proc/self/task/";
    path[..prefix.len()].copy_from_slice(prefix);
    let mut out = prefix.len();
    let mut digits = [0u8; 10];
    let (mut n, mut len) = (tid, 0);
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        n /= 10;
        len += 1;
        if n == 0 {
            break;
        }
    }
    for k in (0..len).rev() {
        path[out] = digits[k];
        out += 1;
    }
    path[out] = b'/';
    out += 1;
    if out + file.len() >= path.len() {
        return None;
    }
    path[out..out + file.len()].copy_from_slice(file);
    path[out + file.len()] = 0;
    Some(&path[..=out + file.len()])
}

/// Reads `/proc/self/task/TID/<file>` into `buf` with raw system calls; the length read.
/// Only where the kept file could not be opened (no descriptor left): a transient
/// descriptor, marked and closed with the program's closes kept out.
pub(super) fn read_task_file(tid: u32, file: TaskFile, buf: &mut [u8]) -> Option<usize> {
    let mut path = [0u8; 64];
    crate::base::own_fds::read_file_nul(task_file_path(tid, file, &mut path)?, buf)
}
