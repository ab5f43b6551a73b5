//! Fibers: stackful coroutines that carry a complete glibc thread identity.
//!
//! # Where a fiber lives
//!
//! Every `pthread_create` under the preload makes a real OS thread with the real
//! `pthread_create`: the **donor**. The donor lends the fiber everything glibc built for
//! it: its TCB and static TLS (so `errno`, `pthread_self()`, `__thread` variables and
//! malloc's tcache are the fiber's own) and its stack (so `pthread_getattr_np` and stack
//! checks stay right). The fiber's stack is the part of the donor's stack *below* the
//! donor's own live frames:
//!
//! ```text
//!   high  +-------------------------+  <- glibc: TCB, static TLS, start_thread frame
//!         | start_thread            |
//!         | donor_main              |  donor frames; the donor sleeps on a futex here
//!         | donor_serve / futex     |
//!         +-------------------------+  <- donor sp - DONOR_MARGIN  = fiber stack base
//!         | corosensei init frame   |
//!         | start_routine(arg)      |  the program's thread body, run by any worker
//!         | ...                     |
//!         v                         v
//!   low   +-------------------------+  <- pthread_attr_getstack() low bound = limit
//!         | guard page (glibc)      |
//! ```
//!
//! # Who runs it
//!
//! Normally a **worker** resumes the coroutine after pointing FS at the donor's TCB
//! (`sys::set_thread_pointer`) and points FS back when the coroutine suspends. Two
//! OS threads must never run on one TLS block at once; so the donor blocks all signals
//! and sleeps while its fiber lives, and touches no TLS after it hands the fiber over.
//!
//! Sometimes the fiber is handed **back to its donor** ([`Switch::RunOnDonor`]): the
//! donor itself resumes the coroutine, so the fiber's code runs on its own OS thread.
//! That is how a blocking call that we cannot turn into a park (`pthread_join` on a
//! real thread, `pthread_exit`'s unwinding) runs without blocking a worker: the worker
//! moves on, the donor blocks in the kernel, and when the call returns the fiber
//! suspends with [`Switch::BackToPool`] and the donor queues it again.
//!
//! # Park protocol
//!
//! `park_state` ([`crate::runtime::sleep::park_state`]) closes the window between "the fiber
//! decided to sleep" and "the fiber's stack is no longer in use".

use crate::runtime::fibers::fiber_state::{
    Cancellation, Demotion, DirectWake, DonorHandoff, Identity, Interruption, RunningOn, SignalState, WaitNote,
};
use core::cell::{Cell, UnsafeCell};
use core::num::NonZeroUsize;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use corosensei::stack::{Stack, StackPointer};
use corosensei::{Coroutine, Yielder};

use crate::base::thread_words::ThreadWord;
pub use crate::runtime::fibers::wait_note::WaitKind;
use crate::runtime::sleep::park_state::ParkState;
use crate::runtime::sleep::sleep_state::DonorWait;

/// Why a fiber gave control back to whoever resumed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    /// `sched_yield`: queue me at the back.
    Yield,
    /// Sleep until unparked (see the park protocol above).
    Park,
    /// Continue me on my donor OS thread (worker → donor).
    RunOnDonor,
    /// I am done on the donor; queue me in the pool again (donor → pool).
    BackToPool,
    /// Preempted inside the kick handler: queue me at the back of the global queue
    /// (see `crate::runtime::preemption::preempt`).
    Preempt,
    /// I woke a lock waiter that others queue behind and queued it to run first: run me
    /// right after it (see `crate::runtime::scheduler::unpark_lock_waiter`).
    YieldToWakee,
    /// My turn is spent while others wait: queue me at the back of the global queue
    /// (see `crate::runtime::scheduler::turn`).
    EndTurn,
}

pub type FiberCoroutine = Coroutine<(), Switch, usize, DonorStack>;
pub type FiberYielder = Yielder<(), Switch>;
pub type FiberRef = Arc<Fiber>;

/// Lifecycle, for the fiber dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Life {
    Starting = 0,
    Runnable = 1,
    Running = 2,
    Parked = 3,
    OnDonor = 4,
    Finished = 5,
}

impl Life {
    /// The `Life` whose `as u32` is `raw` (only values `set_life` stored occur).
    #[inline]
    fn from_raw(raw: u32) -> Life {
        match raw {
            0 => Life::Starting,
            1 => Life::Runnable,
            2 => Life::Running,
            3 => Life::Parked,
            4 => Life::OnDonor,
            _ => Life::Finished,
        }
    }
}

/// A fiber. Its state is grouped by who changes it, each group a type of
/// `crate::runtime::fibers::fiber_state` (or `park_state`) with named transitions and its
/// orderings chosen there once; `Fiber`'s own few words have accessors below.
///
/// Layout: `repr(C)`, in the order written. A wait and the wake-up that ends it find the
/// fiber cold when many fibers take turns (thousands of connections or terminals), and
/// each cache line of it they touch is a miss; the fields they touch come first, so that
/// they share as few lines as the sizes allow (docs/RESULTS.md#fiber-hot-lines).
#[repr(C)]
pub struct Fiber {
    // Every wait and wake touches these (park, unpark, queueing, `run_fiber`, the
    // switch): kept together, first, right after the `Arc` counts (see the type's doc).
    pub(crate) park_state: ParkState,
    /// `Life` as u32, for the dump, the watchdog, joins and kicks.
    life: AtomicU32,
    /// When and from where the fiber was last queued (`crate::runtime::fibers::queue_delay`;
    /// 0 while that is off). Relaxed: the queue it goes through orders it.
    queued: AtomicU64,
    /// The worker running the fiber now, and its thread pointer.
    pub(crate) running_on: RunningOn,
    /// Id, start routine, the donor's `pthread_t`, thread pointer and tid.
    pub(crate) identity: Identity,
    yielder: Cell<*const FiberYielder>,
    coroutine: UnsafeCell<Option<FiberCoroutine>>,
    /// WTLS registrations, pin and end callbacks: a slot that `crate::runtime::fibers::wtls`
    /// owns (it makes, reads and frees the block, and drops it with the fiber); null
    /// until the fiber's first WTLS call, so that a fiber without any pays one load a
    /// switch.
    wtls: AtomicPtr<()>,
    /// The fiber's own signal mask (workers apply it while they run the fiber, see
    /// `scheduler::run_fiber`) and the signals held for it (delivered when it next
    /// runs, see `crate::signal::delivery`).
    pub(crate) signals: SignalState,
    /// How often the monitor caught this fiber blocking its worker in a call we do not
    /// intercept; at `DEMOTE_AFTER_BLOCKS` it is handed to its donor for good.
    pub(crate) demotion: Demotion,
    /// The worker's wake-up eventfd while the fiber waits directly in the kernel.
    pub(crate) direct_wake: DirectWake,
    /// Set when a signal was delivered during a park (interruptible waits return EINTR)
    /// or a program handler ran on the fiber (`signal::note_handler_ran`), with whether
    /// one lacked `SA_RESTART` (a restartable wait returns EINTR too).
    pub(crate) interruption: Interruption,
    /// Set by the fiber itself while it releases a mutex on its way to park (a condition
    /// wait): that unlock does not yield to its wakee (`scheduler::unpark_lock_waiter`),
    /// which runs when this fiber parks a moment later.
    pub(crate) unlocking_to_park: Cell<bool>,
    /// Cancellation: requested, disabled, asynchronous (see `crate::signal::cancel`).
    pub(crate) cancel: Cancellation,
    /// Incremented by every timed park, so that a stale timer does not wake a later wait.
    park_gen: AtomicU64,
    /// What the fiber waits for while parked (the dump, asynchronous cancellation).
    pub(crate) wait: WaitNote,
    // Below: what only thread creation and exit, donor hand-offs, long sleeps and
    // signal stacks touch.
    /// The donor's futex word, the return value and the sleeping donor's stack pointer.
    pub(crate) donor: DonorHandoff,
    /// Intrusive link of the donor → pool hand-off list (`scheduler::push_from_donor`).
    handoff_next: AtomicPtr<Fiber>,
    /// Whether the fiber waits on its donor where only a kick to the donor ends the wait
    /// for a held signal or a cancellation request (`signal::donor_waits::fiber_sigtimedwait`).
    pub(crate) donor_wait: DonorWait,
    /// The fiber's stack `[stack_limit, stack_base)` (0, 0 until its donor lent it), for
    /// `crate::runtime::sleep::stack_release`. Written once by the donor before the fiber is
    /// first queued (the queue's Release/Acquire publishes it), read by the fiber itself.
    stack_limit: AtomicUsize,
    stack_base: AtomicUsize,
    /// The top of the range the fiber's last stack release gave back (0: none yet), for
    /// `crate::runtime::sleep::stack_release`. Only the fiber itself touches it.
    stack_released_to: AtomicUsize,
    /// The fiber's `sigaltstack` settings (`crate::runtime::signals::altstack`).
    pub altstack: crate::runtime::signals::altstack::AltStack,
}

// SAFETY: the coroutine and yielder cells are only touched by whoever runs the fiber,
// and the scheduler guarantees at most one OS thread runs it at a time (park protocol,
// donor hand-off); everything else is atomic.
unsafe impl Send for Fiber {}
unsafe impl Sync for Fiber {}

impl Fiber {
    /// A cancellation request that the fiber's state lets through.
    #[inline]
    pub fn cancel_pending(&self) -> bool {
        self.cancel.is_pending()
    }

    pub fn new(start_routine: usize) -> Fiber {
        Fiber {
            identity: Identity::new(start_routine),
            coroutine: UnsafeCell::new(None),
            yielder: Cell::new(core::ptr::null()),
            unlocking_to_park: Cell::new(false),
            park_state: ParkState::new(),
            park_gen: AtomicU64::new(0),
            donor: DonorHandoff::new(),
            handoff_next: AtomicPtr::new(core::ptr::null_mut()),
            running_on: RunningOn::new(),
            life: AtomicU32::new(Life::Starting as u32),
            wait: WaitNote::new(),
            signals: SignalState::new(),
            interruption: Interruption::new(),
            demotion: Demotion::new(),
            cancel: Cancellation::new(),
            direct_wake: DirectWake::new(),
            donor_wait: DonorWait::new(),
            wtls: AtomicPtr::new(core::ptr::null_mut()),
            stack_limit: AtomicUsize::new(0),
            stack_base: AtomicUsize::new(0),
            stack_released_to: AtomicUsize::new(0),
            queued: AtomicU64::new(0),
            altstack: Default::default(),
        }
    }

    /// The fiber's id.
    #[inline]
    pub fn id(&self) -> u64 {
        self.identity.id()
    }

    /// Where the fiber is in its life. Relaxed, as `set_life`: a diagnostic (dump,
    /// watchdog) and a hint (a kick of a fiber that stopped running is ignored, the
    /// preemption handler re-checks on its own thread); a joiner that sees `Finished`
    /// learns nothing else from it (it then waits in glibc's join, or it saw
    /// `Identity::is_unregistered`'s Acquire first).
    #[inline]
    pub fn life(&self) -> Life {
        Life::from_raw(self.life.load(Ordering::Relaxed))
    }

    /// Records the stack the donor lends this fiber (`[limit, base)`), once, before
    /// the fiber first runs.
    #[inline]
    pub fn set_stack_bounds(&self, limit: usize, base: usize) {
        self.stack_limit.store(limit, Ordering::Relaxed);
        self.stack_base.store(base, Ordering::Relaxed);
    }

    /// The fiber's stack as `(limit, base)`; `(0, 0)` before its donor lent it.
    #[inline]
    pub fn stack_bounds(&self) -> (usize, usize) {
        (self.stack_limit.load(Ordering::Relaxed), self.stack_base.load(Ordering::Relaxed))
    }

    /// The top of the range the fiber's last stack release gave back (0: none yet).
    #[inline]
    pub fn stack_released_to(&self) -> usize {
        self.stack_released_to.load(Ordering::Relaxed)
    }

    /// Notes the top of the range a stack release just gave back.
    #[inline]
    pub fn set_stack_released_to(&self, end: usize) {
        self.stack_released_to.store(end, Ordering::Relaxed);
    }

    #[inline]
    pub fn set_life(&self, l: Life) {
        self.life.store(l as u32, Ordering::Relaxed);
    }

    /// Starts a new timed park and returns its number (for the timer entry).
    /// Relaxed: only the fiber itself increments it, and a timer that reads it just
    /// before a new park's increment wakes that park spuriously whatever the ordering;
    /// waits tolerate that (they re-check their condition), and nothing is published.
    #[inline]
    pub fn next_park_gen(&self) -> u64 {
        self.park_gen.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The number of the fiber's latest timed park.
    #[inline]
    pub fn park_gen(&self) -> u64 {
        self.park_gen.load(Ordering::Relaxed)
    }

    /// The next fiber on the donor hand-off list. Relaxed: the list's head CAS
    /// (Release) and its drain's swap (Acquire) publish the links.
    /// Notes that the fiber is being queued now, from `source` (for the queue-wait
    /// statistics; one Relaxed load when they are off). TLS-free.
    #[inline]
    pub(crate) fn mark_queued(&self, source: crate::runtime::fibers::queue_delay::Source) {
        if crate::runtime::fibers::queue_delay::on() {
            self.queued.store(crate::runtime::fibers::queue_delay::stamp(source), Ordering::Relaxed);
        }
    }

    /// The stamp of the fiber's last `mark_queued` (0: none or off), cleared.
    #[inline]
    pub(crate) fn take_queued(&self) -> u64 {
        if crate::runtime::fibers::queue_delay::on() {
            self.queued.swap(0, Ordering::Relaxed)
        } else {
            0
        }
    }

    #[inline]
    pub(crate) fn handoff_next(&self) -> *mut Fiber {
        self.handoff_next.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn set_handoff_next(&self, next: *mut Fiber) {
        self.handoff_next.store(next, Ordering::Relaxed);
    }

    /// The fiber's WTLS block (null: none yet). Relaxed: only the fiber itself, the
    /// worker running it (on the fiber's behalf, around the switch) and the fiber's
    /// drop touch it, never at once.
    #[inline]
    pub(crate) fn wtls(&self) -> *mut () {
        self.wtls.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn set_wtls(&self, p: *mut ()) {
        self.wtls.store(p, Ordering::Relaxed);
    }

    /// Takes the fiber's WTLS block (for freeing it).
    #[inline]
    pub(crate) fn take_wtls(&self) -> *mut () {
        self.wtls.swap(core::ptr::null_mut(), Ordering::Relaxed)
    }

    /// Installs the coroutine (donor, before the fiber is first queued).
    ///
    /// # Safety
    /// Only the donor may call this, before the fiber is visible to any worker.
    pub unsafe fn install_coroutine(&self, co: FiberCoroutine) {
        // SAFETY: nobody else can see the fiber yet (caller's contract).
        unsafe { *self.coroutine.get() = Some(co) };
    }

    /// The coroutine, for the one OS thread that currently owns the right to run it.
    ///
    /// # Safety
    /// The caller must be the fiber's current runner (a worker that dequeued it, or
    /// its donor after `DonorCommand::Run`), and must not hold the reference across a hand-off.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn coroutine_mut(&self) -> &mut FiberCoroutine {
        // SAFETY: exclusive by the caller's contract.
        match unsafe { &mut *self.coroutine.get() } {
            Some(c) => c,
            None => crate::fatal(&["fiber has no coroutine"]),
        }
    }

    /// Drops a completed coroutine, or forgets a live one whose stack is being
    /// abandoned (pthread_exit on the donor).
    ///
    /// # Safety
    /// Same as [`Fiber::coroutine_mut`]; for a live coroutine the caller must never
    /// resume it again.
    pub unsafe fn discard_coroutine(&self) {
        // SAFETY: exclusive by the caller's contract.
        let co = unsafe { (*self.coroutine.get()).take() };
        if let Some(co) = co {
            if co.done() {
                drop(co);
            } else {
                // Dropping would try to unwind a stack we are standing on.
                core::mem::forget(co);
            }
        }
    }

    pub(crate) fn set_yielder(&self, y: *const FiberYielder) {
        self.yielder.set(y);
    }

    /// Switches from the fiber to whoever resumed it, and back: the bare switch,
    /// shielded from program signal handlers. [`Fiber::suspend`]
    /// (`crate::runtime::fibers::switch`) adds what the upper layers do when the fiber is back.
    ///
    /// # Safety
    /// Must be called by this fiber, on its own stack.
    #[inline]
    pub(crate) unsafe fn switch_out(&self, why: Switch) {
        let y = self.yielder.get();
        // The switch out and back in is shielded from program signal handlers: until
        // the worker has its own FS back, and from the moment it installs ours, a
        // handler would run on the worker's stack with our TLS (crate::base::shield).
        crate::base::shield::enter();
        // SAFETY: the yielder lives at the base of this fiber's stack for the whole
        // life of the coroutine, and we are running on that coroutine (caller).
        unsafe { (*y).suspend(why) };
        crate::base::shield::exit();
    }
}

// ---------------------------------------------------------------------------------
// "Which fiber am I?"
//
// One word of the runtime's thread words (`base::thread_words`). Because FS follows the fiber, reading it
// in fiber context reads the donor's copy, which the donor set to its fiber; on a
// worker (scheduler context), on the main thread or on any foreign thread it is 0.
// Bit 0 marks "this fiber currently runs on its donor" (see `switch::run_on_donor`), where the
// caller must behave like a plain OS thread. Bit 1 marks "this TCB is borrowed by a
// vfork child" (see `crate::thread::process`): the child shares our memory, so it must touch
// none of the runtime's tables and behave as a plain thread too. Bit 2 marks the
// forking thread's TCB in a forked child, where no worker runs.
// ---------------------------------------------------------------------------------

/// In `CURRENT`: the fiber runs on its donor thread now (a plain OS thread's rules).
const ON_DONOR_BIT: usize = 1;
/// In `CURRENT`: a vfork child borrows this TCB (it must not touch the runtime).
const VFORK_CHILD_BIT: usize = 2;
/// In `CURRENT`: this TCB is the forking thread's in a forked child, where no worker
/// runs (set by the fork hook together with `config::mark_forked_child`; new threads
/// of the child start with the word at 0). A bit of the word, not a second load, on
/// every `current()`.
const FORKED_CHILD_BIT: usize = 4;
/// The bits that make the caller a plain thread whatever fiber the word names.
const PLAIN_THREAD_BITS: usize = ON_DONOR_BIT | VFORK_CHILD_BIT | FORKED_CHILD_BIT;

/// The word itself: one of the runtime's initial-exec thread words.
const CURRENT: ThreadWord = crate::base::thread_words::CURRENT_FIBER;

/// The fiber running on this OS thread, if the caller is a fiber scheduled by a worker.
#[inline]
pub fn current() -> Option<&'static Fiber> {
    let v = CURRENT.get();
    if v == 0 || v & PLAIN_THREAD_BITS != 0 {
        return None;
    }
    // SAFETY: the donor set this to its fiber, which it keeps alive (an Arc) until it
    // clears the word in its zombie phase.
    Some(unsafe { &*(v as *const Fiber) })
}

/// Whether the caller is a fiber (it must park instead of blocking its OS thread).
#[inline]
pub fn is_fiber() -> bool {
    current().is_some()
}

/// The fiber this TCB belongs to, wherever it runs (worker or donor), ignoring the
/// fork state: for the fork hooks, which must know who forked.
pub(crate) fn owner_of_tcb() -> Option<&'static Fiber> {
    let v = CURRENT.get() & !PLAIN_THREAD_BITS;
    // SAFETY: as in `current`.
    (v != 0).then(|| unsafe { &*(v as *const Fiber) })
}

/// Whether the caller runs on a worker (not on its donor): read before the fork
/// state changes `current`'s answer.
pub(crate) fn runs_on_worker() -> bool {
    let v = CURRENT.get();
    v != 0 && v & PLAIN_THREAD_BITS == 0
}

/// Whether the caller is a vfork child borrowing this thread's TCB (and memory).
#[inline]
pub fn in_vfork_child() -> bool {
    CURRENT.get() & VFORK_CHILD_BIT != 0
}

/// Marks (or unmarks) this TCB as borrowed by a vfork child: set by the interposed
/// `vfork` just before the system call, cleared in the parent when it returns.
pub fn set_vfork_child(on: bool) {
    let v = CURRENT.get();
    CURRENT.set(if on { v | VFORK_CHILD_BIT } else { v & !VFORK_CHILD_BIT });
}

pub(crate) fn set_current(f: *const Fiber) {
    CURRENT.set(f as usize);
}

/// Marks this TCB as the forking thread's in a forked child (the fork hook, right
/// after `config::mark_forked_child`): from now on `current()` is None here.
pub(crate) fn mark_forked_child() {
    CURRENT.set(CURRENT.get() | FORKED_CHILD_BIT);
}

pub(crate) fn set_on_donor(on: bool) {
    let v = CURRENT.get();
    CURRENT.set(if on { v | ON_DONOR_BIT } else { v & !ON_DONOR_BIT });
}

// ---------------------------------------------------------------------------------
// The donor's stack region as a corosensei `Stack`.
// ---------------------------------------------------------------------------------

/// Part of a donor thread's stack, lent to its fiber. Owns nothing: glibc frees the
/// memory when the donor thread exits, which happens only after the fiber finished.
pub struct DonorStack {
    base: usize,
    limit: usize,
}

impl DonorStack {
    /// The stack region `[limit, base)` of the calling donor thread.
    ///
    /// # Safety
    /// `base` (exclusive top) and `limit` (lowest usable address) are 16-aligned, the
    /// region is mapped, belongs to the calling thread's stack below its live frames
    /// and stays unused by it until the fiber that runs on it has finished; a guard page
    /// (glibc's, or the program's own policy) lies below `limit`. The `Stack` impl
    /// below hands the region to corosensei on these promises.
    pub unsafe fn new(base: usize, limit: usize) -> DonorStack {
        DonorStack { base, limit }
    }
}

// SAFETY: `DonorStack::new`'s contract: the region [limit, base) is mapped, owned by the
// donor thread and unused by it (it lies below the donor's live frames), with a guard
// page below `limit` (glibc's, or the program's own stack and guard policy).
unsafe impl Stack for DonorStack {
    fn base(&self) -> StackPointer {
        NonZeroUsize::new(self.base).unwrap_or_else(|| crate::fatal(&["empty donor stack"]))
    }
    fn limit(&self) -> StackPointer {
        NonZeroUsize::new(self.limit).unwrap_or_else(|| crate::fatal(&["empty donor stack"]))
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;
    use core::mem::offset_of;

    /// The fields a wait and its wake-up touch come before every other field, and fit in
    /// four cache lines (see `Fiber`'s doc): a field added among them, or one of them moved
    /// behind the cold ones, costs every wait of a cold fiber a miss.
    #[test]
    fn the_fields_of_a_wait_come_first_and_fit_in_four_lines() {
        let hot = [
            offset_of!(Fiber, park_state),
            offset_of!(Fiber, life),
            offset_of!(Fiber, queued),
            offset_of!(Fiber, running_on),
            offset_of!(Fiber, identity),
            offset_of!(Fiber, yielder),
            offset_of!(Fiber, coroutine),
            offset_of!(Fiber, wtls),
            offset_of!(Fiber, signals),
            offset_of!(Fiber, demotion),
            offset_of!(Fiber, direct_wake),
            offset_of!(Fiber, interruption),
            offset_of!(Fiber, unlocking_to_park),
            offset_of!(Fiber, cancel),
            offset_of!(Fiber, park_gen),
            offset_of!(Fiber, wait),
        ];
        let cold = [
            offset_of!(Fiber, donor),
            offset_of!(Fiber, handoff_next),
            offset_of!(Fiber, donor_wait),
            offset_of!(Fiber, stack_limit),
            offset_of!(Fiber, stack_base),
            offset_of!(Fiber, stack_released_to),
            offset_of!(Fiber, altstack),
        ];
        let hot_end = *cold.iter().min().unwrap();
        assert!(hot.iter().all(|&o| o < hot_end), "a field of the wait path lies behind a cold one: {hot:?} {cold:?}");
        assert!(hot_end <= 4 * 64, "the wait path's fields take {hot_end} bytes, more than four cache lines");
    }
}
