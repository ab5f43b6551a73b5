//! Issue 2 acceptance: a plain Rust std program with 200 threads using Mutex, Condvar,
//! RwLock, mpsc, Barrier, park/unpark, thread_local with Drop, sleep and scoped
//! threads. Deterministic stdout; distinct kernel thread ids on stderr.

use std::cell::Cell;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier, Condvar, Mutex, RwLock};
use std::time::Duration;

static DROPS: AtomicUsize = AtomicUsize::new(0);

struct CountsDrop(usize);
impl Drop for CountsDrop {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Ordering::SeqCst);
        assert!(self.0 < 1000);
    }
}

thread_local! {
    static ID: Cell<usize> = const { Cell::new(usize::MAX) };
    static GUARD: std::cell::RefCell<Option<CountsDrop>> = const { std::cell::RefCell::new(None) };
}

/// The kernel thread running this code, by a raw system call: `gettid()` and
/// `syscall(SYS_gettid)` give a fiber its own id (its donor's) under the preload.
fn gettid() -> i32 {
    let r: i64;
    // SAFETY: the gettid system call takes no arguments and touches no memory; the
    // kernel clobbers rcx and r11.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::asm!("syscall", inlateout("rax") libc::SYS_gettid => r, out("rcx") _, out("r11") _, options(nostack))
    };
    // SAFETY: as above; on aarch64 the number goes in x8 and the result comes back in x0.
    #[cfg(target_arch = "aarch64")]
    unsafe {
        std::arch::asm!("svc 0", in("x8") libc::SYS_gettid, lateout("x0") r, options(nostack))
    };
    r as i32
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let counter = Arc::new(Mutex::new(0u64));
    let table = Arc::new(RwLock::new(vec![0u64; 16]));
    let turn = Arc::new((Mutex::new(0usize), Condvar::new()));
    let barrier = Arc::new(Barrier::new(n));
    let tids = Arc::new(Mutex::new(HashSet::new()));
    let (tx, rx) = mpsc::channel::<usize>();
    let mut handles = Vec::new();
    for i in 0..n {
        let (counter, table, turn, barrier, tids, tx) =
            (counter.clone(), table.clone(), turn.clone(), barrier.clone(), tids.clone(), tx.clone());
        handles.push(std::thread::spawn(move || {
            ID.with(|c| c.set(i));
            GUARD.with(|g| *g.borrow_mut() = Some(CountsDrop(i)));
            for k in 0..50 {
                *counter.lock().unwrap() += 1;
                if k % 10 == 0 {
                    table.write().unwrap()[i % 16] += 1;
                } else {
                    let _sum: u64 = table.read().unwrap().iter().sum();
                }
                if k % 17 == 0 {
                    std::thread::sleep(Duration::from_micros(200));
                }
                tids.lock().unwrap().insert(gettid());
            }
            barrier.wait();
            // A ring: thread i waits for its turn, in order.
            let (lock, cv) = &*turn;
            let mut t = lock.lock().unwrap();
            while *t != i {
                t = cv.wait(t).unwrap();
            }
            *t += 1;
            cv.notify_all();
            drop(t);
            assert_eq!(ID.with(|c| c.get()), i, "thread_local lost its value");
            tx.send(i).unwrap();
            i
        }));
    }
    drop(tx);
    let received: usize = rx.iter().sum();
    let joined: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();

    // park/unpark ping-pong between two threads.
    let flag = Arc::new(AtomicUsize::new(0));
    let f2 = flag.clone();
    let main_thread = std::thread::current();
    let parker = std::thread::spawn(move || {
        for round in 1..=100 {
            while f2.load(Ordering::SeqCst) != round * 2 - 1 {
                std::thread::park();
            }
            f2.store(round * 2, Ordering::SeqCst);
            main_thread.unpark();
        }
    });
    for round in 1..=100 {
        flag.store(round * 2 - 1, Ordering::SeqCst);
        parker.thread().unpark();
        while flag.load(Ordering::SeqCst) != round * 2 {
            std::thread::park_timeout(Duration::from_millis(10));
        }
    }
    parker.join().unwrap();

    // Scoped threads borrowing local data.
    let data: Vec<u64> = (0..1000).collect();
    let total: u64 = std::thread::scope(|s| {
        let hs: Vec<_> = data.chunks(100).map(|c| s.spawn(move || c.iter().sum::<u64>())).collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });

    let writes: u64 = table.read().unwrap().iter().sum();
    println!(
        "threads={n} counter={} writes={writes} received={received} joined={joined} scoped={total} park_rounds=100",
        *counter.lock().unwrap()
    );
    println!("thread_local_drops={}", DROPS.load(Ordering::SeqCst));
    assert_eq!(DROPS.load(Ordering::SeqCst), n);
    // SAFETY: looking up an optional symbol in the global scope.
    let active = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"fiberize_active".as_ptr()) };
    let active = if active.is_null() {
        0
    } else {
        // SAFETY: the library's marker: int fiberize_active(void).
        unsafe { std::mem::transmute::<*mut libc::c_void, extern "C" fn() -> i32>(active)() }
    };
    eprintln!("preloaded={active} distinct_tids={}", tids.lock().unwrap().len());
}
