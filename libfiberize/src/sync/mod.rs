//! **Layer 4 — the parking lot and the primitives on it.** [`parking`] keeps
//! address-keyed queues of waiting fibers and threads; every blocking primitive of the
//! program (mutexes, condition variables, rwlocks, semaphores, barriers, `pthread_once`,
//! futexes on process-private memory, sleeps, spinlocks) parks there.

pub mod barrier;
pub mod cond;
pub mod futex;
pub mod futex_maps;
pub mod futex_op;
pub mod futex_shared;
pub mod futex_split;
pub mod lock_word;
pub mod mutex;
pub mod once;
pub mod parking;
pub mod parking_fair;
pub mod parking_quick;
pub mod parking_wake;
pub mod rwlock;
pub mod sem;
pub mod sleep;
pub mod spin;
pub mod wait_loop;
