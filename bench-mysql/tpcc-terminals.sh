#!/usr/bin/env bash
# The client side of TPC-C: TERMINALS terminals (one pthread each, keying and think
# times on) against one MariaDB server, the client run natively and then preloaded;
# prints tpmC, client CPU per transaction, peak RSS, peak kernel threads, and how much
# of the client's RSS is thread stacks (8 MiB mappings: the native threads', or under
# the preload the donors' that the fibers run on), sampled from /proc/PID/smaps at the
# end of the ramp and of the run.
#
#   bench-mysql/tpcc-terminals.sh
#
# Environment: TERMINALS [10000], WAREHOUSES [10], RAMP [30] s, SECONDS_PER_RUN [60],
# WAIT_SCALE [1] (multiplies keying and think times), SERVER [pool] (native | pool |
# preload, as in compare.sh), CLIENTS ["native preload"], SERVER_OPTS, SERVER_CPUS /
# CLIENT_CPUS, DATA_CACHE (shared with compare.sh), OUT [bench-mysql/results/terminals-DATE],
# LIB [target/release/libfiberize.so], PROFILE=SECONDS (after
# the ramp, for that long, machine-wide: `perf record` of every system call, counted by
# kind for the client's process into OUT/syscalls-N-CLIENT.txt, and `perf record -e
# cpu-clock -g` into OUT/perf-N-CLIENT.data: `perf report -i … --pid $(cat
# OUT/pid-N-CLIENT.txt)`. Machine-wide because per-thread counters for 10 000 threads
# ran out of descriptors, and attaching to 1000 took most of the window).
# A/B runs: CLIENTS may name `preloadB` (LIB_B [LIB] with the extra environment ENV_B,
# e.g. "FIBERIZE_TUNE=poll_per_worker=0") and repeat names to alternate, e.g. "preload preloadB native
# preload preloadB native"; files are numbered by position.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LIB=${LIB:-${FIBERIZE_LIB:-$ROOT/target/release/libfiberize.so}} # LIB=path: another build (A/B)
TERMINALS=${TERMINALS:-10000}
WAREHOUSES=${WAREHOUSES:-10}
RAMP=${RAMP:-40}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-60}
WAIT_SCALE=${WAIT_SCALE:-1}
SERVER=${SERVER:-pool}
CLIENTS=${CLIENTS:-"native preload"}
SERVER_OPTS=${SERVER_OPTS:-"--innodb-buffer-pool-size=2G --innodb-flush-log-at-trx-commit=2"}
OUT=${OUT:-$ROOT/bench-mysql/results/terminals-$(date -u +%Y-%m-%d-%H%M)}
WORKLOADS=tpcc TABLES=${TABLES:-4} TABLE_SIZE=${TABLE_SIZE:-10000} # the datadir compare.sh prepares

[ -f "$LIB" ] || cargo build --release -p interpose
bash bench-mysql/tpcc/build.sh
TPCC=$ROOT/target/tpcc/tpcc
. bench-mysql/common.sh # the scripts run from the repository root (cd above)
require_lib_and_mariadb
pin_from_env tpcc-terminals.sh
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/fiberize-terminals.XXXXXX)
declare -A PORT=([prepare]=$(free_port) [server]=$(free_port))
[ "${PORT[prepare]}" != "${PORT[server]}" ] || PORT[server]=$((PORT[prepare] + 1))
cleanup() {
    stop_mariadb server
    rm -rf "$WORK"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)" # one socket per terminal in the client, one per connection in the server

prepare_datadir
mv "$WORK/data-prepare" "$WORK/data-server"
start_mariadb server "$SERVER"
echo "== server $SERVER; $TERMINALS terminals on $WAREHOUSES warehouses, ${RAMP}s ramp + ${SECONDS_PER_RUN}s measured, wait scale $WAIT_SCALE"

# Thread-stack share of a process's RSS: "stacks N, stack RSS KiB, total RSS KiB".
stack_rss() { # pid
    awk '/^[0-9a-f]+-[0-9a-f]+ / { size = 0 } /^Size:/ { size = $2 } /^Rss:/ { total += $2; if (size == 8192) { n++; s += $2 } }
         END { printf "stacks %d, stack RSS %d KiB, total RSS %d KiB", n, s, total }' "/proc/$1/smaps" 2>/dev/null || echo "gone"
}

# System calls of process PID in a machine-wide `perf record -e raw_syscalls:sys_enter`
# FILE, by kind, most first ("count name").
syscalls_by_kind() { # file pid
    perf script -i "$1" -F pid,trace 2>/dev/null | awk -v p="$2" '$1 == p { print $3 }' | sort | uniq -c | sort -rn |
        awk 'NR == FNR { if ($1 == "#define") name[$3] = substr($2, 6); next } { print $1, ($2 in name ? name[$2] : "nr" $2) }' \
            /usr/include/x86_64-linux-gnu/asm/unistd_64.h - 2>/dev/null
}

n=0
for client in $CLIENTS; do
    n=$((n + 1))
    pre=()
    [ "$client" = preload ] && pre=(env LD_PRELOAD="$LIB" GLIBC_TUNABLES=glibc.pthread.rseq=0 FIBERIZE_STATS=1)
    # shellcheck disable=SC2206 # ENV_B is a list of VAR=VALUE words
    [ "$client" = preloadB ] && pre=(env LD_PRELOAD="${LIB_B:-$LIB}" GLIBC_TUNABLES=glibc.pthread.rseq=0 FIBERIZE_STATS=1 ${ENV_B:-})
    log=$OUT/client-$n-$client.log
    "${CLIENT_PIN[@]}" "${pre[@]}" "$TPCC" run -P "${PORT[server]}" -w "$WAREHOUSES" -t "$TERMINALS" -d "$SECONDS_PER_RUN" \
        --ramp "$RAMP" --wait-scale "$WAIT_SCALE" --report 10 >"$log" 2>&1 &
    pid=$!
    # Sample the stacks once the terminals are connected and the ramp is over, and near the end.
    for _ in $(seq 1 600); do grep -q "terminals connected" "$log" && break; kill -0 $pid 2>/dev/null || break; sleep 1; done
    sleep "$RAMP"
    echo "client $client after the ramp: $(stack_rss $pid)" | tee "$OUT/stacks-$n-$client.txt"
    if [ -n "${PROFILE:-}" ]; then
        echo $pid >"$OUT/pid-$n-$client.txt"
        perf record -q -a -e raw_syscalls:sys_enter -o "$OUT/sys-$n-$client.data" -- sleep "$PROFILE" >/dev/null 2>&1 &
        perf record -q -a -F 499 -e cpu-clock -g -o "$OUT/perf-$n-$client.data" -- sleep "$PROFILE" >/dev/null 2>&1 &
    fi
    sleep $((SECONDS_PER_RUN - 5))
    echo "client $client near the end: $(stack_rss $pid)" | tee -a "$OUT/stacks-$n-$client.txt"
    wait $pid || echo "client $client: exit status $?"
    [ -n "${PROFILE:-}" ] && syscalls_by_kind "$OUT/sys-$n-$client.data" $pid >"$OUT/syscalls-$n-$client.txt"
    grep -E "^tpcc run: (tpmC|[0-9]+ transactions|response|errors|client CPU)|connected in|^fiberize: stats" "$log" | cut -c1-400
done
"$TPCC" check -P "${PORT[server]}" -w "$WAREHOUSES" | tee "$OUT/check.txt" | tail -1
stop_mariadb server

echo "== summary ($OUT)"
printf "%-8s %-10s %-8s %-14s %-14s %-14s %-10s\n" client tpmC txn/s cpu_us/txn peak_rss_KiB stack_rss_KiB threads
n=0
for client in $CLIENTS; do
    n=$((n + 1))
    log=$OUT/client-$n-$client.log
    r=$(grep '^RESULT' "$log" || true)
    get() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $r"; }
    st=$(sed -n 's/.*near the end: stacks [0-9]*, stack RSS \([0-9]*\) KiB.*/\1/p' "$OUT/stacks-$n-$client.txt")
    printf "%-8s %-10s %-8s %-14s %-14s %-14s %-10s\n" "$client" "$(get tpmC)" "$(get tps)" "$(get cpu_us_per_txn)" \
        "$(get peak_rss_kib)" "${st:-?}" "$(get peak_threads)"
done | tee "$OUT/summary.txt"
