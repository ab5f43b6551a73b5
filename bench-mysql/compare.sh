#!/usr/bin/env bash
# bench-mysql as a product: MariaDB servers {native, pool-of-threads, preloaded} x
# clients {native, preloaded} over sysbench oltp_point_select, oltp_read_write and
# TPC-C (bench-mysql/tpcc, --no-wait), at a list of connection counts (TPC-C:
# terminals), several rounds; writes results.csv (every round), summary.csv and
# results.md (medians) and one PNG per workload (throughput and p95/p90 latency vs
# connections, one line per server x client) into OUT. Loopback only, datadirs in /tmp.
#
#   bench-mysql/compare.sh [--quick]
#
# Environment (defaults in brackets):
#   CONNECTIONS ["2 4 8 16 32 64 128 256 512 1024"]    --quick: "4 64 256"
#   WORKLOADS   ["oltp_point_select oltp_read_write tpcc"]
#   SERVERS     ["native pool preload"]   CLIENTS ["native preload"]
#   SECONDS_PER_RUN [10] (--quick: 5), TPCC_SECONDS [= SECONDS_PER_RUN], ROUNDS [3] (--quick: 1)
#   WAREHOUSES [10] (TPC-C database), TABLES/TABLE_SIZE [4 x 10000] (sysbench)
#   SERVER_OPTS ["--innodb-buffer-pool-size=2G --innodb-flush-log-at-trx-commit=2"]
#   SERVER_CPUS / CLIENT_CPUS: taskset lists (both or neither) to pin servers and clients apart
#   DATA_CACHE: a directory keeping the prepared datadir between invocations (the TPC-C
#               load of 10 warehouses takes minutes); reused when its parameters match
#   OUT [bench-mysql/results/DATE]
# Rounds: each (workload, connections) point runs every configuration once per round,
# the order of the servers rotating by round, so that a noisy stretch of a shared
# machine hits all of them alike; the tables show the median of the rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LIB=${FIBERIZE_LIB:-$ROOT/target/release/libfiberize.so}

if [ "${1:-}" = "--quick" ]; then
    CONNECTIONS=${CONNECTIONS:-"4 64 256"}; SECONDS_PER_RUN=${SECONDS_PER_RUN:-5}; ROUNDS=${ROUNDS:-1}
fi
CONNECTIONS=${CONNECTIONS:-"2 4 8 16 32 64 128 256 512 1024"}
WORKLOADS=${WORKLOADS:-"oltp_point_select oltp_read_write tpcc"}
SERVERS=${SERVERS:-"native pool preload"}
CLIENTS=${CLIENTS:-"native preload"}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
TPCC_SECONDS=${TPCC_SECONDS:-$SECONDS_PER_RUN}
ROUNDS=${ROUNDS:-3}
WAREHOUSES=${WAREHOUSES:-10}
TABLES=${TABLES:-4}
TABLE_SIZE=${TABLE_SIZE:-10000}
SERVER_OPTS=${SERVER_OPTS:-"--innodb-buffer-pool-size=2G --innodb-flush-log-at-trx-commit=2"}
OUT=${OUT:-$ROOT/bench-mysql/results/$(date -u +%Y-%m-%d-%H%M)}

CSV=$OUT/results.csv
if [ "${1:-}" = "--replot" ]; then
    # The tables and plots again from DIR/results.csv (several runs' CSVs may be concatenated
    # there, with their meta*.txt beside it); the lists come from the CSV.
    OUT=${2:?usage: compare.sh --replot DIR}; CSV=$OUT/results.csv
    col() { tail -n +2 "$CSV" | cut -d, -f"$1" | awk '!seen[$0]++' | tr '\n' ' '; }
    WORKLOADS=$(col 1); SERVERS=$(col 2); CLIENTS=$(col 3)
    CONNECTIONS=$(tail -n +2 "$CSV" | cut -d, -f4 | sort -n -u | tr '\n' ' ')
    ROUNDS=$(tail -n +2 "$CSV" | cut -d, -f5 | sort -n | tail -1)
    WORK=$(mktemp -d /tmp/fiberize-compare.XXXXXX)
    trap 'rm -rf "$WORK"' EXIT
else
need=()
[ -x /usr/sbin/mariadbd ] || need+=(mariadb-server mariadb-client)
command -v sysbench >/dev/null 2>&1 || need+=(sysbench)
command -v mariadb_config >/dev/null 2>&1 || need+=(libmariadb-dev)
command -v gnuplot >/dev/null 2>&1 || need+=(gnuplot-nox)
if [ ${#need[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
    (systemctl stop mariadb || service mariadb stop) >/dev/null 2>&1 || true
fi
[ -f "$LIB" ] || cargo build --release -p interpose
bash bench-mysql/tpcc/build.sh
TPCC=$ROOT/target/tpcc/tpcc

. bench-mysql/common.sh # the scripts run from the repository root (cd above)
require_lib_and_mariadb
pin_from_env compare.sh
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/fiberize-compare.XXXXXX)
declare -A PORT
for s in $SERVERS prepare; do
    PORT[$s]=$(free_port)
    for o in "${!PORT[@]}"; do [ "$o" = "$s" ] || [ "${PORT[$o]}" != "${PORT[$s]}" ] || PORT[$s]=$((PORT[$s] + 1)); done
done
cleanup() {
    for s in "${!PORT[@]}"; do stop_mariadb "$s"; done
    rm -rf "$WORK"
}
trap cleanup EXIT

prepare_datadir # -> $WORK/data-prepare, copied for each server
for s in $SERVERS; do
    cp -a "$WORK/data-prepare" "$WORK/data-$s"
    start_mariadb "$s" "$s"
done

client_env() { # client-mode -> the env prefix of a client
    [ "$1" = preload ] && echo env LD_PRELOAD="$LIB" GLIBC_TUNABLES=glibc.pthread.rseq=0
    return 0
}
# One run -> "throughput latency_ms cpu_us_per_txn errors" (FATAL as throughput when it failed).
run_sysbench() { # workload server client connections
    local t0 out cpu
    TIMEFORMAT='%U %S'
    # shellcheck disable=SC2046 # client_env prints words without spaces inside
    out=$( { time "${CLIENT_PIN[@]}" $(client_env "$3") sysbench --db-driver=mysql --mysql-host=127.0.0.1 \
        --mysql-port="${PORT[$2]}" --mysql-user=root --mysql-db=sbtest --tables="$TABLES" --table-size="$TABLE_SIZE" \
        --threads="$4" --time="$SECONDS_PER_RUN" --rand-type=uniform --percentile=95 "$1" run 2>&1; } 2>&1) || true
    cpu=$(tail -1 <<<"$out" | awk '{print $1 + $2}')
    grep -q "transactions:" <<<"$out" && ! grep -q FATAL <<<"$out" || echo "$out" >"$OUT/failed-$1-$2-$3-$4.log"
    awk -v cpu="$cpu" '/transactions:/ { gsub("[(]", "", $3); tps=$3; n=$2 } /ignored errors:/ { err=$3 }
        /95th percentile:/ { p95=$3 } /FATAL/ { fatal=1 }
        END { if (fatal || n == 0) print "FATAL 0 0 0"; else printf "%s %s %.0f %d\n", tps, p95, cpu * 1e6 / n, err }' <<<"$out"
}
run_tpcc() { # server client terminals
    # shellcheck disable=SC2046
    "${CLIENT_PIN[@]}" $(client_env "$2") "$TPCC" run -P "${PORT[$1]}" -w "$WAREHOUSES" -t "$3" -d "$TPCC_SECONDS" \
        --ramp 2 --no-wait --report 1000 2>"$OUT/tpcc-$1-$2-$3.stderr" |
        awk '/^RESULT/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); r[kv[1]] = kv[2] } ok=1 }
             END { if (!ok) print "FATAL 0 0 0"; else print r["tpmC"], r["p90_new_order_ms"], r["cpu_us_per_txn"], r["errors"] }'
}

echo "workload,server,client,connections,round,throughput,latency_ms,cpu_us_per_txn,errors" >"$CSV"
read -r -a server_list <<<"$SERVERS"
total=0; for _ in $WORKLOADS; do for _ in $CONNECTIONS; do total=$((total + ${#server_list[@]} * $(wc -w <<<"$CLIENTS") * ROUNDS)); done; done
done_runs=0
for w in $WORKLOADS; do
    for c in $CONNECTIONS; do
        for r in $(seq "$ROUNDS"); do
            k=$(( (r - 1) % ${#server_list[@]} ))
            order=("${server_list[@]:$k}" "${server_list[@]:0:$k}")
            for client in $CLIENTS; do
                for s in "${order[@]}"; do
                    if [ "$w" = tpcc ]; then res=$(run_tpcc "$s" "$client" "$c"); else res=$(run_sysbench "$w" "$s" "$client" "$c"); fi
                    read -r tput lat cpu err <<<"$res"
                    echo "$w,$s,$client,$c,$r,$tput,$lat,$cpu,$err" >>"$CSV"
                    done_runs=$((done_runs + 1))
                    printf "[%d/%d] %-18s server %-8s client %-8s %5s conns round %d: %s %s, %s ms, %s us/txn, %s errors\n" \
                        "$done_runs" "$total" "$w" "$s" "$client" "$c" "$r" "$tput" "$([ "$w" = tpcc ] && echo tpmC || echo tps)" \
                        "$lat" "$cpu" "$err"
                done
            done
        done
    done
done
# TPC-C's consistency conditions 1-4 on every server the TPC-C runs went to.
CHECKS=""
if [[ " $WORKLOADS " = *" tpcc "* ]]; then
    for s in $SERVERS; do
        if "$TPCC" check -P "${PORT[$s]}" -w "$WAREHOUSES" >"$WORK/check-$s.log" 2>&1; then CHECKS+=" $s: ok;"; else
            CHECKS+=" $s: FAILED;"; cat "$WORK/check-$s.log"; fi
    done
    echo "== tpcc check after the runs:$CHECKS"
fi
for s in $SERVERS; do stop_mariadb "$s"; done
    {
        echo "Median of $ROUNDS round(s), ${SECONDS_PER_RUN} s per sysbench run ($TABLES tables x $TABLE_SIZE rows, uniform)$(
            [[ " $WORKLOADS " = *" tpcc "* ]] && echo ", TPC-C ${TPCC_SECONDS} s after a 2 s ramp with \`--no-wait\` on $WAREHOUSES warehouses").
Server options: \`$SERVER_OPTS\`. Pinning: servers ${SERVER_CPUS:-unpinned}, clients ${CLIENT_CPUS:-unpinned}.
Machine: $(nproc) CPUs ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)), $(uname -r); $(date -u '+%Y-%m-%d %H:%M UTC').$(
            [ -n "$CHECKS" ] && echo "
TPC-C consistency conditions 1-4 after all runs (\`tpcc check\`):$CHECKS")"
    } >"$OUT/meta.txt"
fi

# Medians over the rounds (a FATAL round counts as 0 throughput).
SUMMARY=$OUT/summary.csv
echo "workload,server,client,connections,throughput,latency_ms,cpu_us_per_txn,errors" >"$SUMMARY"
tail -n +2 "$CSV" | sort -t, -k1,1 -k2,2 -k3,3 -k4,4n | awk -F, '
    function median(list,   n, a, i, j, t) {
        n = split(list, a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        return a[int((n + 1) / 2)]
    }
    function flush() { if (key != "") printf "%s,%s,%s,%s,%d\n", key, median(tp), median(lat), median(cpu), err }
    { k = $1 "," $2 "," $3 "," $4
      if (k != key) { flush(); key = k; tp = lat = cpu = ""; err = 0 }
      tp = tp " " ($6 == "FATAL" ? 0 : $6); lat = lat " " $7; cpu = cpu " " $8; err += $9 }
    END { flush() }' >>"$SUMMARY"

machine="$(nproc) CPUs ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo))"
stamp="$(date -u -r "$CSV" '+%Y-%m-%d %H:%M UTC')"
MD=$OUT/results.md
{
    echo "# bench-mysql/compare.sh, $stamp"
    echo
    echo "Cells: throughput (sysbench: transactions/s; TPC-C: tpmC) / latency (sysbench p95, TPC-C New-Order p90, ms) /"
    echo "client CPU per transaction (us). Servers: native = thread per connection, pool = \`thread_handling=pool-of-threads\`,"
    echo "preload = thread per connection under libfiberize.so. Errors (summed over rounds) are shown when not 0; a failed"
    echo "run (0 in the table) left its output in failed-*.log / tpcc-*.stderr beside this file."
    for meta in "$OUT"/meta*.txt; do [ -f "$meta" ] && { echo; cat "$meta"; }; done
    for w in $WORKLOADS; do
        echo
        echo "## $w"
        echo
        header="| connections |"; rule="|---|"
        for s in $SERVERS; do for client in $CLIENTS; do header+=" server $s, client $client |"; rule+="---|"; done; done
        echo "$header"; echo "$rule"
        for c in $CONNECTIONS; do
            line="| $c |"
            for s in $SERVERS; do
                for client in $CLIENTS; do
                    line+=$(awk -F, -v w="$w" -v s="$s" -v cl="$client" -v c="$c" '$1 == w && $2 == s && $3 == cl && $4 == c {
                        if ($5 == 0) printf " failed |"; else printf " %s / %s / %s%s |", $5, $6, $7, ($8 > 0 ? " (" $8 " errors)" : "") }' "$SUMMARY")
                done
            done
            echo "$line"
        done
        echo
        echo "![$w]($w.png)"
    done
} >"$MD"

# One PNG per workload: throughput, latency and client CPU per transaction against
# connections (log2 axis); the colour is the server, a dashed line a preloaded client.
declare -A COLOUR=([native]="#d62728" [pool]="#1f77b4" [preload]="#2ca02c")
for w in $WORKLOADS; do
    plots=()
    for s in $SERVERS; do
        for client in $CLIENTS; do
            dat=$WORK/$w-$s-$client.dat
            awk -F, -v w="$w" -v s="$s" -v cl="$client" '$1 == w && $2 == s && $3 == cl && $5 > 0 { print $4, $5, $6, $7 }' "$SUMMARY" >"$dat"
            plots+=("'$dat' using 1:COLUMN with linespoints lw 2 lc rgb '${COLOUR[$s]:-black}' dt $([ "$client" = preload ] && echo 2 || echo 1) title 'server $s, client $client'")
        done
    done
    ylabel=$([ "$w" = tpcc ] && echo "tpmC (New-Orders per minute)" || echo "transactions/s")
    latlabel=$([ "$w" = tpcc ] && echo "New-Order p90 (ms)" || echo "p95 latency (ms)")
    series() { local IFS=,; echo "${plots[*]//COLUMN/$1}"; }
    gnuplot <<EOF
set terminal pngcairo size 1500,520 font "sans,10" noenhanced
set output "$OUT/$w.png"
set multiplot layout 1,3 title "$w: MariaDB server x client, $machine, $stamp (median of $ROUNDS)"
set logscale x 2
set xlabel "connections"
set grid
set key bottom left box opaque
set ylabel "$ylabel"
set yrange [0:*]
plot $(series 2)
unset key
set logscale y
set yrange [*:*]
set ylabel "$latlabel (log scale)"
plot $(series 3)
unset logscale y
set yrange [0:*]
set ylabel "client CPU per transaction (us)"
plot $(series 4)
unset multiplot
EOF
done
find "$OUT" -name '*.stderr' -empty -delete
echo "== results in $OUT: results.csv (every round), summary.csv, results.md, $(cd "$OUT" && ls ./*.png | tr '\n' ' ')"
cat "$MD"
