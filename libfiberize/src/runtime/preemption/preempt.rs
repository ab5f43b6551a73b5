//! Preemption: a fiber that runs too long without switching while other fibers wait
//! is interrupted by a signal and queued at the back, so that spin-waits cannot starve
//! the fibers they wait for.
//!
//! # Why
//!
//! A fiber switches only when it calls into the library (a lock, a wait, I/O,
//! `sched_yield`). Programs that busy-wait on a flag (redis' I/O threads with
//! `--io-threads`, user-space spinlocks, `while (!ready) ;` hand-offs) never do: with
//! as many spinners as workers, the fiber that would set the flag is runnable but no
//! worker is ever free to run it (redis 7 livelocked that way). The kernel time-slices
//! threads; this module time-slices fibers, as Go's sysmon does since 1.14.
//!
//! # The request (monitor, [`Watch::tick`])
//!
//! Every tick the monitor looks at each ACTIVE worker that runs a fiber on the CPU (not
//! in a direct wait). A worker whose `progress` counter (bumped at every switch) did
//! not move for a whole time slice (`FIBERIZE_PREEMPT_MS`, `scheduler::policy::DEFAULT_SLICE_MS`; 0
//! turns preemption off), while runnable fibers wait in some queue
//! (`Runtime::has_work`), and whose kernel thread is running rather than sleeping (a
//! fiber blocked in a foreign call is the blocked-worker path's business, and a
//! signal would turn its call into EINTR) gets a request: `WorkerShared::preempt_request`
//! is set to the `progress` value of that very run, and the worker is sent the kick
//! signal (`runtime::preemption::kick::KICK_SIGNAL`, SIGRTMAX, which workers never block and which the
//! library already uses to deliver `pthread_kill` to running fibers). A request for a
//! run that has ended meanwhile does not match `progress` any more and is dropped.
//!
//! # The handler ([`on_kick`])
//!
//! The kick handler runs on the interrupted kernel thread, on the interrupted stack
//! (the kick is installed without `SA_ONSTACK`), with FS unchanged: when a fiber was
//! interrupted, on the fiber's stack with the fiber's TLS. It preempts only when the
//! interrupted instruction is program code that is safe to leave, and refuses
//! (`preempt_refused`; the monitor asks again at the next tick) when:
//!
//! * the handler does not run on the worker that the request was for (a `vfork`
//!   child shares the fiber's memory and TLS but is another task; the kick goes to the
//!   worker's tid, so the child never sees it, but the check costs one system call);
//! * the fiber is inside a shield (`shield::depth() != 0`: a runtime critical
//!   section, a switch in progress);
//! * the fiber took a worker-local address since its last switch
//!   (`crate::runtime::fibers::wtls`: it may be in the middle of using the worker's block);
//! * the interrupted context ran on a signal alternate stack (`uc_stack.ss_flags` has
//!   `SS_ONSTACK`): that stack belongs to the worker's kernel thread, not to the fiber;
//! * the interrupted RIP lies in the executable segments of libfiberize itself, the
//!   dynamic loader, libc, libstdc++, libgcc_s or libpthread ([`REFUSED_OBJECTS`],
//!   collected once with `dl_iterate_phdr` when the pool starts): they may hold
//!   internal locks (malloc arenas, stdio, the loader lock) or be in the middle of the
//!   runtime's own bookkeeping. This also refuses a second preemption of a fiber that
//!   is still inside this handler (its RIP is ours).
//!
//! Otherwise the handler suspends the fiber right there with [`Switch::Preempt`];
//! `run_fiber` puts the worker's own signal mask back (the kernel blocked the kick
//! while its handler runs) and pushes the fiber at the back of the global injector,
//! behind the fibers that waited (the local deque would run it again first).
//!
//! ```text
//!   fiber stack (grows down)                         worker W1, later W2
//!   +------------------------------+
//!   | program frames ...           |
//!   | spin loop  <- RIP when kicked|   kernel saves every register, the xsave area
//!   +------------------------------+   (vector state), uc_sigmask, uc_stack here:
//!   | (128-byte red zone, skipped) |
//!   | rt_sigframe: ucontext_t,     |
//!   |   siginfo, fpstate           |
//!   | on_kick -> preempt::on_kick  |
//!   | Fiber::suspend(Preempt)      |   corosensei switch: W1's scheduler resumes,
//!   |   [saved callee regs]        |   re-queues the fiber ........ some time later
//!   +------------------------------+   W2 resumes it: suspend returns, the handler
//!                                      returns, rt_sigreturn restores the frame
//! ```
//!
//! The kernel's signal frame stays on the fiber's stack while the fiber is queued; when
//! any worker resumes it, the handler returns and `rt_sigreturn` reloads every general
//! register, RIP, the flags and the full vector state from the frame, on whatever
//! kernel thread that is. What it does *not* cover, and why that is right:
//!
//! * **FS base.** Not part of the x86-64 sigcontext; `run_fiber` set it to the fiber's
//!   TCB before resuming, exactly as for any other switch, and sigreturn leaves it.
//! * **Signal mask.** sigreturn installs `uc_sigmask` on the new worker: the mask of
//!   the interrupted context. In program code at shield depth 0 that is the fiber's
//!   intended mask (its own, or the worker base mask, which every worker shares, and
//!   never with the kick blocked), or, inside a program signal handler, that handler's
//!   mask: both belong to the fiber, not to W1. Bits that a deferral blocks on a
//!   kernel thread (`crate::signal::handlers`) are not in it: a fiber's own deferrals are
//!   unblocked when its shield ends (it was at depth 0), a worker's at its safe point
//!   before it resumed the fiber. Between the resume on W2 and sigreturn, W2 runs
//!   the fiber's handler tail under the mask `run_fiber` installed, kick unblocked: a
//!   new kick then finds RIP in our own text and is refused (no nesting).
//! * **Alternate signal stack.** sigreturn also restores the sigaltstack settings
//!   saved in `uc_stack` onto W2's kernel thread: those of W1, which are the program's
//!   settings made from some fiber (workers have none of their own); it would fail
//!   only if W2 were running on its alternate stack, and we refused to preempt there.
//! * **Shield and deferred signals.** `Fiber::suspend` shields the switch as for every
//!   other switch; a program signal arriving during it is deferred and redelivered
//!   when the suspend returns on W2 (its `DEFERRED` word is the fiber's TLS).
//!
//! Known limits: program code that libc runs as a callback while holding one of its
//! locks (`dl_iterate_phdr` callbacks under the loader lock, `fopencookie` hooks) is
//! program code and may be preempted; those locks are owned through the TCB, which
//! follows the fiber, and a contender blocks its worker in the kernel, which the
//! blocked-worker path replaces. Objects `dlopen`ed after the pool started are treated
//! as program code (the ranges are collected once, so the handler reads them without
//! a lock).
//!
//! # Fallback: a spare worker
//!
//! A fiber that spins where it may not be preempted (inside libc, say) would keep its
//! worker for good. After `scheduler::policy::FALLBACK_AFTER_REFUSALS` refused requests in a row (a
//! request the handler took, `preempt_request` back at 0, while the run goes on), the
//! monitor declares its worker blocked (`scheduler::mark_blocked`): a
//! spare takes over the queues while the kernel time-slices the spinner's thread as it
//! would natively, and the fiber's foreign-block count (`fiber_state::Demotion`) grows,
//! so that a fiber doing this repeatedly is demoted to its donor at its next blocking
//! call (docs/DESIGN.md §2.15).

use core::sync::atomic::{AtomicUsize, Ordering};

use libc::{c_int, c_void};

use crate::base::stats::{bump, STATS};
use crate::base::sys;
use crate::runtime::fibers::fiber::{Fiber, Life, Switch};
use crate::runtime::scheduler::{Runtime, WorkerShared};

/// Objects a fiber must not be left in, by file name prefix (besides libfiberize itself,
/// found by address).
const REFUSED_OBJECTS: [&[u8]; 6] = [b"ld-linux", b"ld64.so", b"libc.so", b"libstdc++.so", b"libgcc_s.so", b"libpthread.so"];

/// Executable address ranges `[start, end)` of the refused objects; append-only,
/// written once at pool start before any request can be made.
const MAX_RANGES: usize = 32;
static RANGES: [(AtomicUsize, AtomicUsize); MAX_RANGES] = [const { (AtomicUsize::new(0), AtomicUsize::new(0)) }; MAX_RANGES];
static NUM_RANGES: AtomicUsize = AtomicUsize::new(0);

/// The time slice in ns (0: preemption off).
pub fn slice_ns() -> u64 {
    crate::base::config::config()
        .preempt_ms
        .unwrap_or(crate::runtime::scheduler::policy::DEFAULT_SLICE_MS)
        .saturating_mul(1_000_000)
}

/// Collects the refused objects' text ranges (once, when the pool starts, before the
/// monitor runs).
pub fn init() {
    if slice_ns() == 0 || NUM_RANGES.load(Ordering::Acquire) != 0 {
        return;
    }
    // SAFETY: `collect` matches the callback type and only reads what the loader passes.
    unsafe { libc::dl_iterate_phdr(Some(collect), core::ptr::null_mut()) };
}

fn file_name(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&c| c == b'/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

unsafe extern "C" fn collect(info: *mut libc::dl_phdr_info, _size: usize, _data: *mut c_void) -> c_int {
    // SAFETY: the loader passes a valid dl_phdr_info for the duration of the call.
    let info = unsafe { &*info };
    let name: &[u8] = if info.dlpi_name.is_null() {
        b""
    } else {
        // SAFETY: a NUL-terminated path owned by the loader.
        unsafe { core::ffi::CStr::from_ptr(info.dlpi_name) }.to_bytes()
    };
    let listed = REFUSED_OBJECTS.iter().any(|p| file_name(name).starts_with(p));
    // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
    let phdrs = unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    let text = || {
        phdrs.iter().filter(|ph| ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0).map(|ph| {
            let start = info.dlpi_addr as usize + ph.p_vaddr as usize;
            (start, start + ph.p_memsz as usize)
        })
    };
    let own = init as *const () as usize;
    let is_self = text().any(|(s, e)| (s..e).contains(&own));
    if listed || is_self {
        for (s, e) in text() {
            let n = NUM_RANGES.load(Ordering::Relaxed);
            if n == MAX_RANGES {
                break;
            }
            RANGES[n].0.store(s, Ordering::Relaxed);
            RANGES[n].1.store(e, Ordering::Relaxed);
            NUM_RANGES.store(n + 1, Ordering::Release);
        }
    }
    0
}

fn in_refused_object(pc: usize) -> bool {
    let n = NUM_RANGES.load(Ordering::Acquire);
    RANGES[..n].iter().any(|(s, e)| pc >= s.load(Ordering::Relaxed) && pc < e.load(Ordering::Relaxed))
}

/// Whether the ranges were found (libfiberize itself at least), for the tests' sake.
pub fn ranges_known() -> usize {
    NUM_RANGES.load(Ordering::Acquire)
}

// ---------------------------------------------------------------------------------
// The handler side
// ---------------------------------------------------------------------------------

/// Kick handler part: preempts fiber `f` if the monitor asked for it and the
/// interrupted context `uc` is safe to leave (module docs). Runs in `f`'s context, on
/// its stack. Async-signal-safe: atomics, TLS reads, one raw system call and the
/// switch.
pub fn on_kick(f: &Fiber, uc: *mut c_void) {
    let Some(w) = crate::runtime::scheduler::worker_of(f) else { return };
    let asked = w.preempt_request.swap(0, Ordering::AcqRel);
    if asked == 0 || asked != w.progress.load(Ordering::Relaxed) {
        return; // no request, or one for a run that already ended
    }
    if !safe_to_leave(f, w, uc) {
        bump(&STATS.preempt_refused);
        return;
    }
    bump(&STATS.preemptions);
    // SAFETY: we are `f`, on its own stack (the handler runs on the interrupted stack,
    // which safe_to_leave checked is not an alternate signal stack).
    unsafe { f.suspend(Switch::Preempt) };
}

fn safe_to_leave(f: &Fiber, w: &WorkerShared, uc: *mut c_void) -> bool {
    if uc.is_null() || crate::base::shield::depth() != 0 || f.life() != Life::Running || crate::runtime::fibers::wtls::pinned(f) {
        return false;
    }
    // SAFETY: for an SA_SIGINFO handler the kernel passes the interrupted context.
    let uc = unsafe { &*(uc as *const libc::ucontext_t) };
    if uc.uc_stack.ss_flags & libc::SS_ONSTACK != 0 {
        return false;
    }
    if in_refused_object(crate::base::arch::interrupted_pc(uc)) {
        return false;
    }
    if crate::runtime::fibers::fiber::in_vfork_child() {
        return false; // the parent's memory: never switch stacks here
    }
    // Last, as it costs a system call: the handler runs on the requested worker's
    // kernel thread (not in a vfork child of the fiber).
    sys::gettid() as u32 == w.tid.load(Ordering::Relaxed)
}

// ---------------------------------------------------------------------------------
// The monitor side
// ---------------------------------------------------------------------------------

/// The monitor's per-worker view of the current run.
pub struct Watch {
    slice_ns: u64,
    last_progress: Vec<u64>,
    run_since: Vec<u64>,
    /// A request for the current run is out (sent at an earlier tick).
    asked: Vec<bool>,
    /// Requests for the current run that the handler took and refused.
    refusals: Vec<u32>,
}

impl Watch {
    pub fn new(slots: usize) -> Watch {
        Watch {
            slice_ns: slice_ns(),
            last_progress: vec![0; slots],
            run_since: vec![0; slots],
            asked: vec![false; slots],
            refusals: vec![0; slots],
        }
    }

    /// One monitor tick: ask every worker whose fiber overran its slice while work
    /// waits to preempt it (module docs).
    pub fn tick(&mut self, rt: &Runtime) {
        if self.slice_ns == 0 || !crate::runtime::preemption::kick::KICK_INSTALLED.load(Ordering::Acquire) {
            return;
        }
        let now = sys::now_ns();
        let mut work_waits = None;
        for w in rt.workers() {
            let i = w.index;
            let p = w.progress.load(Ordering::Relaxed);
            if p != self.last_progress[i] || !w.runs_fiber_on_cpu() {
                self.last_progress[i] = p;
                self.run_since[i] = now;
                self.asked[i] = false;
                self.refusals[i] = 0;
                continue;
            }
            if self.asked[i] {
                if w.preempt_request.load(Ordering::Acquire) == p {
                    // Not taken yet (the kernel has not run the worker's thread since):
                    // a second kick would only queue another instance of the signal.
                    continue;
                }
                self.asked[i] = false;
                self.refusals[i] += 1;
            }
            let ran = now.saturating_sub(self.run_since[i]);
            if ran < self.slice_ns || !*work_waits.get_or_insert_with(|| rt.has_work(None)) {
                continue;
            }
            if crate::runtime::scheduler::worker_sleeps_in_kernel(w) {
                continue; // blocked, not spinning: the blocked-worker path acts
            }
            if self.refusals[i] >= crate::runtime::scheduler::policy::FALLBACK_AFTER_REFUSALS {
                // The worker stops being ACTIVE, which ends this watch of the run.
                bump(&STATS.preempt_fallbacks);
                crate::runtime::scheduler::mark_blocked(rt, w);
                continue;
            }
            self.asked[i] = true;
            w.preempt_request.store(p, Ordering::Release);
            // To one of our own workers with the kick signal, whose handler is
            // installed (KICK_INSTALLED).
            sys::tgkill(w.tid.load(Ordering::Relaxed) as i32, crate::runtime::preemption::kick::KICK_SIGNAL);
        }
    }
}
