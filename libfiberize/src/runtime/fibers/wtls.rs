//! WTLS: worker-thread-local storage, for code that knows it runs under fiberize.
//!
//! # Why
//!
//! Under the preload every `__thread`/`thread_local` variable is per fiber (a fiber
//! runs on its donor's TLS block). Per-thread caches (object pools, allocator caches,
//! log buffers) then multiply with the connection count and go cold, where natively
//! they were one per busy OS thread. `fiberize.h` gives fiber-aware code a way back
//! to storage per *worker*, the OS thread that actually runs the code.
//!
//! # The three operations
//!
//! * [`addr_of`]: the address of a static-TLS variable of the caller, translated to
//!   the same offset in the TLS block of the worker that runs the caller now. Every
//!   thread's static TLS has the same layout, so `fiber_tp - addr` is the variable's
//!   offset below the thread pointer in every block (x86-64 puts static TLS just below
//!   the TCB; aarch64 just above it, and the offset is `addr - fiber_tp`). Addresses outside the static block (dynamic TLS of a `dlopen`ed module
//!   without static room, or not TLS at all) come back unchanged. After an `addr_of`
//!   the fiber is **pinned** until its next switch: the kick handler refuses to preempt
//!   it (`crate::runtime::preemption::preempt`), so a pool operation on the worker's block is never
//!   interleaved with another fiber's on the same worker. The address is valid until
//!   the caller next blocks, yields or calls into a lock that may park.
//! * [`register`]: a small variable (at most [`MAX_REGISTERED_BYTES`]) that the fiber
//!   wants per worker even when plain code reads it through TLS. At every switch in,
//!   the worker swaps the variable's bytes between the fiber's block and its own; at
//!   every switch out it swaps them back. While the fiber runs, the fiber's block holds
//!   the worker's value (and any change the fiber makes goes back to the worker), and
//!   the fiber's own value waits in the worker's block; when the fiber finishes or
//!   moves to its donor, its own value is in its block again. The swaps happen in
//!   `scheduler::worker::run_fiber`, in scheduler context, where no preemption can
//!   happen; a fiber without registrations pays one load and branch per switch. The
//!   first swap of a new registration happens at once, in the fiber, shielded so that
//!   no preemption falls between it and the entry in the list.
//! * [`at_fiber_destroy`]: a callback run when the fiber ends (its start routine
//!   returned, `pthread_exit`, cancellation), in the fiber, before glibc runs its
//!   `thread_local` and key destructors on the donor. Callbacks run in reverse order
//!   of registration; one registered by a callback runs too.
//!
//! # Plain threads
//!
//! The main thread, threads that are not fibers, a fiber running on its donor and a
//! donor in its exit phase are plain threads: [`addr_of`] returns the address it was
//! given, [`register`] does nothing (their block *is* their OS thread's), and
//! [`at_fiber_destroy`] answers "not a fiber", so that the header falls back to the
//! thread's own exit hook. Never a worker's block: a donor in its exit phase touching
//! a worker's TLS while the worker runs another fiber on it was the original authors'
//! race.

use crate::base::arch;
use crate::runtime::fibers::fiber::{self, Fiber};

/// Largest registered variable, in bytes. Origin: the swaps run at every switch of a
/// fiber that registered; a few cache lines is what a pointer, a counter or a small
/// buffer needs and stays cheap next to the switch itself.
pub const MAX_REGISTERED_BYTES: usize = 256;

/// A fiber's WTLS bookkeeping, made on its first WTLS call (`Fiber::wtls`). Touched
/// only by whoever runs the fiber: the fiber itself, or its worker while the fiber is
/// suspended inside that worker's `resume`.
#[derive(Default)]
pub struct FiberWtls {
    /// Registered variables: (offset from the thread pointer, size).
    registered: Vec<(usize, usize)>,
    /// `addr_of` was called since the fiber's last switch: do not preempt.
    pinned: bool,
    /// Callbacks for the fiber's end, in registration order.
    at_destroy: Vec<extern "C" fn()>,
}

/// The size of the static TLS block (with the TCB), from the dynamic loader; 0 if it
/// does not say (then nothing is translated).
fn static_tls_size() -> usize {
    static SIZE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *SIZE.get_or_init(|| {
        type Info = unsafe extern "C" fn(*mut usize, *mut usize);
        // SAFETY: a NUL-terminated name; dlsym has no other precondition.
        let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"_dl_get_tls_static_info".as_ptr()) };
        if p.is_null() {
            return 0;
        }
        let (mut size, mut align) = (0usize, 0usize);
        // SAFETY: glibc's `void _dl_get_tls_static_info(size_t *size, size_t *align)`.
        unsafe { core::mem::transmute::<*mut libc::c_void, Info>(p)(&mut size, &mut align) };
        size
    })
}

/// The offset of `addr` from the thread pointer `tp` (below it on x86_64, above it on
/// aarch64: `crate::base::arch`), if it lies in the static TLS block.
fn static_offset(addr: usize, tp: usize) -> Option<usize> {
    arch::static_tls_offset(addr, tp, static_tls_size())
}

/// The running fiber and the thread pointers of its block and of its worker's, if the
/// caller is a fiber on a worker.
fn fiber_on_worker() -> Option<(&'static Fiber, usize, usize)> {
    let f = fiber::current()?;
    let worker_tp = f.running_on.worker_tp();
    (worker_tp != 0).then(|| (f, f.identity.tp(), worker_tp))
}

/// The fiber's WTLS state, made on first use.
#[allow(clippy::mut_from_ref)]
fn state_of(f: &Fiber) -> &mut FiberWtls {
    let mut p = f.wtls().cast::<FiberWtls>();
    if p.is_null() {
        p = Box::into_raw(Box::default());
        f.set_wtls(p.cast());
    }
    // SAFETY: only the fiber's current runner touches it (FiberWtls docs): the caller
    // is that runner, the fiber itself.
    unsafe { &mut *p }
}

/// `fiberize_wtls_addr_of`: see the module docs.
pub fn addr_of(addr: usize) -> usize {
    let Some((f, fiber_tp, worker_tp)) = fiber_on_worker() else { return addr };
    let Some(off) = static_offset(addr, fiber_tp) else { return addr };
    state_of(f).pinned = true;
    arch::static_tls_addr(worker_tp, off)
}

/// `fiberize_wtls_register`: 0, or `EINVAL` (too large, or not static TLS).
pub fn register(addr: usize, size: usize) -> i32 {
    if size > MAX_REGISTERED_BYTES {
        return libc::EINVAL;
    }
    let Some((f, fiber_tp, worker_tp)) = fiber_on_worker() else {
        // A plain thread's block is its OS thread's already; still check the address.
        return if static_offset(addr, crate::base::sys::thread_pointer()).is_some() { 0 } else { libc::EINVAL };
    };
    let Some(off) = static_offset(addr, fiber_tp) else { return libc::EINVAL };
    if !arch::static_tls_range_fits(off, size, static_tls_size()) {
        return libc::EINVAL; // runs into the TCB
    }
    crate::base::shield::enter(); // no preemption between the swap and the entry
    let st = state_of(f);
    if !st.registered.iter().any(|&(o, _)| o == off) {
        // SAFETY: both ranges lie in static TLS blocks of live threads (the fiber's
        // donor and our worker) and do not overlap; only this fiber's runner (us)
        // touches the fiber's block, and the worker's block is not read by the worker
        // while it runs us.
        unsafe { swap_bytes(arch::static_tls_addr(fiber_tp, off), arch::static_tls_addr(worker_tp, off), size) };
        st.registered.push((off, size));
    }
    crate::base::shield::exit();
    0
}

/// `fiberize_at_fiber_destroy`: true if `cb` was registered for the calling fiber,
/// false for a plain thread (the caller uses the thread's own exit hook).
pub fn at_fiber_destroy(cb: extern "C" fn()) -> bool {
    let Some(f) = fiber::current() else { return false };
    state_of(f).at_destroy.push(cb);
    true
}

/// Runs the fiber's end callbacks, last registered first (the thread layer calls it
/// when the start routine returned and at `pthread_exit`, on the ending fiber).
pub fn run_destroy_callbacks(f: &Fiber) {
    loop {
        let p = f.wtls().cast::<FiberWtls>();
        if p.is_null() {
            return;
        }
        // SAFETY: the caller is the fiber (FiberWtls docs); no reference is kept across
        // the callback, which may register more.
        let Some(cb) = (unsafe { (*p).at_destroy.pop() }) else { return };
        cb();
    }
}

/// Whether the fiber is pinned to its worker until its next switch (preemption asks).
#[inline]
pub fn pinned(f: &Fiber) -> bool {
    let p = f.wtls().cast::<FiberWtls>();
    // SAFETY: read by the kick handler on the fiber's own stack: the fiber's runner.
    !p.is_null() && unsafe { (*p).pinned }
}

/// Swaps the fiber's registered variables between its block and the worker's: at a
/// switch in, and again at the switch out. Also ends the pin at a switch out.
///
/// # Safety
/// Called by the worker that runs `f`, while `f` is suspended (before its resume, or
/// after it returned); `fiber_tp` and `worker_tp` are the two live thread pointers.
#[inline]
pub unsafe fn swap_registered(f: &Fiber, fiber_tp: usize, worker_tp: usize) {
    let p = f.wtls().cast::<FiberWtls>();
    if p.is_null() {
        return;
    }
    // SAFETY: the caller is f's runner and f is suspended (caller's contract).
    let st = unsafe { &mut *p };
    st.pinned = false;
    for &(off, size) in &st.registered {
        // SAFETY: checked at registration to lie in static TLS; both blocks are alive.
        unsafe { swap_bytes(arch::static_tls_addr(fiber_tp, off), arch::static_tls_addr(worker_tp, off), size) };
    }
}

/// The fiber's WTLS block goes with the fiber: its slot (`Fiber::wtls`) is this
/// module's, so the drop is too.
impl Drop for Fiber {
    fn drop(&mut self) {
        free(self);
    }
}

/// Frees the state (the fiber is being dropped).
fn free(f: &Fiber) {
    let p = f.take_wtls().cast::<FiberWtls>();
    if !p.is_null() {
        // SAFETY: made by Box::into_raw in `state_of`; nobody runs the fiber any more.
        drop(unsafe { Box::from_raw(p) });
    }
}

/// # Safety
/// `a` and `b` are valid for `len` bytes and do not overlap.
unsafe fn swap_bytes(a: usize, b: usize, len: usize) {
    // SAFETY: caller's contract.
    unsafe { core::ptr::swap_nonoverlapping(a as *mut u8, b as *mut u8, len) };
}
