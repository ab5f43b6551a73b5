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
declare -A PORT=([report]=$(free_port))
SERVER_PIN=() SERVER_ENV=(FIBERIZE_REPORT="$WORK/report.txt") SERVER_OPTS="--innodb-buffer-pool-size=256M"
cleanup() {
    [ -f "$WORK/pid-report" ] && kill -9 "$(cat "$WORK/pid-report")" >/dev/null 2>&1
    rm -rf "$WORK"
}
trap cleanup EXIT
die() { echo "report: FAILED: $*"; tail -20 "$WORK"/err-report.log; exit 1; }

CLI=(mariadb --no-defaults -h127.0.0.1 -P${PORT[report]} -uroot)
install_datadir "$WORK/data-report" || die "install-db"
start_mariadb report preload
SRV_PID=$(cat "$WORK/pid-report")
"${CLI[@]}" -e "create database sbtest" || die "create database"
SB=(sysbench --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port=${PORT[report]} --mysql-user=root --mysql-db=sbtest
    --tables=$TABLES --table-size=$TABLE_SIZE --rand-type=uniform)
"${SB[@]}" --threads=4 oltp_read_write prepare >/dev/null || die "prepare"
echo "report: MariaDB preloaded, sysbench oltp_read_write x$THREADS for ${DURATION}s"
"${SB[@]}" --threads=$THREADS --time=$DURATION oltp_read_write run 2>&1 | grep -E "transactions:|queries:|ignored errors:|95th"
stop_mariadb report
kill -0 "$SRV_PID" 2>/dev/null && die "server did not stop"
[ -s "$WORK/report.txt" ] || die "no report written"
cat "$WORK/report.txt"
