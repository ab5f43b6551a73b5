#!/usr/bin/env bash
# MariaDB + sysbench: native server vs the same server under LD_PRELOAD=libfiberize.so,
# measured side by side in one run, loopback only, datadir in a temp dir.
#
#   bench-mysql/run.sh [--quick]
#
# Environment: THREADS (default "2 64 256 1024"), SECONDS_PER_RUN (default 10), ROUNDS (3),
# TEST (default oltp_point_select), TABLES/TABLE_SIZE (4 x 10000), CLIENT_PRELOAD=1 to
# also run the sysbench client preloaded.
# SERVER_CPUS and CLIENT_CPUS (taskset lists, e.g. SERVER_CPUS=0-7 CLIENT_CPUS=8-15):
# when both are set, both servers run pinned to SERVER_CPUS and sysbench to CLIENT_CPUS
# (disjoint sets: the client's CPU time does not come out of the server's, and the
# preloaded server's workers follow its mask, one per CPU of SERVER_CPUS). Unset: no
# pinning, everything shares every CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LIB=${FIBERIZE_LIB:-$ROOT/target/release/libfiberize.so}

if [ "${1:-}" = "--quick" ]; then
    THREADS=${THREADS:-"2 64 1024"}; SECONDS_PER_RUN=${SECONDS_PER_RUN:-5}; ROUNDS=${ROUNDS:-1}
fi
THREADS=${THREADS:-"2 64 256 1024"}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
TEST=${TEST:-oltp_point_select}
ROUNDS=${ROUNDS:-3}
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

. bench-mysql/common.sh  # the scripts run from the repository root (cd above)
pin_from_env run.sh
WORK=$(mktemp -d /tmp/fiberize-mysql.XXXXXX)
declare -A PORT=([native]=$(free_port) [preload]=$(free_port))
[ "${PORT[native]}" != "${PORT[preload]}" ] || PORT[preload]=$((PORT[native] + 1))
cleanup() {
    for s in native preload; do
        mariadb-admin --no-defaults -h127.0.0.1 -P${PORT[$s]} -uroot shutdown >/dev/null 2>&1 || true
    done
    sleep 1
    for s in native preload; do
        [ -f "$WORK/pid-$s" ] && kill -9 "$(cat "$WORK/pid-$s")" >/dev/null 2>&1 || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

# The servers: common.sh's start_mariadb/stop_mariadb, named after their mode.
SERVER_OPTS="--max-connections=4000 --innodb-buffer-pool-size=256M"
start_server() { start_mariadb "$1" "$1"; } # native|preload
stop_server() { stop_mariadb "$1"; }

sb_args() { # server -> the sysbench options that reach it
    echo --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port=${PORT[$1]} --mysql-user=root \
        --mysql-db=sbtest --tables=$TABLES --table-size=$TABLE_SIZE
}
run_sb() { # server client-mode threads -> "tps errors"
    local pre=()
    [ "$2" = preload ] && pre=(env LD_PRELOAD="$LIB" GLIBC_TUNABLES=glibc.pthread.rseq=0)
    # shellcheck disable=SC2046 # sb_args prints words without spaces inside
    "${CLIENT_PIN[@]}" "${pre[@]}" sysbench $(sb_args "$1") --threads="$3" --time="$SECONDS_PER_RUN" --rand-type=uniform "$TEST" run 2>&1 |
        awk '/transactions:/ { gsub("[(]", "", $3); tps=$3 } /ignored errors:/ { err=$3 } /FATAL/ { fatal=1 }
             END { printf "%s %s\n", (fatal ? "FATAL" : tps), err + 0 }'
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "== initializing one datadir in $WORK, copied for the second server (ports ${PORT[native]}, ${PORT[preload]}, loopback only)"
install_datadir "$WORK/data-native"
start_server native
mariadb --no-defaults -h127.0.0.1 -P${PORT[native]} -uroot -e "create database sbtest"
echo "== preparing $TABLES tables x $TABLE_SIZE rows"
sysbench $(sb_args native) --threads=4 oltp_read_write prepare >/dev/null
stop_server native
cp -a "$WORK/data-native" "$WORK/data-preload"

# Both servers run at once; each point alternates between them ROUNDS times (the
# order flips every round) and keeps the median, so that a noisy stretch of the
# machine hits both sides alike.
start_server native
start_server preload
for s in native preload; do SECONDS_PER_RUN=3 run_sb $s native 2 >/dev/null; done # warm both
CLIENTS=(native); [ "${CLIENT_PRELOAD:-0}" = 1 ] && CLIENTS+=(preload)
declare -A R
for client in "${CLIENTS[@]}"; do
    for t in $THREADS; do
        declare -A tps=() errs=()
        for r in $(seq "$ROUNDS"); do
            order=(native preload); [ $((r % 2)) = 0 ] && order=(preload native)
            for s in "${order[@]}"; do
                read -r v e <<<"$(run_sb $s $client "$t")"
                tps[$s]+="$v "; errs[$s]=$(( ${errs[$s]:-0} + e ))
            done
        done
        for s in native preload; do
            R[$s,$client,$t]="$(tr ' ' '\n' <<<"${tps[$s]}" | grep . | median) ${errs[$s]}"
        done
        unset tps errs
    done
done
stop_server native
stop_server preload

report() { # client
    printf "%-8s %-22s %-22s %-8s\n" threads native-server preloaded-server ratio
    for t in $THREADS; do
        read -r a ea <<<"${R[native,$1,$t]}"; read -r b eb <<<"${R[preload,$1,$t]}"
        printf "%-8s %-22s %-22s %s\n" "$t" "$a ($ea)" "$b ($eb)" "$(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0) printf "%.2fx", b / a; else print "-" }')"
    done
}
echo "== $TEST, ${SECONDS_PER_RUN}s per run, median of $ROUNDS; transactions/s (errors summed); ratio = preloaded server / native server"
report native
if [ "${CLIENT_PRELOAD:-0}" = 1 ]; then
    echo "== same, sysbench client preloaded too"
    report preload
fi
