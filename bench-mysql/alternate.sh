#!/usr/bin/env bash
# Stall / hang hunt (issue 11): a preloaded MariaDB alternates oltp_point_select at
# many connections with oltp_read_write at few, while a fiber dump is taken every few
# seconds (FIBERIZE_DUMP_SIGNAL). Every sysbench run reports per-second throughput;
# a 1-second interval at 0 tps is a stall, a run that does not end within its time
# plus HANG_GRACE seconds is a hang (the script then takes a gdb backtrace and fails).
#
#   bench-mysql/alternate.sh
#
# Environment: ROUNDS (20), SECS (10 per run), PS_THREADS (2048), RW_THREADS (64),
# DUMP_EVERY (5 s; 0 = no dumps), TABLES/TABLE_SIZE (4 x 10000), HANG_GRACE (60),
# FIBERIZE_LIB, EXTRA_ENV (more VAR=value for the server, e.g. FIBERIZE_WORKERS=1),
# CLIENT_PRELOAD=1 (sysbench preloaded too: a second process of fibers on the CPUs).
# Prints one line per run and a summary line; exit status 0 only with no stall, no
# hang and 0 errors.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LIB=${FIBERIZE_LIB:-$ROOT/target/release/libfiberize.so}
ROUNDS=${ROUNDS:-20}
SECS=${SECS:-10}
PS_THREADS=${PS_THREADS:-2048}
RW_THREADS=${RW_THREADS:-64}
DUMP_EVERY=${DUMP_EVERY:-5}
TABLES=${TABLES:-4}
TABLE_SIZE=${TABLE_SIZE:-10000}
HANG_GRACE=${HANG_GRACE:-60}
. bench-mysql/common.sh  # the scripts run from the repository root (cd above)
require_lib_and_mariadb

WORK=$(mktemp -d /tmp/fiberize-alt.XXXXXX)
declare -A PORT=([srv]=$(free_port))
SRV_PORT=${PORT[srv]}
SRV_PID= DUMPER=
cleanup() {
    [ -n "$DUMPER" ] && kill "$DUMPER" >/dev/null 2>&1
    [ -n "$SRV_PID" ] && kill -9 "$SRV_PID" >/dev/null 2>&1
    [ "${KEEP_WORK:-0}" = 1 ] && echo "alternate: work dir kept: $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "alternate: FAILED: $*"; tail -20 "$WORK/err-srv.log"; exit 1; }

CLI=(mariadb --no-defaults -h127.0.0.1 -P$SRV_PORT -uroot)
install_datadir "$WORK/data-srv" || fail "install-db"
# shellcheck disable=SC2206 # EXTRA_ENV is a list of words
SERVER_ENV=(FIBERIZE_DUMP_SIGNAL=12 ${EXTRA_ENV:-})
SERVER_OPTS="--max-connections=$((PS_THREADS + 200)) --thread-cache-size=$((PS_THREADS + 100)) --innodb-buffer-pool-size=256M"
start_mariadb srv preload
SRV_PID=$MARIADB_PID
"${CLI[@]}" -e "create database sbtest" || fail "create database"
SB=(sysbench --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port=$SRV_PORT --mysql-user=root --mysql-db=sbtest
    --tables=$TABLES --table-size=$TABLE_SIZE --rand-type=uniform)
"${SB[@]}" --threads=4 oltp_read_write prepare >/dev/null || fail "prepare"
[ "${CLIENT_PRELOAD:-0}" = 1 ] && SB=(env LD_PRELOAD="$LIB" GLIBC_TUNABLES=glibc.pthread.rseq=0 "${SB[@]}")

if [ "$DUMP_EVERY" != 0 ]; then
    ( while sleep "$DUMP_EVERY"; do kill -12 $SRV_PID 2>/dev/null || exit 0; done ) &
    DUMPER=$!
fi

total_tx=0 total_err=0 stalls=0 hangs=0 runs=0
run() { # test threads
    local log=$WORK/run-$runs.log
    runs=$((runs + 1))
    timeout -s KILL $((SECS + HANG_GRACE)) "${SB[@]}" --threads=$2 --time=$SECS --report-interval=1 "$1" run >"$log" 2>&1
    local rc=$?
    local tx err zero
    tx=$(awk '/transactions:/ { print $2 }' "$log")
    err=$(awk '/ignored errors:/ { print $3 }' "$log")
    # Per-second lines: "[ 3s ] thds: 64 tps: 0.00 ...". The first second of a run
    # at thousands of connections is spent connecting, not a stall.
    zero=$(awk '/^\[ [0-9]+s \]/ { s = $2 + 0; for (i = 1; i <= NF; i++) if ($i == "tps:") t = $(i + 1) + 0;
        if (s > 1 && t == 0) z++ } END { print z + 0 }' "$log")
    if [ $rc = 137 ] || [ -z "$tx" ]; then
        hangs=$((hangs + 1))
        echo "alternate: run $runs $1 $2: NO RESULT (rc $rc); server backtrace in $WORK/hang.txt"
        gdb -p $SRV_PID -batch -ex 'thread apply all bt' >"$WORK/hang.txt" 2>&1
        tail -5 "$log"
        return 1
    fi
    [ $rc = 0 ] || err=$((${err:-0} + 1))
    total_tx=$((total_tx + tx)); total_err=$((total_err + ${err:-0})); stalls=$((stalls + zero))
    echo "alternate: run $runs $1 $2 ${SECS}s: $tx transactions, errors ${err:-0}, 0-tps seconds $zero"
}
start=$(date +%s)
for r in $(seq 1 "$ROUNDS"); do
    run oltp_point_select "$PS_THREADS" || break
    run oltp_read_write "$RW_THREADS" || break
done
dumps=$(grep -c "fiber dump:" "$WORK/err-srv.log" "$WORK/out-srv.log" 2>/dev/null | awk -F: '{ s += $2 } END { print s + 0 }')
echo "alternate: $ROUNDS rounds in $(( ($(date +%s) - start) / 60 )) min: $total_tx transactions, errors $total_err, stalls $stalls, hangs $hangs, dumps printed $dumps"
[ $hangs = 0 ] && [ $stalls = 0 ] && [ $total_err = 0 ] || { KEEP_WORK=1; exit 1; }
