//! Which raw system calls (reached through libc's `syscall()`) are long enough to run
//! on the donor thread rather than block a worker.

use crate::base::arch::SYS_IO_PGETEVENTS;

/// System calls that wait for an unbounded time: asynchronous I/O completions and
/// child processes.
pub fn long_syscall(nr: libc::c_long) -> bool {
    matches!(nr, libc::SYS_io_getevents | SYS_IO_PGETEVENTS | libc::SYS_wait4 | libc::SYS_waitid)
}
