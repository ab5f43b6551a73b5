//! All exports of libfiberize.so, one module per family.
pub mod cond;
pub mod io;
pub mod marker;
pub mod mutex;
pub mod offload;
pub mod signal;
pub mod sleep;
pub mod syscall;
pub mod thread;
pub mod time;
pub mod rwlock;
pub mod sem;
pub mod barrier;
pub mod once;
pub mod process;
pub mod spin;
