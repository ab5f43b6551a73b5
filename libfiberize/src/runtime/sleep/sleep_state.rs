//! An idle worker's sleep against a producer's notify: no lost wake-up.
//!
//! An idle worker first spins for a while, then **announces** itself
//! ([`SleepWord::announce`]: its word `Sleeping`, the runtime's sleeper count + 1, a
//! SeqCst fence), re-checks every queue, and only then sleeps (in `epoll_wait`, in
//! `ppoll` for a direct wait, or on a futex on the word). A producer publishes its
//! fiber and then asks [`IdleCounts::wake_needed`] (a SeqCst fence, then the sleeper
//! and spinner counts); if somebody sleeps and nobody spins, it moves one worker's word
//! `Sleeping`→`Notified` ([`SleepWord::try_notify`]) and wakes that worker.
//!
//! ```text
//!   idle worker                             producer
//!   word = Sleeping; sleeping += 1          push fiber
//!   fence(SeqCst)                           fence(SeqCst)
//!   re-check queues ── work? ─> wake()      sleeping > 0 && spinning == 0 ?
//!        │ none                                   │ yes
//!        v                                        v
//!   sleep (unless word != Sleeping)         some word: Sleeping → Notified, wake it
//! ```
//!
//! The two SeqCst sequences form a Dekker pair: either the sleeper's re-check sees the
//! fiber, or the producer sees the sleeper (model: `idle_sleep_and_notify_form_a_dekker_pair`
//! in `libfiberize/tests/loom_protocols.rs`, which runs this file). Without the fences,
//! each side could read the other's old value: the fiber waits in a queue while every
//! worker sleeps (until the monitor's next tick notices it).
//!
//! Only [`crate::base::loom`] is imported: the model checks compile this very file.

use crate::base::loom::{fence, AtomicU32, AtomicUsize, Ordering};

const AWAKE: u32 = 0;
const SLEEPING: u32 = 1;
const NOTIFIED: u32 = 2;

/// One worker's sleep word: `Awake`, `Sleeping` (announced, maybe asleep) or
/// `Notified` (a producer chose it; it must not go to sleep, or must wake up).
pub struct SleepWord(AtomicU32);

/// The runtime's counts of idle workers: asleep (announced) and spinning.
pub struct IdleCounts {
    sleeping: AtomicUsize,
    spinning: AtomicUsize,
}

impl SleepWord {
    pub fn new() -> SleepWord {
        SleepWord(AtomicU32::new(AWAKE))
    }

    /// The worker, before its last re-check of the queues: `Sleeping`, counted, fenced.
    #[inline]
    pub fn announce(&self, counts: &IdleCounts) {
        self.0.store(SLEEPING, Ordering::SeqCst);
        counts.sleeping.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Whether the worker may still go to sleep (no producer chose it since it
    /// announced). SeqCst: read after the worker published that it sleeps in epoll
    /// (`WorkerShared::polling`), the other half of the notifier's CAS-then-read.
    #[inline]
    pub fn still_sleeping(&self) -> bool {
        self.0.load(Ordering::SeqCst) == SLEEPING
    }

    /// A producer chooses this worker: `Sleeping`→`Notified`. True if it was asleep (or
    /// about to be) and the caller must now wake it the way it sleeps.
    #[inline]
    pub fn try_notify(&self) -> bool {
        self.0.compare_exchange(SLEEPING, NOTIFIED, Ordering::SeqCst, Ordering::Relaxed).is_ok()
    }

    /// The worker is up again: `Awake`, uncounted. True if a producer had chosen it
    /// (a wake-up that was meant for it; for the statistics).
    #[inline]
    pub fn wake(&self, counts: &IdleCounts) -> bool {
        let notified = self.0.swap(AWAKE, Ordering::SeqCst) == NOTIFIED;
        counts.sleeping.fetch_sub(1, Ordering::SeqCst);
        notified
    }

    /// The word itself, for a futex wait (value [`SleepWord::SLEEPING`]) and wake.
    pub fn futex_word(&self) -> &AtomicU32 {
        &self.0
    }

    /// The futex value a sleeper waits on.
    pub const SLEEPING: u32 = SLEEPING;
}

impl Default for SleepWord {
    fn default() -> Self {
        Self::new()
    }
}

impl IdleCounts {
    pub fn new() -> IdleCounts {
        IdleCounts { sleeping: AtomicUsize::new(0), spinning: AtomicUsize::new(0) }
    }

    /// The producer, after it published its fiber: whether it must wake a sleeper
    /// (somebody sleeps and nobody spins; a spinner will find the fiber itself).
    #[inline]
    pub fn wake_needed(&self) -> bool {
        fence(Ordering::SeqCst);
        self.sleeping.load(Ordering::SeqCst) != 0 && self.spinning.load(Ordering::SeqCst) == 0
    }

    /// Workers asleep (announced) now.
    pub fn sleeping(&self) -> usize {
        self.sleeping.load(Ordering::SeqCst)
    }

    /// Workers spinning for work now.
    pub fn spinning(&self) -> usize {
        self.spinning.load(Ordering::SeqCst)
    }

    pub fn start_spinning(&self) {
        self.spinning.fetch_add(1, Ordering::SeqCst);
    }

    pub fn stop_spinning(&self) {
        self.spinning.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Default for IdleCounts {
    fn default() -> Self {
        Self::new()
    }
}

/// The monitor's doze against a worker that leaves a sleep (`scheduler::monitor`,
/// "Dozing"): `dozing` (0 or 1) and the word the monitor waits on.
///
/// ```text
///   monitor                                 worker, after SleepWord::wake
///   seen = announce(): dozing = 1, fence,   worker_woke(): fence, dozing? ── no ─> done
///          then the word                        │ yes: dozing = 0, word += 1,
///   pool quiet? (IdleCounts::sleeping)          v      futex-wake the monitor
///   futex_wait(word, seen, until)
///   end(): dozing = 0
/// ```
///
/// All SeqCst, with a SeqCst fence between each side's write and its read of the
/// other's (the fences are what the C++ model, and loom, need for a Dekker pair): a
/// Dekker pair as [`SleepWord`]'s. Either the monitor's check sees the worker's
/// `sleeping -= 1`, or the worker sees `dozing` and moves the word past `seen`, so the
/// monitor's wait returns at once or is woken (model:
/// `monitor_doze_and_worker_wake_form_a_dekker_pair` in
/// `libfiberize/tests/loom_protocols.rs`).
pub struct MonitorDoze {
    dozing: AtomicU32,
    word: AtomicU32,
}

impl MonitorDoze {
    pub fn new() -> MonitorDoze {
        MonitorDoze { dozing: AtomicU32::new(0), word: AtomicU32::new(0) }
    }

    /// The monitor, before it checks whether the pool is quiet: announces a doze, and
    /// returns the value to wait on.
    pub fn announce(&self) -> u32 {
        self.dozing.store(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        self.word.load(Ordering::SeqCst)
    }

    /// The value of the wait word now (a tick waits on it too, so that a worker's
    /// late bump does not make every later wait return at once).
    pub fn word_value(&self) -> u32 {
        self.word.load(Ordering::SeqCst)
    }

    /// The word the monitor waits on, for the futex wait and wake.
    pub fn futex_word(&self) -> &AtomicU32 {
        &self.word
    }

    /// The monitor, after its wait: no longer dozing.
    pub fn end(&self) {
        self.dozing.store(0, Ordering::SeqCst);
    }

    /// A worker that has just left a sleep: true if the monitor dozes and the caller
    /// moved the word, so it must now futex-wake the monitor. One SeqCst load when
    /// the monitor does not doze.
    #[inline]
    pub fn worker_woke(&self) -> bool {
        fence(Ordering::SeqCst);
        self.dozing.load(Ordering::SeqCst) != 0 && self.take_doze()
    }

    #[cold]
    fn take_doze(&self) -> bool {
        if self.dozing.swap(0, Ordering::SeqCst) == 0 {
            return false;
        }
        self.word.fetch_add(1, Ordering::SeqCst);
        true
    }
}

impl Default for MonitorDoze {
    fn default() -> Self {
        Self::new()
    }
}

const DONOR_NOT_WAITING: u32 = 0;
const DONOR_WAITING: u32 = 1;
const DONOR_KICKED: u32 = 2;

/// A fiber's wait on its donor that other threads must be able to interrupt
/// (`sigwait` and friends, and the descriptor waits `poll`, `select`, `ppoll`,
/// `pselect`, `epoll_pwait` there: a signal `pthread_kill` holds for the fiber, or
/// `pthread_cancel`, must end it). A descriptor wait cannot wait for the kick
/// signal as `sigwait` does; it unblocks it for the wait instead, atomically with the
/// wait's start (the mask argument of `ppoll` and the like), so a kick pending before
/// the call ends it just the same (the kick handler does nothing on a donor). The donor blocks every signal while its fiber
/// lives, the kick signal included, so a kick sent to the donor's kernel thread stays
/// pending until the wait takes it: the waiter adds the kick signal to the set it
/// waits for, and a kick that arrives before the wait begins ends it at once. That
/// closes the race a handler-based interruption has (the signal lands between the
/// check and the system call, and the wait sleeps on). A wait that woke every 10 ms to
/// look (`signal::cancel::DONOR_WAIT_SLICE_NS`) kept an idle server's signal thread
/// waking (docs/RESULTS.md#sigwait-on-donor).
///
/// ```text
///   waiter (on the donor)                    signaller (pthread_kill, pthread_cancel)
///   begin(): word = Waiting, fence           publish (held |= sig; requested = true)
///   request there? ── yes ─> end(), act      fence; interrupt_needed():
///        │ no                                      word Waiting → Kicked ?
///        v                                         │ yes
///   rt_sigtimedwait(set + kick) ── kick ─> begin() again, look again
///   end(): word = NotWaiting; kicked? drain a kick left pending (best effort)
/// ```
///
/// All SeqCst, with a SeqCst fence between each side's write and its read of the
/// other's: a Dekker pair as [`SleepWord`]'s. Either the waiter's look sees the
/// request, or the signaller sees `Waiting` and kicks, so the wait returns at once or
/// is ended (model: `donor_wait_and_its_interruption_form_a_dekker_pair` in
/// `libfiberize/tests/loom_protocols.rs`). A kick that arrives after the wait ended
/// stays pending on the donor: the next such wait returns once for it and looks again,
/// and a donor that becomes a plain thread runs the kick handler, which does nothing
/// outside a fiber.
pub struct DonorWait(AtomicU32);

impl DonorWait {
    pub fn new() -> DonorWait {
        DonorWait(AtomicU32::new(DONOR_NOT_WAITING))
    }

    /// The waiter, before it looks for a request (and again after each kick it took).
    pub fn begin(&self) {
        self.0.store(DONOR_WAITING, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// The waiter, when its wait is over: true if a signaller kicked it since the last
    /// [`Self::begin`] (a kick may still be pending on the donor).
    pub fn end(&self) -> bool {
        self.0.swap(DONOR_NOT_WAITING, Ordering::SeqCst) == DONOR_KICKED
    }

    /// Whether the fiber is inside such a wait now (from [`Self::begin`] to
    /// [`Self::end`]): a signal held for it now ends the wait. A hint for choosing a
    /// fiber, read without ordering; the hand-over itself goes through
    /// [`Self::interrupt_needed`].
    #[inline]
    pub fn is_interruptible(&self) -> bool {
        self.0.load(Ordering::Relaxed) != DONOR_NOT_WAITING
    }

    /// A signaller, after it published its request: true if the fiber waits on its
    /// donor and the caller must now send it the kick (one kick per [`Self::begin`]).
    /// A fence and one SeqCst load when it does not wait.
    #[inline]
    pub fn interrupt_needed(&self) -> bool {
        fence(Ordering::SeqCst);
        self.0.load(Ordering::SeqCst) == DONOR_WAITING
            && self.0.compare_exchange(DONOR_WAITING, DONOR_KICKED, Ordering::SeqCst, Ordering::SeqCst).is_ok()
    }
}

impl Default for DonorWait {
    fn default() -> Self {
        Self::new()
    }
}
