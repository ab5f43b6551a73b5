//! Per-fiber states that other layers change: what the fiber waits on, whether a
//! signal handler interrupted its wait, its cancellation state and signal mask, who it
//! is (its donor's identity), which worker runs it, the hand-off to and from its donor,
//! its demotion count and the wake-up of a direct wait. Each is a small type with named
//! transitions, so that the orderings are chosen once, here, each with its reason, and
//! no layer writes a `Fiber`'s atomics directly.

use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};

pub use crate::runtime::fibers::wait_note::WaitNote;
pub use crate::runtime::signals::donor_signals::DonorSignals;
pub use crate::runtime::signals::signal_state::SignalState;

/// A program signal handler ran on the fiber (so its current or next wait returns
/// EINTR, as the kernel interrupts a thread's system call), and whether one of those
/// handlers lacked SA_RESTART. Set from the handler trampoline or the delivering
/// fiber (Release), taken by the waiting fiber (Acquire), so the handler's effects are
/// visible when the wait reports EINTR.
pub struct Interruption {
    interrupted: AtomicBool,
    no_restart: AtomicBool,
}

impl Interruption {
    pub const fn new() -> Interruption {
        Interruption { interrupted: AtomicBool::new(false), no_restart: AtomicBool::new(false) }
    }
    /// A handler ran; `sa_restart`: it was installed with SA_RESTART.
    #[inline]
    pub fn mark(&self, sa_restart: bool) {
        if !sa_restart {
            self.no_restart.store(true, Ordering::Release);
        }
        self.interrupted.store(true, Ordering::Release);
    }
    /// Forgets handlers that ran before a wait begins (they did not interrupt it).
    #[inline]
    pub fn clear(&self) {
        self.interrupted.store(false, Ordering::Relaxed);
        self.no_restart.store(false, Ordering::Relaxed);
    }
    /// Whether a handler ran since the last `clear`/`take`.
    #[inline]
    pub fn is_set(&self) -> bool {
        self.interrupted.load(Ordering::Acquire)
    }
    /// Takes the interruption: `None` if no handler ran, else `Some(no_restart)`.
    #[inline]
    pub fn take(&self) -> Option<bool> {
        if !self.interrupted.swap(false, Ordering::AcqRel) {
            return None;
        }
        Some(self.no_restart.swap(false, Ordering::AcqRel))
    }
}

/// The fiber's cancellation state (glibc keeps the same three facts in its
/// `cancelhandling` word). A request is published with Release and read with
/// Acquire, so the canceller's writes before `pthread_cancel` are visible to the
/// target that acts on it.
pub struct Cancellation {
    requested: AtomicBool,
    disabled: AtomicBool,
    asynchronous: AtomicBool,
}

impl Cancellation {
    pub const fn new() -> Cancellation {
        Cancellation { requested: AtomicBool::new(false), disabled: AtomicBool::new(false), asynchronous: AtomicBool::new(false) }
    }
    /// `pthread_cancel` reached the fiber. SeqCst, as [`Self::is_requested`]: the
    /// request against the fiber's plain-thread flag, a Dekker pair like the held signals'.
    #[inline]
    pub fn request(&self) {
        self.requested.store(true, Ordering::SeqCst);
    }
    /// Whether cancellation was requested (whatever the state).
    #[inline]
    pub fn is_requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }
    /// A request is there and cancellation is enabled.
    #[inline]
    pub fn is_pending(&self) -> bool {
        self.is_requested() && !self.is_disabled()
    }
    /// `PTHREAD_CANCEL_DISABLE` (true) or `ENABLE`; returns whether it was disabled.
    #[inline]
    pub fn set_disabled(&self, disabled: bool) -> bool {
        self.disabled.swap(disabled, Ordering::AcqRel)
    }
    #[inline]
    pub fn is_disabled(&self) -> bool {
        self.disabled.load(Ordering::Acquire)
    }
    /// `PTHREAD_CANCEL_ASYNCHRONOUS` (true) or `DEFERRED`; returns whether it was async.
    #[inline]
    pub fn set_asynchronous(&self, asynchronous: bool) -> bool {
        self.asynchronous.swap(asynchronous, Ordering::AcqRel)
    }
    #[inline]
    pub fn is_asynchronous(&self) -> bool {
        self.asynchronous.load(Ordering::Acquire)
    }
}

impl Default for Interruption {
    fn default() -> Self {
        Self::new()
    }
}

impl Default for Cancellation {
    fn default() -> Self {
        Self::new()
    }
}

// ---------------------------------------------------------------------------------
// Identity, placement, the donor hand-off, demotion, the direct wait's wake-up
// ---------------------------------------------------------------------------------

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Who the fiber is: its id and start routine (fixed at creation), its donor's
/// `pthread_t`, thread pointer and kernel tid (set by the donor before it first queues
/// the fiber), and whether the registry dropped it for good.
///
/// `pthread`, `tp` and `donor_tid` are Relaxed: the donor writes them before
/// `push_from_donor`, whose Release CAS (drained with Acquire) publishes them to the
/// worker that runs the fiber; the other readers hold the registry's lock (which the
/// creator's early `set_pthread` holds too) or only print them (the dump).
/// `unregistered` is set with Release after the fiber finished and read with Acquire
/// by a joiner, which then also sees the fiber's `Life::Finished`.
pub struct Identity {
    id: u64,
    start_routine: usize,
    pthread: AtomicUsize,
    tp: AtomicUsize,
    donor_tid: AtomicU32,
    unregistered: AtomicBool,
}

impl Identity {
    /// A new identity with the next fiber id; the donor's facts come later.
    pub fn new(start_routine: usize) -> Identity {
        Identity {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            start_routine,
            pthread: AtomicUsize::new(0),
            tp: AtomicUsize::new(0),
            donor_tid: AtomicU32::new(0),
            unregistered: AtomicBool::new(false),
        }
    }
    /// The fiber's id (never 0, never reused).
    #[inline]
    pub fn id(&self) -> u64 {
        self.id
    }
    /// The program's start routine, for the dump and the call-site report.
    #[inline]
    pub fn start_routine(&self) -> usize {
        self.start_routine
    }
    /// `pthread_self()` inside the fiber (0 until the creator or the donor set it).
    #[inline]
    pub fn pthread(&self) -> usize {
        self.pthread.load(Ordering::Relaxed)
    }
    /// Records the donor's `pthread_t` (the creator and the donor both do; the value
    /// is the same).
    #[inline]
    pub fn set_pthread(&self, pthread: usize) {
        self.pthread.store(pthread, Ordering::Relaxed);
    }
    /// The donor's thread pointer (FS base): the fiber's TLS.
    #[inline]
    pub fn tp(&self) -> usize {
        self.tp.load(Ordering::Relaxed)
    }
    /// The donor's kernel thread id: the fiber's own tid (`gettid()`, `tgkill`, and
    /// what "this thread" means for `setpriority(PRIO_PROCESS, 0)`: `thread::tid`).
    #[inline]
    pub fn donor_tid(&self) -> u32 {
        self.donor_tid.load(Ordering::Relaxed)
    }
    /// The donor records its thread pointer and tid, before it queues the fiber.
    #[inline]
    pub fn set_donor(&self, tp: usize, tid: u32) {
        self.tp.store(tp, Ordering::Relaxed);
        self.donor_tid.store(tid, Ordering::Relaxed);
    }
    /// Whether the fiber left the by-`pthread_t` map for good (finished, or ran
    /// natively): a late registration by the creator must not bring it back.
    #[inline]
    pub fn is_unregistered(&self) -> bool {
        self.unregistered.load(Ordering::Acquire)
    }
    /// The registry dropped the fiber for good.
    #[inline]
    pub fn mark_unregistered(&self) {
        self.unregistered.store(true, Ordering::Release);
    }
}

/// The worker currently running the fiber and that worker's thread pointer. Written
/// by the worker just before it resumes the fiber (and cleared when the fiber leaves
/// the pool); read by the fiber itself on the same OS thread (queueing into its
/// worker's lifo slot, direct waits, timed parks, WTLS, preemption), which program
/// order makes exact, and by other threads only as a hint whose staleness costs
/// nothing (the kick of a worker that moved on is ignored by its handler; the dump).
/// Hence Relaxed throughout.
pub struct RunningOn {
    worker: AtomicUsize,
    worker_tp: AtomicUsize,
}

impl RunningOn {
    pub const fn new() -> RunningOn {
        RunningOn { worker: AtomicUsize::new(0), worker_tp: AtomicUsize::new(0) }
    }
    /// The worker at `worker` (a `WorkerShared` address) with thread pointer
    /// `worker_tp` is about to resume the fiber.
    #[inline]
    pub fn enter(&self, worker: usize, worker_tp: usize) {
        self.worker.store(worker, Ordering::Relaxed);
        self.worker_tp.store(worker_tp, Ordering::Relaxed);
    }
    /// The fiber left the pool (to its donor, or finished).
    #[inline]
    pub fn leave(&self) {
        self.worker.store(0, Ordering::Relaxed);
    }
    /// Address of the `WorkerShared` running the fiber (0: none).
    #[inline]
    pub fn worker(&self) -> usize {
        self.worker.load(Ordering::Relaxed)
    }
    /// That worker's thread pointer (stale while `worker` is 0), for WTLS.
    #[inline]
    pub fn worker_tp(&self) -> usize {
        self.worker_tp.load(Ordering::Relaxed)
    }
}

/// What the donor is asked to do, read from its futex word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DonorCommand {
    /// Nothing: sleep until asked.
    Idle,
    /// Resume the coroutine on the donor thread (`Switch::RunOnDonor`).
    Run,
    /// The coroutine returned on a worker: return its value from the start routine.
    Finish,
}

/// The donor futex word (`DonorCommand`), the fiber's return value and the sleeping
/// donor's saved stack pointer. A worker hands the fiber to its donor with a Release
/// store of the word (then a futex wake), after its last touch of the fiber's stack
/// (and after the return value, for `Finish`); the donor reads the word with Acquire,
/// so it resumes a coroutine (or returns a value) the worker has completely let go of.
/// The donor's own reset to `Idle` is Relaxed: nobody else writes the word until the
/// donor queues the fiber again, which publishes through the pool's queues.
///
/// `signals`: whether the donor takes the program's signals during a blocking call of
/// its fiber, for senders that aim at it (`crate::runtime::signals::donor_signals`).
pub struct DonorHandoff {
    word: AtomicU32,
    retval: AtomicUsize,
    sleep_sp: AtomicUsize,
    pub signals: DonorSignals,
}

const DONOR_IDLE: u32 = 0;
const DONOR_RUN: u32 = 1;
const DONOR_FINISH: u32 = 2;

impl DonorHandoff {
    pub fn new() -> DonorHandoff {
        DonorHandoff {
            word: AtomicU32::new(DONOR_IDLE),
            retval: AtomicUsize::new(0),
            sleep_sp: AtomicUsize::new(0),
            signals: DonorSignals::new(),
        }
    }
    /// Worker: the fiber continues on its donor; wakes the donor.
    #[inline]
    pub fn run_on_donor(&self) {
        self.word.store(DONOR_RUN, Ordering::Release);
        crate::base::sys::futex_wake(&self.word, 1);
    }
    /// Worker: the coroutine returned `retval`; wakes the donor to return it.
    #[inline]
    pub fn finish(&self, retval: usize) {
        self.retval.store(retval, Ordering::Relaxed);
        self.word.store(DONOR_FINISH, Ordering::Release);
        crate::base::sys::futex_wake(&self.word, 1);
    }
    /// Donor: what it is asked to do.
    #[inline]
    pub fn command(&self) -> DonorCommand {
        match self.word.load(Ordering::Acquire) {
            DONOR_IDLE => DonorCommand::Idle,
            DONOR_RUN => DonorCommand::Run,
            DONOR_FINISH => DonorCommand::Finish,
            _ => crate::fatal(&["corrupt donor word"]),
        }
    }
    /// Donor: it took the fiber after `Run` (the next command starts from `Idle`).
    #[inline]
    pub fn take_run(&self) {
        self.word.store(DONOR_IDLE, Ordering::Relaxed);
    }
    /// Donor, after `Finish`: the coroutine's return value (published by the
    /// word's Release/Acquire).
    #[inline]
    pub fn retval(&self) -> usize {
        self.retval.load(Ordering::Relaxed)
    }
    /// For the donor's sleep routine: the futex word, the value it sleeps on, and the
    /// slot where it publishes its stack pointer while asleep.
    #[inline]
    pub fn sleep_words(&self) -> (&AtomicU32, u32, &AtomicUsize) {
        (&self.word, DONOR_IDLE, &self.sleep_sp)
    }
    /// The sleeping donor's saved stack pointer, where its callee-saved registers lie
    /// (0 while it is awake). Acquire: pairs with the donor's store before its futex
    /// wait, so a forked child that resumes there finds the registers written.
    #[inline]
    pub fn sleeping_sp(&self) -> usize {
        self.sleep_sp.load(Ordering::Acquire)
    }
}

/// Foreign blocking episodes after which a fiber runs as a plain thread on its donor
/// (docs/DESIGN.md §2.11). Origin: one or two episodes are normal (a DNS lookup, a rare
/// `flock`); a fiber that blocks again and again (an io_uring completion thread, a
/// `sigwaitinfo` loop through raw syscalls) costs a spare worker each time.
pub const DEMOTE_AFTER_BLOCKS: u32 = 3;

/// How often the monitor caught the fiber blocking its worker in a call we do not
/// intercept. Relaxed: a counter against a threshold; nothing is published with it,
/// and a demotion one blocking call late is as good.
pub struct Demotion {
    foreign_blocks: AtomicU32,
}

impl Demotion {
    pub const fn new() -> Demotion {
        Demotion { foreign_blocks: AtomicU32::new(0) }
    }
    /// The monitor found the fiber blocking its worker once more.
    #[inline]
    pub fn note_foreign_block(&self) {
        self.foreign_blocks.fetch_add(1, Ordering::Relaxed);
    }
    /// Makes the fiber due for demotion at once (the monitor caught it in a call that
    /// waits for completions, or blocked for over a second). Returns whether it was not
    /// due before, so that the caller counts each fiber once.
    #[inline]
    pub fn mark_due(&self) -> bool {
        self.foreign_blocks.swap(DEMOTE_AFTER_BLOCKS, Ordering::Relaxed) < DEMOTE_AFTER_BLOCKS
    }
    /// Whether the fiber blocked often enough ([`DEMOTE_AFTER_BLOCKS`]) to go to its
    /// donor for good.
    #[inline]
    pub fn is_due(&self) -> bool {
        self.foreign_blocks.load(Ordering::Relaxed) >= DEMOTE_AFTER_BLOCKS
    }
}

/// While the fiber waits for a descriptor directly in the kernel on its worker
/// (`scheduler::direct_wait`): the worker's wake-up eventfd, which `unpark` writes so
/// that the wait ends. SeqCst: `publish` then the waiter's check of its park state,
/// against `unpark`'s park-state CAS then its read of `fd` here, is a Dekker pair
/// (each side stores then loads; without SeqCst both could miss the other's store and
/// the fiber would sleep through its wake-up; loom: direct_wait_and_unpark_form_a_dekker_pair).
pub struct DirectWake {
    fd: AtomicI32,
}

impl DirectWake {
    pub const fn new() -> DirectWake {
        DirectWake { fd: AtomicI32::new(-1) }
    }
    /// The fiber starts a direct wait that `fd` (an eventfd) ends.
    #[inline]
    pub fn publish(&self, fd: i32) {
        self.fd.store(fd, Ordering::SeqCst);
    }
    /// The direct wait is over.
    #[inline]
    pub fn withdraw(&self) {
        self.fd.store(-1, Ordering::SeqCst);
    }
    /// The eventfd to signal, if the fiber is in a direct wait.
    #[inline]
    pub fn fd(&self) -> Option<i32> {
        let fd = self.fd.load(Ordering::SeqCst);
        (fd >= 0).then_some(fd)
    }
}

impl Default for RunningOn {
    fn default() -> Self {
        Self::new()
    }
}

impl Default for DonorHandoff {
    fn default() -> Self {
        Self::new()
    }
}

impl Default for Demotion {
    fn default() -> Self {
        Self::new()
    }
}

impl Default for DirectWake {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn donor_handoff_commands_follow_the_worker_and_the_donor() {
        let h = DonorHandoff::new();
        assert_eq!(h.command(), DonorCommand::Idle);
        h.run_on_donor();
        assert_eq!(h.command(), DonorCommand::Run);
        h.take_run();
        assert_eq!(h.command(), DonorCommand::Idle);
        h.finish(42);
        assert_eq!(h.command(), DonorCommand::Finish);
        assert_eq!(h.retval(), 42);
        assert_eq!(h.sleeping_sp(), 0);
        let (word, idle, _) = h.sleep_words();
        assert_ne!(word.load(Ordering::Relaxed), idle);
    }

    #[test]
    fn demotion_is_due_at_the_threshold() {
        let d = Demotion::new();
        for _ in 1..DEMOTE_AFTER_BLOCKS {
            d.note_foreign_block();
            assert!(!d.is_due());
        }
        d.note_foreign_block();
        assert!(d.is_due());
    }

    #[test]
    fn direct_wake_and_running_on_and_identity() {
        let w = DirectWake::new();
        assert_eq!(w.fd(), None);
        w.publish(7);
        assert_eq!(w.fd(), Some(7));
        w.withdraw();
        assert_eq!(w.fd(), None);

        let r = RunningOn::new();
        r.enter(0x1000, 0x2000);
        assert_eq!((r.worker(), r.worker_tp()), (0x1000, 0x2000));
        r.leave();
        assert_eq!(r.worker(), 0);

        let (a, b) = (Identity::new(1), Identity::new(2));
        assert!(a.id() != 0 && b.id() > a.id());
        assert!(!a.is_unregistered());
        a.set_donor(0x3000, 99);
        a.set_pthread(0x4000);
        a.mark_unregistered();
        assert_eq!((a.tp(), a.donor_tid(), a.pthread(), a.start_routine()), (0x3000, 99, 0x4000, 1));
        assert!(a.is_unregistered());
    }
}
