#!/usr/bin/env bash
# The report (issue 13) of a preloaded MariaDB under sysbench oltp_read_write: what
# still blocks a worker, which locks are contended, how the workers spend their time.
# Loopback only, datadir in a temp dir; prints the sysbench summary, then the report
# the server wrote at its shutdown.
#
#   bench-mysql/report.sh            THREADS=256 DURATION=30 TABLES=4 TABLE_SIZE=10000
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LIB=${FIBERIZE_LIB:-$ROOT/target/release/libfiberize.so}
THREADS=${THREADS:-256}
DURATION=${DURATION:-30}
TABLES=${TABLES:-4}
TABLE_SIZE=${TABLE_SIZE:-10000}
. bench-mysql/common.sh  # the scripts run from the repository root (cd above)
require_lib_and_mariadb

WORK=$(mktemp -d /tmp/fiberize-report.XXXXXX)
PORT=$(free_port)
SRV_PID=
cleanup() {
    [ -n "$SRV_PID" ] && kill -9 "$SRV_PID" >/dev/null 2>&1
    rm -rf "$WORK"
}
trap cleanup EXIT
die() { echo "report: FAILED: $*"; tail -20 "$WORK"/err.log; exit 1; }

CLI=(mariadb --no-defaults -h127.0.0.1 -P$PORT -uroot)
mariadb-install-db --no-defaults --datadir="$WORK/data" --user=root --auth-root-authentication-method=normal >"$WORK/install.log" 2>&1 || die "install-db"
env LD_PRELOAD="$LIB" GLIBC_TUNABLES=glibc.pthread.rseq=0 FIBERIZE_REPORT="$WORK/report.txt" \
    /usr/sbin/mariadbd --no-defaults --datadir="$WORK/data" --socket="$WORK/sock" --port=$PORT \
    --bind-address=127.0.0.1 --user=root --pid-file="$WORK/pid" --log-error="$WORK/err.log" \
    --max-connections=$((THREADS + 50)) --innodb-buffer-pool-size=256M --skip-log-bin >"$WORK/out.log" 2>&1 &
SRV_PID=$!
for _ in $(seq 1 240); do
    "${CLI[@]}" -e "select 1" >/dev/null 2>&1 && break
    kill -0 $SRV_PID 2>/dev/null || die "server exited during start"
    sleep 0.5
done
grep -q libfiberize /proc/$SRV_PID/maps || die "library not loaded in mariadbd"
"${CLI[@]}" -e "create database sbtest" || die "create database"
SB=(sysbench --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port=$PORT --mysql-user=root --mysql-db=sbtest
    --tables=$TABLES --table-size=$TABLE_SIZE --rand-type=uniform)
"${SB[@]}" --threads=4 oltp_read_write prepare >/dev/null || die "prepare"
echo "report: MariaDB preloaded, sysbench oltp_read_write x$THREADS for ${DURATION}s"
"${SB[@]}" --threads=$THREADS --time=$DURATION oltp_read_write run 2>&1 | grep -E "transactions:|queries:|ignored errors:|95th"
mariadb-admin --no-defaults -h127.0.0.1 -P$PORT -uroot shutdown >/dev/null 2>&1
for _ in $(seq 1 240); do kill -0 $SRV_PID 2>/dev/null || break; sleep 0.5; done
kill -0 $SRV_PID 2>/dev/null && die "server did not stop"
SRV_PID=
[ -s "$WORK/report.txt" ] || die "no report written"
cat "$WORK/report.txt"
