//! Readiness waits: `poll`, `ppoll`, `select`, `pselect`, `epoll_pwait`. One owned
//! descriptor waited for one way parks on it; anything else runs on the fiber's donor
//! (`donor_waits::wait_on_donor`), where a cancellation request or a signal sent to the
//! fiber ends the wait as it ends a native one. `super::poll` and the like are the real
//! functions.
//!
//! # A call's signal mask
//!
//! `ppoll`, `pselect` and `epoll_pwait` given a signal mask install it for their wait
//! and put the thread's own back on the way out, atomically with the wait's start and
//! end. A fiber's call does the same with the fiber's mask
//! (`donor_waits::install_call_mask` / `restore_call_mask`) around the very waits the
//! call makes without a mask, which already end for a signal the fiber's mask lets
//! through; so a signal the call's mask lets through interrupts it (its handler run on
//! the fiber, with the call's mask in effect), one it blocks stays pending, and a
//! signal held before the call that the call's mask unblocks is delivered when the
//! call begins (`EINTR`).

use super::*;

/// `poll` for a fiber: probe; one owned fd waiting one way parks on it; anything
/// else runs on the donor.
///
/// # Safety
/// As `poll`.
pub unsafe fn poll(fds: *mut pollfd, n: nfds_t, timeout_ms: c_int) -> c_int {
    let Some(me) = fiber::current() else {
        // SAFETY: a plain thread: `fds` points to `n` pollfds (poll's contract, this fn's # Safety),
        // what the real poll reads and writes.
        return unsafe { super::poll(fds, n, timeout_ms) };
    };
    begin_blocking_call();
    // SAFETY: as this fn's.
    unsafe { poll_begun(me, fds, n, timeout_ms) }
}

/// [`poll`] for fiber `me` once its call began (`begin_blocking_call`).
///
/// # Safety
/// As `poll`.
unsafe fn poll_begun(me: &fiber::Fiber, fds: *mut pollfd, n: nfds_t, timeout_ms: c_int) -> c_int {
    let deadline = crate::base::time::deadline_in_ms(timeout_ms);
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
            match st.io.try_direct_wait(p.fd, p.events, deadline, false) {
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
            if st.io.ensure_registered(p.fd, dir == Dir::Write).is_ok() {
                loop {
                    let seq = dir.seq(st).load(Ordering::Acquire);
                    // A read just found the queue empty at this sequence (e.g. the
                    // program's MSG_DONTWAIT recv before this poll): nothing to probe.
                    // MariaDB's vio waits for POLLIN | POLLPRI: urgent data cannot be
                    // pending on a descriptor the reactor never reported it for.
                    let urgent_possible = p.events & libc::POLLPRI != 0 && st.has(fdtable::URGENT_SEEN);
                    if !(dir == Dir::Read && !urgent_possible && st.known_empty(seq)) {
                        // SAFETY: as above.
                        let r = unsafe { super::poll(fds, 1, 0) };
                        if r != 0 {
                            return r;
                        }
                    }
                    // Declined a direct wait above: the park.
                    match st.io.wait_parked(p.fd, dir, seq, deadline, false) {
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
    // returns, so also on the donor; poll leaves the requested events alone, so every
    // call is the same; `ts` and `m` are wait_on_donor's, valid for the call.
    donor_waits::wait_on_donor(me, deadline, |ts, m| unsafe {
        super::ppoll(fds, n, ts.map_or(core::ptr::null(), |t| t as *const libc::timespec), m)
    })
}

/// # Safety
/// As `ppoll`.
pub unsafe fn ppoll(fds: *mut pollfd, n: nfds_t, ts: *const libc::timespec, mask: *const libc::sigset_t) -> c_int {
    let Some(me) = fiber::current() else {
        // SAFETY: a plain thread: `fds`, `ts` and `mask` are as ppoll's contract has them, for the
        // real ppoll.
        return unsafe { super::ppoll(fds, n, ts, mask) };
    };
    let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `fds` points to `n` writable pollfds and `mask` is null or a sigset_t (ppoll's
    // contract); `zero` is our own timespec. A bad mask pointer gets its EFAULT here.
    let r = unsafe { super::ppoll(fds, n, &zero, mask) };
    // SAFETY: `ts` is null or a valid timespec (caller).
    let ms = match unsafe { ts.as_ref() }.map_or(Some(-1), poll_ms) {
        Some(ms) => ms,
        // A bad timeout: the kernel's EINVAL, at once.
        // SAFETY: as ppoll's contract has them.
        None => return unsafe { super::ppoll(fds, n, ts, mask) },
    };
    // SAFETY: `mask` is null or a valid sigset_t (caller; the probe above read it).
    let call_mask = unsafe { mask.as_ref() };
    // A zero timeout still returns EINTR for a signal held that the call's mask lets
    // through, as the kernel's ppoll does for a pending one.
    if r != 0 || (ms == 0 && !call_mask.is_some_and(|m| donor_waits::holds_signal_outside(me, m))) {
        return r;
    }
    // ppoll is poll with a finer timeout (rounded up to a millisecond here) and, given
    // one, its own signal mask for the wait (module docs).
    begin_blocking_call();
    let Some(m) = call_mask else {
        // SAFETY: `fds` points to `n` writable pollfds (ppoll's contract), as poll's.
        return unsafe { poll_begun(me, fds, n, ms) };
    };
    let before = donor_waits::install_call_mask(me, m);
    // SAFETY: as above.
    let r = if ms == 0 { interrupted_or(me, 0) } else { unsafe { poll_begun(me, fds, n, ms) } };
    donor_waits::restore_call_mask(me, before);
    r
}

/// For a call that would not wait: -1 with `EINTR` if a handler ran on fiber `me` since
/// the call began, else `r`.
fn interrupted_or(me: &fiber::Fiber, r: c_int) -> c_int {
    if delivery::interrupted_for_good(me, false) {
        set_errno(libc::EINTR);
        return -1;
    }
    r
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
    let Some(me) = fiber::current() else {
        // SAFETY: a plain thread: each set is null or an fd_set and `t` null or a timeval (select's
        // contract), for the real select.
        return unsafe { super::select(nfds, r, w, e, t) };
    };
    begin_blocking_call();
    // SAFETY: as this fn's.
    unsafe { select_begun(me, nfds, FdSets { r, w, e }, t) }
}

/// The three descriptor sets of a `select` call, each null or an `fd_set`.
#[derive(Clone, Copy)]
struct FdSets {
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
}

/// [`select`] for fiber `me` once its call began (`begin_blocking_call`).
///
/// # Safety
/// As `select`, with its sets in `sets`.
unsafe fn select_begun(me: &fiber::Fiber, nfds: c_int, sets: FdSets, t: *mut libc::timeval) -> c_int {
    let FdSets { r, w, e } = sets;
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
    // Each call restores the sets an interrupted one cleared, then the real blocking
    // call on the donor.
    let n = donor_waits::wait_on_donor(me, deadline, |ts, m| {
        // SAFETY: the caller's sets (or null), a timespec and a mask of wait_on_donor's.
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
            super::pselect(nfds, r, w, e, ts.map_or(core::ptr::null(), |t| t as *const libc::timespec), m)
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
    let Some(me) = fiber::current() else {
        // SAFETY: a plain thread: the sets, `t` and `m` are null or valid as pselect's contract has
        // them, for the real pselect.
        return unsafe { super::pselect(nfds, r, w, e, t, m) };
    };
    // pselect is select with a timeout it does not write back (rounded up to a
    // millisecond here) and, given one, its own signal mask for the wait (module docs).
    // SAFETY: `t` is null or a valid timespec (caller).
    let Some(ms) = unsafe { t.as_ref() }.map_or(Some(-1), poll_ms) else {
        // A bad timeout: the kernel's EINVAL, at once.
        // SAFETY: as pselect's contract has them.
        return unsafe { super::pselect(nfds, r, w, e, t, m) };
    };
    let mut tv = libc::timeval { tv_sec: (ms / 1000) as libc::time_t, tv_usec: (ms % 1000) as libc::suseconds_t * 1000 };
    let tv_ptr: *mut libc::timeval = if ms < 0 { core::ptr::null_mut() } else { &mut tv };
    if m.is_null() {
        // SAFETY: the program's sets (null or valid, pselect's contract) and our own timeval.
        return unsafe { select(nfds, r, w, e, tv_ptr) };
    }
    // A bad mask pointer gets the kernel's EFAULT (no descriptor looked at).
    let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: no sets, our own timespec, and `m` as the program gave it: the kernel reads it.
    if unsafe { super::pselect(0, core::ptr::null_mut(), core::ptr::null_mut(), core::ptr::null_mut(), &zero, m) } < 0 {
        return -1;
    }
    // SAFETY: `m` is a valid sigset_t (the kernel just read it).
    let call_mask = unsafe { &*m };
    if ms == 0 {
        // A zero timeout: the probe, but EINTR for a held signal the call's mask lets
        // through, as the kernel's pselect does for a pending one.
        // SAFETY: as pselect's contract has them.
        let n = unsafe { super::pselect(nfds, r, w, e, t, m) };
        if n != 0 || !donor_waits::holds_signal_outside(me, call_mask) {
            return n;
        }
    }
    begin_blocking_call();
    let before = donor_waits::install_call_mask(me, call_mask);
    // SAFETY: as above.
    let n = if ms == 0 { interrupted_or(me, 0) } else { unsafe { select_begun(me, nfds, FdSets { r, w, e }, tv_ptr) } };
    donor_waits::restore_call_mask(me, before);
    n
}

/// `epoll_wait` on the program's own epoll fd: its readiness is itself pollable, so
/// a fiber parks on it through our reactor. Given a signal mask, the fiber's mask is
/// that one for the wait (module docs).
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
    let Some(me) = fiber::current() else {
        // SAFETY: a plain thread: as this fn's # Safety, for the real call.
        return unsafe { epoll_call(ep, ev, max, timeout_ms, mask) };
    };
    begin_blocking_call();
    // The probe, with the call's mask: a bad mask pointer gets its EFAULT here.
    // SAFETY: as this fn's # Safety.
    let r = unsafe { epoll_call(ep, ev, max, 0, mask) };
    if r != 0 || timeout_ms == 0 {
        // A zero timeout: the kernel's epoll_pwait does not look at signals either.
        return r;
    }
    // SAFETY: `mask` is null or a valid sigset_t (caller; the probe read it).
    let Some(m) = (unsafe { mask.as_ref() }) else {
        // SAFETY: as this fn's.
        return unsafe { epoll_wait_begun(me, ep, ev, max, timeout_ms) };
    };
    let before = donor_waits::install_call_mask(me, m);
    // SAFETY: as this fn's.
    let r = unsafe { epoll_wait_begun(me, ep, ev, max, timeout_ms) };
    donor_waits::restore_call_mask(me, before);
    r
}

/// The real `epoll_pwait`, or `epoll_wait` for a null `mask`.
///
/// # Safety
/// As `epoll_pwait`.
unsafe fn epoll_call(ep: c_int, ev: *mut libc::epoll_event, max: c_int, ms: c_int, mask: *const libc::sigset_t) -> c_int {
    // SAFETY: `ev` has room for `max` events and `mask` is null or a sigset_t (this fn's
    // # Safety), as the real epoll_wait/epoll_pwait require.
    unsafe {
        if mask.is_null() {
            super::epoll_wait(ep, ev, max, ms)
        } else {
            super::epoll_pwait(ep, ev, max, ms, mask)
        }
    }
}

/// `epoll_wait` for fiber `me` once its call began (`begin_blocking_call`) and its
/// probe found nothing; `timeout_ms` is not 0.
///
/// # Safety
/// As `epoll_wait`.
unsafe fn epoll_wait_begun(me: &fiber::Fiber, ep: c_int, ev: *mut libc::epoll_event, max: c_int, timeout_ms: c_int) -> c_int {
    // SAFETY: `ev` has room for `max` events (this fn's # Safety).
    let call = |ms: c_int| unsafe { super::epoll_wait(ep, ev, max, ms) };
    let deadline = crate::base::time::deadline_in_ms(timeout_ms);
    if let Some(st) = fdtable::owned(ep) {
        if st.io.ensure_registered(ep, false).is_ok() {
            loop {
                let seq = st.read_seq.load(Ordering::Acquire);
                let r = call(0);
                if r != 0 {
                    return r;
                }
                match st.io.wait(ep, Dir::Read, seq, deadline, false) {
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
    // SAFETY: as above; `m` is wait_on_donor's mask.
    donor_waits::wait_on_donor(me, deadline, |ts, m| unsafe {
        super::epoll_pwait(ep, ev, max, ts.and_then(poll_ms).unwrap_or(-1), m)
    })
}
