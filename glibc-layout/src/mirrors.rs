//! `#[repr(C)]` mirrors of glibc 2.36's pthread structs on x86_64 and aarch64, and
//! size/alignment facts for the opaque unions, all checked against `libc` at compile
//! time.
//!
//! The two architectures agree on every offset the runtime uses. They differ in:
//!
//! | what                          | x86_64                        | aarch64 (generic glibc)          |
//! |-------------------------------|-------------------------------|----------------------------------|
//! | `pthread_mutex_t`             | 40 bytes                      | 48 bytes (`__data` 40 + 8 tail)  |
//! | mutex @20                     | `short __spins, __elision`    | `int __spins`                    |
//! | rwlock @32                    | `schar __rwelision`, `__pad1[7]` | `ulong __pad1`                |
//! | `pthread_{mutex,cond,barrier}attr_t` | 4 bytes               | 8 bytes (4-aligned)              |
//! | `pthread_attr_t`              | 56 bytes                      | 64 bytes                         |
//!
//! Field names are glibc's without the leading `__`.

use core::mem::{align_of, size_of};
use memoffset::offset_of;

/// `struct __pthread_mutex_s`, the `__data` member of `pthread_mutex_t`
/// (`bits/struct_mutex.h`). 40 bytes, 8-aligned; on aarch64 the union is 48 bytes and
/// the mirror ends with its 8-byte tail, and bytes 20..24 are one `int __spins`.
///
/// | byte | field      | type      | meaning in glibc                                |
/// |------|------------|-----------|-------------------------------------------------|
/// | 0    | `lock`     | `int`     | futex word (0 free, 1 locked, 2 contended)      |
/// | 4    | `count`    | `uint`    | recursion depth of a recursive mutex            |
/// | 8    | `owner`    | `int`     | owner's TID                                     |
/// | 12   | `nusers`   | `uint`    | users count                                     |
/// | 16   | `kind`     | `int`     | type and flag bits ([`crate::MUTEX_KIND_TYPE_MASK`]…); -1 after destroy |
/// | 20   | `spins`    | `short`   | adaptive spin estimate                          |
/// | 22   | `elision`  | `short`   | lock elision state                              |
/// | 24   | `list`     | 2 ptrs    | robust list links (`__prev`, `__next`)          |
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlibcMutex {
    /// `__lock` @0.
    pub lock: i32,
    /// `__count` @4.
    pub count: u32,
    /// `__owner` @8.
    pub owner: i32,
    /// `__nusers` @12.
    pub nusers: u32,
    /// `__kind` @16.
    pub kind: i32,
    /// `__spins` @20.
    #[cfg(target_arch = "x86_64")]
    pub spins: i16,
    /// `__elision` @22.
    #[cfg(target_arch = "x86_64")]
    pub elision: i16,
    /// `__spins` @20.
    #[cfg(target_arch = "aarch64")]
    pub spins: i32,
    /// `__list` @24: `__prev`, `__next` (as addresses).
    pub list: [usize; 2],
    /// @40: the rest of the 48-byte union (`__size`), beyond `__data`.
    #[cfg(target_arch = "aarch64")]
    pub union_tail: u64,
}

/// `struct __pthread_cond_s`, the `__data` member of `pthread_cond_t`
/// (`bits/thread-shared-types.h`). 48 bytes, 8-aligned.
///
/// | byte | field          | type        | meaning in glibc                           |
/// |------|----------------|-------------|--------------------------------------------|
/// | 0    | `wseq`         | 64-bit      | waiter sequence (`__atomic_wide_counter`)  |
/// | 8    | `g1_start`     | 64-bit      | start of group 1                           |
/// | 16   | `g_refs`       | `uint[2]`   | futex waiter refs per group                |
/// | 24   | `g_size`       | `uint[2]`   | group sizes                                |
/// | 32   | `g1_orig_size` | `uint`      | original G1 size (+ condvar lock bits)     |
/// | 36   | `wrefs`        | `uint`      | bit 0 pshared, bit 1 monotonic clock, bit 2 wake request, bits 3.. waiter refs |
/// | 40   | `g_signals`    | `uint[2]`   | signals per group                          |
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlibcCond {
    /// `__wseq` @0.
    pub wseq: u64,
    /// `__g1_start` @8.
    pub g1_start: u64,
    /// `__g_refs` @16.
    pub g_refs: [u32; 2],
    /// `__g_size` @24.
    pub g_size: [u32; 2],
    /// `__g1_orig_size` @32.
    pub g1_orig_size: u32,
    /// `__wrefs` @36 (see [`crate::COND_WREFS_PSHARED`]).
    pub wrefs: u32,
    /// `__g_signals` @40.
    pub g_signals: [u32; 2],
}

/// `struct __pthread_rwlock_arch_t`, the `__data` member of `pthread_rwlock_t`
/// (`bits/struct_rwlock.h`, x86_64 branch; aarch64's generic one has an 8-byte `__pad1`
/// at 32 where x86_64 has `__rwelision` and `__pad1[7]`). 56 bytes, 8-aligned.
///
/// | byte | field            | type       | meaning in glibc                          |
/// |------|------------------|------------|-------------------------------------------|
/// | 0    | `readers`        | `uint`     | reader count and phase bits               |
/// | 4    | `writers`        | `uint`     | writer count / lock bits                  |
/// | 8    | `wrphase_futex`  | `uint`     | futex for the write phase                 |
/// | 12   | `writers_futex`  | `uint`     | futex for writers                         |
/// | 16   | `pad3`, `pad4`   | `uint` ×2  | unused                                    |
/// | 24   | `cur_writer`     | `int`      | TID of the writer                         |
/// | 28   | `shared`         | `int`      | nonzero = process-shared                  |
/// | 32   | `rwelision`      | `schar`    | elision state                             |
/// | 33   | `pad1`           | `uchar[7]` | unused                                    |
/// | 40   | `pad2`           | `ulong`    | unused                                    |
/// | 48   | `flags`          | `uint`     | kind: [`crate::RWLOCK_PREFER_READER`] …   |
/// | 52   | —                | 4 bytes    | tail padding of the 56-byte union         |
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlibcRwlock {
    /// `__readers` @0.
    pub readers: u32,
    /// `__writers` @4.
    pub writers: u32,
    /// `__wrphase_futex` @8.
    pub wrphase_futex: u32,
    /// `__writers_futex` @12.
    pub writers_futex: u32,
    /// `__pad3` @16.
    pub pad3: u32,
    /// `__pad4` @20.
    pub pad4: u32,
    /// `__cur_writer` @24.
    pub cur_writer: i32,
    /// `__shared` @28.
    pub shared: i32,
    /// `__rwelision` @32.
    #[cfg(target_arch = "x86_64")]
    pub rwelision: i8,
    /// `__pad1` @33.
    #[cfg(target_arch = "x86_64")]
    pub pad1: [u8; 7],
    /// `__pad1` @32.
    #[cfg(target_arch = "aarch64")]
    pub pad1: u64,
    /// `__pad2` @40.
    pub pad2: u64,
    /// `__flags` @48.
    pub flags: u32,
}

/// Size and alignment of one glibc type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeLayout {
    /// `sizeof`.
    pub size: usize,
    /// `_Alignof`.
    pub align: usize,
}

/// Sizes and alignments of glibc's opaque pthread types on this architecture (from
/// `bits/pthreadtypes-arch.h`; the alignment is that of the union's `long int __align`
/// or `int __align` member).
pub mod layouts {
    use super::TypeLayout;
    const fn l(size: usize, align: usize) -> TypeLayout {
        TypeLayout { size, align }
    }
    /// The sizes that differ between x86_64 and aarch64 (`__SIZEOF_PTHREAD_*`).
    #[cfg(target_arch = "x86_64")]
    const ARCH: (usize, usize, usize) = (40, 4, 56);
    #[cfg(target_arch = "aarch64")]
    const ARCH: (usize, usize, usize) = (48, 8, 64);
    const MUTEX: usize = ARCH.0;
    const SMALL_ATTR: usize = ARCH.1;
    const ATTR: usize = ARCH.2;
    /// `pthread_mutex_t`.
    pub const PTHREAD_MUTEX_T: TypeLayout = l(MUTEX, 8);
    /// `pthread_cond_t`.
    pub const PTHREAD_COND_T: TypeLayout = l(48, 8);
    /// `pthread_rwlock_t`.
    pub const PTHREAD_RWLOCK_T: TypeLayout = l(56, 8);
    /// `pthread_mutexattr_t`.
    pub const PTHREAD_MUTEXATTR_T: TypeLayout = l(SMALL_ATTR, 4);
    /// `pthread_condattr_t`.
    pub const PTHREAD_CONDATTR_T: TypeLayout = l(SMALL_ATTR, 4);
    /// `pthread_rwlockattr_t`.
    pub const PTHREAD_RWLOCKATTR_T: TypeLayout = l(8, 8);
    /// `pthread_barrier_t`.
    pub const PTHREAD_BARRIER_T: TypeLayout = l(32, 8);
    /// `pthread_barrierattr_t`.
    pub const PTHREAD_BARRIERATTR_T: TypeLayout = l(SMALL_ATTR, 4);
    /// `sem_t`.
    pub const SEM_T: TypeLayout = l(32, 8);
    /// `pthread_once_t` (a plain `int`).
    pub const PTHREAD_ONCE_T: TypeLayout = l(4, 4);
    /// `pthread_spinlock_t` (a plain `volatile int`).
    pub const PTHREAD_SPINLOCK_T: TypeLayout = l(4, 4);
    /// `pthread_attr_t`.
    pub const PTHREAD_ATTR_T: TypeLayout = l(ATTR, 8);
}

/// Compile-time check that a Rust type has a [`TypeLayout`].
macro_rules! assert_layout {
    ($t:ty, $l:expr) => {
        const _: () = assert!(size_of::<$t>() == $l.size && align_of::<$t>() == $l.align);
    };
}
pub(crate) use assert_layout;

assert_layout!(libc::pthread_mutex_t, layouts::PTHREAD_MUTEX_T);
assert_layout!(libc::pthread_cond_t, layouts::PTHREAD_COND_T);
assert_layout!(libc::pthread_rwlock_t, layouts::PTHREAD_RWLOCK_T);
assert_layout!(libc::pthread_mutexattr_t, layouts::PTHREAD_MUTEXATTR_T);
assert_layout!(libc::pthread_condattr_t, layouts::PTHREAD_CONDATTR_T);
assert_layout!(libc::pthread_rwlockattr_t, layouts::PTHREAD_RWLOCKATTR_T);
assert_layout!(libc::pthread_barrier_t, layouts::PTHREAD_BARRIER_T);
assert_layout!(libc::pthread_barrierattr_t, layouts::PTHREAD_BARRIERATTR_T);
assert_layout!(libc::sem_t, layouts::SEM_T);
assert_layout!(libc::pthread_once_t, layouts::PTHREAD_ONCE_T);
assert_layout!(libc::pthread_spinlock_t, layouts::PTHREAD_SPINLOCK_T);
assert_layout!(libc::pthread_attr_t, layouts::PTHREAD_ATTR_T);
assert_layout!(GlibcMutex, layouts::PTHREAD_MUTEX_T);
assert_layout!(GlibcCond, layouts::PTHREAD_COND_T);
assert_layout!(GlibcRwlock, layouts::PTHREAD_RWLOCK_T);

const _: () = {
    assert!(offset_of!(GlibcMutex, lock) == 0);
    assert!(offset_of!(GlibcMutex, count) == 4);
    assert!(offset_of!(GlibcMutex, owner) == 8);
    assert!(offset_of!(GlibcMutex, nusers) == 12);
    assert!(offset_of!(GlibcMutex, kind) == 16);
    assert!(offset_of!(GlibcMutex, spins) == 20);
    #[cfg(target_arch = "x86_64")]
    assert!(offset_of!(GlibcMutex, elision) == 22);
    assert!(offset_of!(GlibcMutex, list) == 24);

    assert!(offset_of!(GlibcCond, wseq) == 0);
    assert!(offset_of!(GlibcCond, g1_start) == 8);
    assert!(offset_of!(GlibcCond, g_refs) == 16);
    assert!(offset_of!(GlibcCond, g_size) == 24);
    assert!(offset_of!(GlibcCond, g1_orig_size) == 32);
    assert!(offset_of!(GlibcCond, wrefs) == 36);
    assert!(offset_of!(GlibcCond, g_signals) == 40);

    assert!(offset_of!(GlibcRwlock, readers) == 0);
    assert!(offset_of!(GlibcRwlock, writers) == 4);
    assert!(offset_of!(GlibcRwlock, wrphase_futex) == 8);
    assert!(offset_of!(GlibcRwlock, writers_futex) == 12);
    assert!(offset_of!(GlibcRwlock, pad3) == 16);
    assert!(offset_of!(GlibcRwlock, pad4) == 20);
    assert!(offset_of!(GlibcRwlock, cur_writer) == 24);
    assert!(offset_of!(GlibcRwlock, shared) == 28);
    #[cfg(target_arch = "x86_64")]
    assert!(offset_of!(GlibcRwlock, rwelision) == 32);
    #[cfg(target_arch = "x86_64")]
    assert!(offset_of!(GlibcRwlock, pad1) == 33);
    #[cfg(target_arch = "aarch64")]
    assert!(offset_of!(GlibcRwlock, pad1) == 32);
    assert!(offset_of!(GlibcRwlock, pad2) == 40);
    assert!(offset_of!(GlibcRwlock, flags) == 48);
};

macro_rules! bytes_conversions {
    ($t:ty, $n:expr) => {
        impl $t {
            /// Reinterprets the raw bytes of the glibc object (native endianness).
            pub const fn from_bytes(b: [u8; $n]) -> Self {
                // SAFETY: same size (checked above); every bit pattern is valid for a
                // struct of integers (padding bytes may hold anything); `transmute`
                // copies by value, so the array's smaller alignment does not matter.
                unsafe { core::mem::transmute::<[u8; $n], Self>(b) }
            }
        }
    };
}
bytes_conversions!(GlibcMutex, layouts::PTHREAD_MUTEX_T.size);
bytes_conversions!(GlibcCond, layouts::PTHREAD_COND_T.size);
bytes_conversions!(GlibcRwlock, layouts::PTHREAD_RWLOCK_T.size);
