//! Blocked workers: a worker's kernel thread as the monitor reads it (`/proc`'s
//! `stat`, `schedstat` and `syscall` of the thread, kept open by [`super::task_files`]),
//! marking a worker BLOCKED, and bringing a spare in for it (docs/DESIGN.md §2.11).
//! The monitor's watch that decides when (`stuck.rs`) and the quota it follows
//! (`quota.rs`) call these; the roles themselves are [`super::worker_role`]'s.

use super::task_files::{self, TaskFile};
use super::*;

/// Declares `w` blocked, unless its thread sleeps on one of the
/// runtime's own lock words: their holders never park while holding them, so the wait
/// ends as soon as the holder gets a CPU, and a spare would only compete for it
/// (`crate::base::rawlock::is_internal_wait`). Waits inside glibc (a `FILE` lock, a
/// malloc arena) still count: their holder may be a fiber parked on this very worker,
/// which only a spare can run.
pub(super) fn mark_blocked_unless_internal_wait(rt: &Runtime, w: &WorkerShared) {
    let call = BlockedCall::of(w);
    if call.as_ref().is_some_and(|c| c.nr == libc::SYS_futex && crate::base::rawlock::is_internal_wait(c.args[0] as usize)) {
        bump(&STATS.internal_lock_waits);
        return;
    }
    mark_blocked_in(rt, w, call);
}

/// Declares `w` blocked and brings a spare in if the pool is short.
pub(crate) fn mark_blocked(rt: &Runtime, w: &WorkerShared) {
    mark_blocked_in(rt, w, BlockedCall::of(w));
}

/// [`mark_blocked`], with the call the worker's thread was found in (read once by the
/// caller from `/proc/self/task/TID/syscall`).
fn mark_blocked_in(rt: &Runtime, w: &WorkerShared, call: Option<BlockedCall>) {
    if !w.role.mark_blocked() {
        return;
    }
    // Its set goes to the worker that replaces it (`poller::claim_set`).
    poller::release_set(w.readiness_set());
    bump(&STATS.workers_blocked);
    if crate::base::sites::on() {
        if let Some(call) = &call {
            note_blocking_call(w, call);
        }
    }
    let id = w.running.load(Ordering::Relaxed);
    if id != 0 {
        if let Some(f) = crate::runtime::fibers::registry::find_by_id(id) {
            f.demotion.note_foreign_block();
            if call.is_some_and(|c| c.is_completion_wait()) {
                mark_for_demotion(&f, &STATS.demotions_completion_wait);
            }
        }
    }
    if rt.active.fetch_sub(1, Ordering::AcqRel) > rt.target() {
        return;
    }
    bring_in_worker(rt);
}

/// Makes one more worker ACTIVE: a retired spare woken, else a new thread in the next
/// free slot. False when every slot is taken or the thread could not be made (the
/// group's `pids.max`, `RLIMIT_NPROC`: counted, `worker_starts_failed`); the pool then
/// runs short until a blocked worker returns, or goes on with the workers it has
/// after a raised quota. A native program makes no thread for either, so a failure
/// must not end it. Monitor only (it alone starts threads and wakes spares).
pub(super) fn bring_in_worker(rt: &Runtime) -> bool {
    // Prefer waking a retired spare.
    for s in rt.workers() {
        if s.role.activate_spare() {
            rt.active.fetch_add(1, Ordering::AcqRel);
            s.role.wake();
            return true;
        }
    }
    let idx = rt.started.load(Ordering::Acquire);
    if idx >= rt.workers.len() {
        return false;
    }
    rt.active.fetch_add(1, Ordering::AcqRel);
    rt.started.store(idx + 1, Ordering::Release);
    if try_spawn_runtime_thread(worker::worker_main, &rt.workers[idx] as *const WorkerShared as *mut libc::c_void).is_err() {
        return no_worker_started(rt, idx);
    }
    bump(&STATS.workers_spawned);
    true
}

/// Undoes [`bring_in_worker`]'s claim on slot `idx`, whose thread could not be made:
/// the slot is free again for a later try (nothing reached it: no thread ran on it,
/// and nothing is handed to a worker that has not run), and the pool counts one ACTIVE
/// worker less. False, for the caller to return.
#[cold]
fn no_worker_started(rt: &Runtime, idx: usize) -> bool {
    rt.started.store(idx, Ordering::Release);
    rt.active.fetch_sub(1, Ordering::AcqRel);
    bump(&STATS.worker_starts_failed);
    false
}

/// A fiber found blocking its worker in a wait that lasts as long as the program
/// wants (a completion queue, a long one-off call) goes to its donor at its next
/// intercepted blocking call, instead of after `DEMOTE_AFTER_BLOCKS` episodes, each
/// of which costs a spare worker and a few stuck milliseconds (docs/DESIGN.md §2.11).
pub(super) fn mark_for_demotion(f: &Fiber, why: &crate::base::stats::Counter) {
    if f.demotion.mark_due() {
        bump(why);
    }
}

/// The system call a blocked worker's thread sleeps in, from
/// `/proc/self/task/TID/syscall` ("nr a1 a2 a3 a4 a5 a6 sp pc" while in a system call;
/// "running" or "-1 sp pc" when not).
pub(crate) struct BlockedCall {
    pub(crate) nr: i64,
    pub(crate) args: [u64; 6],
    pub(crate) sp: usize,
    pub(crate) pc: usize,
}

impl BlockedCall {
    /// The call worker `w`'s thread is in (its kept `syscall` file).
    pub(crate) fn of(w: &WorkerShared) -> Option<BlockedCall> {
        let mut buf = [0u8; 256];
        let n = read_worker_file(w, TaskFile::Syscall, &mut buf)?;
        BlockedCall::parse(&buf[..n])
    }

    /// The call kernel thread `tid` is in (its `syscall` file opened by path: for the
    /// dump, which names any thread).
    pub(crate) fn of_thread(tid: u32) -> Option<BlockedCall> {
        let mut buf = [0u8; 256];
        let n = task_files::read_task_file(tid, TaskFile::Syscall, &mut buf)?;
        BlockedCall::parse(&buf[..n])
    }

    fn parse(text: &[u8]) -> Option<BlockedCall> {
        let mut fields = [0u64; 9];
        let mut count = 0;
        for f in text.split(|c| c.is_ascii_whitespace()).filter(|f| !f.is_empty()) {
            let s = core::str::from_utf8(f).ok()?;
            let v = match s.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok()?,
                None => s.parse().ok()?,
            };
            *fields.get_mut(count)? = v;
            count += 1;
        }
        (count == 9).then(|| BlockedCall {
            nr: fields[0] as i64,
            args: [fields[1], fields[2], fields[3], fields[4], fields[5], fields[6]],
            sp: fields[7] as usize,
            pc: fields[8] as usize,
        })
    }

    /// A wait for completions that the program makes again and again from one
    /// thread: `io_uring_enter` with `IORING_ENTER_GETEVENTS` and `min_complete > 0`
    /// (liburing's `io_uring_wait_cqe`, inline, so the `syscall` export never sees
    /// it: InnoDB's `tpool::create_linux_aio`), `io_getevents` with
    /// `min_nr > 0` (libaio), or `rt_sigtimedwait` (a signal thread's `sigwaitinfo`
    /// loop through raw system calls).
    fn is_completion_wait(&self) -> bool {
        const IORING_ENTER_GETEVENTS: u64 = 1;
        match self.nr {
            libc::SYS_io_uring_enter => self.args[3] & IORING_ENTER_GETEVENTS != 0 && self.args[2] as u32 > 0,
            libc::SYS_io_getevents => self.args[1] as i64 > 0,
            libc::SYS_rt_sigtimedwait => true,
            _ => false,
        }
    }
}

/// For the report: the call `w` is blocked in, by the program's call site: `pc` (the
/// instruction after the `syscall`) itself when the program made the system call
/// inline, else the first return address into the program's code above `sp`. The
/// time is added when the worker comes back (`worker::rejoin_or_retire`).
fn note_blocking_call(w: &WorkerShared, call: &BlockedCall) {
    let (nr, sp, pc) = (call.nr as u64, call.sp, call.pc);
    use crate::base::sites::{in_main_executable, is_program_code, program_returns};
    let (site, outer) = match (is_program_code(pc), in_main_executable(pc)) {
        (true, true) => (pc, 0),
        // Inline system call in a shared object (liburing): its caller in the program.
        (true, false) => match program_returns(sp, 4096) {
            (first, _) if in_main_executable(first) => (pc, first),
            (_, outer) => (pc, outer),
        },
        (false, _) => program_returns(sp, 4096),
    };
    let key = if site != 0 { site } else { pc };
    if let Some(e) = crate::base::sites::entry(crate::base::sites::Kind::BlockedWorker, key, || site) {
        e.pc.store(pc, Ordering::Relaxed);
        e.detail.store(nr, Ordering::Relaxed);
        e.outer_site.store(outer, Ordering::Relaxed);
        e.add(0);
        w.times.blocked_since.store(crate::base::sites::now(), Ordering::Relaxed);
        w.times.blocked_entry.store(e as *const _ as *mut _, Ordering::Relaxed);
    }
}

/// Reads `file` of worker `w`'s thread (kept open, `task_files::TaskFiles`) into `buf`;
/// the length read.
fn read_worker_file(w: &WorkerShared, file: TaskFile, buf: &mut [u8]) -> Option<usize> {
    w.task_files.read(w.tid.load(Ordering::Relaxed), file, buf)
}

/// CPU time (ns) worker `w`'s thread has run, from its schedstat (None without one).
pub(super) fn worker_cpu_ns(w: &WorkerShared) -> Option<u64> {
    let mut buf = [0u8; 128];
    let n = read_worker_file(w, TaskFile::Schedstat, &mut buf)?;
    let mut fields = buf[..n]
        .split(|c| c.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
        .map(|f| f.iter().try_fold(0u64, |v, &c| c.is_ascii_digit().then(|| v.wrapping_mul(10).wrapping_add((c - b'0') as u64))));
    fields.next()?
}

/// Whether worker `w`'s thread is sleeping in the kernel (state S or D).
pub(crate) fn worker_sleeps_in_kernel(w: &WorkerShared) -> bool {
    let mut buf = [0u8; 512];
    let n = read_worker_file(w, TaskFile::Stat, &mut buf);
    matches!(n.and_then(|n| state_letter(&buf[..n])), Some(b'S' | b'D'))
}

/// The state letter of a `stat` text: "tid (comm) S ...", the state after the last ')'.
fn state_letter(stat: &[u8]) -> Option<u8> {
    match stat.iter().rposition(|&c| c == b')') {
        Some(i) if i + 2 < stat.len() => Some(stat[i + 2]),
        _ => None,
    }
}

/// Kernel thread `tid`'s state letter (R, S, D, ...), from its `stat` (opened by path:
/// for the dump, which names any thread).
pub(crate) fn thread_state(tid: u32) -> Option<u8> {
    let mut buf = [0u8; 512];
    let n = task_files::read_task_file(tid, TaskFile::Stat, &mut buf)?;
    state_letter(&buf[..n])
}
