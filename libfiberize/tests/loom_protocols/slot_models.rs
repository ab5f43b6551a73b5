//! Models of a descriptor's waiter slot (`io/waiter_slot.rs`): a waiter entering it,
//! validating and sleeping or leaving, against a waker that moves the readiness
//! sequence and takes the slot's waiter (`io::slot_park::wake`).

use loom::sync::atomic::{fence, AtomicU32, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use super::waiter_slot::WaiterSlot;

/// An empty slot (the library's `WaiterSlot::new` is a `const fn` outside the file).
fn empty_slot() -> WaiterSlot {
    WaiterSlot { word: AtomicUsize::new(0), lot: AtomicU32::new(0) }
}

/// The waiter's reference (any non-zero word).
const ME: usize = 8;

/// A waiter that occupies the slot and validates (`occupy_then_validate`) against a
/// waker that publishes an edge and then looks (`take_after_publishing`): a waiter
/// that goes to sleep was taken by the waker (its wake-up is not lost); one that
/// found the edge and withdrew without success was taken too; and the reference has
/// exactly one owner at the end.
#[test]
fn waiter_slot_wake_is_not_lost() {
    loom::model(|| {
        let slot = Arc::new(empty_slot());
        let seq = Arc::new(AtomicU32::new(0));
        let (sl2, s2) = (slot.clone(), seq.clone());
        let waker = thread::spawn(move || {
            s2.fetch_add(1, Ordering::AcqRel); // bump_and_wake: publish the edge
            sl2.take_after_publishing().taken
        });
        let sleeps = slot.occupy_then_validate(ME, || seq.load(Ordering::Acquire) == 0).expect("the slot was empty");
        let withdrew = !sleeps && slot.withdraw(ME);
        let taken = waker.join().unwrap();
        if sleeps {
            assert_eq!(taken, ME, "the waiter sleeps and the waker skipped it");
        }
        // One owner of the reference: the waiter (it withdrew) or the waker (it took it).
        if !sleeps {
            assert_eq!(usize::from(withdrew) + usize::from(taken == ME), 1, "the reference has no owner or two");
        }
        if taken == ME {
            assert!(slot.taken(ME), "taken, yet the waiter still sees itself in the slot");
        }
    });
}

/// A waiter in the slot whose deadline passes (`withdraw`) against a waker's edge:
/// exactly one of them ends up owning the reference, and a waiter whose withdrawal
/// failed sees itself taken (so it takes the wake-up instead of a time-out).
#[test]
fn waiter_slot_withdraw_races_a_wake_once() {
    loom::model(|| {
        let slot = Arc::new(empty_slot());
        assert_eq!(slot.occupy_then_validate(ME, || true), Some(true));
        let owners = Arc::new(AtomicUsize::new(0));
        let (sl2, o2) = (slot.clone(), owners.clone());
        let waker = thread::spawn(move || {
            if sl2.take_after_publishing().taken == ME {
                o2.fetch_add(1, Ordering::AcqRel);
            }
        });
        if slot.withdraw(ME) {
            owners.fetch_add(1, Ordering::AcqRel);
        } else {
            assert!(slot.taken(ME), "the withdrawal failed, yet the waiter is still in");
        }
        waker.join().unwrap();
        assert_eq!(owners.load(Ordering::Acquire), 1, "the reference has no owner or two");
    });
}

/// A second waiter finds the slot taken and parks in the lot (`enter_lot`, then the
/// lot's link, SeqCst fence and validation, `parking_quick::queue_then_validate`,
/// modelled here by its fence and validation) against a waker: if it sleeps, the
/// waker saw the lot count and looks in the lot (whose own quick check is modelled in
/// `parking_lot_quick_unpark_is_not_lost`).
#[test]
fn waiter_slot_lot_waiter_is_seen() {
    loom::model(|| {
        let slot = Arc::new(empty_slot());
        assert_eq!(slot.occupy_then_validate(ME, || true), Some(true)); // the first waiter
        let seq = Arc::new(AtomicU32::new(0));
        let (sl2, s2) = (slot.clone(), seq.clone());
        let waker = thread::spawn(move || {
            s2.fetch_add(1, Ordering::AcqRel);
            let found = sl2.take_after_publishing();
            assert_eq!(found.taken, ME, "the slot's waiter was skipped");
            found.lot
        });
        if slot.occupy_then_validate(2 * ME, || true).is_some() {
            // The waker emptied the slot first: the second waiter is the slot's (the
            // models above); this one is about the lot.
            waker.join().unwrap();
            return;
        }
        slot.enter_lot();
        fence(Ordering::SeqCst); // queue_then_validate's fence
        let sleeps = seq.load(Ordering::Acquire) == 0;
        let looked = waker.join().unwrap();
        if sleeps {
            assert!(looked, "a lot waiter sleeps and the waker skipped the lot");
        }
        slot.leave_lot();
    });
}
