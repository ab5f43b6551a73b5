#!/usr/bin/env bash
# What FIBERIZE_METRICS costs the workers (issue 28). Each bench_core scenario runs
# preloaded three ways, in an order that rotates by round, ROUNDS rounds, medians:
#   plain    no statistics
#   metrics  FIBERIZE_METRICS, the file rewritten every INTERVAL (100ms by default: the
#            shortest allowed, 100 times the default's rate)
#   stats    FIBERIZE_STATS (to /dev/null), for comparison: it turns on the queue-wait
#            measurement (a clock read per queueing and per run of a fiber), as
#            FIBERIZE_REPORT does; the metrics file alone does not
# metrics/plain is the file's cost; stats/plain the measurement's. "paired": the median
# of the per-round ratios (a round's three runs follow each other, so they share the
# machine's load better than medians of whole columns on a shared machine).
#   scripts/bench-metrics.sh [scenario...]     ROUNDS=5 INTERVAL=100ms
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p interpose >/dev/null 2>&1 || cargo build --release -p interpose
LIB=$PWD/target/release/libfiberize.so
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
cc -O2 -pthread -o "$TMP/bench_core" test-apps/bench/bench_core.c
ROUNDS=${ROUNDS:-5}
INTERVAL=${INTERVAL:-100ms}
SCENARIOS=${*:-"pingpong uncontended hammer yield prodcons"}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A ENV=([plain]="" [metrics]="FIBERIZE_METRICS=$TMP/m.prom,$INTERVAL" [stats]="FIBERIZE_STATS=/dev/null")
CONFIGS=(plain metrics stats)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b / a }'; }
echo "preloaded, medians of $ROUNDS rounds (order rotating); metrics every $INTERVAL; $(nproc) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-12s %12s %12s %12s %14s %12s\n" scenario plain metrics stats metrics/plain stats/plain
for s in $SCENARIOS; do
    declare -A runs=([plain]="" [metrics]="" [stats]="")
    for r in $(seq 0 $((ROUNDS - 1))); do
        for i in 0 1 2; do
            c=${CONFIGS[$(((i + r) % 3))]}
            # shellcheck disable=SC2086 # ENV holds VAR=value words
            runs[$c]+="$(env LD_PRELOAD="$LIB" GLIBC_TUNABLES=glibc.pthread.rseq=0 ${ENV[$c]} "$TMP/bench_core" "$s" | sed 's/.*=//') "
        done
    done
    declare -A med=()
    for c in "${CONFIGS[@]}"; do med[$c]=$(tr ' ' '\n' <<<"${runs[$c]}" | grep . | median); done
    paired() { paste -d' ' <(tr ' ' '\n' <<<"${runs[plain]}" | grep .) <(tr ' ' '\n' <<<"${runs[$1]}" | grep .) |
        awk '{ printf "%.3f\n", $2 / $1 }' | median; }
    printf "%-12s %12s %12s %12s %13sx %11sx   paired: metrics/plain %sx, stats/plain %sx\n" "$s" \
        "${med[plain]}" "${med[metrics]}" "${med[stats]}" \
        "$(ratio "${med[plain]}" "${med[metrics]}")" "$(ratio "${med[plain]}" "${med[stats]}")" \
        "$(paired metrics)" "$(paired stats)"
    for c in "${CONFIGS[@]}"; do echo "    $c: ${runs[$c]}"; done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
grep -q '^fiberize_switches_total' "$TMP/m.prom" || { echo "bench-metrics: no metrics file written" >&2; exit 1; }
