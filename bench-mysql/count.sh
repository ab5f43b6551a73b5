#!/usr/bin/env bash
# Counts per query, not timings: what a point_select costs MariaDB in instructions and
# simulated cache misses, native (thread per connection), with its own pool-of-threads
# and preloaded, so that a change to the per-request path is judged by a counted
# figure beside its timing.
#
# User side, under valgrind: each server runs under `valgrind --tool=callgrind
# --cache-sim=yes` (L1s of 32 KB, 8-way, and a 512 KB last level standing for the L2)
# with instrumentation off; sysbench's oltp_point_select connects CONNS connections at
# full speed; once all are connected, their statements prepared and WARM_SECONDS passed,
# `callgrind_control -i on` turns instrumentation on, SETTLE_SECONDS later `-z` zeroes
# the counters (the simulated caches are warm by then), COUNT_SECONDS later `-d` dumps
# them and `-i off` ends the window. (Not --collect-atstart=no: with it `-i on` collects
# nothing.) count_summary.py sums each function's own cost by ELF object and divides by
# the calls of PER: dispatch_command, one per statement in every mode (mysqld_stmt_execute
# and mysql_execute_command 1, alloc_root 42 per query alike; do_command is not: a fiber
# parked inside it and resumed counts as a new call). Those calls per query and the
# server's Questions, read just outside the window, are printed as a check.
# Work done per second rather than per query (the library's monitor, InnoDB's background
# threads) counts per query at valgrind's throughput, a few percent of native's: each
# thread dumps apart (--separate-threads=yes), and the table gives the instructions
# without the library's monitor thread beside those of all threads.
# Not deterministic where timing decides whether a request is already there when its
# thread reads: the library's instructions and the stacks' misses follow the I/O waits
# and parks per query (the table's last column; two runs of one build can differ
# several-fold there: docs/RESULTS.md#counts-follow-waits). Compare rows at like rates.
# The native server is counted only up to NATIVE_MAX_CONNS (64): valgrind runs one
# thread at a time, and 1024 native connection threads spin on it (10x the
# instructions of the other two: no sensible count).
#
# Kernel side, without valgrind (where valgrind cannot see): each server runs normally
# under the same load while `perf stat -p` counts, over PERF_SECONDS, its threads' system
# calls (all and by kind), context switches, the wake-ups they do, IPIs they send and the
# function-call and reschedule IPIs taken while they ran; per query by the server's
# sendto calls in the window (one answer per point_select; its Questions as a check).
#
# Prints both tables (also in $WORK/counts.md), the library's top functions per query by
# instructions and by 512 KB-cache misses, and for each config against the first one at
# the same connection count the functions whose per-query cost differs most.
# Loopback only (the unix socket).
#
#   bash bench-mysql/count.sh
#   CONFIGS="pool old=/tmp/old.so new=target/release/libfiberize.so" CONNS=1024 bash bench-mysql/count.sh
#
# Environment (defaults in brackets): CONFIGS ["pool preloaded=target/release/libfiberize.so
# native"] (as mix.sh: native, pool, NAME=native / NAME=pool, NAME=native+VAR=value,
# NAME=LIB[+VAR=value...]),
# CONNS ["64 1024"], ROUNDS [1] (counted windows per point; the table takes the median),
# COUNT_SECONDS [20], WARM_SECONDS [10], SETTLE_SECONDS [5], NATIVE_MAX_CONNS [64],
# PER [dispatch_command], SERVER_STATS [0] (1: the preloaded servers with FIBERIZE_STATS), VALGRIND [1] (0: the kernel side only), KERNEL [1] (0: no perf
# round), PERF_SECONDS [5],
# TABLES/TABLE_SIZE [4 x 50000], DATA_CACHE [/tmp/fiberize-count-cache],
# SERVER_OPTS [256 MB buffer pool], VG_SERVER_OPTS [no native AIO, 600 s to connect: added
# under valgrind], SERVER_CPUS/CLIENT_CPUS [the first and second half of
# this process's CPUs], START_SECONDS [600] (for the start under valgrind and the
# connections).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CONFIGS=${CONFIGS:-"pool preloaded=$ROOT/target/release/libfiberize.so native"}
# The library as shipped: no stats (they add the queue-wait clock reads to every run).
export SERVER_STATS=${SERVER_STATS:-0}
CONNS=${CONNS:-"64 1024"}; ROUNDS=${ROUNDS:-1}
COUNT_SECONDS=${COUNT_SECONDS:-20}; WARM_SECONDS=${WARM_SECONDS:-10}; SETTLE_SECONDS=${SETTLE_SECONDS:-5}
NATIVE_MAX_CONNS=${NATIVE_MAX_CONNS:-64}; PER=${PER:-dispatch_command}
KERNEL=${KERNEL:-1}; PERF_SECONDS=${PERF_SECONDS:-5}; VALGRIND=${VALGRIND:-1}
TABLES=${TABLES:-4}; TABLE_SIZE=${TABLE_SIZE:-50000}; WAREHOUSES=0; WORKLOADS=sysbench
DATA_CACHE=${DATA_CACHE:-/tmp/fiberize-count-cache}
# A buffer pool's maximum is reserved at start (8 TB by default): valgrind cannot map it.
SERVER_OPTS=${SERVER_OPTS:-"--innodb-buffer-pool-size=256M --innodb-buffer-pool-size-max=256M --innodb-flush-log-at-trx-commit=2"}
LIB=${FIBERIZE_LIB:-$ROOT/target/release/libfiberize.so}
export START_SECONDS=${START_SECONDS:-600}
. bench-mysql/common.sh
split_cpus_by_default count.sh
for tool in valgrind callgrind_control python3; do command -v $tool >/dev/null || { echo "count.sh: $tool missing (apt-get install valgrind)"; exit 1; }; done
[ "$KERNEL" = 0 ] || command -v perf >/dev/null || { echo "count.sh: perf missing (KERNEL=0 skips the kernel side)"; exit 1; }
started=$(date +%s)
require_lib_and_mariadb
pin_from_env count.sh
WORK=$(mktemp -d /tmp/fiberize-count.XXXXXX)
ports_for_configs
SYSBENCH_PID=; perf_pid=
cleanup_all() {
    [ -z "$SYSBENCH_PID" ] || kill "$SYSBENCH_PID" 2>/dev/null || true
    [ -z "$perf_pid" ] || kill "$perf_pid" 2>/dev/null || true
    cleanup
}
trap cleanup_all EXIT
prepare_datadir
echo "== work directory $WORK; oltp_point_select at $CONNS connections, $TABLES x $TABLE_SIZE rows, unix socket"

sql() { # NAME statement -> its result, tab-separated, no headers
    mariadb --no-defaults -S "$WORK/sock-$1" -uroot -N -B -e "$2"
}
status_of() { # NAME variable -> its value in SHOW GLOBAL STATUS
    sql "$1" "show global status like '$2'" | awk '{ print $2 }'
}
# Starts sysbench against NAME with CONNS connections for good (SYSBENCH_PID) and waits
# until the server has them all and their statements prepared (at most START_SECONDS).
start_load() { # NAME CONNS LOG
    local base
    base=$(status_of "$1" Com_stmt_prepare)
    ${CLIENT_PIN[@]+"${CLIENT_PIN[@]}"} sysbench --db-driver=mysql --mysql-socket="$WORK/sock-$1" --mysql-user=root --mysql-db=sbtest \
        --tables="$TABLES" --table-size="$TABLE_SIZE" --rand-type=uniform --db-ps-mode=auto \
        --threads="$2" --time=100000 oltp_point_select run >"$3" 2>&1 &
    SYSBENCH_PID=$!
    local t0 n
    t0=$(date +%s)
    while :; do
        n=$(status_of "$1" Threads_connected 2>/dev/null || echo 0)
        [ "${n:-0}" -gt "$2" ] && break # ours too
        kill -0 "$SYSBENCH_PID" 2>/dev/null || { echo "count.sh: sysbench ended:"; tail -5 "$3"; exit 1; }
        [ $(($(date +%s) - t0)) -lt "$START_SECONDS" ] || { echo "count.sh: only $n of $2 connections after ${START_SECONDS}s"; exit 1; }
        sleep 1
    done
    # Then until sysbench's threads have prepared their statements (COM_STMT_PREPARE is
    # not a Question, but costs system calls and instructions): no prepare for a second.
    local p0 p1
    p1=$(status_of "$1" Com_stmt_prepare)
    while :; do
        sleep 1
        p0=$p1; p1=$(status_of "$1" Com_stmt_prepare)
        [ "$p1" -le "$p0" ] && [ $((p1 - base)) -ge "$2" ] && break
        [ $(($(date +%s) - t0)) -lt "$START_SECONDS" ] || { echo "count.sh: statements still being prepared after ${START_SECONDS}s"; exit 1; }
    done
    echo "   $2 connections and $((p1 - base)) prepared statements in $(($(date +%s) - t0)) s"
}
stop_load() { # NAME
    kill "$SYSBENCH_PID" 2>/dev/null || true
    wait "$SYSBENCH_PID" 2>/dev/null || true
    SYSBENCH_PID=
    for _ in $(seq 1 "$START_SECONDS"); do
        [ "$(status_of "$1" Threads_connected 2>/dev/null || echo 0)" -le 1 ] && return 0
        sleep 1
    done
}
restart_fresh() { # CONFIG: a fresh copy of the prepared datadir, server started
    local n=${1%%=*}
    rm -rf "$WORK/data-$n"
    start_config "$1"
}
is_native() { [ "$(config_kind "$1")" = native ]; }

# The kernel side: each server normally, perf stat over its threads.
EVENTS=()
if [ "$KERNEL" != 0 ]; then
    missing=()
    for ev in raw_syscalls:sys_enter sched:sched_switch sched:sched_wakeup ipi:ipi_send_cpu \
        irq_vectors:call_function_single_entry irq_vectors:reschedule_entry \
        syscalls:sys_enter_recvfrom syscalls:sys_enter_sendto syscalls:sys_enter_read syscalls:sys_enter_write \
        syscalls:sys_enter_epoll_wait syscalls:sys_enter_epoll_ctl syscalls:sys_enter_futex \
        syscalls:sys_enter_poll syscalls:sys_enter_ppoll; do
        if perf stat -e "$ev" -- true >/dev/null 2>&1; then EVENTS+=(-e "$ev"); else missing+=("$ev"); fi
    done
    [ ${#missing[@]} -eq 0 ] || echo "== perf: no tracepoint ${missing[*]} here (left out)"
    : >"$WORK/kernel.txt"
    for c in $CONFIGS; do
        n=${c%%=*}
        restart_fresh "$c"
        for conns in $CONNS; do
            start_load "$n" "$conns" "$WORK/perf-$n-$conns.log"
            # perf opens its counters disabled (with 1024 threads that takes a while) and
            # counts between "enable" and "disable" on its control fifo. The queries are
            # the server's sendto calls in the window: one answer per point_select (1.00
            # per dispatch_command, counted with a uprobe at 64 connections in all three
            # modes). The server's Questions, read just outside, are a check only: they
            # are off by the queries served while SHOW GLOBAL STATUS sums 1024
            # connections (up to 40 %); a uprobe on dispatch_command, tried, slowed the
            # server at 1024 connections and missed most calls.
            # Its command waits for a line on a third fifo: perf prints its counts when
            # the command ends (a background job of a script ignores SIGINT).
            rm -f "$WORK/perf-ctl" "$WORK/perf-ack" "$WORK/perf-end"; mkfifo "$WORK/perf-ctl" "$WORK/perf-ack" "$WORK/perf-end"
            perf stat -x, -p "$(cat "$WORK/pid-$n")" --delay=-1 --control="fifo:$WORK/perf-ctl,$WORK/perf-ack" \
                -o "$WORK/perf-$n-$conns.txt" "${EVENTS[@]}" -- bash -c 'read -r _ <"$0"' "$WORK/perf-end" >/dev/null 2>&1 &
            perf_pid=$!
            exec {ctl}>"$WORK/perf-ctl" {ack}<"$WORK/perf-ack"
            q0=$(status_of "$n" Questions)
            echo enable >&"$ctl"; read -r -u "$ack" _
            sleep "$PERF_SECONDS"
            echo disable >&"$ctl"; read -r -u "$ack" _
            q1=$(status_of "$n" Questions)
            exec {ctl}>&- {ack}<&-
            echo end >"$WORK/perf-end"; wait "$perf_pid" || true; perf_pid=
            stop_load "$n"
            awk -F, -v label="$n@$conns" -v q=$((q1 - q0 - 1)) '$1 ~ /^[0-9]/ { v[$3] = $1 }
                END { printf "%s %d %d", label, v["syscalls:sys_enter_sendto"], q
                      split("raw_syscalls:sys_enter syscalls:sys_enter_recvfrom syscalls:sys_enter_sendto syscalls:sys_enter_read syscalls:sys_enter_write syscalls:sys_enter_epoll_wait syscalls:sys_enter_epoll_ctl syscalls:sys_enter_futex syscalls:sys_enter_poll syscalls:sys_enter_ppoll sched:sched_switch sched:sched_wakeup ipi:ipi_send_cpu irq_vectors:call_function_single_entry irq_vectors:reschedule_entry", e, " ")
                      for (i = 1; i in e; i++) printf " %s", (e[i] in v ? v[e[i]] : "-")
                      print "" }' "$WORK/perf-$n-$conns.txt" | tee -a "$WORK/kernel.txt"
        done
        stop_mariadb "$n"
    done
fi

# The user side: each server under callgrind, one start per config.
VG=(valgrind --tool=callgrind --cache-sim=yes --I1=32768,8,64 --D1=32768,8,64 --LL=524288,8,64
    --instr-atstart=no --max-threads=4000 --separate-threads=yes --callgrind-out-file="$WORK/callgrind.out")
# Under valgrind: no io_uring (a thread blocked in io_uring_enter holds valgrind's one
# running thread: the server hangs in InnoDB's start), and handshakes given time.
VG_SERVER_OPTS=${VG_SERVER_OPTS:-"--innodb-use-native-aio=0 --connect-timeout=600"}
JSONS=()
for c in $CONFIGS; do
    [ "$VALGRIND" != 0 ] || break
    n=${c%%=*}
    todo=""
    for conns in $CONNS; do
        if is_native "$c" && [ "$conns" -gt "$NATIVE_MAX_CONNS" ]; then
            echo "== $n@$conns not counted: native connection threads spin under valgrind (NATIVE_MAX_CONNS=$NATIVE_MAX_CONNS)"
            continue
        fi
        todo+=" $conns"
    done
    [ -n "$todo" ] || continue
    t0=$(date +%s)
    VG[${#VG[@]} - 1]=--callgrind-out-file="$WORK/callgrind-$n.out"
    SERVER_WRAP=("${VG[@]}"); plain_opts=$SERVER_OPTS; SERVER_OPTS="$SERVER_OPTS $VG_SERVER_OPTS"
    restart_fresh "$c"
    SERVER_WRAP=(); SERVER_OPTS=$plain_opts
    pid=$(cat "$WORK/pid-$n")
    echo "== $n under callgrind: started in $(($(date +%s) - t0)) s"
    for r in $(seq "$ROUNDS"); do
        for conns in $todo; do
            start_load "$n" "$conns" "$WORK/count-$n-$conns-$r.log"
            sleep "$WARM_SECONDS"
            callgrind_control -i on "$pid" >/dev/null
            sleep "$SETTLE_SECONDS"
            # The Questions are read outside the window: SHOW GLOBAL STATUS sums every
            # connection's counters (millions of instructions, a tenth of a 5 s window).
            q0=$(status_of "$n" Questions)
            callgrind_control -z "$pid" >/dev/null
            sleep "$COUNT_SECONDS"
            callgrind_control -d "$pid" >/dev/null
            q1=$(status_of "$n" Questions)
            callgrind_control -i off "$pid" >/dev/null
            stop_load "$n"
            # One file per thread (--separate-threads=yes), the window's only dump so far.
            mkdir -p "$WORK/callgrind-$n-$conns-$r"
            mv "$WORK/callgrind-$n.out".* "$WORK/callgrind-$n-$conns-$r/"
            if [ "$(config_kind "$c")" = pool ]; then
                echo "   pool threads at the end: $(status_of "$n" Threadpool_threads)"
            fi
            python3 bench-mysql/count_summary.py summarize "$WORK/callgrind-$n-$conns-$r"/* --label "$n@$conns" \
                --per "$PER" --questions $((q1 - q0 - 1)) --json "$WORK/count-$n-$conns-$r.json"
            JSONS+=("$WORK/count-$n-$conns-$r.json")
        done
    done
    stop_mariadb "$n"
done

{
    if [ ${#JSONS[@]} -gt 0 ]; then
        echo "## instructions and simulated misses per query (callgrind; $PER calls as queries)"
        echo
        # Rows by connection count, configs in their order.
        ordered=()
        for conns in $CONNS; do for j in "${JSONS[@]}"; do [[ $j = *-$conns-[0-9]*.json ]] && ordered+=("$j"); done; done
        python3 bench-mysql/count_summary.py table "${ordered[@]}"
    fi
    if [ "$KERNEL" != 0 ]; then
        echo
        echo "## the kernel side per query (perf stat -p over ${PERF_SECONDS} s, no valgrind; queries: the server's sendto calls, one answer each)"
        echo
        echo "| per query | system calls | recvfrom / sendto / read / write | epoll_wait / epoll_ctl / futex / poll / ppoll | context switches | wake-ups done | IPIs sent | IPIs taken: call-function-single / reschedule | queries (Questions per query) |"
        echo "|---|---|---|---|---|---|---|---|---|"
        for conns in $CONNS; do
            awk -v conns="$conns" 'function f(x) { return x == "-" ? "–" : sprintf("%.2f", x / q) }
                $1 ~ "@" conns "$" { q = $2; if (q <= 0) { print "| " $1 " | no queries |"; next }
                    printf "| %s | %s | %s / %s / %s / %s | %s / %s / %s / %s / %s | %s | %s | %s | %s / %s | %d (%.3f) |\n",
                        $1, f($4), f($5), f($6), f($7), f($8), f($9), f($10), f($11), f($12), f($13), f($14), f($15), f($16), f($17), f($18), q, $3 / q }' "$WORK/kernel.txt"
        done
    fi
} | tee "$WORK/counts.md"
trap - EXIT
cleanup
rm -rf "$WORK"/data-*
echo "== $(($(date +%s) - started)) s in all; dumps, logs and counts.md in $WORK"
