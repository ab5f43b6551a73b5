#!/usr/bin/env bash
# The soak's two sysbench runs side by side (issue 11): oltp_point_select at PS_THREADS and
# oltp_read_write at RW_THREADS connections at once, against a native server and against
# preloaded ones, so that the share read_write gets next to thousands of short queries
# can be compared with what the kernel's scheduler gives it. Servers named in CONFIGS run
# side by side (the same datadir copied for each); every round runs the mix once against
# each, the order rotating by round. Loopback only.
#
#   CONFIGS="native new=target/release/libfiberize.so" ROUNDS=3 bash bench-mysql/mix.sh
#
# Per run, over the seconds both run: read_write tps, the median of its per-second p95 (ms),
# its seconds at 0 tps, point_select tps; and over the whole read_write run, its longest
# transaction in seconds (rw_max_s: a stall before or after the window, e.g. while point_select's
# 2048 connections close, shows only there) (see mix_once for the timing; FATAL for a run that
# failed, e.g. sysbench's 2048 threads not connected within its 30 s); over the steady seconds
# (all connections made), the CPUs the server used and the rest of the machine's busy CPUs
# (srv_cpus, rest_cpus: the two should add up to the CPUs there are, less idle_pct); and over
# the steady seconds and over the whole run, the statements the server served per CPU-second
# it used (steady_stmt_per_cpu_s from sysbench's rates; stmt_per_cpu_s from its totals, with
# the connecting and closing of every connection).
# Before each run the servers are let go quiet (common.sh's quiesce_servers). Then the median
# of each per server over the runs that did not fail, and each preloaded server's ratio to
# the first config (native by default).
#
# Environment (defaults in brackets): CONFIGS ["native new=target/release/libfiberize.so"]
# (native: mariadbd as shipped; NAME=LIB: preloaded with LIB; NAME=LIB+VAR=value+...: with
# VAR=value in that server's environment too, e.g. off=LIB+FIBERIZE_TURN_US=0), ROUNDS [3], MIX_SECONDS [90],
# PS_THREADS [2048], RW_THREADS [256; 0: point_select alone], TABLES/TABLE_SIZE [4 x 10000, as soak.sh],
# SERVER_OPTS [--innodb-buffer-pool-size=256M], SERVER_ENV (more VAR=value for preloaded servers),
# SERVER_CPUS/CLIENT_CPUS (both or neither, e.g. 0-7 and 8-15: servers and sysbench pinned apart).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CONFIGS=${CONFIGS:-"native new=$ROOT/target/release/libfiberize.so"}
ROUNDS=${ROUNDS:-3}; MIX_SECONDS=${MIX_SECONDS:-90}
PS_THREADS=${PS_THREADS:-2048}; RW_THREADS=${RW_THREADS:-256}
TABLES=${TABLES:-4}; TABLE_SIZE=${TABLE_SIZE:-10000}; WAREHOUSES=0; WORKLOADS=sysbench
SERVER_OPTS=${SERVER_OPTS:-"--innodb-buffer-pool-size=256M"}
LIB=${FIBERIZE_LIB:-$ROOT/target/release/libfiberize.so}
. bench-mysql/common.sh
read -ra EXTRA_ENV <<<"${SERVER_ENV:-}"
CONFIG_ENV=(FIBERIZE_DUMP_SIGNAL=12 ${EXTRA_ENV[@]+"${EXTRA_ENV[@]}"})
start_configs_side_by_side mix.sh mix
echo "== work directory $WORK; point_select x$PS_THREADS + read_write x$RW_THREADS for ${MIX_SECONDS}s per run, $ROUNDS rounds"

# Per-second reports of a sysbench log over seconds [FROM, TO] -> "tps p95 zero_seconds":
# the mean tps, the median of the per-second p95 latencies (ms), the seconds at 0 tps.
window() { # log from to
    awk -v from="$2" -v to="$3" '/^\[ [0-9]+s \]/ { s = $2 + 0; if (s < from || s > to) next
            for (i = 1; i <= NF; i++) { if ($i == "tps:") t = $(i + 1) + 0; if ($i == "(ms,95%):") p = $(i + 1) + 0 }
            n++; sum += t; if (t == 0) z++; lat[n] = p }
         /FATAL/ { fatal = 1 }
         END { if (fatal || n == 0) { print "FATAL FATAL FATAL"; exit }
               asort(lat); printf "%.1f %.1f %d\n", sum / n, lat[int((n + 1) / 2)], z }' "$1"
}
# Waits (at most 90 s) until FILE has a line that matches the extended regex.
wait_for_line() { # file regex
    for _ in $(seq 1 180); do grep -qE "$2" "$1" 2>/dev/null && return 0; sleep 0.5; done
}
# "seconds server_ticks busy_ticks idle_ticks" now: the clock (/proc/uptime), the CPU
# time server NAME's process used, the machine's busy and idle time, read by one awk at
# real-time priority where chrt may (root): on the saturated machine a plain shell waits
# seconds between two commands. (The server's own counters are no help here: mid-run a
# native server's SHOW GLOBAL STATUS lagged sysbench's counts, e.g. Com_commit 0.7/s in a
# window where read_write reported 311 tps; at the end the totals agree.)
cpu_sample() { # name
    local pid read=(awk 'FILENAME == "/proc/uptime" { t = $1 } FILENAME ~ /^\/proc\/[0-9]+\/stat$/ { s = $14 + $15 }
        FILENAME == "/proc/stat" && /^cpu / { b = $2 + $3 + $4 + $7 + $8 + $9; i = $5 + $6 } END { print t, s, b, i }')
    pid=$(cat "$WORK/pid-$1")
    chrt -f 50 "${read[@]}" /proc/uptime "/proc/$pid/stat" /proc/stat 2>/dev/null || "${read[@]}" /proc/uptime "/proc/$pid/stat" /proc/stat
}
# Two samples -> "CPUS REST IDLE_PCT SERVER_CPU_SECONDS": the CPUs the server used between
# them, the rest of the machine's busy CPUs (the clients, and kernel work charged to no
# server), the machine's idle share, and the server's CPU-seconds.
cpu_between() { # sample sample
    awk -v a="$1" -v b="$2" -v t="$(getconf CLK_TCK)" 'BEGIN { split(a, x, " "); split(b, y, " ")
        wall = y[1] - x[1]; srv = (y[2] - x[2]) / t; busy = (y[3] - x[3]) / t; idle = (y[4] - x[4]) / t
        if (wall <= 0 || busy + idle <= 0) { print "- - - -"; exit }
        printf "%.2f %.2f %.1f %.1f\n", srv / wall, (busy - srv) / wall, 100 * idle / (busy + idle), srv }'
}
# read_write starts first and runs 10 s longer: point_select starts 5 s later (its 2048
# connections would otherwise hold up read_write's connecting past sysbench's 30 s limit);
# read_write is measured over the seconds both run, after point_select's 3 s of connecting.
mix_once() { # name round
    local sb=(${CLIENT_PIN[@]+"${CLIENT_PIN[@]}"} sysbench --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="${PORT[$1]}" --mysql-user=root --mysql-db=sbtest
        --tables="$TABLES" --table-size="$TABLE_SIZE" --rand-type=uniform --report-interval=1)
    local rw= ps rt=- rp=- rz=- rm=- start end a b
    start=$(cpu_sample "$1")
    if [ "$RW_THREADS" -gt 0 ]; then
        "${sb[@]}" --threads="$RW_THREADS" --time=$((MIX_SECONDS + 10)) oltp_read_write run >"$WORK/rw-$1-$2.log" 2>&1 &
        rw=$!
        sleep 5
    fi
    "${sb[@]}" --threads="$PS_THREADS" --time="$MIX_SECONDS" oltp_point_select run >"$WORK/ps-$1-$2.log" 2>&1 &
    ps=$!
    # Where the CPUs went in the steady part of the run: from 3 s after point_select's first
    # report (its connections all made) to its report 5 s before its end.
    wait_for_line "$WORK/ps-$1-$2.log" "^\[ [0-9]+s \]"
    sleep 3; a=$(cpu_sample "$1")
    wait_for_line "$WORK/ps-$1-$2.log" "^\[ $((MIX_SECONDS - 5))s \]"; b=$(cpu_sample "$1")
    wait $ps || true
    if [ -n "$rw" ]; then
        wait $rw || true
        read -r rt rp rz <<<"$(window "$WORK/rw-$1-$2.log" 8 $((MIX_SECONDS + 4)))"
        rm=$(awk '/^ *max:/ { printf "%.1f", $2 / 1000 }' "$WORK/rw-$1-$2.log")
    fi
    end=$(cpu_sample "$1")
    read -r pt _ _ <<<"$(window "$WORK/ps-$1-$2.log" 3 "$MIX_SECONDS")"
    local srv rest idle whole queries
    read -r srv rest idle _ <<<"$(cpu_between "$a" "$b")"
    read -r _ _ _ whole <<<"$(cpu_between "$start" "$end")"
    # The server's work per CPU over the whole run (connecting, serving, closing): the
    # statements both sysbench runs got, per CPU-second the server used from the start of
    # read_write to the end of both (the server's Questions agree with these totals).
    queries=$({ cat "$WORK/ps-$1-$2.log" "$WORK/rw-$1-$2.log" 2>/dev/null || true; } | awk '/^ *queries:/ { q += $2 } END { print q + 0 }')
    # And in the steady seconds: sysbench's rates (a read_write transaction is 20 statements)
    # per CPU the server used.
    echo "round $2 $1 rw_tps=$rt rw_p95_ms=$rp rw_zero_s=$rz rw_max_s=${rm:--} ps_tps=$pt srv_cpus=$srv rest_cpus=$rest idle_pct=$idle" \
        "steady_stmt_per_cpu_s=$(awk -v r="$rt" -v p="$pt" -v c="$srv" 'BEGIN { if (r == "-") r = 0; print (c > 0 && p != "FATAL" && r != "FATAL" ? int((p + 20 * r) / c) : "-") }')" \
        "stmt_per_cpu_s=$(awk -v q="$queries" -v s="$whole" -v p="$pt" 'BEGIN { print (s > 0 && q > 0 && p != "FATAL" ? int(q / s) : "-") }')" | tee -a "$WORK/results.txt"
}
: >"$WORK/results.txt"
each_config_rotating mix_once
median_of() { # name field (over the rounds whose run gave a number; FATAL if none did)
    { grep " $1 " "$WORK/results.txt" || true; } | tr ' ' '\n' | sed -n "s/^$2=//p" | { grep -E '^[0-9.]+$' || true; } | sort -g |
        awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "FATAL")}'
}
read -r first _ <<<"$CONFIGS"; first=${first%%=*}
printf "== medians of %s rounds; ratio = config / %s\n%-10s %8s %10s %9s %8s %9s %8s %9s %14s %13s\n" "$ROUNDS" "$first" config rw_tps rw_p95_ms rw_zero_s rw_max_s ps_tps srv_cpus rest_cpus steady_per_cpu whole_per_cpu
declare -A M
for c in $CONFIGS; do
    n=${c%%=*}
    for f in rw_tps rw_p95_ms rw_zero_s rw_max_s ps_tps srv_cpus rest_cpus steady_stmt_per_cpu_s stmt_per_cpu_s; do M[$n,$f]=$(median_of "$n" $f); done
    printf "%-10s %8s %10s %9s %8s %9s %8s %9s %14s %13s\n" "$n" "${M[$n,rw_tps]}" "${M[$n,rw_p95_ms]}" "${M[$n,rw_zero_s]}" "${M[$n,rw_max_s]}" "${M[$n,ps_tps]}" \
        "${M[$n,srv_cpus]}" "${M[$n,rest_cpus]}" "${M[$n,steady_stmt_per_cpu_s]}" "${M[$n,stmt_per_cpu_s]}"
done
for c in $CONFIGS; do
    n=${c%%=*}
    [ "$n" = "$first" ] && continue
    awk -v n="$n" -v f="$first" -v a="${M[$first,rw_tps]}" -v b="${M[$n,rw_tps]}" -v pa="${M[$first,rw_p95_ms]}" -v pb="${M[$n,rw_p95_ms]}" \
        -v sa="${M[$first,ps_tps]}" -v sb="${M[$n,ps_tps]}" \
        'BEGIN { if (a == "FATAL" || b == "FATAL" || sa == "FATAL" || sb == "FATAL") { print "mix: " n ": a run failed" ; exit }
                 printf "mix: %s/%s read_write tps %.2fx, p95 %.2fx, point_select tps %.2fx\n", n, f, (a > 0 ? b / a : 0), (pa > 0 ? pb / pa : 0), (sa > 0 ? sb / sa : 0) }'
    awk -v n="$n" -v f="$first" -v ea="${M[$first,stmt_per_cpu_s]}" -v eb="${M[$n,stmt_per_cpu_s]}" \
        -v sa="${M[$first,steady_stmt_per_cpu_s]}" -v sb="${M[$n,steady_stmt_per_cpu_s]}" \
        'BEGIN { if (ea > 0 && eb > 0 && sa > 0 && sb > 0) printf "mix: %s/%s statements per server CPU-second: steady seconds %.2fx, whole runs %.2fx\n", n, f, sb / sa, eb / ea }'
done
# Transactions both sysbench runs got from server NAME, over all rounds.
transactions_of() { # name
    cat "$WORK"/ps-"$1"-*.log "$WORK"/rw-"$1"-*.log 2>/dev/null | awk '/transactions:/ { t += $2 } END { printf "%d", t }'
}
finish_configs transactions_of
