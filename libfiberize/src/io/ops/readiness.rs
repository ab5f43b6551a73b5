//! Readiness waits: `poll`, `ppoll`, `select`, `pselect`, `epoll_pwait`. One owned
//! descriptor waited for one way parks on it; anything else runs on the fiber's donor,
//! in slices so that a cancellation request or a signal sent to the fiber is seen
//! (`ppoll`/`pselect` given a signal mask run there in one piece). `super::poll` and
//! the like are the real functions.

use super::*;

/// How long one slice of a donor-run wait over several descriptors lasts before the
/// donor looks for a cancellation request (`poll` and `select` are cancellation points).
const DONOR_WAIT_SLICE_MS: c_int = (crate::signal::cancel::DONOR_WAIT_SLICE_NS / 1_000_000) as c_int;

/// Runs `wait_ms(timeout_ms)` on the fiber's donor in slices of at most
/// `DONOR_WAIT_SLICE_MS` until it returns non-zero, `deadline` passes, the fiber is
/// asked to cancel (then acts on it), or a signal is held for it that its mask lets
/// through (`pthread_kill` while it waits; the donor blocks every signal): then -1 with
/// `EINTR`, as `poll` and `select` are never restarted (signal(7)), and the handler
/// runs when the fiber is back from its donor, before the call returns. `wait_ms` must
/// make each slice a fresh call (restoring whatever a timed-out call changed).
fn wait_on_donor_in_slices(deadline: Option<u64>, mut wait_ms: impl FnMut(c_int) -> c_int) -> c_int {
    let Some(me) = fiber::current() else { return wait_ms(crate::base::time::ms_until(deadline)) };
    let r = fiber::run_on_donor(|| loop {
        if delivery::has_deliverable_held(me) {
            // On the donor, whose TCB (and so errno) is the fiber's.
            set_errno(libc::EINTR);
            return -1;
        }
        let left = crate::base::time::ms_until(deadline);
        let slice = if (0..=DONOR_WAIT_SLICE_MS).contains(&left) { left } else { DONOR_WAIT_SLICE_MS };
        let r = wait_ms(slice);
        if r != 0 || slice == left || me.cancel_pending() {
            return r;
        }
    });
    crate::signal::cancel::testcancel();
    r
}

/// `poll` for a fiber: probe; one owned fd waiting one way parks on it; anything
/// else runs on the donor.
///
/// # Safety
/// As `poll`.
pub unsafe fn poll(fds: *mut pollfd, n: nfds_t, timeout_ms: c_int) -> c_int {
    if fiber::current().is_none() {
        // SAFETY: a plain thread: `fds` points to `n` pollfds (poll's contract, this fn's # Safety),
        // what the real poll reads and writes.
        return unsafe { super::poll(fds, n, timeout_ms) };
    }
    let deadline = crate::base::time::deadline_in_ms(timeout_ms);
    begin_blocking_call();
    if n == 1 && timeout_ms != 0 {
        // SAFETY: n == 1: one valid pollfd.
        let p = unsafe { &mut *fds };
        // POLLPRI (MariaDB's vio waits for POLLIN|POLLPRI) is reported through the
        // same read sequence: the reactor registers EPOLLPRI and bumps read_seq.
        let rd = libc::POLLIN | libc::POLLPRI | libc::POLLRDNORM;
        let ev = p.events & (rd | libc::POLLOUT | libc::POLLWRNORM);
        let dir = if ev != 0 && ev & !rd == 0 {
            Some(Dir::Read)
        } else if ev != 0 && ev & !(libc::POLLOUT | libc::POLLWRNORM) == 0 {
            Some(Dir::Write)
        } else {
            None
        };
        if let (Some(dir), Some(st)) = (dir, fdtable::owned(p.fd)) {
            // Alone on the worker: the kernel's poll itself, as natively (it reports
            // a present readiness at once, so no probe first).
            match try_direct_wait(p.fd, st, p.events, deadline, false) {
                Some(Ok(revents)) => {
                    p.revents = revents;
                    return 1;
                }
                Some(Err(Waited::Interrupted)) => {
                    set_errno(libc::EINTR);
                    return -1;
                }
                Some(Err(_)) => {
                    p.revents = 0;
                    return 0;
                }
                None => {}
            }
            // Registered first, then the sequence, then the probe: an edge after the
            // probe moves the sequence, and registering reports a readiness that
            // came before it, so the park below cannot miss one.
            if reactor::ensure_registered(p.fd, st, dir == Dir::Write).is_ok() {
                loop {
                    let seq = dir.seq(st).load(Ordering::Acquire);
                    // A read just found the queue empty at this sequence (e.g. the
                    // program's MSG_DONTWAIT recv before this poll): nothing to probe.
                    // MariaDB's vio waits for POLLIN | POLLPRI: urgent data cannot be
                    // pending on a descriptor the reactor never reported it for.
                    let urgent_possible = p.events & libc::POLLPRI != 0 && st.has(fdtable::URGENT_SEEN);
                    if !(dir == Dir::Read && !urgent_possible && known_empty(st, seq)) {
                        // SAFETY: as above.
                        let r = unsafe { super::poll(fds, 1, 0) };
                        if r != 0 {
                            return r;
                        }
                    }
                    match wait(p.fd, st, dir, seq, deadline, false) {
                        Waited::Ready if dir == Dir::Read => {
                            // Woken by an edge that only said "data came in": that is
                            // the answer, as the kernel's poll would give it now (a
                            // reader elsewhere may take the data first, as natively
                            // between two threads' polls and reads). Anything else (an
                            // error, a hang-up, urgent data, a wake-up not from an edge)
                            // is probed.
                            let seen = st.read_events.load(Ordering::Relaxed) as i32;
                            let revents = p.events & (libc::POLLIN | libc::POLLRDNORM);
                            if revents != 0 && seen & libc::EPOLLIN != 0 && seen & !(libc::EPOLLIN | libc::EPOLLOUT) == 0 {
                                p.revents = revents;
                                bump(&STATS.poll_probes_saved);
                                return 1;
                            }
                        }
                        Waited::Ready => {}
                        Waited::TimedOut => {
                            p.revents = 0;
                            return 0;
                        }
                        Waited::Interrupted => {
                            set_errno(libc::EINTR);
                            return -1;
                        }
                    }
                }
            }
        }
    }
    // SAFETY: `fds` points to `n` writable pollfds (poll's contract); a zero timeout makes this
    // a probe.
    let r = unsafe { super::poll(fds, n, 0) };
    if r != 0 || timeout_ms == 0 {
        return r;
    }
    // SAFETY: `fds` points to `n` writable pollfds (poll's contract), valid until this call
    // returns, so also on the donor; poll leaves the requested events alone, so every slice
    // is the same call.
    wait_on_donor_in_slices(deadline, |ms| unsafe { super::poll(fds, n, ms) })
}

/// # Safety
/// As `ppoll`.
pub unsafe fn ppoll(fds: *mut pollfd, n: nfds_t, ts: *const libc::timespec, mask: *const libc::sigset_t) -> c_int {
    if fiber::current().is_none() {
        // SAFETY: a plain thread: `fds`, `ts` and `mask` are as ppoll's contract has them, for the
        // real ppoll.
        return unsafe { super::ppoll(fds, n, ts, mask) };
    }
    let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `fds` points to `n` writable pollfds and `mask` is null or a sigset_t (ppoll's
    // contract); `zero` is our own timespec.
    let r = unsafe { super::ppoll(fds, n, &zero, mask) };
    // SAFETY: `ts` is null or a valid timespec (caller).
    if r != 0 || unsafe { ts.as_ref() }.is_some_and(|t| t.tv_sec == 0 && t.tv_nsec == 0) {
        return r;
    }
    // Without a mask, ppoll is poll with a finer timeout (rounded up to a millisecond
    // here): the same waits, which a signal to the fiber interrupts. With one, the mask
    // must hold for the whole wait: on the donor, in one piece (`pthread_kill` does not
    // interrupt it). A bad timeout gets the kernel's EINVAL there.
    // SAFETY: `ts` is null or a valid timespec (caller).
    if mask.is_null() {
        if let Some(ms) = unsafe { ts.as_ref() }.map_or(Some(-1), poll_ms) {
            // SAFETY: `fds` points to `n` writable pollfds (ppoll's contract), as poll's.
            return unsafe { poll(fds, n, ms) };
        }
    }
    // SAFETY: `fds`, `ts`, `mask` are as ppoll's contract has them and stay valid on the donor,
    // which runs this fiber's frames' call.
    fiber::run_on_donor(|| unsafe { super::ppoll(fds, n, ts, mask) })
}

/// A valid, non-negative timespec as a `poll` timeout: milliseconds rounded up (a wait
/// never ends early), at most `c_int::MAX`.
fn poll_ms(t: &libc::timespec) -> Option<c_int> {
    (crate::base::time::valid(t) && t.tv_sec >= 0)
        .then(|| sys::timespec_to_ns(t).div_ceil(1_000_000).min(c_int::MAX as u64) as c_int)
}

/// `select`: probe (on copies of the sets), then run on the donor.
///
/// # Safety
/// As `select`.
pub unsafe fn select(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    t: *mut libc::timeval,
) -> c_int {
    if fiber::current().is_none() {
        // SAFETY: a plain thread: each set is null or an fd_set and `t` null or a timeval (select's
        // contract), for the real select.
        return unsafe { super::select(nfds, r, w, e, t) };
    }
    // SAFETY: each set pointer is null or a valid fd_set (caller).
    let (sr, sw, se) = unsafe { (r.as_ref().copied(), w.as_ref().copied(), e.as_ref().copied()) };
    let mut zero = libc::timeval { tv_sec: 0, tv_usec: 0 };
    // SAFETY: the sets are null or fd_sets (select's contract); `zero` is our own timeval, so
    // this is a probe.
    let n = unsafe { super::select(nfds, r, w, e, &mut zero) };
    // SAFETY: `t` is null or valid (caller).
    let immediate = unsafe { t.as_ref() }.is_some_and(|t| t.tv_sec == 0 && t.tv_usec == 0);
    if n != 0 || immediate {
        return n;
    }
    // SAFETY: `t` is null or valid (caller).
    let deadline = unsafe { t.as_ref() }
        .map(|t| sys::now_ns().saturating_add(t.tv_sec.max(0) as u64 * 1_000_000_000 + t.tv_usec.max(0) as u64 * 1000));
    // Each slice restores the sets a timed-out call cleared, then the real blocking
    // call on the donor.
    let n = wait_on_donor_in_slices(deadline, |ms| {
        let mut slice = libc::timeval { tv_sec: (ms / 1000) as libc::time_t, tv_usec: (ms % 1000) as libc::suseconds_t * 1000 };
        // SAFETY: the caller's sets (or null) and a live timeval.
        unsafe {
            if let Some(s) = sr {
                *r = s;
            }
            if let Some(s) = sw {
                *w = s;
            }
            if let Some(s) = se {
                *e = s;
            }
            super::select(nfds, r, w, e, if ms < 0 { core::ptr::null_mut() } else { &mut slice })
        }
    });
    // Linux reports the time left in `t`.
    // SAFETY: as above.
    if let (Some(t), Some(d)) = (unsafe { t.as_mut() }, deadline) {
        let left = d.saturating_sub(sys::now_ns());
        *t = libc::timeval {
            tv_sec: (left / 1_000_000_000) as libc::time_t,
            tv_usec: (left % 1_000_000_000 / 1000) as libc::suseconds_t,
        };
    }
    n
}

/// # Safety
/// As `pselect`.
pub unsafe fn pselect(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    t: *const libc::timespec,
    m: *const libc::sigset_t,
) -> c_int {
    // Without a mask, pselect is select with a timeout it does not write back (as
    // ppoll above); with one, on the donor in one piece.
    // SAFETY: `t` is null or a valid timespec (caller).
    if m.is_null() && fiber::current().is_some() {
        if let Some(ms) = unsafe { t.as_ref() }.map_or(Some(-1), poll_ms) {
            let mut tv = libc::timeval { tv_sec: (ms / 1000) as libc::time_t, tv_usec: (ms % 1000) as libc::suseconds_t * 1000 };
            // SAFETY: the program's sets (null or valid, pselect's contract) and our own timeval.
            return unsafe { select(nfds, r, w, e, if ms < 0 { core::ptr::null_mut() } else { &mut tv }) };
        }
    }
    // SAFETY: the sets, `t` and `m` are null or valid as pselect's contract has them, and stay
    // valid while the donor runs the call.
    fiber::run_on_donor(|| unsafe { super::pselect(nfds, r, w, e, t, m) })
}

/// `epoll_wait` on the program's own epoll fd: its readiness is itself pollable, so
/// a fiber parks on it through our reactor.
///
/// # Safety
/// As `epoll_pwait` (`mask` null for `epoll_wait`).
pub unsafe fn epoll_pwait(
    ep: c_int,
    ev: *mut libc::epoll_event,
    max: c_int,
    timeout_ms: c_int,
    mask: *const libc::sigset_t,
) -> c_int {
    let call = |ms: c_int| {
        // SAFETY: `ev` has room for `max` events and `mask` is null or a sigset_t (epoll_pwait's
        // contract, this fn's # Safety), as the real epoll_wait/epoll_pwait require.
        unsafe {
            if mask.is_null() {
                super::epoll_wait(ep, ev, max, ms)
            } else {
                super::epoll_pwait(ep, ev, max, ms, mask)
            }
        }
    };
    if fiber::current().is_none() {
        return call(timeout_ms);
    }
    begin_blocking_call();
    let r = call(0);
    if r != 0 || timeout_ms == 0 {
        return r;
    }
    let deadline = crate::base::time::deadline_in_ms(timeout_ms);
    if let Some(st) = fdtable::owned(ep) {
        if reactor::ensure_registered(ep, st, false).is_ok() {
            loop {
                let seq = st.read_seq.load(Ordering::Acquire);
                let r = call(0);
                if r != 0 {
                    return r;
                }
                match wait(ep, st, Dir::Read, seq, deadline, false) {
                    Waited::Ready => {}
                    Waited::TimedOut => return 0,
                    Waited::Interrupted => {
                        set_errno(libc::EINTR);
                        return -1;
                    }
                }
            }
        }
    }
    fiber::run_on_donor(|| call(crate::base::time::ms_until(deadline)))
}
