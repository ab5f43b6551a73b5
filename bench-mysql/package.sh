#!/usr/bin/env bash
# Issue 28's acceptance: MariaDB from the Debian package, through the environment of the
# drop-in the package ships (started by hand: systemd need not run here). Builds the
# package (scripts/package.sh, lintian included), unpacks it into a throwaway root, takes
# the drop-in's Environment= lines (paths moved into the throwaway root and a temp dir),
# starts a private mariadbd with them (loopback, datadir in /tmp), runs sysbench
# oltp_read_write, sends the drop-in's dump signal, checks the metrics file with
# `promtool check metrics` while the server runs and after it stopped, and the report.
#
#   bench-mysql/package.sh        THREADS=64 DURATION=20 INTERVAL=2s
set -uo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-64}
DURATION=${DURATION:-20}
INTERVAL=${INTERVAL:-2s}
. bench-mysql/common.sh
WORK=$(mktemp -d /tmp/fiberize-package.XXXXXX)
declare -A PORT=([pkg]=$(free_port))
cleanup() {
    [ -f "$WORK/pid-pkg" ] && kill -9 "$(cat "$WORK/pid-pkg")" >/dev/null 2>&1
    [ "${KEEP:-0}" = 1 ] && echo "package: kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT
die() { echo "package: FAILED: $*"; tail -n 5 "$WORK"/err-pkg.log "$WORK"/out-pkg.log 2>/dev/null; exit 1; }
command -v promtool >/dev/null || die "promtool missing (apt-get install prometheus)"

DEB=$(scripts/package.sh | tail -1) || die "scripts/package.sh"
dpkg-deb -x "$DEB" "$WORK/root" || die "dpkg-deb -x"
DROPIN=$WORK/root/usr/share/doc/fiberize/examples/mariadb.service.d/fiberize.conf
# The drop-in's environment, with its paths moved: the library into the throwaway root,
# the report and the metrics into $WORK (the interval shortened to see several writes).
SERVER_ENV=()
while IFS= read -r kv; do
    case $kv in
    LD_PRELOAD=*) kv="LD_PRELOAD=$WORK/root${kv#LD_PRELOAD=}" ;;
    FIBERIZE_REPORT=*) kv="FIBERIZE_REPORT=$WORK/report.txt" ;;
    FIBERIZE_METRICS=*) kv="FIBERIZE_METRICS=$WORK/mariadb.prom,$INTERVAL" ;;
    esac
    SERVER_ENV+=("$kv")
done < <(sed -n 's/^Environment=//p' "$DROPIN")
echo "package: $DEB; mariadbd with the drop-in's environment:"
printf '  %s\n' "${SERVER_ENV[@]}"
LIB=${SERVER_ENV[0]#LD_PRELOAD=}
require_lib_and_mariadb

CLI=(mariadb --no-defaults -h127.0.0.1 -P${PORT[pkg]} -uroot)
install_datadir "$WORK/data-pkg" || die "install-db"
SERVER_PIN=() SERVER_OPTS="--innodb-buffer-pool-size=256M"
start_mariadb pkg preload
SRV_PID=$(cat "$WORK/pid-pkg")
grep -q "$WORK/root/.*libfiberize" /proc/$SRV_PID/maps || die "the package's library is not loaded in mariadbd"
"${CLI[@]}" -e "create database sbtest" || die "create database"
SB=(sysbench --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port=${PORT[pkg]} --mysql-user=root --mysql-db=sbtest
    --tables=4 --table-size=10000 --rand-type=uniform)
"${SB[@]}" --threads=4 oltp_read_write prepare >/dev/null || die "prepare"
echo "package: sysbench oltp_read_write x$THREADS for ${DURATION}s"
"${SB[@]}" --threads="$THREADS" --time="$DURATION" oltp_read_write run >"$WORK/sysbench.log" 2>&1 &
SB_PID=$!
sleep $((DURATION / 2))
cp "$WORK/mariadb.prom" "$WORK/during.prom" 2>/dev/null || die "no metrics file while the server runs"
# The drop-in's dump signal: a fiber dump on the server's stderr, the report appended,
# the server unharmed.
for kv in "${SERVER_ENV[@]}"; do case $kv in FIBERIZE_DUMP_SIGNAL=*) DUMP_SIGNAL=${kv#*=} ;; esac; done
if [ -n "${DUMP_SIGNAL:-}" ]; then
    kill -"$DUMP_SIGNAL" "$SRV_PID" || die "kill -$DUMP_SIGNAL"
    # stderr: mariadbd moves it to its error log (--log-error).
    for _ in $(seq 1 40); do grep -q "end of dump" "$WORK/err-pkg.log" && break; sleep 0.5; done
    grep -q "end of dump" "$WORK/err-pkg.log" || die "no fiber dump on signal $DUMP_SIGNAL"
    grep -q "on the dump signal" "$WORK/report.txt" 2>/dev/null || die "no report on signal $DUMP_SIGNAL"
    echo "package: signal $DUMP_SIGNAL: $(grep -m1 -- '---- fiber dump' "$WORK/err-pkg.log" | sed 's/.*---- fiber dump: //; s/ ----//'), report appended"
fi
wait $SB_PID || die "sysbench: $(tail -5 "$WORK/sysbench.log")"
grep -E "transactions:|95th" "$WORK/sysbench.log"
# What the metrics cost: the writer thread's CPU time (schedstat: ns on a CPU).
for t in /proc/$SRV_PID/task/*; do
    [ "$(cat "$t/comm" 2>/dev/null)" = fiberize-metric ] || continue
    WRITER_NS=$(cut -d" " -f1 "$t/schedstat")
    echo "package: the metrics writer thread used $(awk -v ns="$WRITER_NS" 'BEGIN { printf "%.1f", ns / 1e6 }') ms of CPU in $(($(date +%s) - $(stat -c %Y "$WORK/pid-pkg"))) s, writing every $INTERVAL"
done
promtool check metrics <"$WORK/during.prom" || die "promtool on the file written under load"
echo "package: promtool check metrics passed on the file written under load ($(grep -c '^fiberize_' "$WORK/during.prom") samples)"
stop_mariadb pkg
# The pid file goes before the process ends: the exit handlers write the report and the
# metrics file last.
for _ in $(seq 1 120); do kill -0 "$SRV_PID" 2>/dev/null || break; sleep 0.5; done
kill -0 "$SRV_PID" 2>/dev/null && die "server did not stop"
promtool check metrics <"$WORK/mariadb.prom" || die "promtool on the file written at exit"
echo "package: promtool check metrics passed on the file written at exit"
grep -E '^fiberize_(workers|fibers_created_total|switches_total|parks_total|steals_total|preemptions_total|workers_spawned_total) |^fiberize_queue_wait_seconds_(count|sum)' "$WORK/mariadb.prom"
echo "package: site series: $(grep -c '^fiberize_site_waits_total' "$WORK/mariadb.prom")"
grep '^fiberize_site_wait_seconds_total' "$WORK/mariadb.prom" | sort -t' ' -k2 -g -r | head -3
[ -s "$WORK/report.txt" ] || die "no report written"
awk '$1 == "fiberize_fibers_created_total" && $2 > 0 { ok = 1 } END { exit !ok }' "$WORK/mariadb.prom" || die "no fibers in the metrics"
echo "package: OK"
