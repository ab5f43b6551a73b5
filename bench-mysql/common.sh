# Shared by the bench-mysql scripts (sourced, not run): prerequisites and free ports.

# Fails unless libfiberize.so ($LIB), mariadbd and sysbench are there.
require_lib_and_mariadb() {
    [ -f "$LIB" ] || { echo "missing $LIB: run cargo build --release -p interpose"; exit 1; }
    [ -x /usr/sbin/mariadbd ] && command -v sysbench >/dev/null || { echo "mariadb-server/sysbench missing (scripts/test.sh installs them)"; exit 1; }
}

# A free TCP port below the ephemeral range (32768+), so that client sockets never hold it.
free_port() {
    local cand
    for _ in $(seq 1 50); do
        cand=$((12000 + RANDOM % 18000))
        ss -ltn 2>/dev/null | awk '{print $4}' | grep -q ":$cand\$" || { echo $cand; return 0; }
    done
    echo "no free port" >&2; exit 1
}

# The one way every bench-mysql script starts a private server (issue 27: the mariadbd
# command line was spelled out in six places). Each NAME has its datadir
# $WORK/data-NAME, its socket, pid file and port ${PORT[NAME]} (an associative array the
# caller declares), its logs $WORK/err-NAME$TAG.log and $WORK/out-NAME$TAG.log (TAG tells
# the starts of one datadir apart: smoke.sh restarts after a crash). MODE is how it runs:
#   native   mariadbd as shipped (one thread per connection)
#   pool     MariaDB's own thread pool (--thread-handling=pool-of-threads)
#   preload  one thread per connection, under LD_PRELOAD=$LIB (the caller's LIB, which
#            every script takes from FIBERIZE_LIB when that is set), with FIBERIZE_STATS=1
#            (SERVER_STATS=0: without; the stats turn on the queue-wait clock reads)
# SERVER_PIN (an array, e.g. (taskset -c 0)) prefixes the command; SERVER_WRAP (an array,
# e.g. (valgrind --tool=callgrind)) goes right before mariadbd, after the environment (the
# preload reaches the program under the tool); SERVER_OPTS adds options;
# SERVER_ENV (an array of VAR=value) adds to a preloaded server's environment;
# CONFIG_PLAIN_ENV (the same, set by start_config for NAME=native+VAR=value) to a
# native or pool server's.
# max_prepared_stmt_count is raised: sysbench oltp_read_write prepares ~18 statements per
# connection, and 1024 connections pass the default 16382 (every run fails at connect).
# Sets MARIADB_PID (the server's process, a child of the calling shell: `wait` works).
# Exits 1 with the error log's tail if the server dies during start, does not answer
# within START_SECONDS (60), or (preload) does not have the library mapped.
# Each script's servers and their bootstraps keep temporary tables in $WORK/tmp, not in
# the shared /tmp: two bootstraps at once in /tmp (two tests of the suite side by side)
# once failed with "Could not remove temporary table '/tmp/#sql-temptable-…'".
install_datadir() { # DIR (a new datadir; the log goes to $WORK/install.log)
    mkdir -p "$WORK/tmp"
    mariadb-install-db --no-defaults --datadir="$1" --tmpdir="$WORK/tmp" --user=root --auth-root-authentication-method=normal >"$WORK/install.log" 2>&1
}
start_mariadb() { # NAME MODE [TAG]
    local name=$1 mode=$2 tag=${3:-} pre=() extra=()
    case $mode in
    native) pre=(env ${CONFIG_PLAIN_ENV[@]+"${CONFIG_PLAIN_ENV[@]}"}) ;;
    pool) pre=(env ${CONFIG_PLAIN_ENV[@]+"${CONFIG_PLAIN_ENV[@]}"}); extra=(--thread-handling=pool-of-threads) ;;
    preload) pre=(env LD_PRELOAD="$LIB" GLIBC_TUNABLES=glibc.pthread.rseq=0 FIBERIZE_STATS=${SERVER_STATS:-1} ${SERVER_ENV[@]+"${SERVER_ENV[@]}"}) ;;
    *) echo "start_mariadb: unknown mode $mode" >&2; exit 2 ;;
    esac
    local log="$WORK/err-$name$tag.log"
    mkdir -p "$WORK/tmp"
    # shellcheck disable=SC2086 # SERVER_OPTS is a list of options
    ${SERVER_PIN[@]+"${SERVER_PIN[@]}"} ${pre[@]+"${pre[@]}"} ${SERVER_WRAP[@]+"${SERVER_WRAP[@]}"} /usr/sbin/mariadbd --no-defaults --datadir="$WORK/data-$name" \
        --socket="$WORK/sock-$name" --port="${PORT[$name]}" --bind-address=127.0.0.1 --user=root --pid-file="$WORK/pid-$name" \
        --tmpdir="$WORK/tmp" --log-error="$log" --max-connections=12000 --max-prepared-stmt-count=1048576 --skip-log-bin ${extra[@]+"${extra[@]}"} ${SERVER_OPTS:-} \
        >"$WORK/out-$name$tag.log" 2>&1 &
    MARIADB_PID=$!
    local tries=$(( ${START_SECONDS:-60} * 2 ))
    for _ in $(seq 1 "$tries"); do
        if mariadb --no-defaults -h127.0.0.1 -P"${PORT[$name]}" -uroot -e "select 1" >/dev/null 2>&1; then
            if [ "$mode" = preload ] && ! grep -q libfiberize "/proc/$MARIADB_PID/maps"; then
                echo "server $name: library not loaded in mariadbd ($LIB)"
                kill -9 "$MARIADB_PID" 2>/dev/null || true # a caller without a cleanup trap would leave it running
                exit 1
            fi
            return 0
        fi
        kill -0 "$MARIADB_PID" 2>/dev/null || { echo "server $name ($mode) exited during start:"; tail -20 "$log"; exit 1; }
        sleep 0.5
    done
    echo "server $name ($mode) did not start:"; tail -20 "$log"
    kill -9 "$MARIADB_PID" 2>/dev/null || true
    exit 1
}
stop_mariadb() { # NAME
    mariadb-admin --no-defaults -h127.0.0.1 -P"${PORT[$1]}" -uroot shutdown >/dev/null 2>&1 || true
    for _ in $(seq 1 120); do [ -f "$WORK/pid-$1" ] || return 0; sleep 0.5; done
    [ -f "$WORK/pid-$1" ] && kill -9 "$(cat "$WORK/pid-$1")" 2>/dev/null || true
}

# For a CONFIGS list (ab-tpcc.sh, mix.sh): a port per server (and one for the server that
# prepares the datadir) in the global PORT, and a `cleanup` that stops them all, run at exit.
ports_for_configs() {
    declare -gA PORT
    local c
    for c in $CONFIGS prepare; do PORT[${c%%=*}]=$(free_port); done
    cleanup() { for n in "${!PORT[@]}"; do stop_mariadb "$n"; done; }
    trap cleanup EXIT
}

# Runs `FN NAME ROUND` for each server of CONFIGS, ROUNDS times, the order rotating by
# round so that no server always runs first. Before each run every server is let go quiet
# (quiesce_servers): the servers run side by side, and one that has just served a mix
# purges InnoDB's history for up to a minute after, on the CPUs of the next one's run.
each_config_rotating() { # fn
    local cl k r i
    read -ra cl <<<"$CONFIGS"
    k=${#cl[@]}
    for r in $(seq "$ROUNDS"); do
        for i in $(seq 0 $((k - 1))); do
            quiesce_servers
            "$1" "${cl[$(((i + r) % k))]%%=*}" "$r"
        done
    done
}

# CPU time (user + system, in clock ticks) that server NAME's process has used so far.
server_cpu_ticks() { # NAME
    awk '{ print $14 + $15 }' "/proc/$(cat "$WORK/pid-$1")/stat" 2>/dev/null || echo 0
}
# Waits (at most QUIESCE_SECONDS, 90) until the servers of CONFIGS together use under
# QUIET_CPU_PCT (5) % of a CPU per server over a second; says how long it waited when it
# waited. (Per server: an idle MariaDB that has just served a load uses ~2.5 % of a CPU
# for a while, so six servers side by side never went under 5 % in all, and every run
# waited the full 90 s.)
quiesce_servers() {
    local c before after waited=0 tck servers
    tck=$(getconf CLK_TCK)
    servers=$(wc -w <<<"$CONFIGS")
    while [ "$waited" -lt "${QUIESCE_SECONDS:-90}" ]; do
        before=0; for c in $CONFIGS; do before=$((before + $(server_cpu_ticks "${c%%=*}"))); done
        sleep 1; waited=$((waited + 1))
        after=0; for c in $CONFIGS; do after=$((after + $(server_cpu_ticks "${c%%=*}"))); done
        [ $(((after - before) * 100)) -le $((${QUIET_CPU_PCT:-5} * tck * servers)) ] && break
    done
    [ "$waited" -le 1 ] || echo "== servers quiet after ${waited}s$([ "$waited" -ge "${QUIESCE_SECONDS:-90}" ] && echo " (not quiet: gave up)")"
}

# What a CONFIGS entry runs: native, pool or preload (see start_config).
config_kind() { # config
    case $1 in
    native | *=native | *=native+*) echo native ;;
    pool | *=pool | *=pool+*) echo pool ;;
    *) echo preload ;;
    esac
}

# Copies the prepared datadir for one server of a CONFIGS list (ab-tpcc.sh, mix.sh) and
# starts it: native, pool, NAME=native or NAME=pool (a second such server under another
# name: a control, whose ratio to the first shows how far two identical servers differ
# in the same rounds), NAME=native+VAR=value... or NAME=pool+VAR=value... (such a server
# with VAR=value in its environment: a control for a preloaded config's environment,
# e.g. a GLIBC_TUNABLES setting), or NAME=LIB[+VAR=value...] (preloaded with LIB;
# CONFIG_ENV, an array the caller may set, and the VAR=value words go into its
# environment; commas separate FIBERIZE_TUNE's entries:
# NAME=LIB+FIBERIZE_TUNE=poll_per_worker=0,name=value).
start_config() { # config
    local c=$1 n=${1%%=*} parts
    cp -a "$WORK/data-prepare" "$WORK/data-$n"
    case $c in
    native | pool | *=native | *=pool) start_mariadb "$n" "${c#*=}" ;;
    *=native+* | *=pool+*)
        IFS=+ read -ra parts <<<"${c#*=}"
        local CONFIG_PLAIN_ENV=("${parts[@]:1}") # seen by start_mariadb, this server only
        start_mariadb "$n" "${parts[0]}" ;;
    *=*)
        IFS=+ read -ra parts <<<"${c#*=}"
        LIB=$(realpath "${parts[0]}")
        SERVER_ENV=(${CONFIG_ENV[@]+"${CONFIG_ENV[@]}"} "${parts[@]:1}")
        # With SERVER_METRICS_INTERVAL (e.g. 500ms), each preloaded server writes its
        # counters to $WORK/metrics-NAME.prom at that interval (read with server_counters).
        [ -z "${SERVER_METRICS_INTERVAL:-}" ] || SERVER_ENV+=("FIBERIZE_METRICS=$WORK/metrics-$n.prom,$SERVER_METRICS_INTERVAL")
        start_mariadb "$n" preload ;;
    *) echo "unknown config $c (native, pool, NAME=native, NAME=pool, NAME=LIB or NAME=LIB+VAR=value)" >&2; exit 2 ;;
    esac
}

# A preloaded server's counters from its metrics file (see start_config), one line:
# the value of each fiberize_<name>_total, in the order given; 0 where there is no file
# (a native server) or no such counter.
server_counters() { # NAME COUNTER...
    local name=$1; shift
    awk -v names="$*" 'BEGIN { n = split(names, want, " ") }
        { v[$1] = $2 }
        END { for (i = 1; i <= n; i++) printf "%s%d", (i > 1 ? " " : ""), v["fiberize_" want[i] "_total"] + 0; print "" }' \
        "$WORK/metrics-$name.prom" 2>/dev/null || { printf '0%.0s ' "$@"; echo; }
}

# The set-up of the scripts that run the servers of a CONFIGS list side by side (mix.sh,
# tails.sh): prerequisites, pinning, the work directory /tmp/fiberize-TAG.*, a port per
# server, the prepared datadir, and every server started (with CONFIG_ENV, if the caller
# set it, in each preloaded server's environment).
start_configs_side_by_side() { # script-name tag
    require_lib_and_mariadb
    pin_from_env "$1"
    WORK=$(mktemp -d "/tmp/fiberize-$2.XXXXXX")
    ports_for_configs
    prepare_datadir
    local c
    for c in $CONFIGS; do start_config "$c"; done
}

# The end of such a script: stops the servers, removes the datadirs, and prints each
# preloaded server's scheduling counters (from its stats line, written at exit); with
# TXNS_FN, a function that prints a server's transactions, its locality per transaction
# first (locality_per_txn).
finish_configs() { # [txns-fn]
    cleanup; trap - EXIT
    rm -rf "$WORK"/data-*
    local c n
    for c in $CONFIGS; do
        n=${c%%=*}
        [ "$(config_kind "$c")" = preload ] || continue
        [ -z "${1:-}" ] || locality_per_txn "$n" "$("$1" "$n")"
        echo "== $n stats:" $(grep -h "fiberize: stats" "$WORK/out-$n.log" "$WORK/err-$n.log" 2>/dev/null | tr ' ' '\n' |
            grep -E "^(switches|parks|migrations|steals|lifo_capped|donor_handoffs|preemptions|turn|queue_)" || true)
    done
    echo "== logs in $WORK"
}

# Unless SERVER_CPUS or CLIENT_CPUS is given, the first half of this process's CPUs for
# the servers and the second for the clients (2 vCPUs: 0 and 1), exported; exits unless
# there are 2 CPUs at least (yardstick.sh, count.sh: the server on CPUs of its own).
split_cpus_by_default() { # script-name
    if [ -z "${SERVER_CPUS:-}" ] && [ -z "${CLIENT_CPUS:-}" ]; then
        local cpus half
        mapfile -t cpus < <(taskset -cp $$ | sed 's/.*: //' | tr ',' '\n' | awk -F- '{ if (NF == 2) for (i = $1; i <= $2; i++) print i; else print $1 }')
        [ "${#cpus[@]}" -ge 2 ] || { echo "$1: needs at least 2 CPUs (server and client apart)" >&2; exit 2; }
        half=$((${#cpus[@]} / 2))
        SERVER_CPUS=$(IFS=,; echo "${cpus[*]:0:$half}"); CLIENT_CPUS=$(IFS=,; echo "${cpus[*]:$half}")
    fi
    export SERVER_CPUS CLIENT_CPUS
}

# Optional pinning: sets SERVER_PIN and CLIENT_PIN (taskset prefixes) from SERVER_CPUS and
# CLIENT_CPUS, both or neither; warns when the two sets overlap.
pin_from_env() { # script-name
    SERVER_PIN=(); CLIENT_PIN=()
    [ -z "${SERVER_CPUS:-}" ] && [ -z "${CLIENT_CPUS:-}" ] && return 0
    [ -n "${SERVER_CPUS:-}" ] && [ -n "${CLIENT_CPUS:-}" ] ||
        { echo "$1: set both SERVER_CPUS and CLIENT_CPUS (e.g. SERVER_CPUS=0-7 CLIENT_CPUS=8-15), or neither" >&2; exit 2; }
    for set in "$SERVER_CPUS" "$CLIENT_CPUS"; do
        taskset -c "$set" true 2>/dev/null || { echo "$1: '$set' is not a usable CPU list here (taskset -c $set failed)" >&2; exit 2; }
    done
    expand() { tr ',' '\n' <<<"$1" | awk -F- '{ if (NF == 2) for (i = $1; i <= $2; i++) print i; else print $1 }' | sort; }
    local shared
    shared=$(comm -12 <(expand "$SERVER_CPUS") <(expand "$CLIENT_CPUS") | tr '\n' ' ')
    [ -z "$shared" ] || echo "$1: warning: SERVER_CPUS and CLIENT_CPUS share CPUs $shared(the sets should be disjoint)" >&2
    SERVER_PIN=(taskset -c "$SERVER_CPUS"); CLIENT_PIN=(taskset -c "$CLIENT_CPUS")
    echo "== servers pinned to CPUs $SERVER_CPUS, clients to CPUs $CLIENT_CPUS"
}

# The pristine datadir $WORK/data-prepare: sysbench's sbtest ($TABLES x $TABLE_SIZE) and,
# when WORKLOADS names tpcc, the TPC-C database of $WAREHOUSES warehouses ($TPCC load).
# With DATA_CACHE set, it is kept there and reused while its parameters match (loading
# 10 warehouses takes minutes; `tpcc=analyzed` marks a load that ends with ANALYZE TABLE,
# so a cache made before it is loaded again). Needs PORT[prepare].
prepare_datadir() {
    local params
    params="tables=$TABLES table_size=$TABLE_SIZE warehouses=$WAREHOUSES tpcc=$([[ " $WORKLOADS " = *" tpcc "* ]] && echo analyzed || echo 0) $(/usr/sbin/mariadbd --version | awk '{print $3}')"
    if [ -n "${DATA_CACHE:-}" ] && [ "$(cat "$DATA_CACHE/params" 2>/dev/null)" = "$params" ]; then
        echo "== reusing the datadir in $DATA_CACHE ($params)"
        cp -a "$DATA_CACHE/data" "$WORK/data-prepare"
        return 0
    fi
    echo "== preparing a datadir: sysbench $TABLES x $TABLE_SIZE$([[ " $WORKLOADS " = *" tpcc "* ]] && echo ", TPC-C $WAREHOUSES warehouses")"
    install_datadir "$WORK/data-prepare"
    start_mariadb prepare native
    mariadb --no-defaults -h127.0.0.1 -P"${PORT[prepare]}" -uroot -e "create database sbtest"
    sysbench --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="${PORT[prepare]}" --mysql-user=root --mysql-db=sbtest \
        --tables="$TABLES" --table-size="$TABLE_SIZE" --threads=4 oltp_read_write prepare >/dev/null
    if [[ " $WORKLOADS " = *" tpcc "* ]]; then
        "$TPCC" load -P "${PORT[prepare]}" -w "$WAREHOUSES" -j 4 | awk 'NR % 10 == 1 || /done/'
    fi
    stop_mariadb prepare
    if [ -n "${DATA_CACHE:-}" ]; then
        rm -rf "$DATA_CACHE" && mkdir -p "$DATA_CACHE" && cp -a "$WORK/data-prepare" "$DATA_CACHE/data" && echo "$params" >"$DATA_CACHE/params"
    fi
}

# Issue 24's locality counters of preloaded server NAME (its stats line, printed at exit
# into its logs) per transaction, for TXNS transactions served in all: migrations,
# cross-worker wake-ups, steals, eventfd writes, epoll_wait calls and events per call.
locality_per_txn() { # NAME TXNS
    grep -h "fiberize: stats" "$WORK/out-$1.log" "$WORK/err-$1.log" 2>/dev/null | head -1 | tr ' ' '\n' |
        awk -F= -v n="$1" -v t="$2" '{ v[$1] = $2 }
            END { if (!t || !("switches" in v)) { print "== " n " locality: no stats line"; exit }
                  printf "== %s locality per transaction (%d transactions): runs %.2f, migrations %.2f, cross-worker wake-ups %.2f, steals %.3f, eventfd writes %.2f, epoll_wait calls %.2f (%.2f events each), fd moves %.3f\n",
                      n, t, v["switches"] / t, v["migrations"] / t, v["cross_worker_wakes"] / t, v["steals"] / t, v["eventfd_writes"] / t,
                      v["epoll_waits"] / t, (v["epoll_waits"] ? v["epoll_events"] / v["epoll_waits"] : 0), v["fd_moves"] / t }' || true
}

# A sysbench log with --histogram -> "tps p95 p99" (ms; the percentiles from the
# histogram's rows "value |*** count", counted over the whole run; tps with DECIMALS
# decimals, 0 by default); "FATAL FATAL FATAL" for a failed run.
summarize_sysbench() { # log [decimals]
    awk -v d="${2:-0}" '/transactions:/ { gsub(/[(]/, "", $3); tps = $3 + 0 }
         /^ *[0-9.]+ \|/ { v[++n] = $1 + 0; c[n] = $NF + 0; total += $NF }
         /FATAL/ { fatal = 1 }
         END { if (fatal || !total) { print "FATAL FATAL FATAL"; exit }
               for (i = 1; i <= n; i++) { s += c[i]; if (!p95 && s >= 0.95 * total) p95 = v[i]; if (!p99 && s >= 0.99 * total) p99 = v[i] }
               printf "%.*f %.3f %.3f\n", d, tps, p95, p99 }' "$1"
}
