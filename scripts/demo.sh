#!/usr/bin/env bash
# The main job: build libfiberize.so and run real programs under it, native and
# preloaded side by side, printing preloaded/native ratios. About 13 minutes on 2 CPUs
# (after the first build):
#   1. MariaDB on a CPU of its own (bench-mysql/yardstick.sh): native,
#      pool-of-threads and preloaded, the client on the other CPUs             ~5 min
#   2. sysbench's own pthread benchmarks (threads: mutex + yield; mutex)      ~1 min
#   3. the core benchmarks (scripts/bench-core.sh), with the project's goals  ~1.5 min
#   4. the echo server (scripts/bench-io.sh)                                   ~1.5 min
#   5. mktime with TZ unset (scripts/bench-mktime.sh)                          ~40 s
#   6. MariaDB + sysbench sharing the server's CPUs (bench-mysql/run.sh)      ~3 min
# and a closing summary. Installs what it needs with apt-get (needs root the first
# time). The echo and MariaDB servers it starts bind to 127.0.0.1 only, on free ports,
# with their data in /tmp, and are stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
START=$SECONDS
LOG=$(mktemp); trap 'rm -f "$LOG"' EXIT

need_pkgs=()
command -v sysbench >/dev/null || need_pkgs+=(sysbench)
command -v cc >/dev/null || need_pkgs+=(gcc)
[ -x /usr/sbin/mariadbd ] || need_pkgs+=(mariadb-server mariadb-client)
command -v perf >/dev/null || need_pkgs+=(linux-perf)
if [ ${#need_pkgs[@]} -gt 0 ]; then
    echo "== installing ${need_pkgs[*]} (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
    # The package may start its own service; the demo runs private servers.
    (systemctl stop mariadb || service mariadb stop) >/dev/null 2>&1 || true
fi

phase() { # phase N TITLE DURATION EXPLANATION...
    local n=$1 title=$2 dur=$3; shift 3
    echo
    echo "== [$n/6] $title (about $dur; $((SECONDS - START)) s elapsed so far)"
    local line; for line in "$@"; do echo "   $line"; done
}

echo "== building libfiberize.so (cargo build --release -p interpose; a few minutes the first time)"
if ! cargo build --release -p interpose -q 2>"$LOG"; then cat "$LOG" >&2; exit 1; fi
LIB=$ROOT/target/release/libfiberize.so
export GLIBC_TUNABLES=glibc.pthread.rseq=0
echo "   $LIB, $(nproc) CPUs"
echo
echo "Every line compares one program run natively and the same program run preloaded"
echo "(LD_PRELOAD=libfiberize.so), in the same run; ratio = preloaded/native for rates,"
echo "so higher is better and 1.00x is parity."

events() { awk '/total number of events/ {print $NF}'; }
SUMMARY=()

phase 1 "MariaDB on a CPU of its own: native, pool-of-threads, preloaded" "5 min" \
    "How production databases run: the server pinned to the first half of the CPUs (CPU 0 here)," \
    "sysbench to the other half. Three private servers on 127.0.0.1 with the same data: native" \
    "(a thread per connection), MariaDB's own thread_handling=pool-of-threads, and preloaded." \
    "oltp_point_select at 64 and 1024 connections and oltp_read_write at 256, 3 interleaved" \
    "rounds of 5 s, medians; cpu_us is the server's CPU time per transaction (steadier than tps)." \
    "bench-mysql/yardstick.sh runs the full set (TPC-C too, 5 rounds, the library's CPU share)."
POINTS=${YARDSTICK_POINTS:-"ps64 ps1024 rw256"} ROUNDS=${ROUNDS:-3} SECONDS_PER_RUN=${SECONDS_PER_RUN:-5} TABLE_SIZE=20000 \
    DATA_CACHE=/tmp/fiberize-demo-yardstick CONFIGS="native pool preloaded=$LIB" \
    bash bench-mysql/yardstick.sh 2>&1 | tee "$LOG" | sed -n '/^== yardstick/,/^== preloaded stats/p' | grep -v '^== preloaded stats' | sed 's/^/   /'
SUMMARY+=("$(awk '/^== yardstick/ { on = 1 } on && ($2 == "pool" || $2 == "preloaded") && $NF ~ /x$/ { printf "own CPU %s %s: %s  ", $1, $2, $(NF - 4) }' "$LOG")")

phase 2 "sysbench's pthread benchmarks" "1 min" \
    "sysbench threads: N threads each lock one of 8 mutexes, yield 100 times, unlock; 5 s per run." \
    "sysbench mutex: 64 threads, a fixed amount of locking; the time to finish is compared."
printf "   %-34s %17s %17s %8s\n" "benchmark" native preloaded ratio
for t in 16 64 256; do
    nat=$(sysbench threads --threads=$t --time=5 --thread-yields=100 --thread-locks=8 run 2>&1 | events)
    pre=$(env LD_PRELOAD="$LIB" sysbench threads --threads=$t --time=5 --thread-yields=100 --thread-locks=8 run 2>&1 | events)
    r=$(awk -v a="$nat" -v b="$pre" 'BEGIN { printf "%.2fx", (a > 0 ? b / a : 0) }')
    printf "   %-34s %10s evt/5s %10s evt/5s %8s\n" "threads, $t threads" "$nat" "$pre" "$r"
    SUMMARY+=("sysbench threads $t: $r")
done
secs() { awk '/total time:/ {gsub("s","",$NF); print $NF}'; }
nat=$(sysbench mutex --threads=64 --mutex-num=16 --mutex-locks=50000 --mutex-loops=50 run 2>&1 | secs)
pre=$(env LD_PRELOAD="$LIB" sysbench mutex --threads=64 --mutex-num=16 --mutex-locks=50000 --mutex-loops=50 run 2>&1 | secs)
r=$(awk -v a="$nat" -v b="$pre" 'BEGIN { printf "%.2fx", (b > 0 ? a / b : 0) }')
printf "   %-34s %14s s %14s s %8s  (ratio = native time / preloaded time)\n" "mutex, 64 threads (time)" "$nat" "$pre" "$r"
SUMMARY+=("sysbench mutex 64: $r")

phase 3 "core benchmarks" "1.5 min" \
    "Small C programs (test-apps/bench/bench_core.c), median of 3 runs each." \
    "goal: the ratio the project set itself for that scenario (issues 2 and 3); ✓ met, ✗ missed." \
    "The native and preloaded columns are rates in the unit given on the right."
bash scripts/bench-core.sh | tee "$LOG" | sed 's/^/   /'
SUMMARY+=("$(grep "^core goals" "$LOG")")

phase 4 "echo server" "1.5 min" \
    "test-apps/c/bench_echo.c: a thread-per-connection TCP echo server on 127.0.0.1, one 32-byte" \
    "message in flight per connection, median of 3 runs of 3 s; a row every ~20 s." \
    "server: the server alone is native or preloaded, the load is a separate native process." \
    "inproc: the clients are threads of the server's process (fibers too when preloaded)." \
    "Figures are round trips per second."
bash scripts/bench-io.sh | tee "$LOG" | sed 's/^/   /'
SUMMARY+=("$(awk '$1 == "server" { printf "echo server %s connections: %s  ", $2, $5 }' "$LOG")")

phase 5 "mktime with TZ unset" "40 s" \
    "glibc re-runs tzset (a process-wide lock and a stat of /etc/localtime) in every mktime;" \
    "the library's tz throttle avoids that, also with FIBERIZE=off. Figures are mktime calls/s."
bash scripts/bench-mktime.sh 2>/dev/null | tee "$LOG" | sed 's/^/   /'
SUMMARY+=("$(awk '$1 ~ /^[0-9]+$/ { printf "mktime %s threads: %s  ", $1, $4 }' "$LOG")")

phase 6 "MariaDB + sysbench sharing the server's CPUs" "3 min" \
    "Second, and labelled: here the client shares the server's 2 CPUs, so the figures measure" \
    "CPU share as much as the library (1024 native server threads against a pool of 2 workers)." \
    "Two private MariaDB servers on 127.0.0.1 (one native, one preloaded) with the same data;" \
    "sysbench oltp_point_select at 2, 64 and 1024 connections, 3 s per run, 3 rounds" \
    "alternating between the servers, median shown (figures: transactions/s, errors)." \
    "Single runs swing a lot here (seen: 0.6x to 2.5x at 2 connections): server, client and" \
    "benchmark share 2 CPUs, and which CPU each reply wakes decides a run. The median of 3" \
    "alternating rounds is steadier; ROUNDS=5 steadier still."
CLIENT_PRELOAD=1 THREADS=${THREADS:-"2 64 1024"} SECONDS_PER_RUN=${SECONDS_PER_RUN:-3} ROUNDS=${ROUNDS:-3} \
    bash bench-mysql/run.sh | tee "$LOG" | sed 's/^/   /'
SUMMARY+=("$(awk '/^== / { client = /client preloaded/ ? "preloaded client" : "native client" }
                 $1 ~ /^[0-9]+$/ && NF >= 6 { printf "MariaDB shared CPUs %s %s conns: %s  ", client, $1, $NF }' "$LOG")")

echo
echo "== summary ($((SECONDS - START)) s in all; ratios preloaded/native, higher is better)"
for line in "${SUMMARY[@]}"; do echo "   $line"; done
