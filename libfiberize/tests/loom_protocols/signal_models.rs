//! Models of the held signals (`runtime/signals/signal_state.rs`) and of a donor that takes
//! signals during a blocking call (`runtime/signals/donor_signals.rs`).

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use super::donor_signals::DonorSignals;
use super::signal_state::SignalState;

const SIG: i32 = 10;
const BIT: u64 = 1 << (SIG - 1);

/// How each signal ended: given back to the process, or raised on the (now plain)
/// thread as sent to the thread.
#[derive(Default)]
struct Outcomes {
    process_given_back: AtomicUsize,
    thread_raised: AtomicUsize,
}

/// A fiber becomes a plain thread (`switch::become_plain_thread`: mark, then take
/// everything held) while one sender hands it a signal of the process
/// (`delivery::hand_process_signal`: hold, fence, look at the flag, give back what is
/// still held) and another sends the same signal to its thread (`delivery::kill_fiber`:
/// hold, look at the flag, take it back and send it to the donor). Each of the two
/// signals ends exactly once, and as the kind it was sent as: the process's goes back
/// to the process, the thread's is raised on the thread.
#[test]
fn held_signals_are_taken_once_and_as_the_kind_sent() {
    loom::model(|| {
        let state = Arc::new(SignalState::new());
        let out = Arc::new(Outcomes::default());
        let (s2, o2) = (state.clone(), out.clone());
        let process_sender = thread::spawn(move || {
            s2.hold_from_process(SIG);
            loom::sync::atomic::fence(Ordering::SeqCst);
            if s2.is_plain_thread() && s2.take_from_process(u64::MAX) & BIT != 0 {
                o2.process_given_back.fetch_add(1, Ordering::SeqCst); // kill(getpid(), sig)
            }
        });
        let (s3, o3) = (state.clone(), out.clone());
        let thread_sender = thread::spawn(move || {
            s3.hold(SIG);
            if s3.is_plain_thread() && s3.take_sent_to_thread(BIT) {
                o3.thread_raised.fetch_add(1, Ordering::SeqCst); // tgkill(donor, sig)
            }
        });
        state.mark_plain_thread();
        let (to_thread, to_process) = state.take_all();
        if to_thread & BIT != 0 {
            out.thread_raised.fetch_add(1, Ordering::SeqCst);
        }
        if to_process & BIT != 0 {
            out.process_given_back.fetch_add(1, Ordering::SeqCst);
        }
        process_sender.join().unwrap();
        thread_sender.join().unwrap();
        assert_eq!(out.process_given_back.load(Ordering::SeqCst), 1, "the process's signal was lost or given back twice");
        assert_eq!(out.thread_raised.load(Ordering::SeqCst), 1, "the thread's signal was lost or raised twice");
        assert_eq!(state.held(), 0, "a signal stayed held for a plain thread");
    });
}

/// A fiber on a worker delivers what it holds (`mask::deliver_pending`: `take_sent_to_process`)
/// while it blocks the process's signal and gives it back (`give_back_to_process`:
/// `take_from_process`), and a new signal of the process comes for it meanwhile. Each
/// held signal is taken exactly once, by one of them.
#[test]
fn a_delivery_and_a_give_back_take_each_signal_once() {
    loom::model(|| {
        let state = Arc::new(SignalState::new());
        state.hold_from_process(SIG);
        let taken = Arc::new(AtomicUsize::new(0));
        let (s2, t2) = (state.clone(), taken.clone());
        let giver = thread::spawn(move || {
            t2.fetch_add(s2.take_from_process(BIT).count_ones() as usize, Ordering::SeqCst);
        });
        let s3 = state.clone();
        let sender = thread::spawn(move || s3.hold_from_process(SIG));
        while state.take_sent_to_process(BIT) {
            taken.fetch_add(1, Ordering::SeqCst);
        }
        giver.join().unwrap();
        sender.join().unwrap();
        // What nobody took yet stays held, for the next delivery.
        let left = state.take_sent_to_process(BIT) as usize;
        let n = taken.load(Ordering::SeqCst) + left;
        // The kernel merges a standard signal already pending: one or two, never more,
        // never none.
        assert!((1..=2).contains(&n), "{n} deliveries of at most two signals");
    });
}

/// A donor opens for signals during a blocking call, then blocks them again, closes
/// and takes what is pending (`signal::on_donor::run_on_donor_taking_signals`), while a
/// sender sends one to its thread if it is open (`delivery::send_to_open_donor`). A
/// signal sent is delivered while the donor takes signals or found pending by the
/// drain: never left pending, blocked, on the donor.
#[test]
fn donor_signals_never_strand_a_signal() {
    loom::model(|| {
        let donor = Arc::new(DonorSignals::new());
        let pending = Arc::new(AtomicBool::new(false)); // the signal, pending on the donor's thread
        let (d2, p2) = (donor.clone(), pending.clone());
        let sender = thread::spawn(move || {
            if d2.enter(BIT) {
                // tgkill(donor, sig): the kernel adds it to the donor's pending set (an
                // OR; loom also mis-orders a plain store against a concurrent swap).
                p2.fetch_or(true, Ordering::SeqCst);
                d2.leave();
                return true;
            }
            false
        });
        let mut taken = 0;
        donor.open(BIT);
        // While open the kernel delivers what is pending (the handler runs on the donor).
        if pending.swap(false, Ordering::SeqCst) {
            taken += 1;
        }
        // Every signal blocked again, then:
        donor.close();
        if pending.swap(false, Ordering::SeqCst) {
            taken += 1; // the drain: held for the fiber
        }
        let sent = sender.join().unwrap();
        assert_eq!(taken, sent as usize, "a signal sent to the open donor was stranded on it");
        assert!(!donor.takes(BIT));
    });
}
