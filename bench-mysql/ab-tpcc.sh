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
# (native: mariadbd as shipped; pool: --thread-handling=pool-of-threads; NAME=LIB: preloaded
# with LIB), ROUNDS [3], TPCC_SECONDS [30], TERMS [256], WAREHOUSES [10], DATA_CACHE
# [/tmp/fiberize-ab-cache: the loaded datadir, kept between invocations], SERVER_OPTS as compare.sh.
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
LIB=$ROOT/target/release/libfiberize.so
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
tpcc_once() { # name round
    local n=$1 r=$2 res
    res=$("$TPCC" run -P "${PORT[$n]}" -w "$WAREHOUSES" -t "$TERMS" -d "$TPCC_SECONDS" --ramp 2 --no-wait --report 1000 \
        2>"$WORK/tpcc-$n-$r.stderr" | awk '/^RESULT/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); r[kv[1]] = kv[2] } ok=1 }
            END { if (!ok) print "FATAL"; else print "tpmC=" r["tpmC"], "p90_new_order_ms=" r["p90_new_order_ms"], "errors=" r["errors"] }')
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
    echo "== $n stats:" $(grep -h "fiberize: stats" "$WORK/out-$n.log" "$WORK/err-$n.log" 2>/dev/null | tr ' ' '\n' |
        grep -E "^(switches|steals|lifo_capped|mutex_handoffs|donor_handoffs|workers_|fibers_demoted|demotions_|preempt)" || true)
    echo "== $n report"; head -30 "$WORK/report-$n.txt"
done
