#!/usr/bin/env bash
# Multi-core scaling (issue 10): every bench_core scenario, and the echo server, at
# growing CPU widths, natively and preloaded side by side in the same run.
#
#   scripts/bench-scale.sh [scenario...]       ROUNDS=N (median of N runs, default 1)
#
# Widths: 1, 2, 4, 8, ... CPUs, up to and including all CPUs this process may use (only
# widths that exist). A width c runs the program under `taskset -c` on the first c
# allowed CPUs; the preloaded runs' workers follow the mask (one per allowed CPU).
# The echo server (`bench_echo serve`) runs on the first half of the width's CPUs and
# the native load generator (`bench_echo load PORT 1000 SECS`, 1000 connections) on
# the other half; a width of 1 CPU has no echo row, and on 2 CPUs each side gets one.
# Scenarios: hammer prodcons sleepers yield pingpong createjoin uncontended echo.
# Env: ROUNDS (1), ECHO_SECONDS (4), RUN_TIMEOUT (120 s per run; a run that exceeds it
# shows "TIMEOUT", one that fails "FAILED"). Each figure is the scenario's own rate (higher is better):
#   yield ops/s, pingpong round trips/s, sleepers ops/s, createjoin threads/s,
#   uncontended pairs/s, hammer locks/s, prodcons items/s, echo round trips/s.
# The ratio is preloaded/native (higher is better). Conventions as in bench-core.sh and
# the `scale`/`echo` phases of the big-machine runs.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p interpose >/dev/null 2>&1 || cargo build --release -p interpose
LIB=$PWD/target/release/libfiberize.so
WORK=$(mktemp -d)
SERVER_PID=
cleanup() { if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; fi; rm -rf "$WORK"; }
trap cleanup EXIT
cc -O2 -pthread -o "$WORK/bench_core" test-apps/bench/bench_core.c
cc -O2 -pthread -o "$WORK/bench_echo" test-apps/c/bench_echo.c
ulimit -n 65536 2>/dev/null || true
export GLIBC_TUNABLES=glibc.pthread.rseq=0
ROUNDS=${ROUNDS:-1}
ECHO_SECONDS=${ECHO_SECONDS:-4}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
SCENARIOS=${*:-"hammer prodcons sleepers yield pingpong createjoin uncontended echo"}

# The CPUs this process may use, in order (taskset's list of the current mask), so that
# "the first c CPUs" means allowed ones even inside a container or a cpuset.
mapfile -t CPUS < <(taskset -cp $$ | sed 's/.*: //' | tr ',' '\n' |
    awk -F- '{ if (NF == 2) for (i = $1; i <= $2; i++) print i; else print $1 }')
N=${#CPUS[@]}
WIDTHS=$(w=1; while [ $w -lt "$N" ]; do echo $w; w=$((w * 2)); done; echo "$N")
cpulist() { local IFS=,; echo "${CPUS[*]:$1:$2}"; }   # cpulist FIRST COUNT

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
value() { sed -n 's/^[a-z_]*=//p' | head -1; }
# preload_env MODE: the environment assignments for `env` that put MODE into effect.
preload_env() { if [ "$1" = preloaded ]; then echo "LD_PRELOAD=$LIB"; else echo "LD_PRELOAD="; fi; }   # native: no inherited preload

# core MODE WIDTH SCENARIO -> one rate
core() {
    local out rc=0
    out=$(timeout "$RUN_TIMEOUT" taskset -c "$(cpulist 0 "$2")" env "$(preload_env "$1")" "$WORK/bench_core" "$3" 2>/dev/null) || rc=$?
    out=$(value <<<"$out")
    if [ "$rc" = 124 ]; then echo TIMEOUT; else echo "${out:-FAILED}"; fi
}
# echo MODE WIDTH -> round trips/s of the server under MODE, load from the other half
echo_rate() {
    local half=$(($2 / 2)) server_cpus load_cpus port=
    server_cpus=$(cpulist 0 "$half"); load_cpus=$(cpulist "$half" $(($2 - half)))
    : >"$WORK/port"
    taskset -c "$server_cpus" env "$(preload_env "$1")" "$WORK/bench_echo" serve >"$WORK/port" &
    SERVER_PID=$!
    for _ in $(seq 100); do grep -q '^port=' "$WORK/port" 2>/dev/null && break; sleep 0.05; done
    port=$(sed -n 's/^port=//p' "$WORK/port")
    local out=
    [ -n "$port" ] && out=$(timeout "$RUN_TIMEOUT" taskset -c "$load_cpus" "$WORK/bench_echo" load "$port" 1000 "$ECHO_SECONDS" 2>/dev/null | value) || true
    kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=
    echo "${out:-FAILED}"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2fx", b / a; else print "-" }'; }

echo "bench-scale: $N CPUs (${CPUS[*]}), widths $(echo $WIDTHS), median of $ROUNDS round(s), $(ldd --version | head -1 | awk '{print $NF}') glibc"
echo "each cell is a rate, higher is better; ratio = preloaded/native"
printf "%-12s %6s %16s %16s %8s\n" scenario cpus native preloaded ratio
for s in $SCENARIOS; do
    for c in $WIDTHS; do
        [ "$s" = echo ] && [ "$c" -lt 2 ] && continue
        nat=(); pre=()
        for _ in $(seq "$ROUNDS"); do
            if [ "$s" = echo ]; then
                nat+=("$(echo_rate native "$c")"); pre+=("$(echo_rate preloaded "$c")")
            else
                nat+=("$(core native "$c" "$s")"); pre+=("$(core preloaded "$c" "$s")")
            fi
        done
        n=$(printf "%s\n" "${nat[@]}" | median); p=$(printf "%s\n" "${pre[@]}" | median)
        printf "%-12s %6s %16s %16s %8s\n" "$s" "$c" "$n" "$p" "$(ratio "$n" "$p")"
    done
done
