//! Where a socket's peer runs, as far as the kernel tells: the rule that keeps a direct
//! wait (`scheduler::direct_wait`) on the CPU its wake-up comes from.
//!
//! ```text
//!   crossed (the rule before)                     paired (the rule now)
//!   CPU 0: worker W0 ─┐   ┌─ client C0            CPU 0: worker W0 <──> client C0
//!                      ╳                          CPU 1: worker W1 <──> client C1
//!   CPU 1: worker W1 ─┘   └─ client C1
//!   every request and reply crosses CPUs          the client's send wakes nobody: its
//!   (an IPI and a vCPU wake-up each way), and     worker is the thread it preempted,
//!   the load looks balanced, so the kernel        and finds the request when it runs
//!   never pairs them up again                     again (native threads do the same)
//! ```

use core::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use libc::c_int;

use crate::base::sys;

/// The CPU on which the kernel last took in a segment for socket `fd`
/// (`SO_INCOMING_CPU`, socket(7)); `None` where it recorded none: no segment yet, not a
/// socket, or a family that does not record it (unix sockets). On TCP and UDP over
/// loopback that is the CPU the peer sent from: the sender's system call runs the
/// receive path (the loopback device's backlog is processed in the sender's softirq).
pub fn socket_incoming_cpu(fd: c_int) -> Option<u32> {
    let mut cpu = -1;
    let r = sys::getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_INCOMING_CPU, &mut cpu);
    if r < 0 || cpu < 0 {
        None
    } else {
        Some(cpu as u32)
    }
}

/// Where socket `fd`'s peer runs as against the calling worker (`local`: an AF_UNIX
/// socket): [`Peer::Elsewhere`] where a direct wait on it would, or may, be one across
/// CPUs, [`Peer::Here`] where the kernel says it runs on this CPU.
///
/// A direct wait binds the fiber to its worker, and the worker to whatever CPU the
/// kernel keeps it on. When the peer (a client thread on the same machine) runs on the
/// other CPU, every request and every reply then crosses CPUs, and nothing ever pairs
/// them up again: the load looks balanced (a worker and a client on each CPU), so the
/// kernel moves neither. Declining such waits (the fiber parks the ordinary way), the
/// pairs form within the first seconds and stay, and the fibers hardly wait at all:
/// each worker is preempted by its own client's wake-up and finds the next request
/// when it runs again, as native server threads do
/// (docs/RESULTS.md#direct-wait-peer-cpu). The pairs form at wake-ups: a parked fiber's
/// readiness wakes a sleeping worker, and the kernel places a waking thread by its
/// waker's CPU. A worker that spins instead and finds the readiness itself is never
/// woken, and stays where it is: the slow rounds had both workers on one CPU and both
/// clients on the other, or both fibers on one worker, declining waits for a whole run
/// (docs/RESULTS.md#sleep-without-spin). So a worker that runs dry after a declined wait
/// sleeps without spinning wherever [`kernel_may_pair_with`] says a wake-up could move
/// it (`scheduler::sleep_without_spin_next`).
///
/// * TCP and UDP: the CPU the last segment came in on ([`socket_incoming_cpu`]); none
///   recorded yet (no segment so far): the direct wait goes ahead.
/// * AF_UNIX: the kernel records no CPU, so a direct wait there can never be known to
///   be paired; it is declined: the pairs only form when the fibers park every time
///   (docs/RESULTS.md#direct-wait-unix-socket).
///
/// Other descriptors (pipes, eventfds) are not asked about. The cost is one
/// `getsockopt` per direct wait on a TCP or UDP socket (`getcpu` reads the vDSO); a
/// socket whose peer ran outside the process's mask is asked only every so many waits
/// (`ScheduledIo::try_direct_wait`).
pub fn where_peer_runs(fd: c_int, local: bool) -> Peer {
    if local {
        return Peer::Elsewhere(None);
    }
    crate::base::stats::bump(&crate::base::stats::STATS.peer_cpu_lookups);
    match socket_incoming_cpu(fd) {
        Some(cpu) if cpu as i32 == sys::getcpu() => Peer::Here,
        Some(cpu) => Peer::Elsewhere(Some(cpu)),
        None => Peer::Unknown,
    }
}

/// [`where_peer_runs`]'s answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// The socket's last segment came in on this CPU: its sender runs here, and cannot
    /// send the next one while this worker holds the CPU (a direct wait then blocks at
    /// once instead of spinning first: `scheduler::direct_wait`).
    Here,
    /// On another CPU (the one the last segment came in on), or possibly (a unix
    /// socket, which records none: `None`): no direct wait.
    Elsewhere(Option<u32>),
    /// Not known (no segment yet, not asked): a direct wait as before the rule.
    Unknown,
}

/// Whether the kernel may move this worker's thread beside a peer that runs on `cpu`
/// (`None`: a peer whose CPU is not known, e.g. over a unix socket): `cpu` is in the
/// process's CPU mask, or, for an unknown CPU, the mask holds every online CPU. Where
/// it may, a worker that runs dry after declining a wait sleeps at once instead of
/// spinning (`scheduler::sleep_without_spin_next`), so that the peer's next send wakes
/// it and the kernel places it by its waker (see "Pairs form at wake-ups" in the
/// module docs). Where it may not (the server pinned apart from its clients), the spin
/// stays: only it saves the wake-up.
pub fn kernel_may_pair_with(cpu: Option<u32>) -> bool {
    if MASK_STATE.load(Ordering::Acquire) == MASK_UNREAD {
        read_process_mask();
    }
    match cpu {
        Some(c) => (c as usize) < MASK_CPUS && MASK_WORDS[c as usize / 64].load(Ordering::Relaxed) & (1 << (c % 64)) != 0,
        None => MASK_STATE.load(Ordering::Relaxed) == MASK_COVERS_ALL_ONLINE,
    }
}

/// CPUs the process mask holds at most (`CPU_SETSIZE`).
const MASK_CPUS: usize = 1024;
/// [`MASK_STATE`]: not read yet; read, a subset of the online CPUs; read, all of them.
const MASK_UNREAD: u8 = 0;
const MASK_SUBSET: u8 = 1;
const MASK_COVERS_ALL_ONLINE: u8 = 2;

/// The process's CPU mask as a worker first read it ([`read_process_mask`]).
static MASK_WORDS: [AtomicU64; MASK_CPUS / 64] = [const { AtomicU64::new(0) }; MASK_CPUS / 64];
static MASK_STATE: AtomicU8 = AtomicU8::new(MASK_UNREAD);

/// Reads the calling thread's CPU mask (a worker's: they inherit the process's) into
/// [`MASK_WORDS`] and publishes it with a Release store of [`MASK_STATE`], which
/// readers load with Acquire. Two workers that race here store the same words. A mask
/// changed later (`taskset -p` on a running server) is not seen: the rule it feeds is
/// a heuristic, and the spin it decides on is never wrong, only slower.
#[cold]
fn read_process_mask() {
    // SAFETY: all-zero is a valid (empty) cpu_set_t.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    let mut count = 0;
    if sys::sched_getaffinity(&mut set) > 0 {
        for c in 0..MASK_CPUS {
            // SAFETY: CPU_ISSET reads the set; the index is below CPU_SETSIZE.
            if unsafe { libc::CPU_ISSET(c, &set) } {
                MASK_WORDS[c / 64].fetch_or(1 << (c % 64), Ordering::Relaxed);
                count += 1;
            }
        }
    }
    // SAFETY: sysconf has no preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    let state = if online > 0 && count >= online as usize { MASK_COVERS_ALL_ONLINE } else { MASK_SUBSET };
    MASK_STATE.store(state, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::sys::sched_getaffinity;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    /// The direct wait's peer rule ([`where_peer_runs`]) rests on this: over
    /// TCP loopback, the kernel takes a segment in on the CPU its sender ran on.
    #[test]
    fn loopback_segments_come_in_on_the_senders_cpu() {
        std::thread::spawn(|| {
            // SAFETY: all-zero is a valid (empty) cpu_set_t.
            let mut allowed: libc::cpu_set_t = unsafe { core::mem::zeroed() };
            assert!(sched_getaffinity(&mut allowed) > 0);
            // SAFETY: CPU_ISSET reads the set; the index is below CPU_SETSIZE.
            let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &allowed) }).collect();
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (mut server, _) = listener.accept().unwrap();
            for &cpu in cpus.iter().take(4) {
                // SAFETY: as above.
                let mut one: libc::cpu_set_t = unsafe { core::mem::zeroed() };
                // SAFETY: CPU_SET writes the set; the index is below CPU_SETSIZE.
                unsafe { libc::CPU_SET(cpu, &mut one) };
                // SAFETY: a valid set of the size given, for the calling thread (0).
                assert_eq!(unsafe { libc::sched_setaffinity(0, core::mem::size_of_val(&one), &one) }, 0);
                client.write_all(b"x").unwrap();
                let mut byte = [0u8; 1];
                server.read_exact(&mut byte).unwrap();
                assert_eq!(socket_incoming_cpu(server.as_raw_fd()), Some(cpu as u32), "a segment sent from CPU {cpu}");
            }
            // A unix socket records no CPU: the rule leaves its waits alone.
            let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
            (&a).write_all(b"x").unwrap();
            let mut byte = [0u8; 1];
            (&b).read_exact(&mut byte).unwrap();
            assert_eq!(socket_incoming_cpu(b.as_raw_fd()), None);
            assert_eq!(socket_incoming_cpu(0x7fff_0000), None, "not a descriptor");
        })
        .join()
        .unwrap();
    }
}
