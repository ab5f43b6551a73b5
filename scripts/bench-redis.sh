#!/usr/bin/env bash
# redis-server with I/O threads that spin (`--io-threads 4 --io-threads-do-reads yes`),
# native against preloaded libraries, side by side: every round starts each server
# afresh, the order rotating by round, runs `redis-benchmark -c CLIENTS -t set,get`
# against it and prints the requests per second; the end prints the medians and each
# server's ratio to the first. A workload family of its own for the scheduler: spinning
# threads that the preemption slice must move along. Loopback only.
#
#   CONFIGS="native new=target/release/libfiberize.so" bash scripts/bench-redis.sh
#
# Environment (defaults in brackets): CONFIGS ["native new=target/release/libfiberize.so"]
# (native, or NAME=LIB[+VAR=value...]), ROUNDS [5], REQUESTS [100000], CLIENTS [200],
# IO_THREADS [4].
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CONFIGS=${CONFIGS:-"native new=$ROOT/target/release/libfiberize.so"}
ROUNDS=${ROUNDS:-5}; REQUESTS=${REQUESTS:-100000}; CLIENTS=${CLIENTS:-200}; IO_THREADS=${IO_THREADS:-4}
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null ||
    { echo "bench-redis.sh: redis-server and redis-tools are needed (scripts/test.sh installs them)" >&2; exit 1; }
WORK=$(mktemp -d /tmp/fiberize-redis.XXXXXX)
SERVER=
trap '[ -z "$SERVER" ] || kill -9 "$SERVER" 2>/dev/null || true' EXIT
: >"$WORK/results.txt"

once() { # config round
    local c=$1 r=$2 n=${1%%=*} env=() parts port out
    if [ "$c" != native ]; then
        IFS=+ read -ra parts <<<"${c#*=}"
        env=(LD_PRELOAD="$(realpath "${parts[0]}")" GLIBC_TUNABLES=glibc.pthread.rseq=0 FIBERIZE_STATS="$WORK/stats-$n.txt" "${parts[@]:1}")
    fi
    port=$((20000 + RANDOM % 10000))
    env ${env[@]+"${env[@]}"} redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no --daemonize no \
        --io-threads "$IO_THREADS" --io-threads-do-reads yes --dir "$WORK" >"$WORK/server-$n-$r.log" 2>&1 &
    SERVER=$!
    for _ in $(seq 50); do redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
    out=$(timeout 300 redis-benchmark -h 127.0.0.1 -p "$port" -c "$CLIENTS" -n "$REQUESTS" -t set,get -q 2>&1 | tr '\r' '\n' |
        awk '/^SET:/ { s = $2 } /^GET:/ { g = $2 } END { printf "set=%s get=%s", (s ? s : 0), (g ? g : 0) }')
    redis-cli -h 127.0.0.1 -p "$port" shutdown nosave >/dev/null 2>&1 || kill "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
    SERVER=
    echo "round $r $n $out" | tee -a "$WORK/results.txt"
}
read -ra cl <<<"$CONFIGS"
k=${#cl[@]}
for r in $(seq "$ROUNDS"); do
    for i in $(seq 0 $((k - 1))); do once "${cl[$(((i + r) % k))]}" "$r"; done
done
median_of() { # name field
    { grep " $1 " "$WORK/results.txt" || true; } | tr ' ' '\n' | sed -n "s/^$2=//p" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}
first=${cl[0]%%=*}
echo "== redis-server --io-threads $IO_THREADS, redis-benchmark -c $CLIENTS -n $REQUESTS: medians of $ROUNDS rounds (requests/s); ratio = server / $first"
bs=$(median_of "$first" set); bg=$(median_of "$first" get)
for c in "${cl[@]}"; do
    n=${c%%=*}; s=$(median_of "$n" set); g=$(median_of "$n" get)
    awk -v n="$n" -v s="$s" -v g="$g" -v bs="$bs" -v bg="$bg" 'BEGIN {
        printf "%-10s SET %9.0f GET %9.0f   %.2fx / %.2fx\n", n, s, g, (bs > 0 ? s / bs : 0), (bg > 0 ? g / bg : 0) }'
done
for c in "${cl[@]}"; do
    n=${c%%=*}
    [ -f "$WORK/stats-$n.txt" ] || continue
    echo "== $n (last round):" $(tail -1 "$WORK/stats-$n.txt" | tr ' ' '\n' | grep -E "^(workers|switches|preemptions|lifo_capped|turns_ended|steals)=" || true)
done
rm -rf "$WORK"
