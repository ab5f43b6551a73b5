//! **Layer 0 — the base.** What every other layer stands on, and which stands on
//! nothing of the runtime: the processor-dependent parts ([`arch`]), raw system
//! calls ([`sys`]), the table of real libc
//! functions ([`real`]), the environment ([`config`]), the CPU limit of the
//! process's cgroup ([`cgroup`]), counters ([`stats`]), deadline
//! conversions ([`time`]), glibc's object layouts ([`layout`]), the runtime's own futex
//! lock ([`rawlock`]), the runtime's own descriptors ([`own_fds`]), the shield against program signal handlers ([`shield`]) and the
//! report's table of waits and call sites ([`sites`]).
//!
//! Nothing here imports a module outside `base`.

pub mod arch;
pub mod batch;
pub mod cgroup;
pub mod config;
pub mod layout;
pub mod loom;
pub mod own_fds;
pub mod rawlock;
pub mod real;
pub mod shield;
pub mod sites;
pub mod stats;
pub mod sys;
pub mod thread_words;
pub mod time;
