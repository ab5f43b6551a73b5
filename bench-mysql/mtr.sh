#!/usr/bin/env bash
# MariaDB's own test suite (mariadb-test-run, Debian package mariadb-test) against the
# installed mariadbd, natively and then with mariadbd under LD_PRELOAD=libfiberize.so:
# the same test list, the same options, one after the other; then a table
# (test, native result, preloaded result, times) and totals.
#
#   bash bench-mysql/mtr.sh          # main suite + ~120 others, ~13 minutes a run on 2 cores
#   MTR_TESTS="main.kill main.lock_multi" bash bench-mysql/mtr.sh
#   MTR_TESTS="--suite=innodb,binlog" bash bench-mysql/mtr.sh    # whole suites
#
# Environment: FIBERIZE_LIB (default target/release/libfiberize.so, built if missing),
# MTR_PARALLEL (2), MTR_CASE_TIMEOUT (minutes per test, 2), MTR_SUITE_TIMEOUT (minutes,
# 40), MTR_OUT (/tmp/fiberize-mtr: vardirs native/ and preload/, MTR output, table),
# MTR_ONLY=native|preload (one side only), MTR_EXTRA (more mtr options, both runs).
# The preloaded servers get FIBERIZE_STATS=1 (a stats line in each error log at exit,
# which also proves the library was loaded) and FIBERIZE_DUMP_SIGNAL=12: a watchdog
# sends SIGUSR2 to a worker's servers when one test has run for 75% of the test timeout,
# and copies the fiber dump it produces (and a gdb 'thread apply all bt') to
# $MTR_OUT/dumps/. Not SIGUSR1: mariadbd installs its own SIGUSR1 handler at startup,
# replacing the library's, so FIBERIZE_DUMP_SIGNAL=10 never dumps in mariadbd.
# Exit status: 0 when no test that passes natively fails (or is missing) preloaded.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LIB=${FIBERIZE_LIB:-$ROOT/target/release/libfiberize.so}
PAR=${MTR_PARALLEL:-2}
CASE_TO=${MTR_CASE_TIMEOUT:-2}
SUITE_TO=${MTR_SUITE_TIMEOUT:-40}
OUT=${MTR_OUT:-/tmp/fiberize-mtr}
ONLY=${MTR_ONLY:-}

if [ ! -f "$LIB" ]; then
    cargo build --release -p interpose >/dev/null || { echo "mtr: cannot build $LIB"; exit 1; }
fi
[ -x /usr/sbin/mariadbd ] || { echo "mtr: mariadb-server is not installed"; exit 1; }
find_mtr() {
    local d
    for d in /usr/share/mysql/mysql-test /usr/share/mariadb/mariadb-test /usr/share/mariadb-test /usr/share/mysql-test; do
        [ -f "$d/mariadb-test-run.pl" ] && { echo "$d"; return 0; }
        [ -f "$d/mysql-test-run.pl" ] && { echo "$d"; return 0; }
    done
    dpkg -L mariadb-test 2>/dev/null | grep -E '/(mariadb|mysql)-test-run\.pl$' | head -1 | xargs -r dirname
}
MTR_DIR=$(find_mtr)
if [ -z "$MTR_DIR" ]; then
    echo "mtr: installing mariadb-test"
    DEBIAN_FRONTEND=noninteractive apt-get install -y mariadb-test >/dev/null 2>&1 ||
        { apt-get update >/dev/null 2>&1; DEBIAN_FRONTEND=noninteractive apt-get install -y mariadb-test >/dev/null 2>&1; }
    MTR_DIR=$(find_mtr)
fi
[ -n "$MTR_DIR" ] || { echo "mtr: mariadb-test-run.pl not found"; exit 1; }
MTR=$MTR_DIR/mariadb-test-run.pl
[ -f "$MTR" ] || MTR=$MTR_DIR/mysql-test-run.pl

# The whole main suite (~1300 tests, ~1100 of them run here: the rest need a debug
# build, --big-test, a non-root user or Windows; ~8 minutes on 2 cores), plus tests of
# the other suites that threads, locks, KILL, timeouts, signals, replication threads,
# group commit and InnoDB's background threads exercise (~5 minutes).
MAIN_TESTS=$(cd "$MTR_DIR/main" && ls *.test | sed 's/\.test$//; s/^/main./')
OTHER_TESTS="
innodb.innodb innodb.innodb-lock innodb.innodb_lock_wait_timeout_1 innodb.deadlock_detect
innodb.deadlock_report innodb.trx_deadlock innodb.innodb-timeout
innodb.innodb_timeout_rollback innodb.innodb-autoinc innodb.innodb-xa innodb.xa_recovery
innodb.purge innodb.monitor innodb.skip_locked_nowait innodb.snapshot_isolation_race
innodb.innodb-semi-consistent innodb.innodb_i_s_innodb_locks innodb.innodb_i_s_innodb_trx
innodb.row_lock innodb.lock_release innodb.alter_kill innodb.innodb_bug51920
innodb.innodb_row_lock_time_ms innodb.log_file_size_online innodb.innodb_bug42419
innodb.innodb_mysql_rbk innodb.innodb_stats_drop_locked innodb.lock_insert_into_empty
innodb.create_table_insert_skip_locked innodb.implicit_gap_lock_convertion
innodb.temporary_table innodb.foreign_key innodb.innodb-index innodb.innodb_defrag_stats
innodb.innodb_force_recovery innodb.read_only_recovery innodb.encryption_threads_shutdown
innodb.instant_alter_rollback innodb_fts.fulltext
rpl.rpl_row_basic_3innodb rpl.rpl_start_stop_slave rpl.rpl_heartbeat_basic rpl.rpl_semi_sync
rpl.rpl_semi_sync_wait_point rpl.rpl_gtid_stop_start rpl.rpl_gtid_basic rpl.rpl_get_lock
rpl.rpl_master_pos_wait rpl.kill_hard-6290 rpl.rpl_slave_max_statement_time
rpl.rpl_xa_survive_disconnect rpl.rpl_parallel_optimistic_xa rpl.rpl_parallel_multilevel2
rpl.rpl_parallel_autoinc rpl.rpl_semi_sync_after_sync rpl.rpl_semi_sync_master_shutdown
rpl.rpl_semi_sync_gtid_reconnect rpl.rpl_stop_slave_error rpl.show_status_stop_slave_race-7126
rpl.rpl_stm_start_stop_slave rpl.rpl_semi_sync_ssl_stop
binlog.binlog_killed binlog.binlog_stm_binlog binlog.binlog_commit_wait
binlog.binlog_mysqlbinlog_stop_never binlog.temptable_uservar_disconnect-7938
binlog.binlog_xa_prepared_disconnect binlog.binlog_autocommit_off_no_hang
binlog.binlog_expire_logs_seconds
binlog.binlog_parallel_replication_marks_row binlog.binlog_row_binlog rpl.rpl_semi_sync_event
perfschema.threads_mysql perfschema.global_read_lock perfschema.socket_instances_func
perfschema.mdl_func perfschema.socket_summary_by_instance_func perfschema.stage_mdl_table
perfschema.transaction perfschema.connect_attrs perfschema.processlist_acl
"
read -r -a TESTS <<<"$(echo ${MTR_TESTS:-$MAIN_TESTS $OTHER_TESTS})"

mkdir -p "$OUT"
COMMON=(--parallel="$PAR" --force --max-test-fail=0 --retry=0 --testcase-timeout="$CASE_TO"
        --suite-timeout="$SUITE_TO" --shutdown-timeout=20 ${MTR_EXTRA:-})
PRELOAD=(--mysqld-env=LD_PRELOAD="$LIB" --mysqld-env=GLIBC_TUNABLES=glibc.pthread.rseq=0
         --mysqld-env=FIBERIZE_STATS=1 --mysqld-env=FIBERIZE_DUMP_SIGNAL=12)

# Watchdog for the preloaded run: a mariadb-test process (the client that runs one test)
# older than 75% of the test timeout means a test about to time out: SIGUSR2 the
# preloaded mariadbd processes of that MTR worker (same --defaults-file) and keep what
# they print (the fiber dump goes to stderr = the error log).
watchdog() { # vardir
    local vardir=$1 limit=$((CASE_TO * 60 * 3 / 4)) pid age cnf srv log before test n=0
    local -A seen=()
    mkdir -p "$OUT/dumps"
    while sleep 5; do
        for pid in $(pgrep -x mariadb-test 2>/dev/null; pgrep -x mysqltest 2>/dev/null); do
            [ -n "${seen[$pid]:-}" ] && continue
            age=$(ps -o etimes= -p "$pid" 2>/dev/null | tr -d ' ')
            [ -n "$age" ] && [ "$age" -ge "$limit" ] || continue
            seen[$pid]=1
            cnf=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | sed -n 's/^--defaults-file=//p' | head -1)
            case "$cnf" in "$vardir"/*) ;; *) continue ;; esac
            test=$(tr '\0' '\n' <"/proc/$pid/cmdline" | sed -n 's/^--test-file=//p' | head -1)
            n=$((n + 1))
            echo "== watchdog: $test running ${age}s (mariadb-test pid $pid, $cnf)" >"$OUT/dumps/hang-$n.txt"
            for srv in $(pgrep -x mariadbd 2>/dev/null); do
                tr '\0' '\n' <"/proc/$srv/cmdline" 2>/dev/null | grep -qxF -- "--defaults-file=$cnf" || continue
                grep -q libfiberize "/proc/$srv/maps" 2>/dev/null || continue
                log=$(readlink "/proc/$srv/fd/2" 2>/dev/null)
                before=0
                [ -f "$log" ] && before=$(wc -c <"$log")
                kill -USR2 "$srv" 2>/dev/null
                sleep 2
                {
                    echo "== mariadbd pid $srv $(tr '\0' '\n' <"/proc/$srv/cmdline" | grep -- --defaults-group-suffix) log $log"
                    [ -f "$log" ] && tail -c +$((before + 1)) "$log"
                    if command -v gdb >/dev/null; then
                        echo "== gdb thread apply all bt (OS threads: workers, donors, plain threads)"
                        timeout 60 gdb -p "$srv" -batch -nx -ex "set pagination off" -ex "thread apply all bt 30" 2>&1 |
                            grep -E '^(Thread|#)'
                    fi
                } >>"$OUT/dumps/hang-$n.txt"
            done
        done
    done
}

run_mtr() { # native|preload
    local mode=$1 vardir=$OUT/$1 wd= rc
    rm -rf "$vardir"
    local extra=()
    [ "$mode" = preload ] && extra=("${PRELOAD[@]}")
    echo "mtr: $mode run: ${#TESTS[@]} tests, parallel $PAR, vardir $vardir"
    echo "mtr: $MTR --vardir=$vardir ${COMMON[*]} ${extra[*]} <tests>" >"$OUT/$mode.cmd"
    if [ "$mode" = preload ]; then
        rm -rf "$OUT/dumps"
        watchdog "$vardir" &
        wd=$!
    fi
    local t0=$SECONDS
    (cd "$MTR_DIR" && perl "$MTR" --vardir="$vardir" "${COMMON[@]}" "${extra[@]}" "${TESTS[@]}") \
        >"$OUT/$mode.out" 2>&1 </dev/null
    rc=$?
    [ -n "$wd" ] && { kill "$wd" 2>/dev/null; wait "$wd" 2>/dev/null; }
    echo "mtr: $mode run: exit $rc after $((SECONDS - t0)) s; $(grep -E '^(Completed|Failed|Too many)' "$OUT/$mode.out" | head -1)"
}

# "main.select 'nm'   w1 [ pass ]   826" -> "main.select 'nm'|pass|826"
results() { # mtr output
    grep -E "\[ (pass|fail|skipped|disabled) \]" "$1" |
        sed -E "s/^(\S+( '[^']*')?)\s+(w[0-9]+ )?\[ (\w+) \]\s*(.*)$/\1|\4|\5/" |
        awk -F'|' '{ r[$1] = $2; c[$1] = $3 } END { for (t in r) print t "|" r[t] "|" c[t] }' | sort
}

[ "$ONLY" != preload ] && run_mtr native
[ "$ONLY" != native ] && run_mtr preload

for m in native preload; do
    if [ -f "$OUT/$m.out" ]; then results "$OUT/$m.out" >"$OUT/$m.res"; else : >"$OUT/$m.res"; fi
done

if [ -d "$OUT/preload" ]; then
    loaded=$(grep -rh "fiberize: stats" "$OUT/preload" --include='*.err' 2>/dev/null | wc -l)
    echo "mtr: preloaded servers that printed fiberize stats at exit: $loaded"
    [ "$loaded" -gt 0 ] || echo "mtr: WARNING: no fiberize stats line in any preloaded error log (library not loaded?)"
fi

# The table: every test either run reported.
: >"$OUT/diff.res"
{
    printf "%-50s %-8s %7s  %-8s %7s  %s\n" test native ms preload ms note
    cut -d'|' -f1 "$OUT/native.res" "$OUT/preload.res" | sort -u |
        while IFS= read -r t; do
            n=$(grep -F -- "$t|" "$OUT/native.res" | head -1)
            p=$(grep -F -- "$t|" "$OUT/preload.res" | head -1)
            nr=$(echo "$n" | cut -d'|' -f2); nc=$(echo "$n" | cut -d'|' -f3-)
            pr=$(echo "$p" | cut -d'|' -f2); pc=$(echo "$p" | cut -d'|' -f3-)
            nr=${nr:-not-run}; pr=${pr:-not-run}
            nt=; pt=; note=
            if [[ "$nc" =~ ^[0-9]+$ ]]; then nt=$nc; elif [ "$nr" != pass ] && [ -n "$nc" ]; then note="native: $nc"; fi
            if [[ "$pc" =~ ^[0-9]+$ ]]; then pt=$pc; elif [ "$pr" != pass ] && [ -n "$pc" ]; then note="$note${note:+; }preload: $pc"; fi
            if [ "$nr" != "$pr" ]; then
                note="<< $note"
                echo "$t|$nr|$pr" >>"$OUT/diff.res"
            fi
            printf "%-50s %-8s %7s  %-8s %7s  %s\n" "$t" "$nr" "$nt" "$pr" "$pt" "$note"
        done
} >"$OUT/table.txt"
cat "$OUT/table.txt"

echo
for m in native preload; do
    [ -s "$OUT/$m.res" ] || continue
    printf "mtr: totals %-7s: %s\n" "$m" "$(cut -d'|' -f2 "$OUT/$m.res" | sort | uniq -c | awk '{ printf "%s %s  ", $2, $1 }')"
done
regressions=$(awk -F'|' '$2 == "pass"' "$OUT/diff.res" | wc -l)
echo "mtr: differing tests: $(wc -l <"$OUT/diff.res") (pass natively, not preloaded: $regressions)"
ls "$OUT/dumps" 2>/dev/null | grep -q . && echo "mtr: fiber dumps of tests near their timeout: $OUT/dumps/"
echo "mtr: logs: $OUT/{native,preload}.out, failed tests' logs under $OUT/{native,preload}/"
[ "$regressions" = 0 ]
