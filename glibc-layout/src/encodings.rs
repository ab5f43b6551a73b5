//! What glibc stores in its pthread objects: static initializer bytes and the type and
//! flag values of `__kind` (mutex), `__wrefs` (cond), `__shared`/`__flags` (rwlock).
//!
//! Values follow glibc's `nptl/pthreadP.h` and `pthread_*_init.c` (2.36) and are
//! compared with the real functions by `tests/c_layout.rs`.

use crate::layouts;

// ---------------------------------------------------------------------------------
// Mutex `__kind` (byte 16)
// ---------------------------------------------------------------------------------
//
// | bits   | value | constant                      | set by                              |
// |--------|-------|-------------------------------|-------------------------------------|
// | 0..=1  | 0..3  | type, [`MUTEX_KIND_TYPE_MASK`]| initializer / `settype`             |
// | 4      | 16    | [`MUTEX_KIND_ROBUST`]         | `setrobust(ROBUST)` (also sets 128) |
// | 5      | 32    | [`MUTEX_KIND_PRIO_INHERIT`]   | `setprotocol(PTHREAD_PRIO_INHERIT)` |
// | 6      | 64    | [`MUTEX_KIND_PRIO_PROTECT`]   | `setprotocol(PTHREAD_PRIO_PROTECT)` |
// | 7      | 128   | [`MUTEX_KIND_PSHARED`]        | `setpshared(SHARED)` or robust      |
// | 8      | 256   | [`MUTEX_KIND_ELISION`]        | elision tunable, at first lock      |
// | 9      | 512   | [`MUTEX_KIND_NO_ELISION`]     | `settype(PTHREAD_MUTEX_NORMAL)`     |
// | all    | -1    | [`MUTEX_KIND_DESTROYED`]      | `pthread_mutex_destroy`             |

/// Bits of `__kind` holding the mutex type (glibc's `PTHREAD_MUTEX_KIND_MASK_NP`).
pub const MUTEX_KIND_TYPE_MASK: i32 = 3;
/// `PTHREAD_MUTEX_NORMAL` / `PTHREAD_MUTEX_TIMED_NP` / `PTHREAD_MUTEX_DEFAULT`.
pub const MUTEX_KIND_NORMAL: i32 = 0;
/// `PTHREAD_MUTEX_RECURSIVE(_NP)`.
pub const MUTEX_KIND_RECURSIVE: i32 = 1;
/// `PTHREAD_MUTEX_ERRORCHECK(_NP)`.
pub const MUTEX_KIND_ERRORCHECK: i32 = 2;
/// `PTHREAD_MUTEX_ADAPTIVE_NP`.
pub const MUTEX_KIND_ADAPTIVE: i32 = 3;
/// Robust mutex (`PTHREAD_MUTEX_ROBUST_NORMAL_NP`). glibc also sets
/// [`MUTEX_KIND_PSHARED`] for every robust mutex.
pub const MUTEX_KIND_ROBUST: i32 = 16;
/// Priority-inheritance protocol (`PTHREAD_MUTEX_PRIO_INHERIT_NP`).
pub const MUTEX_KIND_PRIO_INHERIT: i32 = 32;
/// Priority-protect (ceiling) protocol (`PTHREAD_MUTEX_PRIO_PROTECT_NP`); glibc then
/// keeps the ceiling in `__lock` bits 19.. .
pub const MUTEX_KIND_PRIO_PROTECT: i32 = 64;
/// Process-shared (`PTHREAD_MUTEX_PSHARED_BIT`).
pub const MUTEX_KIND_PSHARED: i32 = 128;
/// Lock elision enabled (`PTHREAD_MUTEX_ELISION_NP`).
pub const MUTEX_KIND_ELISION: i32 = 256;
/// Lock elision disabled (`PTHREAD_MUTEX_NO_ELISION_NP`). Note that glibc's
/// `pthread_mutexattr_settype(PTHREAD_MUTEX_NORMAL)` sets it, so a normal mutex made by
/// glibc's `pthread_mutex_init` with such an attribute has `__kind` = 512, not 0.
pub const MUTEX_KIND_NO_ELISION: i32 = 512;
/// `__kind` after `pthread_mutex_destroy`.
pub const MUTEX_KIND_DESTROYED: i32 = -1;
/// The flags that make glibc keep a mutex for itself.
pub const MUTEX_KIND_DELEGATED_MASK: i32 =
    MUTEX_KIND_ROBUST | MUTEX_KIND_PRIO_INHERIT | MUTEX_KIND_PRIO_PROTECT | MUTEX_KIND_PSHARED;

/// Whether a mutex with this `__kind` stays glibc's (robust, priority-inheritance,
/// priority-protect or process-shared): the runtime passes it to the real functions and
/// never writes through [`crate::MutexOverlay`]. A destroyed mutex (-1) is not delegated.
#[inline]
pub const fn mutex_kind_is_delegated(kind: i32) -> bool {
    kind >= 0 && kind & MUTEX_KIND_DELEGATED_MASK != 0
}

/// The type (`MUTEX_KIND_NORMAL` … `MUTEX_KIND_ADAPTIVE`) encoded in `__kind`.
#[inline]
pub const fn mutex_kind_type(kind: i32) -> i32 {
    kind & MUTEX_KIND_TYPE_MASK
}

/// Whether `kind` is one the runtime handles itself: not destroyed, not delegated, and
/// nothing but a type and elision hints.
#[inline]
pub const fn mutex_kind_is_valid_runtime(kind: i32) -> bool {
    kind & !(MUTEX_KIND_TYPE_MASK | MUTEX_KIND_ELISION | MUTEX_KIND_NO_ELISION) == 0
}

const MUTEX_SIZE: usize = layouts::PTHREAD_MUTEX_T.size;
const COND_SIZE: usize = layouts::PTHREAD_COND_T.size;
const RWLOCK_SIZE: usize = layouts::PTHREAD_RWLOCK_T.size;

/// Zero bytes with one native-endian 32-bit value at `at`.
const fn with_word<const N: usize>(at: usize, value: u32) -> [u8; N] {
    let mut b = [0u8; N];
    let v = value.to_ne_bytes();
    let mut i = 0;
    while i < 4 {
        b[at + i] = v[i];
        i += 1;
    }
    b
}

/// The bytes of glibc's `__PTHREAD_MUTEX_INITIALIZER(kind)`: all zero but `__kind`.
pub const fn mutex_initializer(kind: i32) -> [u8; MUTEX_SIZE] {
    with_word(16, kind as u32)
}

/// `PTHREAD_MUTEX_INITIALIZER`: 40 zero bytes.
pub const PTHREAD_MUTEX_INITIALIZER: [u8; MUTEX_SIZE] = mutex_initializer(MUTEX_KIND_NORMAL);
/// `PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP`: `__kind` (byte 16) = 1.
pub const PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP: [u8; MUTEX_SIZE] = mutex_initializer(MUTEX_KIND_RECURSIVE);
/// `PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP`: `__kind` = 2.
pub const PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP: [u8; MUTEX_SIZE] = mutex_initializer(MUTEX_KIND_ERRORCHECK);
/// `PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP`: `__kind` = 3.
pub const PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP: [u8; MUTEX_SIZE] = mutex_initializer(MUTEX_KIND_ADAPTIVE);

// ---------------------------------------------------------------------------------
// Cond `__wrefs` (byte 36), as `pthread_cond_init` writes it
// ---------------------------------------------------------------------------------
//
// | bit  | constant                       | meaning                                  |
// |------|--------------------------------|------------------------------------------|
// | 0    | [`COND_WREFS_PSHARED`]         | condattr had `PTHREAD_PROCESS_SHARED`    |
// | 1    | [`COND_WREFS_CLOCK_MONOTONIC`] | condattr clock was `CLOCK_MONOTONIC`     |
// | 2    | —                              | glibc: waiters must wake the destroyer   |
// | 3..  | —                              | glibc: waiter reference count            |

/// `__wrefs` bit 0: process-shared condition variable.
pub const COND_WREFS_PSHARED: u32 = 1;
/// `__wrefs` bit 1: timed waits measure `CLOCK_MONOTONIC` (else `CLOCK_REALTIME`).
pub const COND_WREFS_CLOCK_MONOTONIC: u32 = 2;
/// Byte offset of `__wrefs` in `pthread_cond_t`.
pub const COND_WREFS_OFFSET: usize = 36;

/// `PTHREAD_COND_INITIALIZER`: 48 zero bytes (private, `CLOCK_REALTIME`).
pub const PTHREAD_COND_INITIALIZER: [u8; COND_SIZE] = [0; COND_SIZE];

// ---------------------------------------------------------------------------------
// Rwlock `__shared` (byte 28) and `__flags` (byte 48)
// ---------------------------------------------------------------------------------
//
// | byte | field      | values                                                        |
// |------|------------|---------------------------------------------------------------|
// | 28   | `__shared` | 0 private, nonzero (1) process-shared                         |
// | 48   | `__flags`  | 0 [`RWLOCK_PREFER_READER`], 1 [`RWLOCK_PREFER_WRITER`], 2 [`RWLOCK_PREFER_WRITER_NONRECURSIVE`] |

/// `PTHREAD_RWLOCK_PREFER_READER_NP` (also `PTHREAD_RWLOCK_DEFAULT_NP`).
pub const RWLOCK_PREFER_READER: u32 = 0;
/// `PTHREAD_RWLOCK_PREFER_WRITER_NP` (glibc treats it like prefer-reader).
pub const RWLOCK_PREFER_WRITER: u32 = 1;
/// `PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP`.
pub const RWLOCK_PREFER_WRITER_NONRECURSIVE: u32 = 2;
/// Byte offset of `__shared` in `pthread_rwlock_t`.
pub const RWLOCK_SHARED_OFFSET: usize = 28;
/// Byte offset of `__flags` in `pthread_rwlock_t`.
pub const RWLOCK_FLAGS_OFFSET: usize = 48;

/// `PTHREAD_RWLOCK_INITIALIZER`: 56 zero bytes.
pub const PTHREAD_RWLOCK_INITIALIZER: [u8; RWLOCK_SIZE] = with_word(RWLOCK_FLAGS_OFFSET, RWLOCK_PREFER_READER);
/// `PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP`: `__flags` (byte 48) = 2.
pub const PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP: [u8; RWLOCK_SIZE] =
    with_word(RWLOCK_FLAGS_OFFSET, RWLOCK_PREFER_WRITER_NONRECURSIVE);

const _: () = {
    use memoffset::offset_of;
    assert!(offset_of!(crate::GlibcMutex, kind) == 16);
    assert!(offset_of!(crate::GlibcCond, wrefs) == COND_WREFS_OFFSET);
    assert!(offset_of!(crate::GlibcRwlock, shared) == RWLOCK_SHARED_OFFSET);
    assert!(offset_of!(crate::GlibcRwlock, flags) == RWLOCK_FLAGS_OFFSET);
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GlibcMutex, GlibcRwlock};

    fn bytes<T>(v: &T) -> &[u8] {
        // SAFETY: reading the initialized bytes of a padding-free libc opaque type.
        unsafe { core::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }
    }

    #[test]
    fn zero_initializers_match_libc() {
        assert_eq!(bytes(&libc::PTHREAD_MUTEX_INITIALIZER), &PTHREAD_MUTEX_INITIALIZER[..]);
        assert_eq!(bytes(&libc::PTHREAD_COND_INITIALIZER), &PTHREAD_COND_INITIALIZER[..]);
        assert_eq!(bytes(&libc::PTHREAD_RWLOCK_INITIALIZER), &PTHREAD_RWLOCK_INITIALIZER[..]);
    }

    #[test]
    fn initializers_put_the_type_in_glibc_fields() {
        for (b, k) in [
            (PTHREAD_MUTEX_INITIALIZER, 0),
            (PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP, 1),
            (PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP, 2),
            (PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP, 3),
        ] {
            assert_eq!(GlibcMutex::from_bytes(b), GlibcMutex { kind: k, ..Default::default() });
        }
        let rw = GlibcRwlock::from_bytes(PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP);
        assert_eq!(rw, GlibcRwlock { flags: 2, ..Default::default() });
    }

    #[test]
    fn delegation() {
        for k in [0, 1, 2, 3, 512, 256 | 1, -1] {
            assert!(!mutex_kind_is_delegated(k), "{k}");
        }
        for k in [16 | 128, 32, 64 | 2, 128 | 1, 32 | 512] {
            assert!(mutex_kind_is_delegated(k), "{k}");
        }
        assert!(mutex_kind_is_valid_runtime(512 | 3));
        assert!(!mutex_kind_is_valid_runtime(-1) && !mutex_kind_is_valid_runtime(4));
        assert!(!mutex_kind_is_valid_runtime(128));
    }
}
