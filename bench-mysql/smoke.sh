#!/usr/bin/env bash
# MariaDB under the preload, end to end, bounded in time (~2 minutes), loopback only:
#  1. a fresh datadir; the preloaded server starts with default settings;
#  2. sysbench oltp_read_write at 64 connections (errors must be 0), oltp_point_select
#     at 1024 connections (errors 0), the sysbench client itself preloaded for one run;
#  3. clean shutdown with mariadb-admin;
#  4. crash safety: autocommit inserts acknowledged to a client while sysbench writes,
#     kill -9, restart preloaded: every acknowledged row is there.
# Exit status 0 only if all of that held. Prints "smoke: ok" at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LIB=${FIBERIZE_LIB:-$ROOT/target/release/libfiberize.so}
SECS=${SMOKE_SECONDS:-10}
. bench-mysql/common.sh  # the scripts run from the repository root (cd above)
require_lib_and_mariadb

WORK=$(mktemp -d /tmp/fiberize-smoke.XXXXXX)
declare -A PORT=([srv]=$(free_port))
SRV_PORT=${PORT[srv]}
SRV_PID=
cleanup() {
    [ -n "$SRV_PID" ] && kill -9 "$SRV_PID" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "smoke: FAILED: $*"; for f in "$WORK"/err*.log; do echo "--- $f"; tail -30 "$f"; done; exit 1; }

install_datadir "$WORK/data-srv" || fail "install-db"

CLI=(mariadb --no-defaults -h127.0.0.1 -P$SRV_PORT -uroot)
start_server() { # log-tag: a fresh log for each start of the one datadir
    SERVER_OPTS="--max-connections=3000" start_mariadb srv preload "$1"
    SRV_PID=$MARIADB_PID
}
start_server 1
"${CLI[@]}" -e "create database sbtest; create table sbtest.acked (id int primary key) engine=innodb"

SB=(sysbench --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port=$SRV_PORT --mysql-user=root --mysql-db=sbtest --tables=4 --table-size=10000)
"${SB[@]}" --threads=4 oltp_read_write prepare >/dev/null || fail "prepare"

sb_run() { # label, max-ignored-errors, command...
    # sysbench aborts (non-zero exit) on any real error; "ignored errors" are InnoDB
    # deadlock retries, which read-write mixes also get natively (~0.2/s at 64 conns).
    local label=$1 max_ignored=$2; shift 2
    local out; out=$("$@" 2>&1) || { echo "$out" | tail -20; fail "$label: sysbench failed"; }
    local tps err
    tps=$(echo "$out" | awk '/transactions:/ { gsub("[(]", "", $3); print $3 }')
    err=$(echo "$out" | awk '/ignored errors:/ { print $3 }')
    echo "smoke: $label: $tps transactions/s, errors $err"
    [ -n "$err" ] && [ "$err" -le "$max_ignored" ] || fail "$label: ignored errors=$err (max $max_ignored)"
}
sb_run "oltp_read_write 64 conns ${SECS}s" $((SECS * 5)) "${SB[@]}" --threads=64 --time=$SECS oltp_read_write run
sb_run "oltp_write_only 16 conns ${SECS}s" $((SECS * 5)) "${SB[@]}" --threads=16 --time=$SECS oltp_write_only run
sb_run "oltp_point_select 1024 conns 5s" 0 "${SB[@]}" --threads=1024 --time=5 oltp_point_select run
sb_run "oltp_point_select 64 conns 5s, client preloaded" 0 env LD_PRELOAD="$LIB" GLIBC_TUNABLES=glibc.pthread.rseq=0 \
    "${SB[@]}" --threads=64 --time=5 oltp_point_select run

mariadb-admin --no-defaults -h127.0.0.1 -P$SRV_PORT -uroot shutdown || fail "shutdown command"
for _ in $(seq 1 120); do kill -0 $SRV_PID 2>/dev/null || break; sleep 0.5; done
kill -0 $SRV_PID 2>/dev/null && fail "server did not exit after shutdown"
wait $SRV_PID || fail "server exit status $?"
SRV_PID=
grep -q "Shutdown complete" "$WORK/err-srv1.log" || fail "no clean shutdown in the log"
# mariadbd points stderr at its error log, so the stats line lands there.
grep -h "fiberize: stats" "$WORK/out-srv1.log" "$WORK/err-srv1.log" | head -1 | cut -c1-300 || true
echo "smoke: clean shutdown ok"

# Crash safety under load.
start_server 2
"${SB[@]}" --threads=8 --time=60 oltp_write_only run >/dev/null 2>&1 &
LOAD=$!
: >"$WORK/acked"
(
    for i in $(seq 1 100000); do
        "${CLI[@]}" -e "insert into sbtest.acked values ($i)" 2>/dev/null && echo $i >>"$WORK/acked" || break
    done
) &
INS=$!
sleep 4
kill -9 $SRV_PID
wait $SRV_PID 2>/dev/null || true
SRV_PID=
wait $INS 2>/dev/null || true
kill $LOAD 2>/dev/null || true; wait $LOAD 2>/dev/null || true
n_acked=$(wc -l <"$WORK/acked")
[ "$n_acked" -gt 0 ] || fail "no insert was acknowledged before the crash"
start_server 3
"${CLI[@]}" -N -e "select id from sbtest.acked" | sort -n >"$WORK/present"
missing=$(sort -n "$WORK/acked" | comm -23 - "$WORK/present" | wc -l)
echo "smoke: crash recovery: $n_acked acknowledged inserts, $missing missing"
[ "$missing" = 0 ] || fail "acknowledged rows lost"
mariadb-admin --no-defaults -h127.0.0.1 -P$SRV_PORT -uroot shutdown || fail "shutdown after recovery"
for _ in $(seq 1 120); do kill -0 $SRV_PID 2>/dev/null || break; sleep 0.5; done
SRV_PID=
echo "smoke: ok"
