#!/usr/bin/env bash
# Core benchmarks (issues 2 and 3): each scenario of test-apps/bench/bench_core.c runs
# natively and preloaded side by side in one run (alternating, ROUNDS rounds, median)
# and the table shows the ratio preloaded/native (higher is better) and the goal.
#   scripts/bench-core.sh [scenario...]     ROUNDS=3 by default
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p interpose >/dev/null 2>&1 || cargo build --release -p interpose
LIB=$PWD/target/release/libfiberize.so
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
cc -O2 -pthread -o "$TMP/bench_core" test-apps/bench/bench_core.c
ROUNDS=${ROUNDS:-3}
declare -A GOAL=(
    [yield]=">= 2.8x" [pingpong]=">= 25x" [sleepers]=">= 1.25x" [createjoin]=">= 0.5x"
    [uncontended]=">= 0.83x (time <= 1.2x)" [hammer]=">= 3x" [prodcons]=">= 5x")
SCENARIOS=${*:-"yield pingpong sleepers createjoin uncontended hammer prodcons"}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf "%-12s %-14s %-14s %-9s %s\n" scenario native preloaded ratio goal
for s in $SCENARIOS; do
    nat=(); pre=()
    for _ in $(seq 1 "$ROUNDS"); do
        nat+=("$("$TMP/bench_core" "$s" | sed 's/.*=//')")
        pre+=("$(env LD_PRELOAD="$LIB" GLIBC_TUNABLES=glibc.pthread.rseq=0 "$TMP/bench_core" "$s" | sed 's/.*=//')")
    done
    n=$(printf "%s\n" "${nat[@]}" | median); p=$(printf "%s\n" "${pre[@]}" | median)
    printf "%-12s %-14s %-14s %-9s %s\n" "$s" "$n" "$p" "$(awk -v a="$n" -v b="$p" 'BEGIN { printf "%.2fx", b / a }')" "${GOAL[$s]:-}"
done
