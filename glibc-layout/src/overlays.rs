//! The runtime's in-place views of `pthread_mutex_t`, `pthread_cond_t` and
//! `pthread_rwlock_t`: the same bytes, as atomics.
//!
//! Each overlay keeps glibc's type field where glibc keeps it (mutex `__kind`, cond
//! `__wrefs` flag bits, rwlock `__shared` and `__flags`); everything else belongs to the
//! runtime. Objects that glibc keeps (see [`crate::mutex_kind_is_delegated`]) must only
//! be read through an overlay, never written.

use core::hint::spin_loop;
use core::mem::{align_of, size_of};
use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use memoffset::offset_of;

use crate::{layouts, mutex_kind_is_delegated, mutex_kind_is_valid_runtime};
use crate::{GlibcCond, GlibcMutex, GlibcRwlock};

/// `init_state`: never seen by the runtime; all-zero memory or a static initializer.
pub const INIT_STATIC: u32 = 0;
/// `init_state`: one caller is validating the object right now.
pub const INIT_INITIALIZING: u32 = 1;
/// `init_state`: initialized (lazily or by `pthread_mutex_init`), usable.
pub const INIT_READY: u32 = 2;
/// `init_state`: destroyed, or found with an invalid `kind`; operations fail with EINVAL.
pub const INIT_DESTROYED: u32 = 3;

/// The runtime's view of a `pthread_mutex_t` (40 bytes, 8-aligned; 48 on aarch64,
/// whose last 8 are unused).
///
/// | byte | field        | glibc field            | content                                |
/// |------|--------------|------------------------|----------------------------------------|
/// | 0    | `lock`       | `__lock`               | runtime lock word, 0 = unlocked        |
/// | 4    | `count`      | `__count`              | recursion count                        |
/// | 8    | `owner`      | `__owner`, `__nusers`  | owner's `pthread_self()`, 0 = none     |
/// | 16   | `kind`       | `__kind`               | glibc's encoding (`MUTEX_KIND_*`), -1 after destroy |
/// | 20   | `init_state` | `__spins`, `__elision` | `INIT_*`; 0 in every static initializer |
/// | 24   | `reserved`   | `__list`               | zero, unused                           |
///
/// ## Why lazy initialization is safe
///
/// A mutex made with `PTHREAD_*_MUTEX_INITIALIZER*` (or zeroed memory, which equals
/// `PTHREAD_MUTEX_INITIALIZER`) never reaches `pthread_mutex_init`. Its bytes are
/// nonetheless a valid runtime state: every static initializer is zero except `__kind`
/// (see [`crate::mutex_initializer`]), so `lock`, `count` and `owner` read "unlocked,
/// no owner", `init_state` reads [`INIT_STATIC`], and `kind` already holds the type the
/// program asked for. [`MutexOverlay::ensure_initialized`] therefore only has to
/// validate `kind` and publish [`INIT_READY`]; it writes nothing but `init_state`, so
/// racing first users cannot lose each other's lock state, and the CAS makes exactly
/// one of them do the publishing (the others spin for the few instructions it takes).
/// glibc itself never writes `__spins`/`__elision` of a mutex the runtime owns, because
/// every function that would (lock, unlock, init, destroy) is interposed.
#[repr(C)]
pub struct MutexOverlay {
    /// @0 (`__lock`) runtime lock state word; 0 = unlocked.
    pub lock: AtomicU32,
    /// @4 (`__count`) recursion count.
    pub count: AtomicU32,
    /// @8 (`__owner` + `__nusers`) owner identity = `pthread_self()`, 0 = none.
    pub owner: AtomicU64,
    /// @16 (`__kind`) glibc's encoding; -1 after destroy (as glibc).
    pub kind: AtomicI32,
    /// @20 (`__spins` + `__elision`) one of the `INIT_*` values.
    pub init_state: AtomicU32,
    /// @24 (`__list`) unused, zero.
    pub reserved: [AtomicU64; 2],
    /// @40 (aarch64 only: the 48-byte union's tail beyond `__data`) unused.
    #[cfg(target_arch = "aarch64")]
    pub union_tail: AtomicU64,
}

impl MutexOverlay {
    /// Views a program's `pthread_mutex_t` in place.
    ///
    /// # Safety
    /// `p` must be non-null, 8-aligned and valid for reads and writes of 40 bytes for
    /// `'a`, and all concurrent accesses during `'a` must be atomic (other overlays,
    /// glibc's atomics), never plain writes.
    #[inline]
    pub unsafe fn from_ptr<'a>(p: *mut libc::pthread_mutex_t) -> &'a MutexOverlay {
        // SAFETY: same size and alignment (checked below); the caller guarantees
        // validity; all fields are atomics, so a shared reference may mutate.
        unsafe { &*p.cast::<MutexOverlay>() }
    }

    /// Makes a mutex the runtime has never seen usable (see the type's docs).
    ///
    /// - [`INIT_STATIC`]: one caller CASes to [`INIT_INITIALIZING`], checks `kind`
    ///   with [`crate::mutex_kind_is_valid_runtime`], and publishes [`INIT_READY`]
    ///   (or [`INIT_DESTROYED`] for an invalid kind, which glibc would reject with
    ///   EINVAL too). Delegated kinds are left completely untouched.
    /// - [`INIT_INITIALIZING`]: spins until the other caller has published.
    /// - [`INIT_READY`], [`INIT_DESTROYED`] (or garbage): returns at once; the caller
    ///   checks `init_state`/`kind`.
    ///
    /// The Acquire on return pairs with the Release of the publication or of
    /// [`MutexOverlay::init`].
    pub fn ensure_initialized(&self) {
        loop {
            match self.init_state.load(Ordering::Acquire) {
                INIT_STATIC => {
                    let kind = self.kind.load(Ordering::Relaxed);
                    if mutex_kind_is_delegated(kind) {
                        return; // glibc's bytes: __spins/__elision are not ours.
                    }
                    if self
                        .init_state
                        .compare_exchange(INIT_STATIC, INIT_INITIALIZING, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                    {
                        let next = if mutex_kind_is_valid_runtime(kind) { INIT_READY } else { INIT_DESTROYED };
                        self.init_state.store(next, Ordering::Release);
                        return;
                    }
                }
                INIT_INITIALIZING => spin_loop(),
                _ => return,
            }
        }
    }

    /// What `pthread_mutex_init` does for a runtime-owned mutex: unlocked, no owner,
    /// `kind` stored as given (glibc's encoding), then [`INIT_READY`] (Release).
    pub fn init(&self, kind: i32) {
        self.lock.store(0, Ordering::Relaxed);
        self.count.store(0, Ordering::Relaxed);
        self.owner.store(0, Ordering::Relaxed);
        self.reserved.iter().for_each(|r| r.store(0, Ordering::Relaxed));
        #[cfg(target_arch = "aarch64")]
        self.union_tail.store(0, Ordering::Relaxed);
        self.kind.store(kind, Ordering::Relaxed);
        self.init_state.store(INIT_READY, Ordering::Release);
    }

    /// What `pthread_mutex_destroy` leaves: `kind` = -1 (as glibc) and
    /// [`INIT_DESTROYED`].
    pub fn mark_destroyed(&self) {
        self.kind.store(crate::MUTEX_KIND_DESTROYED, Ordering::Relaxed);
        self.init_state.store(INIT_DESTROYED, Ordering::Release);
    }
}

/// The runtime's view of a `pthread_cond_t` (48 bytes, 8-aligned).
///
/// | byte   | field       | glibc field                   | content                      |
/// |--------|-------------|-------------------------------|------------------------------|
/// | 0      | `waiters`   | `__wseq` low                  | number of queued waiters     |
/// | 4      | `seq`       | `__wseq` high                 | wake sequence                |
/// | 8..36  | `reserved`  | `__g1_start` … `__g1_orig_size` | zero, unused               |
/// | 36     | `flags`     | `__wrefs`                     | bit 0 pshared, bit 1 `CLOCK_MONOTONIC` |
/// | 40     | `reserved2` | `__g_signals`                 | zero, unused                 |
///
/// `PTHREAD_COND_INITIALIZER` is all zero, which reads as "no waiters, private,
/// `CLOCK_REALTIME`", so a condition variable needs no lazy initialization step.
#[repr(C, align(8))]
pub struct CondOverlay {
    /// @0 number of waiters queued (runtime).
    pub waiters: AtomicU32,
    /// @4 wake sequence (runtime).
    pub seq: AtomicU32,
    /// @8..36 unused.
    pub reserved: [AtomicU32; 7],
    /// @36 (`__wrefs`) [`crate::COND_WREFS_PSHARED`], [`crate::COND_WREFS_CLOCK_MONOTONIC`]
    /// as glibc's `pthread_cond_init` writes them.
    pub flags: AtomicU32,
    /// @40 (`__g_signals`) unused.
    pub reserved2: [AtomicU32; 2],
}

impl CondOverlay {
    /// Views a program's `pthread_cond_t` in place.
    ///
    /// # Safety
    /// As [`MutexOverlay::from_ptr`], for 48 bytes.
    #[inline]
    pub unsafe fn from_ptr<'a>(p: *mut libc::pthread_cond_t) -> &'a CondOverlay {
        // SAFETY: same size and alignment (checked below); caller guarantees validity.
        unsafe { &*p.cast::<CondOverlay>() }
    }
}

/// The runtime's view of a `pthread_rwlock_t` (56 bytes, 8-aligned).
///
/// | byte   | field       | glibc field                            | content               |
/// |--------|-------------|----------------------------------------|-----------------------|
/// | 0      | `state`     | `__readers`                            | readers and writer bits |
/// | 4      | `waiters`   | `__writers`                            | waiter count/bits     |
/// | 8      | `writer`    | `__wrphase_futex`, `__writers_futex`   | writer identity       |
/// | 16..28 | `reserved`  | `__pad3`, `__pad4`, `__cur_writer`     | zero, unused          |
/// | 28     | `shared`    | `__shared`                             | nonzero = process-shared |
/// | 32..48 | `reserved2` | `__rwelision`, `__pad1`, `__pad2`      | zero, unused          |
/// | 48     | `flags`     | `__flags`                              | `RWLOCK_PREFER_*`     |
/// | 52     | `reserved3` | tail padding                           | unused                |
///
/// Both rwlock static initializers are zero except `__flags`, which reads as
/// "unlocked, private, kind = `__flags`": no lazy initialization step is needed.
#[repr(C)]
pub struct RwlockOverlay {
    /// @0 readers count and writer bits (runtime).
    pub state: AtomicU32,
    /// @4 waiters (runtime).
    pub waiters: AtomicU32,
    /// @8 writer identity (runtime).
    pub writer: AtomicU64,
    /// @16..28 unused.
    pub reserved: [AtomicU32; 3],
    /// @28 (`__shared`) nonzero = process-shared.
    pub shared: AtomicI32,
    /// @32..48 unused.
    pub reserved2: [AtomicU64; 2],
    /// @48 (`__flags`) [`crate::RWLOCK_PREFER_READER`] and friends.
    pub flags: AtomicU32,
    /// @52 unused.
    pub reserved3: AtomicU32,
}

impl RwlockOverlay {
    /// Views a program's `pthread_rwlock_t` in place.
    ///
    /// # Safety
    /// As [`MutexOverlay::from_ptr`], for 56 bytes.
    #[inline]
    pub unsafe fn from_ptr<'a>(p: *mut libc::pthread_rwlock_t) -> &'a RwlockOverlay {
        // SAFETY: same size and alignment (checked below); caller guarantees validity.
        unsafe { &*p.cast::<RwlockOverlay>() }
    }
}

crate::mirrors::assert_layout!(MutexOverlay, layouts::PTHREAD_MUTEX_T);
crate::mirrors::assert_layout!(CondOverlay, layouts::PTHREAD_COND_T);
crate::mirrors::assert_layout!(RwlockOverlay, layouts::PTHREAD_RWLOCK_T);

const _: () = {
    assert!(offset_of!(MutexOverlay, lock) == offset_of!(GlibcMutex, lock));
    assert!(offset_of!(MutexOverlay, count) == offset_of!(GlibcMutex, count));
    assert!(offset_of!(MutexOverlay, owner) == offset_of!(GlibcMutex, owner));
    assert!(offset_of!(MutexOverlay, kind) == offset_of!(GlibcMutex, kind));
    assert!(offset_of!(MutexOverlay, init_state) == offset_of!(GlibcMutex, spins));
    assert!(offset_of!(MutexOverlay, reserved) == offset_of!(GlibcMutex, list));

    assert!(offset_of!(CondOverlay, seq) == 4);
    assert!(offset_of!(CondOverlay, reserved) == offset_of!(GlibcCond, g1_start));
    assert!(offset_of!(CondOverlay, flags) == offset_of!(GlibcCond, wrefs));
    assert!(offset_of!(CondOverlay, reserved2) == offset_of!(GlibcCond, g_signals));

    assert!(offset_of!(RwlockOverlay, waiters) == offset_of!(GlibcRwlock, writers));
    assert!(offset_of!(RwlockOverlay, writer) == offset_of!(GlibcRwlock, wrphase_futex));
    assert!(offset_of!(RwlockOverlay, reserved) == offset_of!(GlibcRwlock, pad3));
    assert!(offset_of!(RwlockOverlay, shared) == offset_of!(GlibcRwlock, shared));
    assert!(offset_of!(RwlockOverlay, reserved2) == 32);
    assert!(offset_of!(RwlockOverlay, flags) == offset_of!(GlibcRwlock, flags));
    assert!(offset_of!(RwlockOverlay, reserved3) == 52);
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;

    /// A pthread_mutex_t holding `bytes`, as a static initializer would leave it.
    fn mutex_from(bytes: [u8; layouts::PTHREAD_MUTEX_T.size]) -> Box<libc::pthread_mutex_t> {
        // SAFETY: same size; pthread_mutex_t is plain bytes.
        Box::new(unsafe { core::mem::transmute::<[u8; layouts::PTHREAD_MUTEX_T.size], libc::pthread_mutex_t>(bytes) })
    }

    #[test]
    fn static_initializers_become_ready_with_their_kind() {
        for (bytes, kind) in [
            (PTHREAD_MUTEX_INITIALIZER, 0),
            (PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP, 1),
            (PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP, 2),
            (PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP, 3),
        ] {
            let mut m = mutex_from(bytes);
            // SAFETY: a live, aligned pthread_mutex_t used only through the overlay.
            let o = unsafe { MutexOverlay::from_ptr(&mut *m) };
            assert_eq!(o.init_state.load(Ordering::Relaxed), INIT_STATIC);
            o.ensure_initialized();
            assert_eq!(o.init_state.load(Ordering::Relaxed), INIT_READY);
            assert_eq!(o.kind.load(Ordering::Relaxed), kind);
            assert_eq!((o.lock.load(Ordering::Relaxed), o.owner.load(Ordering::Relaxed)), (0, 0));
            o.mark_destroyed();
            o.ensure_initialized();
            assert_eq!(o.init_state.load(Ordering::Relaxed), INIT_DESTROYED);
            assert_eq!(o.kind.load(Ordering::Relaxed), -1);
            o.init(MUTEX_KIND_RECURSIVE);
            assert_eq!(o.init_state.load(Ordering::Relaxed), INIT_READY);
        }
    }

    #[test]
    fn invalid_and_delegated_kinds() {
        let mut m = mutex_from(mutex_initializer(7));
        // SAFETY: as above.
        let o = unsafe { MutexOverlay::from_ptr(&mut *m) };
        o.ensure_initialized();
        assert_eq!(o.init_state.load(Ordering::Relaxed), INIT_DESTROYED);

        let mut m = mutex_from(mutex_initializer(MUTEX_KIND_ROBUST | MUTEX_KIND_PSHARED));
        // SAFETY: as above.
        let o = unsafe { MutexOverlay::from_ptr(&mut *m) };
        o.ensure_initialized();
        assert_eq!(o.init_state.load(Ordering::Relaxed), INIT_STATIC, "glibc's bytes untouched");
    }

    #[test]
    fn racing_first_users_all_see_ready() {
        for _ in 0..200 {
            let p = Box::into_raw(mutex_from(PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP));
            let addr = p as usize; // a raw pointer is not Send; its address is
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    std::thread::spawn(move || {
                        // SAFETY: freed only after every thread has joined; atomics only.
                        let o = unsafe { MutexOverlay::from_ptr(addr as *mut _) };
                        o.ensure_initialized();
                        assert_eq!(o.init_state.load(Ordering::Relaxed), INIT_READY);
                        assert_eq!(o.kind.load(Ordering::Relaxed), MUTEX_KIND_ERRORCHECK);
                    })
                })
                .collect();
            threads.into_iter().for_each(|t| t.join().unwrap());
            // SAFETY: from Box::into_raw above, no users left.
            drop(unsafe { Box::from_raw(p) });
        }
    }

    #[test]
    fn cond_and_rwlock_overlays_read_glibc_fields() {
        let mut rw: libc::pthread_rwlock_t =
            // SAFETY: same size; plain bytes.
            unsafe { core::mem::transmute(PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP) };
        // SAFETY: live and aligned.
        let o = unsafe { RwlockOverlay::from_ptr(&mut rw) };
        assert_eq!(o.flags.load(Ordering::Relaxed), RWLOCK_PREFER_WRITER_NONRECURSIVE);
        assert_eq!(o.shared.load(Ordering::Relaxed), 0);

        let mut c = libc::PTHREAD_COND_INITIALIZER;
        // SAFETY: live and aligned.
        let o = unsafe { CondOverlay::from_ptr(&mut c) };
        assert_eq!(o.flags.load(Ordering::Relaxed), 0);
    }
}
