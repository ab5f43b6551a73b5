//! All exports of libfiberize.so, one module per family.
pub mod barrier;
pub mod cond;
pub mod io;
pub mod marker;
pub mod mutex;
pub mod offload;
pub mod once;
pub mod process;
pub mod rwlock;
pub mod sem;
pub mod signal;
pub mod sleep;
pub mod spin;
pub mod syscall;
pub mod thread;
pub mod time;
pub mod wtls;
