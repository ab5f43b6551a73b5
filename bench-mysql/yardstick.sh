#!/usr/bin/env bash
# The yardstick: MariaDB on CPUs of its own, as production databases run, native against
# MariaDB's own pool-of-threads and the preloaded server (and any other CONFIGS), side by
# side, in interleaved rounds. The servers run pinned to SERVER_CPUS and the clients
# (sysbench, the TPC-C client) to CLIENT_CPUS: by default the first and the second half
# of this process's CPUs (CPU 0 and CPU 1 on 2 vCPUs). For each point it prints the
# medians over the rounds of:
#   tps, p95 and p99 (ms; sysbench's histogram of the whole run; TPC-C: New-Order p90),
#   the server's CPU time per transaction (utime + stime of the whole process from
#     /proc/PID/stat, which keeps the time of threads that ended: steadier than tps
#     on a noisy machine),
# and each config's ratio to the first one (tps, p95, CPU per transaction). With
# PROFILE=1 an extra round after the measured ones records each preloaded server with
# `perf record -e cpu-clock` and prints the share of its CPU samples in libfiberize.so
# and the library's top symbols; PROFILE=all records every server (native and pool too)
# and prints, for each, its CPU per transaction split by where it went (kernel,
# mariadbd, libc, libfiberize.so, ...): where the pool saves what we do not. SYSCALLS=1
# adds a round under `perf stat` that prints each server's system calls per transaction
# by kind (recvfrom, sendto, epoll_wait, futex, ...). Loopback only.
#
#   bash bench-mysql/yardstick.sh
#   CONFIGS="native pool old=/tmp/old/libfiberize.so new=target/release/libfiberize.so" POINTS="ps64 ps1024" bash bench-mysql/yardstick.sh
#
# Environment (defaults in brackets): CONFIGS ["native pool new=target/release/libfiberize.so"]
# (as mix.sh: native, pool, NAME=native / NAME=pool for a control, NAME=native+VAR=value /
# NAME=pool+VAR=value for one with an environment, NAME=LIB[+VAR=value...]),
# POINTS ["ps64 ps256 ps1024 rw256 tpcc256"] (psN: oltp_point_select at N connections,
# rwN: oltp_read_write, tpccN: the TPC-C client of bench-mysql/tpcc at N terminals,
# --no-wait), ROUNDS [5], SECONDS_PER_RUN [10], TPCC_SECONDS [20], WAREHOUSES [4],
# TABLES/TABLE_SIZE [8 x 100000], PATH_KIND [unix | tcp], SERVER_CPUS/CLIENT_CPUS,
# DATA_CACHE [/tmp/fiberize-yardstick-cache; without a TPC-C point …-cache-sysbench], PROFILE [0], PROFILE_SECONDS [8], SYSCALLS [0],
# PLOT_DIR [none], SERVER_STATS [0] (1: the preloaded servers with FIBERIZE_STATS, whose
# counters it prints at the end). The medians also go to $WORK/yardstick.csv (point, server, kind, tps,
# p95, p99, cpu_us, rounds; the machine, pinning and date in leading # lines); with
# PLOT_DIR (relative to the repository's root: bench-mysql/plots for the README's
# plot) the csv is copied there right after the medians and drawn as
# PLOT_DIR/yardstick.png by bench-mysql/yardstick-plot.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CONFIGS=${CONFIGS:-"native pool new=$ROOT/target/release/libfiberize.so"}
POINTS=${POINTS:-"ps64 ps256 ps1024 rw256 tpcc256"}
ROUNDS=${ROUNDS:-5}; SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}; TPCC_SECONDS=${TPCC_SECONDS:-20}
TABLES=${TABLES:-8}; TABLE_SIZE=${TABLE_SIZE:-100000}; PATH_KIND=${PATH_KIND:-unix}
PROFILE=${PROFILE:-0}; PROFILE_SECONDS=${PROFILE_SECONDS:-8}; SYSCALLS=${SYSCALLS:-0}
SERVER_OPTS=${SERVER_OPTS:-"--innodb-buffer-pool-size=1G --innodb-flush-log-at-trx-commit=2"}
# The library as shipped: FIBERIZE_STATS off (its queue-wait clock reads cost the
# preloaded server a few per cent of its CPU per query; RESULTS.md#yardstick-as-shipped).
export SERVER_STATS=${SERVER_STATS:-0}
LIB=${FIBERIZE_LIB:-$ROOT/target/release/libfiberize.so}
# A datadir with TPC-C and one without are cached apart: one cache for both made a run
# without a TPC-C point load the TPC-C data again at the next run with one (minutes).
# TPC-C's tables are analyzed when loaded: without their statistics TPC-C ran several
# times slower (RESULTS.md#tpcc-datadir-statistics).
# With a TPC-C point, also a redo log of 2 GB: with MariaDB's 96 MB default, native's
# page cleaner froze at the log's sync limit for 30-45 s in TPC-C rounds after
# read_write, which voided its CPU per transaction; each round of read_write and TPC-C
# adds ~165 MB of checkpoint age that no server flushes between rounds, so 1 GB would
# reach its flushing limits in the fifth (RESULTS.md#yardstick-as-shipped).
if [[ " $POINTS " = *" tpcc"* ]]; then
    WORKLOADS="sysbench tpcc"; WAREHOUSES=${WAREHOUSES:-4}
    [[ $SERVER_OPTS = *innodb-log-file-size* ]] || SERVER_OPTS+=" --innodb-log-file-size=2G"
    DATA_CACHE=${DATA_CACHE:-/tmp/fiberize-yardstick-cache}
    bash bench-mysql/tpcc/build.sh
    TPCC=$ROOT/target/tpcc/tpcc
else
    WORKLOADS=sysbench; WAREHOUSES=0
    DATA_CACHE=${DATA_CACHE:-/tmp/fiberize-yardstick-cache-sysbench}
fi
. bench-mysql/common.sh
split_cpus_by_default yardstick.sh
start_configs_side_by_side yardstick.sh yardstick
echo "== work directory $WORK; points $POINTS over $PATH_KIND, $ROUNDS rounds"
: >"$WORK/results.txt"

# One point against one server: prints "tps p95 p99 seconds".
run_point() { # name point log
    local n=$1 point=$2 log=$3 where
    if [ "$PATH_KIND" = tcp ]; then where=(--mysql-host=127.0.0.1 --mysql-port="${PORT[$n]}"); else where=(--mysql-socket="$WORK/sock-$n"); fi
    case $point in
    ps* | rw*)
        local lua=oltp_point_select; [[ $point = rw* ]] && lua=oltp_read_write
        ${CLIENT_PIN[@]+"${CLIENT_PIN[@]}"} sysbench --db-driver=mysql "${where[@]}" --mysql-user=root --mysql-db=sbtest \
            --tables="$TABLES" --table-size="$TABLE_SIZE" --rand-type=uniform --histogram=on --db-ps-mode=auto \
            --threads="${point#??}" --time="$SECONDS_PER_RUN" "$lua" run >"$log" 2>&1 || true
        echo "$(summarize_sysbench "$log" 1) $SECONDS_PER_RUN" ;;
    tpcc*)
        ${CLIENT_PIN[@]+"${CLIENT_PIN[@]}"} "$TPCC" run -P "${PORT[$n]}" -w "$WAREHOUSES" -t "${point#tpcc}" -d "$TPCC_SECONDS" \
            --ramp 2 --no-wait --report 1000 >"$log" 2>&1 || true
        awk -v s="$TPCC_SECONDS" '/^RESULT/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); r[kv[1]] = kv[2] } ok = 1 }
            END { if (!ok) print "FATAL FATAL FATAL " s; else printf "%.1f %s %s %s\n", r["tps"], r["p90_new_order_ms"], r["p90_new_order_ms"], s }' "$log" ;;
    *) echo "yardstick.sh: unknown point $point (psN, rwN, tpccN)" >&2; exit 2 ;;
    esac
}

points_once() { # name round
    local n=$1 r=$2 point pid t0 t1 res
    pid=$(cat "$WORK/pid-$n")
    for point in $POINTS; do
        t0=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
        res=$(run_point "$n" "$point" "$WORK/$point-$n-$r.log")
        t1=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
        # CPU per transaction: the server's ticks over the run's transactions (sysbench's
        # connect and TPC-C's ramp add a little, alike for every server).
        awk -v r="$r" -v n="$n" -v p="$point" -v res="$res" -v ticks=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" 'BEGIN {
            split(res, f, " "); txns = f[1] * f[4]
            printf "round %s %s %s tps=%s p95=%s p99=%s cpu_us=%.1f\n", r, n, p, f[1], f[2], f[3], (txns > 0 ? ticks / hz * 1e6 / txns : 0) }' |
            tee -a "$WORK/results.txt"
    done
}
each_config_rotating points_once

median_of() { # name point field
    { grep " $1 $2 " "$WORK/results.txt" || true; } | tr ' ' '\n' | sed -n "s/^$3=//p" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}
read -r first _ <<<"$CONFIGS"; first=${first%%=*}
echo
echo "== yardstick: servers on CPUs $SERVER_CPUS, clients on CPUs $CLIENT_CPUS, $PATH_KIND; medians of $ROUNDS rounds"
echo "   (p95/p99 in ms; TPC-C: New-Order p90 in both; cpu: the server's µs per transaction); ratio = server / $first"
printf "%-8s %-8s %9s %9s %9s %8s   %s\n" point server tps p95 p99 cpu_us "ratio tps / p95 / cpu"
CSV=$WORK/yardstick.csv
{
    echo "# machine: $(nproc) CPUs ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo || true)), $(uname -r)"
    echo "# setup: servers on CPUs $SERVER_CPUS, clients on CPUs $CLIENT_CPUS, $PATH_KIND, $TABLES x $TABLE_SIZE rows, TPC-C $WAREHOUSES warehouses"
    echo "# date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "# medians of $ROUNDS rounds (${SECONDS_PER_RUN} s, TPC-C ${TPCC_SECONDS} s); p95/p99 in ms (TPC-C: New-Order p90); cpu_us: the server's µs per transaction"
    echo "point,server,kind,tps,p95,p99,cpu_us,rounds"
} >"$CSV"
for point in $POINTS; do
    bt=$(median_of "$first" "$point" tps); b95=$(median_of "$first" "$point" p95); bc=$(median_of "$first" "$point" cpu_us)
    for c in $CONFIGS; do
        n=${c%%=*}
        t=$(median_of "$n" "$point" tps); p95=$(median_of "$n" "$point" p95); p99=$(median_of "$n" "$point" p99); cu=$(median_of "$n" "$point" cpu_us)
        ratio=$(awk -v a="$bt" -v b="$t" -v a5="$b95" -v b5="$p95" -v ac="$bc" -v bc="$cu" 'BEGIN {
            if (a == "FATAL" || b == "FATAL" || a == "" || b == "") { print "a run failed"; exit }
            printf "%.2fx / %.2fx / %.2fx", (a > 0 ? b / a : 0), (a5 > 0 ? b5 / a5 : 0), (ac > 0 ? bc / ac : 0) }')
        printf "%-8s %-8s %9s %9s %9s %8s   %s\n" "$point" "$n" "$t" "$p95" "$p99" "$cu" "$ratio"
        kind=$(config_kind "$c")
        echo "$point,$n,$kind,$t,$p95,$p99,$cu,$(grep -c " $n $point " "$WORK/results.txt" || true)" >>"$CSV"
    done
done
echo "== medians in $CSV"
if [ -n "${PLOT_DIR:-}" ]; then
    mkdir -p "$PLOT_DIR" && cp "$CSV" "$PLOT_DIR/yardstick.csv"
    bash bench-mysql/yardstick-plot.sh "$PLOT_DIR/yardstick.csv" "$PLOT_DIR/yardstick.png" || echo "yardstick.sh: the plot failed" >&2
fi

# The profile round: each preloaded server under perf while it serves each point once
# (not counted above: perf's own cost lands on the server's CPUs).
if [ "$PROFILE" != 0 ] && command -v perf >/dev/null; then
    for c in $CONFIGS; do
        [ "$(config_kind "$c")" = preload ] || [ "$PROFILE" = all ] || continue
        n=${c%%=*}
        for point in $POINTS; do
            quiesce_servers
            (sleep 2 && perf record -q -F 999 -g -e cpu-clock -p "$(cat "$WORK/pid-$n")" -o "$WORK/perf-$n-$point.data" \
                -- sleep "$PROFILE_SECONDS" >/dev/null 2>&1) &
            recorder=$!
            run_point "$n" "$point" "$WORK/$point-$n-profile.log" >/dev/null
            wait "$recorder" # not a bare wait: the servers are this shell's children too
            share=$(perf report -i "$WORK/perf-$n-$point.data" --stdio --no-children --sort dso 2>/dev/null |
                awk '/libfiberize/ { gsub(/%/, "", $1); s += $1 } END { printf "%.1f", s }')
            if [ "$PROFILE" = all ]; then
                # The measured rounds' median CPU per transaction, split by the profile's shares.
                echo "== $n $point: µs per transaction by where the server spent it (median $(median_of "$n" "$point" cpu_us) µs):"
                perf report -i "$WORK/perf-$n-$point.data" --stdio --no-children --sort dso 2>/dev/null |
                    awk -v us="$(median_of "$n" "$point" cpu_us)" '/^ +[0-9.]+%/ { gsub(/%/, "", $1); if ($1 >= 0.5) printf "     %-28s %5.1f %%  %6.2f µs\n", $2, $1, $1 * us / 100 }'
                perf report -i "$WORK/perf-$n-$point.data" --stdio --no-children -g none --sort dso,sym 2>/dev/null |
                    sed -n '/^ *[0-9]/p' | sed -n 1,25p > "$WORK/top-$n-$point.txt"
                echo "     (top symbols: $WORK/top-$n-$point.txt)"
                [ "$(config_kind "$c")" = preload ] || continue
            fi
            echo "== $n $point: libfiberize.so ${share}% of the server's CPU samples; its top symbols:"
            perf report -i "$WORK/perf-$n-$point.data" --stdio --no-children -g none --dsos libfiberize.so --sort sym 2>/dev/null |
                grep -E '^ +[0-9]' | head -12
        done
    done
fi

# The system-call round (SYSCALLS=1): each server under `perf stat` while it serves each
# point once more (not counted above), its system calls per transaction by kind.
if [ "$SYSCALLS" != 0 ] && command -v perf >/dev/null; then
    for c in $CONFIGS; do
        n=${c%%=*}
        for point in $POINTS; do
            quiesce_servers
            # A window inside the run (2 s in: sysbench's connects, TPC-C's ramp).
            case $point in tpcc*) win=$((TPCC_SECONDS - 1)) ;; *) win=$((SECONDS_PER_RUN - 3)) ;; esac
            (sleep 2 && perf stat -x, -p "$(cat "$WORK/pid-$n")" -o "$WORK/syscalls-$n-$point.txt" \
                -e raw_syscalls:sys_enter,context-switches,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendto \
                -e syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_poll,syscalls:sys_enter_ppoll \
                -e syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_ctl,syscalls:sys_enter_futex \
                -- sleep "$win" >/dev/null 2>&1) &
            recorder=$!
            res=$(run_point "$n" "$point" "$WORK/$point-$n-syscalls.log")
            wait "$recorder"
            echo "== $n $point: system calls per transaction (${win} s at the run's $(cut -d' ' -f1 <<<"$res") tps):"
            awk -F, -v txns="$(awk -v r="$res" -v s="$win" 'BEGIN { split(r, f, " "); print f[1] * s }')" \
                '$1 ~ /^[0-9]/ && txns > 0 { sub(/^syscalls:sys_enter_/, "", $3); printf "     %-28s %6.2f\n", $3, $1 / txns }' \
                "$WORK/syscalls-$n-$point.txt"
        done
    done
fi
finish_configs
