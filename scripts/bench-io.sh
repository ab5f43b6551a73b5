#!/usr/bin/env bash
# I/O benchmark (issue 5): the thread-per-connection echo server of
# test-apps/c/bench_echo.c, native and preloaded side by side in one run (alternating,
# ROUNDS rounds, median), ratio preloaded/native of round trips per second.
#
#   server  the server alone is native or preloaded; the load comes from a separate,
#           always native process (one thread, epoll, one 32-byte message in flight per
#           connection), as sysbench is for MariaDB. This is the figure of issue 5.
#   inproc  one client thread per connection inside the server's process, so under
#           the preload the clients are fibers too (each round trip also pays the
#           client side's park/wake and its read that finds nothing yet).
#
#   scripts/bench-io.sh [CONNECTIONS...]      (default: 100 1000; env ROUNDS=3, SECONDS_PER_RUN=3)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p interpose >/dev/null 2>&1 || cargo build --release -p interpose
LIB=$PWD/target/release/libfiberize.so
WORK=$(mktemp -d)
SERVER_PID=
cleanup() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
BIN=$WORK/bench_echo
cc -O2 -pthread -o "$BIN" test-apps/c/bench_echo.c
ulimit -n 65536 2>/dev/null || true
CONNS=${*:-"100 1000"}
ROUNDS=${ROUNDS:-3}
SECS=${SECONDS_PER_RUN:-3}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
rate() { sed -n 's/^msgs_per_sec=//p'; }
under() { if [ "$1" = preloaded ]; then shift; exec env LD_PRELOAD="$LIB" "$@"; else shift; exec "$@"; fi; }

# server MODE CONNS: one measurement of the standalone server under MODE.
server() {
    under "$1" "$BIN" serve >"$WORK/port" &
    SERVER_PID=$!
    for _ in $(seq 100); do grep -q '^port=' "$WORK/port" 2>/dev/null && break; sleep 0.05; done
    local port; port=$(sed -n 's/^port=//p' "$WORK/port")
    [ -n "$port" ] || { echo "bench-io: the $1 server did not start" >&2; exit 1; }
    "$BIN" load "$port" "$2" "$SECS" | rate
    kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=
}

# inproc MODE CONNS: one measurement with the clients in the server's process.
inproc() {
    local msgs=$((200000 / $2)); [ $msgs -lt 20 ] && msgs=20
    under "$1" "$BIN" inproc "$2" "$msgs" | rate
}

printf "%-8s %-12s %-12s %-12s %s\n" kind connections native preloaded "ratio (round trips/s, higher is better)"
for kind in server inproc; do
    for c in $CONNS; do
        nat=(); pre=()
        for _ in $(seq "$ROUNDS"); do
            nat+=("$($kind native "$c")")
            pre+=("$($kind preloaded "$c")")
        done
        n=$(printf "%s\n" "${nat[@]}" | median); p=$(printf "%s\n" "${pre[@]}" | median)
        printf "%-8s %-12s %-12s %-12s %s\n" "$kind" "$c" "$n" "$p" "$(awk -v a="$n" -v b="$p" 'BEGIN { printf "%.2fx", b / a }')"
    done
done
