#!/usr/bin/env bash
# The WTLS demo (issue 13): N connection threads, each using a per-thread object pool
# (test-apps/bench/bench_wtls.c), run three ways side by side in one run:
#   native    plain threads, one pool per thread
#   preload   under libfiberize.so: every thread_local is per fiber, one pool per connection
#   wtls      under libfiberize.so, the pool reached through WTLS_ADDR_OF: one pool per worker
# Per way: requests/s (median of ROUNDS rounds, alternating), the bytes of pool slabs
# the program allocated, and its peak RSS.
#   scripts/bench-wtls.sh [CONNECTIONS...]    default: 256 2000; ROUNDS=3 RUN_SECONDS=2
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p interpose >/dev/null 2>&1 || cargo build --release -p interpose
LIB=$PWD/target/release/libfiberize.so
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
cc -O2 -pthread -Iinterpose/include -o "$TMP/bench_wtls" test-apps/bench/bench_wtls.c
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${RUN_SECONDS:-2}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
run() { # way connections
    case $1 in
        native) "$TMP/bench_wtls" "$2" "$SECONDS_PER_RUN" thread ;;
        preload) env LD_PRELOAD="$LIB" GLIBC_TUNABLES=glibc.pthread.rseq=0 "$TMP/bench_wtls" "$2" "$SECONDS_PER_RUN" thread ;;
        wtls) env LD_PRELOAD="$LIB" GLIBC_TUNABLES=glibc.pthread.rseq=0 "$TMP/bench_wtls" "$2" "$SECONDS_PER_RUN" wtls ;;
    esac
}
printf "%-6s %-8s %12s %8s %12s %9s\n" conns way "requests/s" "x native" "pool KiB" "RSS MB"
for n in ${*:-256 2000}; do
    declare -A ops=() pool=() rss=()
    for _ in $(seq 1 "$ROUNDS"); do
        for way in native preload wtls; do
            out=$(run "$way" "$n")
            ops[$way]+="$(echo "$out" | field ops) "
            pool[$way]=$(echo "$out" | field pool_kib)
            rss[$way]+="$(echo "$out" | field rss_mb) "
        done
    done
    nat=$(printf "%s\n" ${ops[native]} | median)
    for way in native preload wtls; do
        o=$(printf "%s\n" ${ops[$way]} | median)
        r=$(printf "%s\n" ${rss[$way]} | median)
        printf "%-6s %-8s %12s %7.2fx %12s %9s\n" "$n" "$way" "$o" "$(awk -v a="$o" -v b="$nat" 'BEGIN{print a/b}')" "${pool[$way]}" "$r"
    done
    unset ops pool rss
done
