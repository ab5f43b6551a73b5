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
# Per run, over the steady seconds (wall-clock seconds in which every connection of both
# is up; counted by the server's TCP sockets, see mix_once): read_write tps, the median of
# its per-second p95 (ms) there, its seconds at 0 tps, point_select tps; the seconds
# point_select took to connect its PS_THREADS (ps_connect_s) and the window's length
# (steady_s); over the whole read_write run, its longest transaction in seconds (rw_max_s:
# a stall outside the window, e.g. while point_select's 2048 connections close, shows only
# there); FATAL for a run that failed (e.g. sysbench's 2048 threads not connected within
# its 30 s); the CPUs the server used in the window and the rest of the machine's busy
# CPUs (srv_cpus, rest_cpus: the two should add up to the CPUs there are, less
# idle_pct); and in the window and over the whole run, the statements the server served
# per CPU-second it used (steady_stmt_per_cpu_s; stmt_per_cpu_s from sysbench's totals,
# with the connecting and closing of every connection).
# Before each run the servers are let go quiet (common.sh's quiesce_servers). Then the median
# of each per server over the runs that did not fail, and each preloaded server's ratio to
# the first config (native by default).
#
# Environment (defaults in brackets): CONFIGS ["native new=target/release/libfiberize.so"]
# (native: mariadbd as shipped; NAME=native: a second one, a control; NAME=LIB: preloaded with LIB; NAME=LIB+VAR=value+...: with
# VAR=value in that server's environment too, e.g. one=LIB+FIBERIZE_TUNE=poll_per_worker=0), ROUNDS [3], MIX_SECONDS [90],
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

# The measurement (issue 27). Every rate below is counted by the kernel in
# wall-clock seconds in which all PS_THREADS + RW_THREADS connections are up, not taken
# from sysbench's per-second reports: on the saturated 2-vCPU machine a native run's
# reports were printed seconds late and in bursts (point_select's first one at its
# [18s]-[23s] when connecting its 2048 took that long), and read_write's window by its
# labels covered the seconds while point_select was still connecting. In the seconds when
# both ran at full strength a native server gave read_write ~70 tps, not the ~350 its
# reports had suggested (perf stat of the clients' sendto calls, 2026-11-26).
#
# "uptime rw_statements ps_statements rw_conns ps_conns" now: the statements the server
# has received so far on the connections from read_write's client ports (file RWPORTS)
# and on the others, as its TCP sockets count them (`ss -i` data_segs_in: each sysbench
# statement is one small request, one data segment), and how many of each are up.
RT=(); chrt -f 50 true 2>/dev/null && RT=(chrt -f 50)
conn_sample() { # name rwports_file
    ${RT[@]+"${RT[@]}"} ss -Htin state established "( sport = :${PORT[$1]} )" 2>/dev/null |
        ${RT[@]+"${RT[@]}"} awk -v rwf="$2" 'BEGIN { while ((getline p < rwf) > 0) rw[p] = 1; getline t < "/proc/uptime"; split(t, u, " ") }
            $1 ~ /^[0-9]+$/ && NF >= 4 { n = split($4, a, ":"); cls = (a[n] in rw) ? "rw" : "ps"; c[cls]++; next }
            { if (match($0, /data_segs_in:[0-9]+/)) s[cls] += substr($0, RSTART + 13, RLENGTH - 13) }
            END { printf "%s %d %d %d %d\n", u[1], s["rw"], s["ps"], c["rw"], c["ps"] }'
}
# The client ports of server NAME's connections now, one per line.
client_ports() { # name
    ss -Htn state established "( sport = :${PORT[$1]} )" | awk '{ n = split($4, a, ":"); print a[n] }'
}
# Polls conn_sample every half second (at most LIMIT seconds) until at least RW and PS
# connections are up; prints the last sample.
wait_for_conns() { # name rwports_file rw ps limit_s
    local s t0=$SECONDS
    while :; do
        s=$(conn_sample "$1" "$2")
        read -r _ _ _ nrw nps <<<"$s"
        if [ "$nrw" -ge "$3" ] && [ "$nps" -ge "$4" ]; then break; fi
        [ $((SECONDS - t0)) -ge "$5" ] && break
        sleep 0.5
    done
    echo "$s"
}
# The median of read_write's per-second p95 (ms) in LOG over its reports for the uptimes
# FROM..TO, read_write having started at uptime START (its labels are its own seconds
# since it started; its 256 connections are made in about a second, so these are close
# to wall-clock seconds).
rw_p95_between() { # from to start log
    awk -v from="$1" -v to="$2" -v start="$3" 'BEGIN { from = int(from - start); to = int(to - start) }
         /^\[ [0-9]+s \]/ { s = $2 + 0; if (s < from || s > to) next
            for (i = 1; i <= NF; i++) if ($i == "(ms,95%):") lat[++n] = $(i + 1) + 0 }
         END { if (n == 0) { print "-"; exit } asort(lat); printf "%.1f\n", lat[int((n + 1) / 2)] }' "$4"
}
# "seconds server_ticks busy_ticks idle_ticks" now: the clock (/proc/uptime), the CPU
# time server NAME's process used, the machine's busy and idle time, read by one awk at
# real-time priority where chrt may (root): on the saturated machine a plain shell waits
# seconds between two commands.
cpu_sample() { # name
    local pid
    pid=$(cat "$WORK/pid-$1")
    ${RT[@]+"${RT[@]}"} awk 'FILENAME == "/proc/uptime" { t = $1 } FILENAME ~ /^\/proc\/[0-9]+\/stat$/ { s = $14 + $15 }
        FILENAME == "/proc/stat" && /^cpu / { b = $2 + $3 + $4 + $7 + $8 + $9; i = $5 + $6 } END { print t, s, b, i }' \
        /proc/uptime "/proc/$pid/stat" /proc/stat 2>/dev/null
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
# read_write starts first (its connections made before point_select's 2048 would hold
# them past sysbench's 30 s limit) and runs 10 s longer. The steady window: from 3 s
# after every connection of both is up to point_select's planned end less 3 s (or read_write's,
# or the first connection to close), sampled once a second: read_write tps (its statements
# / 20), its seconds at 0, point_select tps, and the server's CPU. ps_connect_s: seconds
# from point_select's start until its PS_THREADS connections were all up.
mix_once() { # name round
    local sb=(${CLIENT_PIN[@]+"${CLIENT_PIN[@]}"} sysbench --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="${PORT[$1]}" --mysql-user=root --mysql-db=sbtest
        --tables="$TABLES" --table-size="$TABLE_SIZE" --rand-type=uniform --report-interval=1)
    local rw= ps ports="$WORK/rwports-$1-$2" rt=- rp=- rz=- rm=- pt=FATAL cs=FATAL steady=- start end a b t_rw= t_ps s now nrw nps rwt wstmts=0 f0= f1= r0 r1
    : >"$ports"
    start=$(cpu_sample "$1")
    if [ "$RW_THREADS" -gt 0 ]; then
        read -r t_rw _ </proc/uptime
        "${sb[@]}" --threads="$RW_THREADS" --time=$((MIX_SECONDS + 10)) oltp_read_write run >"$WORK/rw-$1-$2.log" 2>&1 &
        rw=$!
        wait_for_conns "$1" "$ports" 0 "$RW_THREADS" 30 >/dev/null
        client_ports "$1" >"$ports"
        sleep 2
    fi
    read -r t_ps _ </proc/uptime
    "${sb[@]}" --threads="$PS_THREADS" --time="$MIX_SECONDS" oltp_point_select run >"$WORK/ps-$1-$2.log" 2>&1 &
    ps=$!
    s=$(wait_for_conns "$1" "$ports" "$RW_THREADS" "$PS_THREADS" "$MIX_SECONDS")
    read -r now _ _ nrw nps <<<"$s"
    if [ "$nrw" -ge "$RW_THREADS" ] && [ "$nps" -ge "$PS_THREADS" ]; then
        cs=$(awk -v a="$t_ps" -v b="$now" 'BEGIN { printf "%.1f", b - a }')
        sleep 3
        a=$(cpu_sample "$1"); s=$(conn_sample "$1" "$ports"); b=$a
        local first=$s last=$s zero=0 limit
        limit=$(awk -v p="$t_ps" -v r="${t_rw:-$t_ps}" -v m="$MIX_SECONDS" 'BEGIN { e = p + m - 3; f = r + m + 7; print (e < f ? e : f) }')
        read -r _ r1 _ <<<"$s"
        while :; do
            sleep 1
            s=$(conn_sample "$1" "$ports")
            r0=$r1; read -r now r1 _ nrw nps <<<"$s"
            # The window ends at the last sample with every connection up.
            [ "$nrw" -ge "$RW_THREADS" ] && [ "$nps" -ge "$PS_THREADS" ] || break
            last=$s; b=$(cpu_sample "$1")
            [ "$RW_THREADS" -gt 0 ] && [ "$r1" = "$r0" ] && zero=$((zero + 1))
            awk -v n="$now" -v l="$limit" 'BEGIN { exit !(n >= l) }' && break
        done
        # "seconds ps_tps rw_tps statements from_uptime to_uptime" of the window.
        read -r steady pt rwt wstmts f0 f1 <<<"$(awk -v p="$first" -v q="$last" 'BEGIN { split(p, x, " "); split(q, y, " "); w = y[1] - x[1]
            if (w <= 0) { print "0 FATAL FATAL 0", x[1], y[1]; exit }
            printf "%.1f %.1f %.1f %d %.2f %.2f\n", w, (y[3] - x[3]) / w, (y[2] - x[2]) / 20 / w, y[2] - x[2] + y[3] - x[3], x[1], y[1] }')"
        if [ "$RW_THREADS" -gt 0 ]; then
            rt=$rwt; rz=$zero
        fi
    fi
    wait $ps || true
    if [ -n "$rw" ]; then
        wait $rw || true
        [ "$cs" != FATAL ] && rp=$(rw_p95_between "$f0" "$f1" "$t_rw" "$WORK/rw-$1-$2.log")
        # (A run that failed gets none: its read_write ran beside no point_select.)
        [ "$cs" != FATAL ] && rm=$(awk '/^ *max:/ { printf "%.1f", $2 / 1000 }' "$WORK/rw-$1-$2.log")
    fi
    end=$(cpu_sample "$1")
    local srv=- rest=- idle=- wcpu=- whole queries
    [ "$cs" != FATAL ] && read -r srv rest idle wcpu <<<"$(cpu_between "$a" "$b")"
    read -r _ _ _ whole <<<"$(cpu_between "$start" "$end")"
    # The server's work per CPU over the whole run (connecting, serving, closing): the
    # statements both sysbench runs got, per CPU-second the server used from the start of
    # read_write to the end of both (the server's Questions agree with these totals).
    queries=$({ cat "$WORK/ps-$1-$2.log" "$WORK/rw-$1-$2.log" 2>/dev/null || true; } | awk '/^ *queries:/ { q += $2 } END { print q + 0 }')
    echo "round $2 $1 rw_tps=$rt rw_p95_ms=$rp rw_zero_s=$rz rw_max_s=${rm:--} ps_tps=$pt ps_connect_s=$cs steady_s=$steady srv_cpus=$srv rest_cpus=$rest idle_pct=$idle" \
        "steady_stmt_per_cpu_s=$(awk -v q="${wstmts:-0}" -v c="$wcpu" 'BEGIN { print (c > 0 && q > 0 ? int(q / c) : "-") }')" \
        "stmt_per_cpu_s=$(awk -v q="$queries" -v s="$whole" -v p="$pt" 'BEGIN { print (s > 0 && q > 0 && p != "FATAL" ? int(q / s) : "-") }')" | tee -a "$WORK/results.txt"
}
: >"$WORK/results.txt"
each_config_rotating mix_once
median_of() { # name field (over the rounds whose run gave a number; FATAL if none did)
    { grep " $1 " "$WORK/results.txt" || true; } | tr ' ' '\n' | sed -n "s/^$2=//p" | { grep -E '^[0-9.]+$' || true; } | sort -g |
        awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "FATAL")}'
}
read -r first _ <<<"$CONFIGS"; first=${first%%=*}
printf "== medians of %s rounds; ratio = config / %s\n%-10s %8s %10s %9s %8s %9s %10s %9s %8s %9s %14s %13s\n" "$ROUNDS" "$first" config rw_tps rw_p95_ms rw_zero_s rw_max_s ps_tps ps_connect_s steady_s srv_cpus rest_cpus steady_per_cpu whole_per_cpu
declare -A M
for c in $CONFIGS; do
    n=${c%%=*}
    for f in rw_tps rw_p95_ms rw_zero_s rw_max_s ps_tps ps_connect_s steady_s srv_cpus rest_cpus steady_stmt_per_cpu_s stmt_per_cpu_s; do M[$n,$f]=$(median_of "$n" $f); done
    printf "%-10s %8s %10s %9s %8s %9s %10s %9s %8s %9s %14s %13s\n" "$n" "${M[$n,rw_tps]}" "${M[$n,rw_p95_ms]}" "${M[$n,rw_zero_s]}" "${M[$n,rw_max_s]}" "${M[$n,ps_tps]}" \
        "${M[$n,ps_connect_s]}" "${M[$n,steady_s]}" \
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
