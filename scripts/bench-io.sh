#!/usr/bin/env bash
# I/O benchmark (issue 5): the thread-per-connection echo server of
# test-apps/c/bench_echo.c with many client connections, native and preloaded side by
# side in one run (alternating, 3 rounds, median). Prints the ratio preloaded/native.
#   scripts/bench-io.sh [CONNECTIONS...]      (default: 100 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p interpose >/dev/null 2>&1 || cargo build --release -p interpose
LIB=$PWD/target/release/libfiberize.so
BIN=$(mktemp -d)/bench_echo
trap 'rm -rf "$(dirname "$BIN")"' EXIT
cc -O2 -pthread -o "$BIN" test-apps/c/bench_echo.c
ulimit -n 65536 2>/dev/null || true
CONNS=${*:-"100 1000"}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf "%-12s %-14s %-14s %s\n" connections native preloaded "ratio (msgs/s, higher is better)"
for c in $CONNS; do
    msgs=$((200000 / c)); [ $msgs -lt 20 ] && msgs=20
    nat=(); pre=()
    for _ in 1 2 3; do
        nat+=("$("$BIN" "$c" "$msgs" | sed 's/.*=//')")
        pre+=("$(env LD_PRELOAD="$LIB" GLIBC_TUNABLES=glibc.pthread.rseq=0 "$BIN" "$c" "$msgs" | sed 's/.*=//')")
    done
    n=$(printf "%s\n" "${nat[@]}" | median); p=$(printf "%s\n" "${pre[@]}" | median)
    printf "%-12s %-14s %-14s %s\n" "$c" "$n" "$p" "$(awk -v a="$n" -v b="$p" 'BEGIN { printf "%.2fx", b / a }')"
done
