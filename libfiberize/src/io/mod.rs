//! Blocking I/O without blocking workers (docs/DESIGN.md §2.10).
//!
//! * [`fdtable`]: what we know about each file descriptor the program made through us
//!   (sockets, pipes, eventfds, its epoll fds): whether we own it (set `O_NONBLOCK`
//!   underneath), the program's own view of `O_NONBLOCK`, readiness sequence numbers,
//!   `SO_RCVTIMEO`/`SO_SNDTIMEO`.
//! * [`scheduled_io`]: the one owner of each descriptor's readiness: its registration
//!   in the runtime's edge-triggered epoll sets (idle workers wait in them, busy
//!   workers and the monitor poll them when nobody has for a while), its readiness
//!   sequences, its waiters, and how a fiber waits for it (parked, directly in the
//!   kernel when alone on its worker, or in the real `poll` on the donor).
//! * [`waiter_slot`], [`slot_park`]: each descriptor's one waiter per direction,
//!   outside the parking lot (model-checked hand-shake), and its wait and wake-up.
//! * [`epoll_membership`]: the registration lock and the hand-shake between a direct
//!   waiter and the fibers parked through the set (model-checked).
//! * [`ops`]: the blocking wrappers behind the exports: try the call (non-blocking
//!   underneath), and on `EAGAIN` park the fiber until the fd's readiness changes, or,
//!   for a plain thread, block in the real `poll`. Calls that cannot be made
//!   readiness-driven run on the fiber's donor thread (multi-fd `poll`, `select`,
//!   `fsync`).
//! * [`peer_cpu`]: whether a socket's peer runs on the calling worker's CPU, which a
//!   fiber alone on its worker needs before it waits for that socket in the kernel
//!   directly (`scheduler::direct_wait`).
pub mod epoll_membership;
pub mod fdtable;
pub mod offload;
pub mod ops;
pub mod peer_cpu;
pub mod scheduled_io;
pub mod slot_park;
pub mod waiter_slot;
