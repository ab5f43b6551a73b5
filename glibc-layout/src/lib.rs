//! # glibc-layout: what glibc's pthread objects look like in memory (x86_64, aarch64)
//!
//! fiberize replaces the pthread *functions* by symbol interposition, but it cannot
//! replace the pthread *objects*: a program's `pthread_mutex_t`, `pthread_cond_t` and
//! `pthread_rwlock_t` are plain bytes that the program allocated with sizes taken from
//! glibc's headers, and that it may have filled in at compile time with
//! `PTHREAD_*_INITIALIZER` before any function of ours ever ran. The runtime therefore
//! keeps its own state *inside those bytes*, and this crate is the single place that
//! knows which bytes are which. It has three parts:
//!
//! 1. **Mirrors** ([`GlibcMutex`], [`GlibcCond`], [`GlibcRwlock`]): `#[repr(C)]` copies
//!    of glibc 2.36's internal structs (`struct __pthread_mutex_s`,
//!    `struct __pthread_cond_s`, `struct __pthread_rwlock_arch_t`), plus size and
//!    alignment facts for the other opaque unions ([`layouts`]). Const assertions tie
//!    every one of them to the `libc` crate's opaque types and to the field offsets of
//!    the headers, so a layout mistake is a compile error.
//! 2. **Encodings** ([`PTHREAD_MUTEX_INITIALIZER`] and friends, the `MUTEX_KIND_*`,
//!    `COND_WREFS_*` and `RWLOCK_*` constants): the bytes glibc's static initializers
//!    produce and the values glibc's init functions store. These are how the runtime
//!    learns an object's type without ever having seen its `*_init` call.
//! 3. **Overlays** ([`MutexOverlay`], [`CondOverlay`], [`RwlockOverlay`]): the runtime's
//!    own view of the same bytes, all atomics, obtained in place with `from_ptr`.
//!    Each overlay keeps glibc's *type* fields (`__kind`, `__wrefs` bits, `__shared`,
//!    `__flags`) where glibc puts them, because static initializers and
//!    glibc-initialized objects put the type there, and uses the rest freely.
//!
//! Everything is checked twice: at compile time against `libc` and `memoffset`, and by
//! `tests/c_layout.rs`, which compiles a C program against the real headers, runs the
//! real `pthread_*_init` functions and compares every offset and byte with this crate.
//!
//! x86_64 and aarch64 Linux with glibc are described (their differences are listed in
//! `mirrors.rs`); on any other target the crate does not compile (no layout constants),
//! which is intended. On aarch64 the test compiles the C program with
//! `aarch64-linux-gnu-gcc` and, cross-built, runs it under `qemu-aarch64-static`.
//!
//! Objects glibc keeps for itself (robust, priority-inheritance, priority-protect or
//! process-shared mutexes, see [`mutex_kind_is_delegated`]) keep glibc's full layout and
//! must not be touched through an overlay. Note also that glibc reaches a mutex
//! internally without the PLT through the C11 `mtx_*` functions (same struct), so the
//! interposer has to export those as well.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod encodings;
mod mirrors;
mod overlays;

pub use encodings::*;
pub use mirrors::*;
pub use overlays::*;
