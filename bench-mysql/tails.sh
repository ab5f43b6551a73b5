#!/usr/bin/env bash
# Latency tails next to throughput (issue 27): oltp_point_select at a few connection
# counts, over TCP loopback (how application servers connect) and over the unix socket,
# against servers that run side by side (a native one and preloaded ones, the same
# datadir copied for each). Every round runs each point once against each server, the
# order rotating by round; the table gives the medians of the rounds: tps, p95 and p99
# (ms, from sysbench's histogram of the whole run), and each server's ratio to the first.
# Under each run, the machine's rescheduling and function-call IPIs, context switches
# and the server's threads' wait for a CPU in the kernel's run queues per transaction, and
# the idle CPU share during it (where the CPUs go at few connections:
# a client thread and its server thread sharing one CPU need no IPI); for a preloaded
# server also its own counters over that run, per transaction (switches, parks, direct
# waits and those refused because the peer ran on another CPU, migrations, steals, turns
# ended; from its FIBERIZE_METRICS file), so that a bad round can be told from a good one.
# Loopback only.
#
#   CONFIGS="native new=target/release/libfiberize.so" bash bench-mysql/tails.sh
#
# Environment (defaults in brackets): CONFIGS ["native new=target/release/libfiberize.so"]
# (native, pool, NAME=native or NAME=pool: a control, NAME=LIB[+VAR=value...], as mix.sh), CONNS ["2 16 64"], PATHS ["tcp unix"],
# ROUNDS [3], SECONDS_PER_RUN [10], TABLES/TABLE_SIZE [4 x 10000],
# SERVER_OPTS [--innodb-buffer-pool-size=256M], SERVER_CPUS/CLIENT_CPUS (both or neither).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CONFIGS=${CONFIGS:-"native new=$ROOT/target/release/libfiberize.so"}
CONNS=${CONNS:-"2 16 64"}; PATHS=${PATHS:-"tcp unix"}
ROUNDS=${ROUNDS:-3}; SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
TABLES=${TABLES:-4}; TABLE_SIZE=${TABLE_SIZE:-10000}; WAREHOUSES=0; WORKLOADS=sysbench
SERVER_OPTS=${SERVER_OPTS:-"--innodb-buffer-pool-size=256M"}
LIB=${FIBERIZE_LIB:-$ROOT/target/release/libfiberize.so}
. bench-mysql/common.sh
CONFIG_ENV=()
# Each preloaded server writes its counters twice a second (server_counters reads them),
# so that every run prints its own: the stats line at exit sums the whole invocation.
METRICS_MS=500
SERVER_METRICS_INTERVAL=${METRICS_MS}ms
FIBER_COUNTERS="switches parks direct_waits direct_waits_unspun direct_waits_declined_peer_elsewhere idle_spins_skipped migrations steals turns_ended"
start_configs_side_by_side tails.sh tails
echo "== work directory $WORK; point_select at $CONNS connections over $PATHS, ${SECONDS_PER_RUN}s per run, $ROUNDS rounds"

: >"$WORK/results.txt"
# The machine's rescheduling and function-call IPIs (RES, CAL of /proc/interrupts, all
# CPUs), context switches and idle/total CPU ticks (/proc/stat): "res cal ctxt idle total".
kernel_counters() {
    awk '/^ *RES:/ { for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) r += $i }
         /^ *CAL:/ { for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) c += $i }
         END { printf "%d %d ", r, c }' /proc/interrupts
    awk '/^ctxt/ { x = $2 } /^cpu / { i = $5; t = $2 + $3 + $4 + $5 + $6 + $7 + $8 }
         END { printf "%d %d %d\n", x, i, t }' /proc/stat
}
# Nanoseconds that server NAME's threads have spent runnable in the kernel's run queues
# without a CPU (field 2 of /proc/PID/task/*/schedstat, summed): the time its requests
# waited because the thread serving them (a native connection thread, or a worker with
# the fibers queued on it) was not on a CPU.
# Also the count of those waits (field 3: timeslices run) and of the threads' involuntary
# context switches (the kernel took the CPU from a runnable thread), and the CPU time its
# threads ran (field 1): "delay waits cpu preempted".
# A worker preempted with fibers queued on it holds all their requests, so the mean wait
# per preemption says how long such a stall lasts.
server_sched_counters() { # name
    local pid
    pid=$(cat "$WORK/pid-$1")
    { cat /proc/"$pid"/task/*/schedstat 2>/dev/null | awk '{ s += $2; n += $3; cpu += $1 } END { printf "%d %d %d ", s, n, cpu }'
      cat /proc/"$pid"/task/*/status 2>/dev/null | awk '/^nonvoluntary_ctxt_switches/ { s += $2 } END { printf "%d\n", s }'; }
}
point_once() { # name round
    local n=$1 r=$2 path conns where log
    for path in $PATHS; do
        for conns in $CONNS; do
            if [ "$path" = tcp ]; then where=(--mysql-host=127.0.0.1 --mysql-port="${PORT[$n]}"); else where=(--mysql-socket="$WORK/sock-$n"); fi
            log="$WORK/ps-$n-$path-$conns-$r.log"
            read -r res0 cal0 ctxt0 idle0 total0 <<<"$(kernel_counters)"
            read -r delay0 waits0 cpu0 preempted0 <<<"$(server_sched_counters "$n")"
            fibers0=$(server_counters "$n" $FIBER_COUNTERS)
            # The client's CPU time (user and system seconds, bash's `time`): on a machine the
            # client shares, what the server's scheduling costs the client counts too.
            { TIMEFORMAT='%U %S'; time ${CLIENT_PIN[@]+"${CLIENT_PIN[@]}"} sysbench --db-driver=mysql "${where[@]}" --mysql-user=root --mysql-db=sbtest \
                --tables="$TABLES" --table-size="$TABLE_SIZE" --rand-type=uniform --histogram=on \
                --threads="$conns" --time="$SECONDS_PER_RUN" oltp_point_select run >"$log" 2>&1 || true; } 2>"$log.cpu"
            read -r client_user client_sys <"$log.cpu" || { client_user=0; client_sys=0; }
            read -r t p95 p99 <<<"$(summarize_sysbench "$log")"
            read -r res1 cal1 ctxt1 idle1 total1 <<<"$(kernel_counters)"
            read -r delay1 waits1 cpu1 preempted1 <<<"$(server_sched_counters "$n")"
            # The metrics file is at most METRICS_MS old: wait for one written after the run.
            [ ! -f "$WORK/metrics-$n.prom" ] || sleep "$(awk -v ms="$METRICS_MS" 'BEGIN { print (ms + 100) / 1000 }')"
            fibers1=$(server_counters "$n" $FIBER_COUNTERS)
            echo "round $r $n $path $conns tps=$t p95=$p95 p99=$p99" | tee -a "$WORK/results.txt"
            awk -v t="$t" -v s="$SECONDS_PER_RUN" -v res=$((res1 - res0)) -v cal=$((cal1 - cal0)) -v cx=$((ctxt1 - ctxt0)) \
                -v idle=$((idle1 - idle0)) -v total=$((total1 - total0)) -v delay=$((delay1 - delay0)) \
                -v waits=$((waits1 - waits0)) -v cpu=$((cpu1 - cpu0)) -v preempted=$((preempted1 - preempted0)) \
                -v cu="$client_user" -v cs="$client_sys" 'BEGIN { n = t * s; if (n <= 0 || total <= 0) exit
                client = sprintf(", client %.1f us on a CPU (%.1f in the kernel)", (cu + cs) * 1e6 / n, cs * 1e6 / n)
                if (delay < 0 || waits < 0 || cpu < 0 || preempted < 0) {
                    # The sums cover the threads alive at each read: a native server ends the
                    # connection threads its thread cache does not keep as sysbench disconnects
                    # (1024 connections), and their counters go with them.
                    printf "    per transaction: %.3f rescheduling IPIs, %.3f function-call IPIs, %.2f context switches; the server ended threads during the run, so its own counters are left out; CPUs idle %.1f%%%s\n",
                        res / n, cal / n, cx / n, 100 * idle / total, client
                    exit
                }
                printf "    per transaction: %.1f us of the server on a CPU, %.3f rescheduling IPIs, %.3f function-call IPIs, %.2f context switches, %.1f us of the server waiting for a CPU (%.1f us per wait, %.3f preemptions); CPUs idle %.1f%%%s\n",
                    cpu / n / 1000, res / n, cal / n, cx / n, delay / n / 1000, (waits > 0 ? delay / waits / 1000 : 0), preempted / n, 100 * idle / total, client }'
            # A preloaded server's own counters over this run, per transaction: how often
            # its fibers switched, parked, waited directly (or were refused a direct wait
            # because the peer ran on another CPU), moved between workers, and ended turns.
            [ ! -f "$WORK/metrics-$n.prom" ] || awk -v t="$t" -v s="$SECONDS_PER_RUN" -v names="$FIBER_COUNTERS" -v a="$fibers0" -v b="$fibers1" 'BEGIN {
                n = t * s; if (n <= 0) exit
                k = split(names, name, " "); split(a, before, " "); split(b, after, " ")
                line = "    fibers per transaction:"
                for (i = 1; i <= k; i++) line = line sprintf(" %s %.3f", name[i], (after[i] - before[i]) / n)
                print line }'
        done
    done
}
each_config_rotating point_once

median_of() { # name path conns field
    { grep " $1 $2 $3 " "$WORK/results.txt" || true; } | tr ' ' '\n' | sed -n "s/^$4=//p" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
read -r first _ <<<"$CONFIGS"; first=${first%%=*}
echo "== medians of $ROUNDS rounds (p95/p99 in ms); ratio = server / $first"
printf "%-5s %6s %-10s %9s %8s %8s   %s\n" path conns server tps p95 p99 "ratio tps / p95 / p99"
for path in $PATHS; do
    for conns in $CONNS; do
        bt=$(median_of "$first" "$path" "$conns" tps); b95=$(median_of "$first" "$path" "$conns" p95); b99=$(median_of "$first" "$path" "$conns" p99)
        for c in $CONFIGS; do
            n=${c%%=*}
            t=$(median_of "$n" "$path" "$conns" tps); p95=$(median_of "$n" "$path" "$conns" p95); p99=$(median_of "$n" "$path" "$conns" p99)
            ratio=$(awk -v a="$bt" -v b="$t" -v a5="$b95" -v b5="$p95" -v a9="$b99" -v b9="$p99" 'BEGIN {
                if (a == "FATAL" || b == "FATAL" || a == "" || b == "") { print "a run failed"; exit }
                printf "%.2fx / %.2fx / %.2fx", (a > 0 ? b / a : 0), (a5 > 0 ? b5 / a5 : 0), (a9 > 0 ? b9 / a9 : 0) }')
            printf "%-5s %6s %-10s %9s %8s %8s   %s\n" "$path" "$conns" "$n" "$t" "$p95" "$p99" "$ratio"
        done
    done
done
finish_configs
