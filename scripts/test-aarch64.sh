#!/usr/bin/env bash
# The aarch64 build and tests, on an x86_64 Debian 12 machine: cross-builds
# libfiberize.so and the test apps for aarch64 and runs the app tests under qemu-user,
# natively and preloaded, with the same checks as on x86_64 (same output, the preload
# in effect, fibers on few kernel threads). About 7 minutes on 2 CPUs once built (the
# first build adds some). scripts/test.sh runs it after the x86_64 tests. qemu is no
# performance reference: nothing here measures speed.
#
# Debian's rustc-web (rustc 1.96 at /usr/bin/rustc, with libstd-rust-web-dev:arm64)
# compiles for aarch64; rustup's toolchain, which builds everything else, has no
# aarch64 standard library. .cargo/config.toml names the linker and qemu as the runner.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=aarch64-unknown-linux-gnu
AARCH64_RUSTC=/usr/bin/rustc

need=()
[ -x "$AARCH64_RUSTC" ] || need+=(rustc-web cargo-web)
[ -d "/usr/lib/rustlib/$TARGET/lib" ] || need+=(libstd-rust-web-dev:arm64)
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
command -v aarch64-linux-gnu-g++ >/dev/null || need+=(g++-aarch64-linux-gnu)
command -v qemu-aarch64-static >/dev/null || need+=(qemu-user-static)
[ -e /lib/ld-linux-aarch64.so.1 ] || need+=(libc6:arm64)
if [ ${#need[@]} -gt 0 ]; then
    echo "== installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${need[@]}" >/dev/null
fi

echo "== build for $TARGET (libfiberize.so, the Rust test programs)"
# Two commands: `--bins` would leave out interpose's cdylib (libfiberize.so).
RUSTC=$AARCH64_RUSTC cargo build --release --target "$TARGET" -p interpose
RUSTC=$AARCH64_RUSTC cargo build --release --target "$TARGET" -p test-apps --bins

echo "== glibc layouts and library unit tests on aarch64 (under qemu)"
# The loom model checks (tests/loom_protocols.rs) are the same logic on every
# architecture and slow when emulated: they run on the host (scripts/test.sh). So does
# the mutex fairness measurement (primitives' starving waiter): its bounds are wall
# time (250 ms of waiting in all), which emulation on a loaded host exceeds (264 ms).
# A failure here still lets the app tests run.
status=0
RUSTC=$AARCH64_RUSTC cargo test --release --target "$TARGET" -p glibc-layout --lib --tests -- --test-threads=2 || status=1
RUSTC=$AARCH64_RUSTC cargo test --release --target "$TARGET" -p libfiberize --lib --test primitives -- --test-threads=2 \
    --skip starving_waiter_gets_the_mutex_while_a_barging_pair_hammers_it || status=1

echo "== the app tests, apps cross-built and run under qemu-aarch64-static, natively and preloaded"
# The tests themselves run on the host; FIBERIZE_TEST_ARCH makes the harness build and
# run aarch64 apps (test-apps/tests/harness). Left out under qemu:
# - stress_two_thousand_threads: 2000 emulated threads outlast its time limit natively;
# - fork_exec_stress_all_children_reaped: qemu-user deadlocks in children forked from
#   many threads, natively too: qemu's fork does not take the mutex its clone of a new
#   thread holds (syscall.c's clone_lock), so a child forked while another thread
#   started one blocks on it at its own first pthread_create (seen without the library:
#   54 of the app's children in FUTEX_WAIT on that mutex in qemu's data, host stack
#   cpu_loop -> do_syscall -> its clone path -> pthread_mutex_lock on the mutex that
#   qemu's thread start, clone_func, also takes). The harness's G_SLICE=always-malloc
#   (test-apps/tests/harness) mends the other such lock, GLib's slice allocator's,
#   which proc_fork_child's posix_spawn case met now and then;
# - mktime's native_vs_preloaded, in_process_against_glibc and odd_zone_from_tzdir:
#   100k inputs per zone take minutes per zone emulated, and the throttle's "tzset at
#   most once per 1000 calls" check then fails on emulation time (Europe/Berlin by
#   hand: 51362 inputs compared, 0 differences, 141 real tzset calls in 166 s).
# - every_io_call_on_every_kind_of_descriptor (io_badfd): the library asks the kernel
#   for its answer with preadv2/pwritev2(RWF_NOWAIT), which qemu 7.2 does not have
#   ("Unknown syscall 286"), and its fallback, a readv/writev of no vectors, qemu
#   answers with 0 itself: a fiber's read of a pipe's write end or of an eventfd with
#   a short buffer then waits forever instead of failing (EBADF, EINVAL);
# - sync_rwlock's reader-count overflow (2^29 read locks, ~110 s a run emulated), and
#   fiberize_tz_off_passes_through compares 2000 inputs instead of 20000: the same
#   logic runs in full on x86_64.
# Emulation is slow and uneven (a loaded 2-CPU host): the harness passes
# FIBERIZE_TEST_SLOW=3 to the apps, whose own alarms (and the harness's hang limits)
# are 3 times longer; no check depends on how fast the emulated threads run. Under
# qemu only, the kernel-thread bounds of cpp_std and wtls also count the spare
# workers started (qemu's own locks, and /proc/TID/syscall showing the host's call
# numbers, make a worker look blocked now and then).
export FIBERIZE_TEST_ARCH=aarch64
cargo test --release --no-fail-fast -p test-apps \
    --test core --test sync_family --test io --test fork --test wtls_report --test preempt \
    -- --test-threads=2 --skip stress_two_thousand_threads --skip fork_exec_stress_all_children_reaped \
    --skip every_io_call_on_every_kind_of_descriptor || status=1
cargo test --release -p test-apps --test mktime -- --test-threads=2 \
    tz_changes_are_picked_up fiberize_tz_off_passes_through || status=1
exit $status
