//! `pthread_barrier_t` for fibers and threads, in the program's own 32 bytes.
//!
//! # Layout
//!
//! | offset | glibc field      | ours                                                   |
//! |--------|------------------|--------------------------------------------------------|
//! | 0      | `in`, `current_round` | `state`: u64, see below                           |
//! | 8      | `count`          | `count`: threads per round (1..0x7ffffffe)             |
//! | 12     | `shared`         | 0 private; glibc's `FUTEX_SHARED` (128): process-shared, glibc's barrier |
//! | 16     | `out`            | `inside`: threads between entry and exit, + DESTROYING  |
//!
//! State word (`state`, u64):
//!
//! | bits   | name    | meaning                                            |
//! |--------|---------|----------------------------------------------------|
//! | 0..31  | ARRIVED | threads that arrived in the current round          |
//! | 32..63 | ROUND   | round number, +1 (wrapping) each time a round completes |
//!
//! `inside` word:
//!
//! | bits   | name       | meaning                                              |
//! |--------|------------|------------------------------------------------------|
//! | 0..30  | INSIDE     | threads inside `pthread_barrier_wait`                |
//! | 31     | DESTROYING | `pthread_barrier_destroy` waits for INSIDE to drop to 0 |
//!
//! # Algorithm
//!
//! A thread enters (INSIDE += 1) and adds itself to ARRIVED with a CAS. The one that
//! makes ARRIVED reach `count` completes the round instead: in the same CAS it resets
//! ARRIVED to 0 and bumps ROUND, then wakes every thread parked on the barrier's
//! address and returns `PTHREAD_BARRIER_SERIAL_THREAD`; so, as in glibc, the serial
//! thread is the last to arrive, exactly one per round, and a thread beyond `count`
//! simply opens the next round. The others spin briefly, then park until ROUND moves
//! (re-checked under the bucket lock), and return 0.
//!
//! # Destruction
//!
//! POSIX allows `pthread_barrier_destroy` (and freeing the memory) as soon as the
//! round completed, typically by the serial thread while the others are still waking
//! up. As glibc does with its `out` counter, every thread leaves by decrementing
//! INSIDE as its very last access; `destroy` sets DESTROYING and parks (key:
//! `&inside`) until INSIDE is 0, and the thread that drops INSIDE to 0 while
//! DESTROYING is set wakes it, using the address only as a key. Destroying a barrier
//! with threads blocked in an incomplete round waits, as glibc's does.
//!
//! Process-shared barriers (and any at a NULL or misaligned address) are initialized
//! and run by glibc; a fiber waits on one by running the real `pthread_barrier_wait`
//! on its donor thread.

use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

use libc::{c_int, c_uint, pthread_barrier_t, pthread_barrierattr_t};

use crate::base::sys;
use crate::runtime::fibers::fiber::WaitKind;
use crate::sync::parking::{self, TOKEN_NORMAL};

/// Our view of the 32 bytes of a `pthread_barrier_t`.
#[repr(C)]
pub struct BarrierOverlay {
    pub state: AtomicU64,
    pub count: AtomicU32,
    pub shared: AtomicI32,
    pub inside: AtomicU32,
    _pad: [u32; 3],
}

const _: () = {
    assert!(core::mem::size_of::<BarrierOverlay>() == core::mem::size_of::<pthread_barrier_t>());
    assert!(core::mem::align_of::<BarrierOverlay>() <= core::mem::align_of::<pthread_barrier_t>());
    assert!(core::mem::offset_of!(BarrierOverlay, count) == 8);
    assert!(core::mem::offset_of!(BarrierOverlay, shared) == 12);
    assert!(core::mem::offset_of!(BarrierOverlay, inside) == 16);
};

/// glibc's `BARRIER_IN_THRESHOLD` (UINT_MAX/2): counts from here on get EINVAL.
pub const COUNT_LIMIT: u32 = u32::MAX / 2;
/// What `pthread_barrier_wait` returns to exactly one thread of each round.
pub const PTHREAD_BARRIER_SERIAL_THREAD: c_int = -1;
/// In `inside`: `pthread_barrier_destroy` waits for INSIDE to drop to 0.
const DESTROYING: u32 = 1 << 31;
/// ROUND's position in `state` (above the 32-bit ARRIVED).
const ROUND_SHIFT: u32 = 32;
/// Spins before parking. Origin: a round completed by a fiber on another worker is
/// often only a few hundred ns away; three short spins (~2 µs in all) cover that.
const SPIN_LIMIT: u32 = 3;

#[inline]
fn round_of(s: u64) -> u32 {
    (s >> ROUND_SHIFT) as u32
}

/// `pthread_barrier_init` of a private barrier (`count` already checked).
pub fn init(b: &BarrierOverlay, count: u32) {
    b.state.store(0, Ordering::Relaxed);
    b.shared.store(0, Ordering::Relaxed);
    b.inside.store(0, Ordering::Relaxed);
    b.count.store(count, Ordering::Release);
}

/// `pthread_barrier_wait`.
///
/// # Safety
/// `b` points to a live private barrier, at least until this thread counts as inside;
/// after it leaves (the last step) the memory may be gone.
pub unsafe fn wait(b: *const BarrierOverlay) -> c_int {
    // SAFETY: alive while we are inside (caller's contract; destroy waits for us).
    let bar = unsafe { &*b };
    let count = bar.count.load(Ordering::Relaxed);
    if count == 0 || count >= COUNT_LIMIT {
        return libc::EINVAL; // never initialized or garbage (glibc would misbehave)
    }
    bar.inside.fetch_add(1, Ordering::Acquire);
    let mut s = bar.state.load(Ordering::Relaxed);
    let serial = loop {
        let arrived = (s as u32).wrapping_add(1);
        let round = round_of(s);
        if arrived >= count {
            let next = (round.wrapping_add(1) as u64) << ROUND_SHIFT;
            match bar.state.compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => {
                    parking::unpark_some_quick(b as usize, u32::MAX, usize::MAX);
                    break true;
                }
                Err(x) => s = x,
            }
        } else {
            match bar.state.compare_exchange_weak(s, s + 1, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => {
                    wait_round(bar, round);
                    break false;
                }
                Err(x) => s = x,
            }
        }
    };
    // SAFETY: still inside; leave() is our last access.
    unsafe { leave(b) };
    if serial {
        PTHREAD_BARRIER_SERIAL_THREAD
    } else {
        0
    }
}

/// Waits until the round `round` completed.
#[cold]
fn wait_round(bar: &BarrierOverlay, round: u32) {
    let key = bar as *const BarrierOverlay as usize;
    let mut spins = 0;
    loop {
        if round_of(bar.state.load(Ordering::Acquire)) != round {
            return;
        }
        if spins < SPIN_LIMIT {
            for _ in 0..(16u32 << spins) {
                sys::cpu_relax();
            }
            spins += 1;
            continue;
        }
        parking::park(
            key,
            u32::MAX,
            WaitKind::Barrier,
            || round_of(bar.state.load(Ordering::SeqCst)) == round,
            || {},
            |_| {},
            None,
        );
    }
}

/// Stops counting as inside; wakes a waiting `destroy` if we were the last.
///
/// # Safety
/// `b` is alive until the decrement, which is our last access to it.
unsafe fn leave(b: *const BarrierOverlay) {
    // SAFETY: alive until the decrement completes (caller).
    let key = unsafe { &(*b).inside } as *const AtomicU32 as usize;
    // SAFETY: as above.
    let before = unsafe { (*b).inside.fetch_sub(1, Ordering::Release) };
    if before == DESTROYING | 1 {
        parking::unpark_one(key, |_| TOKEN_NORMAL);
    }
}

/// `pthread_barrier_destroy`: waits until every thread that entered has left.
pub fn destroy(b: &BarrierOverlay) -> c_int {
    let key = &b.inside as *const AtomicU32 as usize;
    let before = b.inside.fetch_or(DESTROYING, Ordering::Acquire);
    if before & !DESTROYING != 0 {
        loop {
            parking::park(
                key,
                u32::MAX,
                WaitKind::Barrier,
                || b.inside.load(Ordering::SeqCst) & !DESTROYING != 0,
                || {},
                |_| {},
                None,
            );
            if b.inside.load(Ordering::Acquire) & !DESTROYING == 0 {
                break;
            }
        }
    }
    // Ready for a later pthread_barrier_init on the same memory.
    b.inside.store(0, Ordering::Relaxed);
    0
}

// ---------------------------------------------------------------------------------
// Entry points behind the `pthread_barrier_*` exports.
// ---------------------------------------------------------------------------------

pub mod api {
    use super::*;

    /// glibc's own functions (looked up with dlsym/dlvsym), for the objects and
    /// attributes the runtime leaves to glibc: `real::` always means glibc's.
    pub mod real {
        use super::*;
        crate::real_fns! {
            fn pthread_barrier_init(b: *mut pthread_barrier_t, a: *const pthread_barrierattr_t, count: c_uint) -> c_int;
            fn pthread_barrier_wait(b: *mut pthread_barrier_t) -> c_int;
            fn pthread_barrier_destroy(b: *mut pthread_barrier_t) -> c_int;
            fn pthread_barrierattr_getpshared(a: *const pthread_barrierattr_t, p: *mut c_int) -> c_int;
        }
    }

    /// Whether we can overlay this address (non-NULL, aligned). Others stay glibc's
    /// from `pthread_barrier_init` on, as natively.
    #[inline]
    fn overlayable(b: *mut pthread_barrier_t) -> bool {
        !b.is_null() && (b as usize).is_multiple_of(core::mem::align_of::<BarrierOverlay>())
    }

    /// Our barrier, or None for glibc's (process-shared, or not overlayable).
    ///
    /// # Safety
    /// `b` is NULL or points to a pthread_barrier_t.
    #[inline]
    unsafe fn ours<'a>(b: *mut pthread_barrier_t) -> Option<&'a BarrierOverlay> {
        if !overlayable(b) {
            return None;
        }
        // SAFETY: same size, compatible alignment (checked above), atomics only.
        let o = unsafe { &*(b as *const BarrierOverlay) };
        if o.shared.load(Ordering::Relaxed) != 0 {
            None
        } else {
            Some(o)
        }
    }

    /// # Safety
    /// As `pthread_barrier_init`.
    pub unsafe fn init(b: *mut pthread_barrier_t, attr: *const pthread_barrierattr_t, count: c_uint) -> c_int {
        // glibc checks the count first.
        if count == 0 || count >= COUNT_LIMIT {
            return libc::EINVAL;
        }
        let mut pshared = libc::PTHREAD_PROCESS_PRIVATE;
        if !attr.is_null() {
            // SAFETY: the program's initialized attribute object.
            unsafe { real::pthread_barrierattr_getpshared(attr, &mut pshared) };
        }
        if pshared != libc::PTHREAD_PROCESS_PRIVATE || !overlayable(b) {
            // SAFETY: a barrier we cannot overlay: glibc's init gets the program's `b` (storage), `attr`
            // (null or initialised) and count.
            return unsafe { real::pthread_barrier_init(b, attr, count) };
        }
        // SAFETY: the program owns the 32 bytes; we fill them as glibc's init would.
        unsafe { core::ptr::write_bytes(b as *mut u8, 0, core::mem::size_of::<pthread_barrier_t>()) };
        // SAFETY: as above; non-null and aligned.
        super::init(unsafe { &*(b as *const BarrierOverlay) }, count);
        0
    }

    /// # Safety
    /// As `pthread_barrier_wait`.
    pub unsafe fn wait(b: *mut pthread_barrier_t) -> c_int {
        // SAFETY: `b` is NULL or a pthread_barrier_t (pthread_barrier_wait's contract), all `ours`
        // asks.
        if unsafe { ours(b) }.is_none() {
            // SAFETY: glibc's barrier: its wait gets the program's initialised `b`, on the donor for a
            // fiber (the donor shares the fiber's memory, so `b` stays valid).
            return crate::signal::on_donor::run_on_donor_taking_signals(|| unsafe { real::pthread_barrier_wait(b) });
        }
        // SAFETY: `b` is the program's live private barrier (pthread_barrier_wait's contract) and
        // ours, so non-null and aligned: `super::wait`'s contract.
        unsafe { super::wait(b as *const BarrierOverlay) }
    }

    /// # Safety
    /// As `pthread_barrier_destroy`.
    pub unsafe fn destroy(b: *mut pthread_barrier_t) -> c_int {
        // SAFETY: `b` is NULL or a pthread_barrier_t (pthread_barrier_destroy's contract), all
        // `ours` asks.
        match unsafe { ours(b) } {
            Some(o) => super::destroy(o),
            // SAFETY: glibc's barrier: its destroy gets the program's initialised `b` (it may wait for
            // leavers, so on the donor).
            None => crate::signal::on_donor::run_on_donor_taking_signals(|| unsafe { real::pthread_barrier_destroy(b) }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    struct Bar(Box<pthread_barrier_t>);
    // SAFETY: accessed only through the overlay's atomics.
    unsafe impl Send for Bar {}
    // SAFETY: as above.
    unsafe impl Sync for Bar {}
    impl Bar {
        fn new(count: u32) -> Bar {
            // SAFETY: zero bytes are a valid pthread_barrier_t to overwrite.
            let b = Bar(Box::new(unsafe { core::mem::zeroed() }));
            init(b.o(), count);
            b
        }
        fn o(&self) -> &BarrierOverlay {
            // SAFETY: a live, aligned pthread_barrier_t.
            unsafe { &*(&*self.0 as *const pthread_barrier_t as *const BarrierOverlay) }
        }
    }

    #[test]
    fn one_serial_per_round() {
        const N: usize = 4;
        const ROUNDS: usize = 300;
        let b = Arc::new(Bar::new(N as u32));
        let serials = Arc::new((0..ROUNDS).map(|_| AtomicU32::new(0)).collect::<Vec<_>>());
        let hs: Vec<_> = (0..N)
            .map(|_| {
                let (b, serials) = (b.clone(), serials.clone());
                std::thread::spawn(move || {
                    for s in serials.iter() {
                        // SAFETY: a live private barrier.
                        let r = unsafe { wait(b.o()) };
                        assert!(r == 0 || r == PTHREAD_BARRIER_SERIAL_THREAD);
                        if r == PTHREAD_BARRIER_SERIAL_THREAD {
                            s.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert!(serials.iter().all(|s| s.load(Ordering::Relaxed) == 1));
        assert_eq!(destroy(b.o()), 0);
        assert_eq!(b.o().inside.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn count_one_and_bad_counts() {
        let b = Bar::new(1);
        // SAFETY: a live private barrier.
        assert_eq!(unsafe { wait(b.o()) }, PTHREAD_BARRIER_SERIAL_THREAD);
        let z = Bar::new(1);
        z.o().count.store(0, Ordering::Relaxed);
        // SAFETY: as above (garbage count).
        assert_eq!(unsafe { wait(z.o()) }, libc::EINVAL);
    }
}
