#!/usr/bin/env bash
# The synthetic request server (test-apps/c/bench_request.c): one handler served three
# ways, side by side in interleaved rounds (the order rotating by round):
#   native     thread-per-connection, blocking read/write, no preload
#   preloaded  the same server under LD_PRELOAD=libfiberize.so
#   pool       an epoll worker pool shaped like MariaDB's thread pool, no preload
# for the plain handler and the group-commit handler (COMMIT=1), at each connection
# count. The server runs on SERVER_CPUS, the native epoll load generator on CLIENT_CPUS
# (taskset). Per configuration the medians of: requests/s, p95, the server's CPU per
# request (utime+stime of /proc/PID/stat across the load's measured window) and its
# context switches per request (every thread's /proc/PID/task/TID/status); then the
# ratios preloaded/native, pool/native and preloaded/pool.
#
#   bash scripts/bench-request.sh
#   ROUNDS=1 SECONDS_PER_RUN=2 CONNS="64 1024" bash scripts/bench-request.sh   # a smoke run
#
# Environment (defaults in brackets): CONNS ["64 1024 10000"], HANDLERS ["plain commit"],
# ROUNDS [5], SECONDS_PER_RUN [5], SERVER_CPUS [0], CLIENT_CPUS [1], STACK_KB [16],
# MALLOCS [8] (the handler's work, passed to the server);
# SYSCALLS=1: one more run per configuration under `perf record -e raw_syscalls:sys_enter`
# on the server's CPUs, printing the server's system calls per request by kind;
# PROFILE=1: one more run per configuration under `perf record -e cpu-clock`, printing the
# share of the server's samples per object (libfiberize.so, the kernel, libc, the server).
# Both record whole CPUs (`perf record -C`, root or kernel.perf_event_paranoid <= 0) and
# keep the server's samples; the load switches perf on and off around its window through
# perf's control fifo. KEEP_WORK=1 keeps the work folder (perf.data, logs) for a look.
# Native at a count the kernel cannot carry (threads, pid_max, vm.max_map_count) or
# beyond the descriptor limit is skipped with a line saying why.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p interpose >/dev/null 2>&1 || cargo build --release -p interpose
LIB=$PWD/target/release/libfiberize.so
WORK=$(mktemp -d /tmp/fiberize-request.XXXXXX)
SERVER_PID=
PERF_PID=
cleanup() {
    [ -z "$PERF_PID" ] || kill -INT "$PERF_PID" 2>/dev/null || true
    [ -z "$SERVER_PID" ] || kill -9 "$SERVER_PID" 2>/dev/null || true
    [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
BIN=$WORK/bench_request
cc -O2 -pthread -o "$BIN" test-apps/c/bench_request.c -ldl
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
CONNS=${CONNS:-"64 1024 10000"}
HANDLERS=${HANDLERS:-"plain commit"}
ROUNDS=${ROUNDS:-5}
SECS=${SECONDS_PER_RUN:-5}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
CONFIGS=(native preloaded pool)
export STACK_KB=${STACK_KB:-16} MALLOCS=${MALLOCS:-8}

# How many threads this machine lets the thread-per-connection server have.
thread_room() {
    local max pids users
    max=$(cat /proc/sys/kernel/threads-max)
    pids=$(cat /proc/sys/kernel/pid_max)
    users=$(ulimit -u)
    [ "$users" = unlimited ] && users=$max
    local room=$max
    for l in "$pids" "$users"; do [ "$l" -lt "$room" ] && room=$l; done
    echo $((room - $(ls /proc/*/task 2>/dev/null | grep -c '^[0-9]')))
}

# runnable CONFIG CONNS: whether this machine can carry it, or why not (on stderr).
runnable() {
    local fds; fds=$(ulimit -n)
    if [ "$fds" != unlimited ] && [ "$fds" -lt $(($2 + 64)) ]; then
        echo "bench-request: $1 @$2 skipped: the descriptor limit is $fds" >&2; return 1
    fi
    if [ "$1" = native ] && [ "$(thread_room)" -lt $(($2 + 64)) ]; then
        echo "bench-request: native @$2 skipped: threads-max, pid_max and ulimit -u leave room for $(thread_room) more threads" >&2; return 1
    fi
    if [ "$1" = native ] && [ $(($(cat /proc/sys/vm/max_map_count) / 2)) -lt $(($2 + 64)) ]; then
        echo "bench-request: native @$2 skipped: vm.max_map_count is too small for $2 thread stacks" >&2; return 1
    fi
}

# start_server CONFIG HANDLER: starts it, sets SERVER_PID and PORT.
start_server() {
    local how=threads env=()
    [ "$1" = pool ] && how=pool
    [ "$1" = preloaded ] && env=(LD_PRELOAD="$LIB" GLIBC_TUNABLES=glibc.pthread.rseq=0)
    [ "$2" = commit ] && env+=(COMMIT=1)
    : >"$WORK/port"
    taskset -c "$SERVER_CPUS" env ${env[@]+"${env[@]}"} "$BIN" serve "$how" >"$WORK/port" 2>"$WORK/server.err" &
    SERVER_PID=$!
    for _ in $(seq 200); do grep -q '^port=' "$WORK/port" 2>/dev/null && break; sleep 0.05; done
    PORT=$(sed -n 's/^port=//p' "$WORK/port")
    [ -n "$PORT" ] || { echo "bench-request: the $1 server did not start: $(cat "$WORK/server.err")" >&2; return 1; }
}

stop_server() {
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
}

# measure CONFIG HANDLER CONNS [PERF_ARGS...]: one run; the load's key=value lines in
# $WORK/load.out. With PERF_ARGS, perf records on the server's CPUs in the window only.
measure() {
    local cfg=$1 h=$2 c=$3 ok=0
    shift 3
    start_server "$cfg" "$h" || return 1
    local perf_env=()
    if [ $# -gt 0 ]; then
        rm -f "$WORK/ctl" "$WORK/ack" "$WORK/perf.data"
        mkfifo "$WORK/ctl" "$WORK/ack"
        perf record -q -C "$SERVER_CPUS" -D -1 --control "fifo:$WORK/ctl,$WORK/ack" -o "$WORK/perf.data" "$@" \
            >"$WORK/perf.log" 2>&1 &
        PERF_PID=$!
        perf_env=(PERF_CTL="$WORK/ctl" PERF_ACK="$WORK/ack")
    fi
    if env ${perf_env[@]+"${perf_env[@]}"} SERVER_PID="$SERVER_PID" taskset -c "$CLIENT_CPUS" \
        "$BIN" load "$PORT" "$c" "$SECS" >"$WORK/load.out" 2>"$WORK/load.err"; then ok=1; fi
    if [ -n "$PERF_PID" ]; then
        kill -INT "$PERF_PID" 2>/dev/null || true
        wait "$PERF_PID" 2>/dev/null || true
        PERF_PID=
    fi
    LAST_PID=$SERVER_PID
    stop_server
    if grep -q PERF_ "$WORK/load.err"; then echo "    (perf: $(grep PERF_ "$WORK/load.err" | head -1))"; fi
    [ $ok = 1 ] || { echo "bench-request: $cfg $h @$c failed: $(cat "$WORK/load.err") $(tail -3 "$WORK/server.err")" >&2; return 1; }
}

val() { sed -n "s/^$1=//p" "$WORK/load.out"; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "-"}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || a + 0 == 0) print "-"; else printf "%.2fx", b / a }'; }

# syscalls_by_kind: the server's system calls per request in the perf window, by name.
syscalls_by_kind() {
    local req; req=$(val requests)
    perf script -i "$WORK/perf.data" -F pid,trace 2>/dev/null |
        awk -v pid="$LAST_PID" '
            NR == FNR { if ($1 == "#define" && $2 ~ /^__NR_/) name[$3] = substr($2, 6); next }
            $1 == pid && $2 == "NR" { n[$3]++ }
            END { for (k in n) print (k in name ? name[k] : "NR" k), n[k] }' /usr/include/x86_64-linux-gnu/asm/unistd_64.h - |
        sort -k2,2nr | awk -v req="$req" '
            { all += $2; if ($2 / req >= 0.005) line = line sprintf(" %s %.2f", $1, $2 / req) }
            END { printf "    system calls per request: %.2f:%s\n", all / req, line }'
    perf report -i "$WORK/perf.data" --stats 2>/dev/null | awk '/LOST/ && $3 + 0 > 0 { print "    (perf lost events: the counts above are low)"; exit }'
}

# profile_by_object: the share of the server's cpu-clock samples per object.
profile_by_object() {
    perf script -i "$WORK/perf.data" -F pid,ip,dso 2>/dev/null |
        awk -v pid="$LAST_PID" '$1 == pid { o = $NF; gsub(/[()]/, "", o); sub(/.*\//, "", o); n[o]++; all++ }
            END { for (o in n) print o, n[o], all }' |
        sort -k2,2nr | awk '$2 / $3 >= 0.005 { line = line sprintf(" %s %.1f%%", $1, 100 * $2 / $3); all = $3 }
            END { printf "    cpu-clock samples of the server (%d) by object:%s\n", all, line }'
}

printf "server on CPUs %s, load on CPUs %s; STACK_KB=%s MALLOCS=%s; %s rounds of %s s\n" \
    "$SERVER_CPUS" "$CLIENT_CPUS" "$STACK_KB" "$MALLOCS" "$ROUNDS" "$SECS"
for c in $CONNS; do
    for h in $HANDLERS; do
        declare -A rps=() p95=() cpu=() usr=() sys=() sw=()
        for r in $(seq 0 $((ROUNDS - 1))); do
            for k in 0 1 2; do
                cfg=${CONFIGS[$(((k + r) % 3))]}
                runnable "$cfg" "$c" 2>/dev/null || continue
                measure "$cfg" "$h" "$c" || continue
                rps[$cfg]+="$(val requests_per_sec) "; p95[$cfg]+="$(val p95_us) "
                cpu[$cfg]+="$(val server_cpu_us) "; usr[$cfg]+="$(val server_user_us) "
                sys[$cfg]+="$(val server_sys_us) "; sw[$cfg]+="$(val switches) "
            done
        done
        echo
        printf "%-6s %-7s %-10s %10s %8s %22s %14s\n" conns handler config "requests/s" p95_us "CPU µs/req (usr+sys)" switches/req
        declare -A med_rps=() med_cpu=()
        for cfg in "${CONFIGS[@]}"; do
            if ! runnable "$cfg" "$c"; then med_rps[$cfg]=-; med_cpu[$cfg]=-; continue; fi
            m() { tr ' ' '\n' <<<"$1" | awk NF | median; }
            med_rps[$cfg]=$(m "${rps[$cfg]:-}"); med_cpu[$cfg]=$(m "${cpu[$cfg]:-}")
            printf "%-6s %-7s %-10s %10s %8s %22s %14s\n" "$c" "$h" "$cfg" "${med_rps[$cfg]}" "$(m "${p95[$cfg]:-}")" \
                "${med_cpu[$cfg]} ($(m "${usr[$cfg]:-}")+$(m "${sys[$cfg]:-}"))" "$(m "${sw[$cfg]:-}")"
            if [ "${SYSCALLS:-0}" = 1 ] && measure "$cfg" "$h" "$c" -e raw_syscalls:sys_enter -m 16384; then
                syscalls_by_kind
            fi
            if [ "${PROFILE:-0}" = 1 ] && measure "$cfg" "$h" "$c" -e cpu-clock; then
                profile_by_object
            fi
        done
        for pair in "preloaded native" "pool native" "preloaded pool"; do
            set -- $pair
            printf "%-6s %-7s %-18s requests/s %s, CPU per request %s\n" "$c" "$h" "$1/$2" \
                "$(ratio "${med_rps[$2]}" "${med_rps[$1]}")" "$(ratio "${med_cpu[$2]}" "${med_cpu[$1]}")"
        done
        unset rps p95 cpu usr sys sw med_rps med_cpu
    done
done
