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
# failed, e.g. sysbench's 2048 threads not connected within its 30 s). Then the median of
# each per server over the runs that did not fail, and each preloaded
# server's ratio to the first config (native by default).
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
# read_write starts first and runs 10 s longer: point_select starts 5 s later (its 2048
# connections would otherwise hold up read_write's connecting past sysbench's 30 s limit);
# read_write is measured over the seconds both run, after point_select's 3 s of connecting.
mix_once() { # name round
    local sb=(${CLIENT_PIN[@]+"${CLIENT_PIN[@]}"} sysbench --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="${PORT[$1]}" --mysql-user=root --mysql-db=sbtest
        --tables="$TABLES" --table-size="$TABLE_SIZE" --rand-type=uniform --report-interval=1)
    local rw= rt=- rp=- rz=- rm=-
    if [ "$RW_THREADS" -gt 0 ]; then
        "${sb[@]}" --threads="$RW_THREADS" --time=$((MIX_SECONDS + 10)) oltp_read_write run >"$WORK/rw-$1-$2.log" 2>&1 &
        rw=$!
        sleep 5
    fi
    "${sb[@]}" --threads="$PS_THREADS" --time="$MIX_SECONDS" oltp_point_select run >"$WORK/ps-$1-$2.log" 2>&1 || true
    if [ -n "$rw" ]; then
        wait $rw || true
        read -r rt rp rz <<<"$(window "$WORK/rw-$1-$2.log" 8 $((MIX_SECONDS + 4)))"
        rm=$(awk '/^ *max:/ { printf "%.1f", $2 / 1000 }' "$WORK/rw-$1-$2.log")
    fi
    read -r pt _ _ <<<"$(window "$WORK/ps-$1-$2.log" 3 "$MIX_SECONDS")"
    echo "round $2 $1 rw_tps=$rt rw_p95_ms=$rp rw_zero_s=$rz rw_max_s=${rm:--} ps_tps=$pt" | tee -a "$WORK/results.txt"
}
: >"$WORK/results.txt"
each_config_rotating mix_once
median_of() { # name field (over the rounds whose run gave a number; FATAL if none did)
    { grep " $1 " "$WORK/results.txt" || true; } | tr ' ' '\n' | sed -n "s/^$2=//p" | { grep -E '^[0-9.]+$' || true; } | sort -g |
        awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "FATAL")}'
}
read -r first _ <<<"$CONFIGS"; first=${first%%=*}
printf "== medians of %s rounds; ratio = config / %s\n%-10s %10s %12s %10s %10s %10s\n" "$ROUNDS" "$first" config rw_tps rw_p95_ms rw_zero_s rw_max_s ps_tps
declare -A M
for c in $CONFIGS; do
    n=${c%%=*}
    for f in rw_tps rw_p95_ms rw_zero_s rw_max_s ps_tps; do M[$n,$f]=$(median_of "$n" $f); done
    printf "%-10s %10s %12s %10s %10s %10s\n" "$n" "${M[$n,rw_tps]}" "${M[$n,rw_p95_ms]}" "${M[$n,rw_zero_s]}" "${M[$n,rw_max_s]}" "${M[$n,ps_tps]}"
done
for c in $CONFIGS; do
    n=${c%%=*}
    [ "$n" = "$first" ] && continue
    awk -v n="$n" -v f="$first" -v a="${M[$first,rw_tps]}" -v b="${M[$n,rw_tps]}" -v pa="${M[$first,rw_p95_ms]}" -v pb="${M[$n,rw_p95_ms]}" \
        -v sa="${M[$first,ps_tps]}" -v sb="${M[$n,ps_tps]}" \
        'BEGIN { if (a == "FATAL" || b == "FATAL" || sa == "FATAL" || sb == "FATAL") { print "mix: " n ": a run failed" ; exit }
                 printf "mix: %s/%s read_write tps %.2fx, p95 %.2fx, point_select tps %.2fx\n", n, f, (a > 0 ? b / a : 0), (pa > 0 ? pb / pa : 0), (sa > 0 ? sb / sa : 0) }'
done
# Transactions both sysbench runs got from server NAME, over all rounds.
transactions_of() { # name
    cat "$WORK"/ps-"$1"-*.log "$WORK"/rw-"$1"-*.log 2>/dev/null | awk '/transactions:/ { t += $2 } END { printf "%d", t }'
}
finish_configs transactions_of
