#!/usr/bin/env bash
# MariaDB + sysbench: native server vs the same server under LD_PRELOAD=libfiberize.so,
# measured side by side in one run, loopback only, datadir in a temp dir.
#
#   bench-mysql/run.sh [--quick]
#
# Environment: THREADS (default "2 64 256 1024"), SECONDS_PER_RUN (default 10),
# TEST (default oltp_point_select), TABLES/TABLE_SIZE (4 x 10000), CLIENT_PRELOAD=1 to
# also run the sysbench client preloaded.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LIB=$ROOT/target/release/libfiberize.so

if [ "${1:-}" = "--quick" ]; then
    THREADS=${THREADS:-"2 64 1024"}; SECONDS_PER_RUN=${SECONDS_PER_RUN:-5}
fi
THREADS=${THREADS:-"2 64 256 1024"}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
TEST=${TEST:-oltp_point_select}
TABLES=${TABLES:-4}
TABLE_SIZE=${TABLE_SIZE:-10000}

need=()
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server mariadb-client)
command -v sysbench >/dev/null 2>&1 || need+=(sysbench)
if [ ${#need[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
    # Debian starts the packaged service where it can; we run our own instance.
    (systemctl stop mariadb || service mariadb stop) >/dev/null 2>&1 || true
fi
[ -f "$LIB" ] || cargo build --release -p interpose

WORK=$(mktemp -d /tmp/fiberize-mysql.XXXXXX)
# A free port below the ephemeral range (32768+), so that client sockets never hold it.
PORT=
for _ in $(seq 1 50); do
    cand=$((12000 + RANDOM % 18000))
    ss -ltn 2>/dev/null | awk '{print $4}' | grep -q ":$cand\$" || { PORT=$cand; break; }
done
[ -n "$PORT" ] || { echo "no free port"; exit 1; }
SOCK=$WORK/mysqld.sock
cleanup() {
    mariadb-admin --no-defaults -h127.0.0.1 -P$PORT -uroot shutdown >/dev/null 2>&1 || true
    sleep 1
    [ -f "$WORK/pid" ] && kill -9 "$(cat "$WORK/pid")" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

echo "== initializing datadir in $WORK (port $PORT, loopback only)"
mariadb-install-db --no-defaults --datadir="$WORK/data" --user=root --auth-root-authentication-method=normal >"$WORK/install.log" 2>&1

start_server() { # native|preload
    local pre=()
    [ "$1" = preload ] && pre=(env LD_PRELOAD="$LIB" GLIBC_TUNABLES=glibc.pthread.rseq=0)
    "${pre[@]}" /usr/sbin/mariadbd --no-defaults --datadir="$WORK/data" --socket="$SOCK" --port=$PORT \
        --bind-address=127.0.0.1 --user=root --pid-file="$WORK/pid" --log-error="$WORK/err-$1.log" \
        --max-connections=4000 --innodb-buffer-pool-size=256M --skip-log-bin >"$WORK/out-$1.log" 2>&1 &
    for _ in $(seq 1 60); do
        mariadb --no-defaults -h127.0.0.1 -P$PORT -uroot -e "select 1" >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    echo "server ($1) did not start:"; tail -20 "$WORK/err-$1.log"; exit 1
}
stop_server() {
    mariadb-admin --no-defaults -h127.0.0.1 -P$PORT -uroot shutdown
    for _ in $(seq 1 60); do [ -f "$WORK/pid" ] || return 0; sleep 0.5; done
}

SB=(sysbench --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port=$PORT --mysql-user=root
    --mysql-db=sbtest --tables=$TABLES --table-size=$TABLE_SIZE)

run_sb() { # client-mode threads -> "tps errors"
    local pre=()
    [ "$1" = preload ] && pre=(env LD_PRELOAD="$LIB" GLIBC_TUNABLES=glibc.pthread.rseq=0)
    "${pre[@]}" "${SB[@]}" --threads="$2" --time="$SECONDS_PER_RUN" --rand-type=uniform "$TEST" run 2>&1 |
        awk '/transactions:/ { gsub("[(]", "", $3); tps=$3 } /ignored errors:/ { err=$3 } /FATAL/ { fatal=1 }
             END { printf "%s %s\n", (fatal ? "FATAL" : tps), err + 0 }'
}

start_server native
mariadb --no-defaults -h127.0.0.1 -P$PORT -uroot -e "create database sbtest"
echo "== preparing $TABLES tables x $TABLE_SIZE rows"
"${SB[@]}" --threads=4 oltp_read_write prepare >/dev/null

declare -A R
for server in native preload; do
    [ $server = preload ] && { stop_server; start_server preload; }
    # Warm the buffer pool and caches of the freshly started server (discarded), so
    # that the first point is not measured against a cold server.
    SECONDS_PER_RUN=3 run_sb native 2 >/dev/null
    for t in $THREADS; do
        R[$server,native,$t]=$(run_sb native "$t")
        [ "${CLIENT_PRELOAD:-0}" = 1 ] && R[$server,preload,$t]=$(run_sb preload "$t")
    done
done
stop_server

echo "== $TEST, ${SECONDS_PER_RUN}s per point; transactions/s (errors); ratio = preloaded server / native server"
printf "%-8s %-22s %-22s %-8s\n" threads native-server preloaded-server ratio
for t in $THREADS; do
    read -r a ea <<<"${R[native,native,$t]}"; read -r b eb <<<"${R[preload,native,$t]}"
    printf "%-8s %-22s %-22s %s\n" "$t" "$a ($ea)" "$b ($eb)" "$(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0) printf "%.2fx", b / a; else print "-" }')"
done
if [ "${CLIENT_PRELOAD:-0}" = 1 ]; then
    echo "== same, sysbench client preloaded too"
    for t in $THREADS; do
        read -r a ea <<<"${R[native,preload,$t]}"; read -r b eb <<<"${R[preload,preload,$t]}"
        printf "%-8s %-22s %-22s %s\n" "$t" "$a ($ea)" "$b ($eb)" "$(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0) printf "%.2fx", b / a; else print "-" }')"
    done
fi
