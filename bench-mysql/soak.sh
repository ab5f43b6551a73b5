#!/usr/bin/env bash
# Soak (issue 11): a preloaded MariaDB under mixed load for DURATION seconds, then a
# crash under write load. Loopback only, datadir in a temp dir.
#
#   DURATION=1800 bench-mysql/soak.sh          # 30 minutes; default 600 (10 minutes)
#
# During DURATION, all at once:
#   * sysbench oltp_point_select at PS_THREADS connections (default 2048),
#   * sysbench oltp_read_write at RW_THREADS connections (default 256),
#   * connect/disconnect churn: short connections, one query each, CHURN_CLIENTS loops,
#   * KILL QUERY / KILL CONNECTION from a second client against victim sessions
#     (sessions sitting in SELECT SLEEP(), so that no sysbench connection is killed),
#   * a deterministic ledger workload: LEDGER_CLIENTS clients apply fixed lists of
#     single-statement transfers between accounts and log each one in a second table;
#     every final balance, the total and the log are known in advance,
#   * a fiber dump (FIBERIZE_DUMP_SIGNAL) every DUMP_EVERY seconds, and the stall
#     watchdog (FIBERIZE_WATCHDOG=5) writing to a file.
# Then: the ledger's balances, total and log are compared with the expected ones;
# the server is killed with -9 while sysbench writes and a client records every
# acknowledged autocommit insert; it restarts (preloaded) and every acknowledged row
# must be there.
#
# One summary line:
#   soak: M minutes, T transactions, E errors, S stalls, L lost commits (details...)
# errors: failed sysbench runs, failed churn connections, failed ledger clients, ledger
# mismatches, failed dumps; stalls: 1-second intervals in which neither sysbench run
# completed a transaction (after the first 2 seconds, spent connecting); seconds in
# which one run alone completed none are reported in the details; lost commits:
# acknowledged rows missing after the crash. Deadlock retries of read_write (InnoDB aborts some
# transactions natively too) are reported separately. Exit status 0 only if errors,
# stalls and lost commits are all 0.
# Each stall is also printed with the server's CPU use, the machine's load and the nearest
# dump in that second (WORK/samples, one line a second), to tell a server that stood still
# from a machine that did.
#
# Environment: DURATION (600), PS_THREADS (2048), RW_THREADS (256), CHURN_CLIENTS (2),
# LEDGER_CLIENTS (4), LEDGER_OPS (ops per ledger client, 2000), DUMP_EVERY (30),
# TABLES/TABLE_SIZE (4 x 10000), FIBERIZE_LIB, EXTRA_ENV (more VAR=value for the server).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LIB=${FIBERIZE_LIB:-$ROOT/target/release/libfiberize.so}
DURATION=${DURATION:-600}
PS_THREADS=${PS_THREADS:-2048}
RW_THREADS=${RW_THREADS:-256}
CHURN_CLIENTS=${CHURN_CLIENTS:-2}
LEDGER_CLIENTS=${LEDGER_CLIENTS:-4}
LEDGER_OPS=${LEDGER_OPS:-2000}
LEDGER_ACCOUNTS=100
DUMP_EVERY=${DUMP_EVERY:-30}
TABLES=${TABLES:-4}
TABLE_SIZE=${TABLE_SIZE:-10000}
. bench-mysql/common.sh  # the scripts run from the repository root (cd above)
require_lib_and_mariadb

WORK=$(mktemp -d /tmp/fiberize-soak.XXXXXX)
declare -A PORT=([srv]=$(free_port))
SRV_PORT=${PORT[srv]}
SRV_PID=
BG=()
cleanup() {
    for p in "${BG[@]}"; do kill "$p" >/dev/null 2>&1; done
    [ -n "$SRV_PID" ] && kill -9 "$SRV_PID" >/dev/null 2>&1
    [ "${KEEP_WORK:-0}" = 1 ] && echo "soak: work dir kept: $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT
die() { echo "soak: FAILED: $*"; tail -20 "$WORK"/err-*.log; KEEP_WORK=1; exit 1; }

CLI=(mariadb --no-defaults -h127.0.0.1 -P$SRV_PORT -uroot)
start_server() { # log-tag: a fresh log for each start of the one datadir
    # shellcheck disable=SC2206 # EXTRA_ENV is a list of words
    local SERVER_ENV=(FIBERIZE_DUMP_SIGNAL=12 FIBERIZE_WATCHDOG=5 FIBERIZE_WATCHDOG_FILE="$WORK/watchdog.txt" ${EXTRA_ENV:-})
    SERVER_OPTS="--max-connections=$((PS_THREADS + RW_THREADS + 300)) --innodb-buffer-pool-size=256M" START_SECONDS=120 \
        start_mariadb srv preload "$1"
    SRV_PID=$MARIADB_PID
}

install_datadir "$WORK/data-srv" || die "install-db"
start_server 1
"${CLI[@]}" -e "create database sbtest; create database ledger;
    create table ledger.accounts (id int primary key, balance bigint not null) engine=innodb;
    create table ledger.log (client int, seq int, primary key (client, seq)) engine=innodb;
    create table sbtest.acked (id int primary key) engine=innodb" || die "schema"
"${CLI[@]}" -e "insert into ledger.accounts select seq, 1000 from ledger.seq_1_to_$LEDGER_ACCOUNTS" || die "accounts"
SB=(sysbench --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port=$SRV_PORT --mysql-user=root --mysql-db=sbtest
    --tables=$TABLES --table-size=$TABLE_SIZE --rand-type=uniform)
"${SB[@]}" --threads=4 oltp_read_write prepare >/dev/null || die "prepare"

# The ledger scripts and the balances they must give (transfers commute, so the final
# state does not depend on how the clients interleave).
for c in $(seq 1 "$LEDGER_CLIENTS"); do
    awk -v c=$c -v n=$LEDGER_OPS -v accts=$LEDGER_ACCOUNTS 'BEGIN {
        srand(c * 7919);
        for (i = 1; i <= n; i++) {
            a = 1 + int(rand() * accts); b = 1 + int(rand() * accts); x = 1 + int(rand() * 50);
            if (a == b) b = a % accts + 1;
            printf "update accounts set balance = balance + case id when %d then %d when %d then %d end where id in (%d, %d);\n", a, -x, b, x, a, b;
            printf "insert into log values (%d, %d);\n", c, i;
            printf "%d %d\n", a, -x > "/dev/stderr"; printf "%d %d\n", b, x > "/dev/stderr";
        }
    }' >"$WORK/ledger-$c.sql" 2>"$WORK/ledger-$c.delta"
done
cat "$WORK"/ledger-*.delta | awk -v accts=$LEDGER_ACCOUNTS '{ d[$1] += $2 }
    END { for (i = 1; i <= accts; i++) print i, 1000 + d[i] }' >"$WORK/ledger-expected"

echo "soak: $((DURATION / 60)) min: point_select x$PS_THREADS, read_write x$RW_THREADS, churn x$CHURN_CLIENTS, kills, ledger x$LEDGER_CLIENTS, dump every ${DUMP_EVERY}s (work dir $WORK)"
start=$(date +%s)
end=$((start + DURATION))
"${SB[@]}" --threads=$PS_THREADS --time=$DURATION --report-interval=1 oltp_point_select run >"$WORK/ps.log" 2>&1 &
PS_PID=$!; BG+=($PS_PID)
"${SB[@]}" --threads=$RW_THREADS --time=$DURATION --report-interval=1 oltp_read_write run >"$WORK/rw.log" 2>&1 &
RW_PID=$!; BG+=($RW_PID)
for c in $(seq 1 "$CHURN_CLIENTS"); do
    ( ok=0 bad=0
      while [ "$(date +%s)" -lt $end ]; do
          if "${CLI[@]}" -N -e "select 1" >/dev/null 2>&1; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
      done
      echo "$ok $bad" >"$WORK/churn-$c" ) &
    BG+=($!)
done
# Victims: sessions in SELECT SLEEP(), to be killed; they end early or late, never fail
# the run. The killer alternates KILL QUERY and KILL CONNECTION on them.
( while [ "$(date +%s)" -lt $end ]; do "${CLI[@]}" -e "select sleep(20), 'soak-victim'" >/dev/null 2>&1; done ) &
BG+=($!)
( while [ "$(date +%s)" -lt $end ]; do "${CLI[@]}" -e "select sleep(20), 'soak-victim'" >/dev/null 2>&1; done ) &
BG+=($!)
( kills=0 kill_errors=0 k=0
  while [ "$(date +%s)" -lt $end ]; do
      sleep 1
      id=$("${CLI[@]}" -N -e "select id from information_schema.processlist where info like '%soak-victim%' and info not like '%processlist%' limit 1" 2>/dev/null)
      [ -n "$id" ] || continue
      k=$((k + 1)); what=QUERY; [ $((k % 2)) = 0 ] && what=CONNECTION
      out=$("${CLI[@]}" -e "kill $what $id" 2>&1)
      # "Unknown thread id": the victim ended on its own meanwhile.
      if [ -z "$out" ] || grep -q "Unknown thread" <<<"$out"; then kills=$((kills + 1)); else kill_errors=$((kill_errors + 1)); fi
  done
  echo "$kills $kill_errors" >"$WORK/kills" ) &
BG+=($!)
# One line a second, to tell a stall of the server from a stall of the machine:
# second, server CPU (% of one CPU, from /proc/PID/stat), machine busy (% of all CPUs,
# /proc/stat), processes runnable machine-wide, 1-minute load.
( prev_srv=0 prev_busy=0 prev_total=0
  while [ "$(date +%s)" -lt $end ] && kill -0 $SRV_PID 2>/dev/null; do
      read -r -a st </proc/$SRV_PID/stat 2>/dev/null || break
      srv=$((st[13] + st[14]))
      read -r _ u n sy idle iow irq sirq steal _ </proc/stat
      busy=$((u + n + sy + irq + sirq + steal)); total=$((busy + idle + iow))
      running=$(awk '/^procs_running/ { print $2 }' /proc/stat); read -r load _ </proc/loadavg
      if [ $prev_total -gt 0 ] && [ $total -gt $prev_total ]; then
          echo "$(($(date +%s) - start)) $((srv - prev_srv)) $((100 * (busy - prev_busy) / (total - prev_total))) $running $load"
      fi
      prev_srv=$srv prev_busy=$busy prev_total=$total
      sleep 1
  done >"$WORK/samples" ) &
BG+=($!)
LEDGER_PIDS=()
for c in $(seq 1 "$LEDGER_CLIENTS"); do
    ( "${CLI[@]}" ledger <"$WORK/ledger-$c.sql" >"$WORK/ledger-$c.out" 2>&1; echo $? >"$WORK/ledger-$c.rc" ) &
    LEDGER_PIDS+=($!); BG+=($!)
done
dumps=0
while [ "$(date +%s)" -lt $end ]; do
    sleep "$DUMP_EVERY"
    [ "$(date +%s)" -lt $end ] || break
    kill -12 $SRV_PID 2>/dev/null && dumps=$((dumps + 1)) && echo $(($(date +%s) - start)) >>"$WORK/dump-times"
    kill -0 $SRV_PID 2>/dev/null || die "server died"
done
# sysbench ends on its own after DURATION; give it a minute, then call it a hang.
hung=0
for p in $PS_PID $RW_PID; do
    for _ in $(seq 1 60); do kill -0 $p 2>/dev/null || break; sleep 1; done
    kill -0 $p 2>/dev/null && { hung=$((hung + 1)); gdb -p $SRV_PID -batch -ex 'thread apply all bt' >"$WORK/hang.txt" 2>&1; kill -9 $p; }
done
# Everything but the server ends by itself now (victims within their 20 s sleep).
for p in "${BG[@]}"; do wait "$p" 2>/dev/null; done
BG=()

tx_ps=$(awk '/transactions:/ { print $2 }' "$WORK/ps.log"); tx_rw=$(awk '/transactions:/ { print $2 }' "$WORK/rw.log")
retries=$(awk '/ignored errors:/ { print $3 }' "$WORK/rw.log")
# Per-second tps of both runs, by second: a stall is a second in which the server
# completed no transaction at all; seconds in which read_write alone completed none
# are counted apart (256 writers on 40 000 rows queue on InnoDB row locks: natively
# too, on the 2-vCPU machine, while the server serves hundreds of queries a second).
per_second() { awk '/^\[ [0-9]+s \]/ { s = $2 + 0; for (i = 1; i <= NF; i++) if ($i == "tps:") t = $(i + 1) + 0; print s, t }' "$1"; }
per_second "$WORK/ps.log" >"$WORK/ps.tps"; per_second "$WORK/rw.log" >"$WORK/rw.tps"
stalls=$(awk 'NR == FNR { ps[$1] = $2; next } $1 > 2 && ($1 in ps) && ps[$1] + $2 == 0 { z++ } END { print z + 0 }' "$WORK/ps.tps" "$WORK/rw.tps")
rw_zero=$(awk '$1 > 2 && $2 == 0 { z++ } END { print z + 0 }' "$WORK/rw.tps")
ps_zero=$(awk '$1 > 2 && $2 == 0 { z++ } END { print z + 0 }' "$WORK/ps.tps")
errors=$hung
# Each stall with the machine's state around it (samples: see above) and the nearest dump.
awk 'NR == FNR { ps[$1] = $2; next } $1 > 2 && ($1 in ps) && ps[$1] + $2 == 0 { print $1 }' "$WORK/ps.tps" "$WORK/rw.tps" |
    while read -r s; do
        line=$(awk -v s="$s" '$1 == s { printf "server %d%% of a CPU, machine %d%% busy, %d runnable, load %s", $2, $3, $4, $5 }' "$WORK/samples")
        dump=$(awk -v s="$s" '{ d = s - $1; if (d < 0) d = -d; if (best == "" || d < best) best = d } END { print best }' "$WORK/dump-times" 2>/dev/null)
        echo "soak: stall at ${s}s: ${line:-no sample}; nearest dump ${dump:-?} s away"
    done
[ -n "$tx_ps" ] || { errors=$((errors + 1)); tx_ps=0; echo "soak: point_select run failed:"; tail -5 "$WORK/ps.log"; }
[ -n "$tx_rw" ] || { errors=$((errors + 1)); tx_rw=0; echo "soak: read_write run failed:"; tail -5 "$WORK/rw.log"; }
churn_ok=0
for f in "$WORK"/churn-*; do read -r ok bad <"$f"; churn_ok=$((churn_ok + ok)); errors=$((errors + bad)); done
read -r kills kill_errors <"$WORK/kills" || { kills=0; kill_errors=1; }
errors=$((errors + kill_errors))

# Ledger: every client finished, balances, total and log as computed in advance.
ledger_bad=0
for c in $(seq 1 "$LEDGER_CLIENTS"); do
    [ "$(cat "$WORK/ledger-$c.rc" 2>/dev/null)" = 0 ] || { ledger_bad=$((ledger_bad + 1)); echo "soak: ledger client $c failed:"; tail -3 "$WORK/ledger-$c.out"; }
done
"${CLI[@]}" -N -e "select id, balance from ledger.accounts order by id" | tr '\t' ' ' >"$WORK/ledger-actual"
cmp -s "$WORK/ledger-expected" "$WORK/ledger-actual" || { ledger_bad=$((ledger_bad + 1)); echo "soak: ledger balances differ from the expected ones"; }
read -r total log_rows log_sum <<<"$("${CLI[@]}" -N -e "select (select sum(balance) from ledger.accounts), count(*), sum(seq) from ledger.log")"
[ "$total" = $((LEDGER_ACCOUNTS * 1000)) ] || { ledger_bad=$((ledger_bad + 1)); echo "soak: ledger total $total"; }
[ "$log_rows" = $((LEDGER_CLIENTS * LEDGER_OPS)) ] && [ "$log_sum" = $((LEDGER_CLIENTS * LEDGER_OPS * (LEDGER_OPS + 1) / 2)) ] ||
    { ledger_bad=$((ledger_bad + 1)); echo "soak: ledger log has $log_rows rows (sum $log_sum)"; }
errors=$((errors + ledger_bad))
dumps_printed=$(grep -c "fiber dump:" "$WORK/err-srv1.log" "$WORK/out-srv1.log" 2>/dev/null | awk -F: '{ s += $2 } END { print s + 0 }')
[ "$dumps_printed" -ge "$dumps" ] || errors=$((errors + dumps - dumps_printed))
watchdog=$(grep -c "fiberize: watchdog" "$WORK/watchdog.txt" 2>/dev/null); watchdog=${watchdog:-0}
minutes=$(awk -v s=$start -v e="$(date +%s)" 'BEGIN { printf "%.1f", (e - s) / 60 }')

# Crash under write load: every acknowledged autocommit insert must survive kill -9.
"${SB[@]}" --threads=8 --time=60 oltp_write_only run >/dev/null 2>&1 &
LOAD=$!; BG+=($LOAD)
: >"$WORK/acked"
( for i in $(seq 1 1000000); do
      "${CLI[@]}" -e "insert into sbtest.acked values ($i)" 2>/dev/null && echo $i >>"$WORK/acked" || break
  done ) &
INS=$!; BG+=($INS)
sleep 5
kill -9 $SRV_PID
wait $SRV_PID 2>/dev/null
SRV_PID=
wait $INS 2>/dev/null
kill $LOAD 2>/dev/null; wait $LOAD 2>/dev/null
BG=()
n_acked=$(wc -l <"$WORK/acked")
start_server 2
"${CLI[@]}" -N -e "select id from sbtest.acked" | sort -n >"$WORK/present"
lost=$(sort -n "$WORK/acked" | comm -23 - "$WORK/present" | wc -l)
[ "$n_acked" -gt 0 ] || { errors=$((errors + 1)); echo "soak: no insert acknowledged before the crash"; }
"${CLI[@]}" -e "select 1" >/dev/null || errors=$((errors + 1))
mariadb-admin --no-defaults -h127.0.0.1 -P$SRV_PORT -uroot shutdown >/dev/null 2>&1
for _ in $(seq 1 120); do kill -0 $SRV_PID 2>/dev/null || break; sleep 0.5; done
SRV_PID=

echo "soak: $minutes minutes, $((tx_ps + tx_rw)) transactions, $errors errors, $stalls stalls, $lost lost commits" \
    "(point_select $tx_ps with $ps_zero seconds at 0 tps, read_write $tx_rw with $rw_zero seconds at 0 tps and" \
    "${retries:-0} deadlock retries, $churn_ok short connections," \
    "$kills kills, ledger $((LEDGER_CLIENTS * LEDGER_OPS)) transfers checked, $dumps_printed dumps, $watchdog watchdog reports," \
    "$n_acked acknowledged inserts before kill -9)"
if [ "$errors" = 0 ] && [ "$stalls" = 0 ] && [ "$lost" = 0 ]; then exit 0; fi
KEEP_WORK=1
exit 1
