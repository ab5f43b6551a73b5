#!/usr/bin/env bash
# A/B of libraries on the preloaded MariaDB server under TPC-C (--no-wait): servers named
# in CONFIGS run side by side (all started once, the same datadir copied for each), and
# every round runs the TPC-C client once against each, the order rotating by round;
# prints every run and the median tpmC per server, then each preloaded server's
# FIBERIZE_STATS counters and the head of its FIBERIZE_REPORT. Loopback only.
#
#   CONFIGS="native pool old=/tmp/old.so new=target/release/libfiberize.so" bash bench-mysql/ab-tpcc.sh
#
# Environment (defaults in brackets): CONFIGS ["native pool new=target/release/libfiberize.so"]
# (native: mariadbd as shipped; pool: --thread-handling=pool-of-threads; NAME=native, NAME=pool:
# a second such server, a control; NAME=LIB: preloaded with LIB), ROUNDS [3], TPCC_SECONDS [30], TERMS [256], WAREHOUSES [10], DATA_CACHE
# [/tmp/fiberize-ab-cache: the loaded datadir, kept between invocations], SERVER_OPTS as compare.sh,
# PROFILE=SECONDS (in round 1, `perf record -e cpu-clock` of each server for that long after
# the ramp; the end prints its CPU by shared object and its top symbols).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CONFIGS=${CONFIGS:-"native pool new=$ROOT/target/release/libfiberize.so"}
ROUNDS=${ROUNDS:-3}; TPCC_SECONDS=${TPCC_SECONDS:-30}; TERMS=${TERMS:-256}
WAREHOUSES=${WAREHOUSES:-10}; TABLES=4; TABLE_SIZE=10000; WORKLOADS=tpcc
DATA_CACHE=${DATA_CACHE:-/tmp/fiberize-ab-cache}
SERVER_OPTS=${SERVER_OPTS:-"--innodb-buffer-pool-size=2G --innodb-flush-log-at-trx-commit=2"}
bash bench-mysql/tpcc/build.sh
TPCC=$ROOT/target/tpcc/tpcc
LIB=${FIBERIZE_LIB:-$ROOT/target/release/libfiberize.so}
. bench-mysql/common.sh
SERVER_PIN=()
WORK=$(mktemp -d /tmp/fiberize-ab.XXXXXX)
ports_for_configs
prepare_datadir
for c in $CONFIGS; do
    CONFIG_ENV=(FIBERIZE_REPORT="$WORK/report-${c%%=*}.txt")
    start_config "$c"
done
echo "== work directory $WORK (logs; the datadirs are removed at the end)"
: >"$WORK/results.txt"
# "voluntary involuntary" context switches of process PID's threads alive now.
context_switches() { # pid
    cat /proc/"$1"/task/*/status 2>/dev/null |
        awk '/^(non)?voluntary_ctxt_switches/ { if ($1 ~ /^non/) n += $2; else v += $2 } END { print v, n }'
}
tpcc_once() { # name round
    local n=$1 r=$2 res
    if [ -n "${PROFILE:-}" ] && [ "$r" = 1 ]; then
        (sleep 3 && perf record -q -F 999 -g -e cpu-clock -p "$(cat "$WORK/pid-$n")" -o "$WORK/perf-$n.data" \
            -- sleep "$PROFILE" >/dev/null 2>&1) &
        local ev=context-switches s
        # Named calls only: every syscall tracepoint on each of ~300 threads is too many events.
        for s in sendto recvfrom read write pread64 pwrite64 poll ppoll epoll_wait epoll_ctl futex sched_yield io_uring_enter; do
            ev+=",syscalls:sys_enter_$s"
        done
        (sleep 3 && perf stat -x, -e "$ev" -p "$(cat "$WORK/pid-$n")" \
            -o "$WORK/syscalls-$n.txt" -- sleep "$PROFILE" >/dev/null 2>&1) &
    fi
    # The server's CPU time (user + system, all threads) over the whole client run, ramp
    # included: server_cpus is its average CPUs in use, server_us_per_txn that time over
    # the measured transactions (the ramp's 2 s of work make it a few % high, alike for all).
    # Its kernel context switches per measured transaction (voluntary+preempted, all
    # threads, of threads alive at both ends; threads that start or end between are missed).
    local pid t0 t1 w0 w1 c0 c1
    pid=$(cat "$WORK/pid-$n")
    c0=$(context_switches "$pid")
    t0=$(awk '{print $14 + $15}' "/proc/$pid/stat"); w0=$(date +%s%N)
    res=$("$TPCC" run -P "${PORT[$n]}" -w "$WAREHOUSES" -t "$TERMS" -d "$TPCC_SECONDS" --ramp 2 --no-wait --report 1000 \
        2>"$WORK/tpcc-$n-$r.stderr" | awk '/^RESULT/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); r[kv[1]] = kv[2] } ok=1 }
            END { if (!ok) print "FATAL"; else print "tpmC=" r["tpmC"], "p90_new_order_ms=" r["p90_new_order_ms"], "errors=" r["errors"], "tps=" r["tps"] }')
    t1=$(awk '{print $14 + $15}' "/proc/$pid/stat"); w1=$(date +%s%N)
    c1=$(context_switches "$pid")
    res=$(awk -v res="$res" -v ticks=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v wall_ns=$((w1 - w0)) -v secs="$TPCC_SECONDS" \
        -v c0="$c0" -v c1="$c1" 'BEGIN {
        split(res, f, " "); tps = 0; for (i in f) if (f[i] ~ /^tps=/) tps = substr(f[i], 5)
        cpu = ticks / hz; sub(/ tps=[^ ]*/, "", res); split(c0, a, " "); split(c1, b, " "); txns = tps * secs
        printf "%s server_cpus=%.2f server_us_per_txn=%.0f switches_per_txn=%.1f+%.1f txns=%d", res, cpu / (wall_ns / 1e9),
            (txns > 0 ? cpu * 1e6 / txns : 0), (txns > 0 ? (b[1] - a[1]) / txns : 0), (txns > 0 ? (b[2] - a[2]) / txns : 0), txns }')
    echo "round $r $n $res" | tee -a "$WORK/results.txt"
}
each_config_rotating tpcc_once
for c in $CONFIGS; do
    n=${c%%=*}
    printf "%s median tpmC " "$n"
    { grep " $n tpmC=" "$WORK/results.txt" || true; } | sed 's/.*tpmC=\([0-9.]*\).*/\1/' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)], "(" NR " runs)"}'
done
cleanup; trap - EXIT
rm -rf "$WORK"/data-*
for c in $CONFIGS; do
    n=${c%%=*}
    [ -f "$WORK/report-$n.txt" ] || continue
    locality_per_txn "$n" "$({ grep " $n tpmC=" "$WORK/results.txt" || true; } | sed -n 's/.* txns=\([0-9]*\).*/\1/p' | awk '{ t += $1 } END { printf "%d", t }')"
    echo "== $n stats:" $(grep -h "fiberize: stats" "$WORK/out-$n.log" "$WORK/err-$n.log" 2>/dev/null | tr ' ' '\n' |
        grep -E "^(switches|steals|lifo_capped|mutex_handoffs|donor_handoffs|workers_|fibers_demoted|demotions_|preempt|turn)" || true)
    echo "== $n report"; head -30 "$WORK/report-$n.txt"
done
for c in $CONFIGS; do
    n=${c%%=*}
    [ -f "$WORK/perf-$n.data" ] || continue
    echo "== $n profile (${PROFILE} s of round 1, cpu-clock samples)"
    perf report -i "$WORK/perf-$n.data" --stdio --sort dso 2>/dev/null | grep -E '^ +[0-9]' | head -8
    perf report -i "$WORK/perf-$n.data" --stdio --no-children --sort dso,sym -g none 2>/dev/null | grep -E '^ +[0-9]' | head -25
    echo "== $n context switches and system calls in those ${PROFILE} s (most frequent)"
    { grep -v '^#' "$WORK/syscalls-$n.txt" || true; } | awk -F, '$1 ~ /^[0-9]+$/ && $1 > 0 { sub(/syscalls:sys_enter_/, "", $3); print $1, $3 }' | sort -rn | head -14
done
