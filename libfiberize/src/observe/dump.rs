//! The fiber dump: every live fiber with its state, what it waits on, where it was
//! created (its start routine) and which worker runs it — like Go's goroutine dump.
//! Triggered by `FIBERIZE_DUMP_SIGNAL=N`, printed by the stall watchdog
//! (`crate::observe::watchdog`) and at exit with `FIBERIZE_DUMP_AT_EXIT=1`.
//!
//! # A dump must never make things worse
//!
//! A user takes a dump when something is wrong, often under load with thousands of
//! fibers. So:
//!
//! * The signal handler only bumps [`REQUESTS`] and wakes the **dump thread** with a
//!   futex (atomics and one system call: async-signal-safe whatever lock the
//!   interrupted context holds). The dump thread is a runtime thread of its own with
//!   every signal blocked, started with the pool when dumps are enabled. The monitor
//!   used to print the dump itself: for as long as that took (thousands of fibers, two
//!   `dladdr` calls per fiber, each a linear scan of the program's dynamic symbols:
//!   docs/RESULTS.md#dump-cost), and *forever* when stderr blocked (a pipe nobody reads), nobody
//!   moved fibers out of stuck workers' queues, woke sleepers for queued work or
//!   replaced blocked workers (test `a_dump_with_blocked_output_does_not_stop_the_monitor`).
//! * The registry lock (which `pthread_create` and thread exit need) is held only to
//!   clone the fiber handles; every field is read, every symbol resolved and every
//!   byte written after it is released. Symbols are resolved once per distinct start
//!   routine (a server has a handful), not once per fiber.
//! * Output goes out in bounded chunks with retries on `EINTR`/`EAGAIN`; a blocked
//!   stderr (a full pipe nobody reads) only stalls the dump thread. Requests that
//!   arrive during a dump are merged into one more dump, so a burst of signals costs
//!   at most two.

use core::fmt::Write;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::collections::BTreeMap;

use crate::base::sys;
use crate::observe::report::write_all;
use crate::runtime::fibers::fiber::FiberRef;
use crate::runtime::fibers::registry;
use crate::runtime::scheduler;

fn symbol(addr: usize) -> String {
    // SAFETY: dladdr only reads loader tables; `info` is a valid out-parameter, and the
    // names it fills in are NUL-terminated strings of a loaded object.
    unsafe {
        let mut info: libc::Dl_info = core::mem::zeroed();
        if libc::dladdr(addr as *const libc::c_void, &mut info) == 0 {
            return format!("{addr:#x}");
        }
        if !info.dli_sname.is_null() {
            let name = core::ffi::CStr::from_ptr(info.dli_sname).to_string_lossy();
            return format!("{}+{:#x}", name, addr - info.dli_saddr as usize);
        }
        if !info.dli_fname.is_null() {
            let file = core::ffi::CStr::from_ptr(info.dli_fname).to_string_lossy();
            return format!("{:#x} in {}", addr - info.dli_fbase as usize, file);
        }
    }
    format!("{addr:#x}")
}

const LIFE: [&str; 6] = ["starting", "runnable", "running", "parked", "on-donor", "finished"];
const WAIT: [&str; 12] =
    ["-", "mutex", "cond", "futex", "sleep", "rwlock", "other", "semaphore", "barrier", "once", "io", "join"];

/// One fiber as the dump saw it (plain values: no handle is kept while writing).
struct Row {
    id: u64,
    pthread: usize,
    life: u32,
    wait_kind: u32,
    wait_addr: usize,
    held_signals: u64,
    cancel_requested: bool,
    worker: Option<usize>,
    start_routine: usize,
    donor_tid: u32,
    wait_sp: usize,
    expected: u32,
    /// In the coordinating class (`WaitNote::coordinates`): queued in a worker's
    /// coordinating queue when it runs again.
    coordinating: bool,
}

/// Copies what the dump shows of every live fiber. The registry lock is held only
/// while the handles are cloned.
fn snapshot() -> Vec<Row> {
    let fibers: Vec<FiberRef> = registry::all();
    fibers
        .iter()
        .map(|f| Row {
            id: f.id(),
            pthread: f.identity.pthread(),
            life: f.life() as u32,
            wait_kind: f.wait.raw().0,
            wait_addr: f.wait.raw().1,
            held_signals: f.signals.held(),
            cancel_requested: f.cancel.is_requested(),
            worker: crate::runtime::scheduler::worker_of(f).map(|w| w.index),
            start_routine: f.identity.start_routine(),
            donor_tid: f.identity.donor_tid(),
            wait_sp: f.wait.sp(),
            coordinating: f.wait.coordinates(),
            expected: f.wait.expected(),
        })
        .collect()
}

/// The 32-bit word at `addr` now (a lock word, a futex), read through
/// `process_vm_readv`, which fails instead of faulting if the memory went away.
fn word_at(addr: usize) -> Option<u32> {
    let mut word = 0u32;
    let local = libc::iovec { iov_base: (&mut word as *mut u32).cast(), iov_len: 4 };
    let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: 4 };
    // SAFETY: `local` describes `word`, four writable bytes on this stack.
    let n = unsafe { sys::process_vm_readv(&local, &remote) };
    (n == 4).then_some(word)
}

/// Kernel thread `tid` as the kernel sees it: its state letter, and while it sleeps in
/// a system call the call's number and first argument (the monitor's reading of
/// `/proc/self/task/TID/syscall`), e.g. `R` or `S sys 202 0x7f00cafe0180` (a futex
/// wait on that word), then the program's frames above the call, found on the
/// thread's stack from the `sp` the same file gives.
fn kernel_side(tid: u32, frames: &mut Frames) -> String {
    let state = scheduler::thread_state(tid).map_or('?', char::from);
    let mut out = format!("{state}");
    if state == 'S' || state == 'D' {
        if let Some(call) = scheduler::BlockedCall::of_thread(tid) {
            let _ = write!(out, " sys {} {:#x}", call.nr, call.args[0]);
            if call.sp != 0 {
                program_frames_of(call.sp, &mut out, frames);
            }
        }
    }
    out
}

/// Appends ` at F1 < F2 < ...`: the program's frames on the stack above `sp`.
fn program_frames_of(sp: usize, out: &mut String, frames: &mut Frames) {
    let mut pcs = [0usize; DUMP_FRAMES];
    let n = crate::base::sites::program_frames(sp, &mut frames.scratch, &mut pcs);
    for (k, &pc) in pcs[..n].iter().enumerate() {
        let name = frames.symbols.entry(pc).or_insert_with(|| symbol(pc));
        let _ = write!(out, "{}{}", if k == 0 { " at " } else { " < " }, name);
    }
}

/// What the frame lookups of one dump share: the names found so far (one `dladdr` per
/// distinct address) and the buffer a stack is read into.
struct Frames {
    symbols: BTreeMap<usize, String>,
    scratch: Vec<usize>,
}

/// How much of a stack above the wait the dump reads for frames (words): 8 KiB, in one
/// system call per fiber (a MariaDB connection's frames lie within it).
const DUMP_STACK_WORDS: usize = 1024;

/// How many of the program's frames the dump shows for a thread asleep in the kernel.
const DUMP_FRAMES: usize = 4;

/// Where dump text goes: a descriptor, written in chunks of at most this many bytes.
/// Origin: one pipe buffer (64 KiB on Linux), so that a reader sees whole chunks.
const CHUNK: usize = 64 * 1024;

/// Builds the dump and hands it to `flush` in pieces of about [`CHUNK`] bytes,
/// holding no lock while it does. `reason` (if any) comes first, on a line of its own.
fn produce(reason: Option<&str>, flush: &mut dyn FnMut(&str)) {
    let started = sys::now_ns();
    crate::base::sites::ensure_code_ranges();
    let rows = snapshot();
    let mut out = String::with_capacity(CHUNK + 512);
    if let Some(r) = reason {
        let _ = writeln!(out, "fiberize: {r}");
    }
    let _ = writeln!(
        out,
        "fiberize: ---- fiber dump: {} fibers, {} armed timers ----",
        rows.len(),
        scheduler::try_runtime().map_or(0, |rt| rt.pending_timers())
    );
    let st = &crate::base::stats::STATS;
    let _ = writeln!(
        out,
        "fiberize: preemptions {} preempt-refused {} preempt-fallbacks {} lifo-capped {} mutex-handoffs {} demoted {} (completion waits {}, long blocks {})",
        st.preemptions.get(),
        st.preempt_refused.get(),
        st.preempt_fallbacks.get(),
        st.lifo_capped.get(),
        st.mutex_handoffs.get(),
        st.fibers_demoted.get(),
        st.demotions_completion_wait.get(),
        st.demotions_long_block.get()
    );
    let _ = writeln!(out, "fiberize: {}", crate::observe::report::locality_line());
    let mut frames = Frames { symbols: BTreeMap::new(), scratch: vec![0; DUMP_STACK_WORDS] };
    if let Some(rt) = scheduler::try_runtime() {
        for w in rt.workers() {
            let _ = write!(
                out,
                "fiberize: worker {} tid {} {} kernel {} running fiber {} switches {} deferred-signals {:#x}",
                w.index,
                w.tid.load(Ordering::Relaxed),
                w.state_name(),
                kernel_side(w.tid.load(Ordering::Relaxed), &mut frames),
                w.running.load(Ordering::Relaxed),
                w.progress.load(Ordering::Relaxed),
                w.deferred_signals(),
            );
            for (queue, len) in w.queue_lengths() {
                let _ = write!(out, " {queue} {len}");
            }
            let _ = writeln!(out);
        }
        let _ = writeln!(out, "fiberize: injector {}{}", rt.injector_len(), crate::runtime::fibers::queue_delay::render());
    }
    let mut symbols: BTreeMap<usize, String> = BTreeMap::new();
    for f in &rows {
        let life = LIFE.get(f.life as usize).copied().unwrap_or("?");
        let wait = WAIT.get(f.wait_kind as usize).copied().unwrap_or("?");
        let _ = write!(out, "fiberize: fiber {} pthread {:#x} {}", f.id, f.pthread, life);
        if wait != "-" {
            // A non-private futex's key has bit 0 set (`sync::futex_shared::KEY_TAG`).
            let addr = if wait == "futex" { f.wait_addr & !3 } else { f.wait_addr };
            let _ = write!(out, " waits on {} {:#x}", wait, addr);
            if wait == "futex" && f.wait_addr & 1 != 0 {
                out.push_str(" (non-private)");
            }
            if matches!(wait, "mutex" | "futex" | "rwlock" | "cond" | "semaphore" | "barrier" | "once") {
                match word_at(addr) {
                    Some(word) if wait == "futex" => {
                        let _ = write!(out, " word {word:#x} expected {:#x}", f.expected);
                    }
                    Some(word) => {
                        let _ = write!(out, " word {word:#x}");
                    }
                    None => out.push_str(" word unreadable"),
                }
            }
        }
        if wait != "-" && f.wait_sp != 0 {
            program_frames_of(f.wait_sp, &mut out, &mut frames);
        }
        if life == "on-donor" && f.donor_tid != 0 {
            let _ = write!(out, " donor {} kernel {}", f.donor_tid, kernel_side(f.donor_tid, &mut frames));
        }
        if f.held_signals != 0 {
            let _ = write!(out, " held-signals {:#x}", f.held_signals);
        }
        if f.cancel_requested {
            let _ = write!(out, " cancel-requested");
        }
        if f.coordinating {
            out.push_str(" coordinating");
        }
        let origin = symbols.entry(f.start_routine).or_insert_with(|| symbol(f.start_routine));
        let _ = match f.worker {
            Some(i) => writeln!(out, " worker {i} created for {origin}"),
            None => writeln!(out, " worker - created for {origin}"),
        };
        if out.len() >= CHUNK {
            flush(&out);
            out.clear();
        }
    }
    let took_us = sys::now_ns().saturating_sub(started) / 1000;
    let _ = writeln!(out, "fiberize: ---- end of dump ({took_us} us) ----");
    flush(&out);
}

/// Writes the dump to `fd`, chunk by chunk, holding no lock.
pub fn write_dump(fd: i32, reason: Option<&str>) {
    produce(reason, &mut |text| write_all(fd, text.as_bytes()));
}

/// Renders the dump into a string.
pub fn render() -> String {
    let mut s = String::new();
    produce(None, &mut |text| s.push_str(text));
    s
}

/// Prints the dump to stderr from the calling thread (exit-time dump).
pub fn dump_all() {
    write_dump(2, None);
}

// ---------------------------------------------------------------------------------
// The dump thread
// ---------------------------------------------------------------------------------

/// Dump requests so far (bumped by the signal handler; the dump thread waits on it).
static REQUESTS: AtomicU32 = AtomicU32::new(0);
static DUMP_THREAD_STARTED: AtomicBool = AtomicBool::new(false);

/// Starts the dump thread (once; called when the pool starts with dumps enabled).
pub fn start_dump_thread() {
    if DUMP_THREAD_STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    scheduler::spawn_runtime_thread(dump_thread_main, core::ptr::null_mut());
}

/// Asks the dump thread for a dump. Async-signal-safe: an atomic increment and a
/// futex wake, no lock, no allocation, no TLS.
pub fn request() {
    REQUESTS.fetch_add(1, Ordering::Release);
    sys::futex_wake(&REQUESTS, 1);
}

extern "C" fn dump_thread_main(_: *mut libc::c_void) -> *mut libc::c_void {
    let mut served = REQUESTS.load(Ordering::Acquire);
    loop {
        let now = REQUESTS.load(Ordering::Acquire);
        if now == served {
            sys::futex_wait(&REQUESTS, now, None);
            continue;
        }
        // Everything requested up to here is answered by this one dump.
        served = now;
        write_dump(2, None);
        crate::observe::report::write_if_wanted("on the dump signal");
    }
}
