#!/usr/bin/env bash
# The main job: build libfiberize.so and run real programs under it, native and
# preloaded side by side, printing preloaded/native ratios.
#   1. sysbench's own pthread benchmarks (threads: mutex + yield; mutex)
#   2. the core benchmarks (scripts/bench-core.sh), the echo server (bench-io.sh),
#      mktime with TZ unset (bench-mktime.sh)
#   3. the MariaDB + sysbench comparison (bench-mysql/run.sh --quick)
# Installs what it needs with apt-get. Everything binds to loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

need_pkgs=()
command -v sysbench >/dev/null || need_pkgs+=(sysbench)
command -v cc >/dev/null || need_pkgs+=(gcc)
if [ ${#need_pkgs[@]} -gt 0 ]; then
    echo "== installing ${need_pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

echo "== building libfiberize.so"
cargo build --release -p interpose
LIB=$ROOT/target/release/libfiberize.so
export GLIBC_TUNABLES=glibc.pthread.rseq=0

events() { grep -E "total number of events" | awk '{print $NF}'; }

run_sysbench() { # name, sysbench args...
    local name=$1; shift
    local nat pre
    nat=$(sysbench "$@" run 2>&1 | events)
    pre=$(env LD_PRELOAD="$LIB" sysbench "$@" run 2>&1 | events)
    awk -v n="$name" -v a="$nat" -v b="$pre" 'BEGIN { printf "%-40s native=%-10s preloaded=%-10s ratio=%.2fx\n", n, a, b, (a > 0 ? b / a : 0) }'
}

echo "== sysbench pthread benchmarks (events in 5 s; ratio = preloaded/native, higher is better)"
for t in 16 64 256; do
    run_sysbench "sysbench threads, $t threads" threads --threads=$t --time=5 --thread-yields=100 --thread-locks=8
done
run_sysbench_time() { # name, sysbench args... (fixed work: compare wall time)
    local name=$1; shift
    local nat pre
    nat=$(sysbench "$@" run 2>&1 | awk '/total time:/ {gsub("s","",$NF); print $NF}')
    pre=$(env LD_PRELOAD="$LIB" sysbench "$@" run 2>&1 | awk '/total time:/ {gsub("s","",$NF); print $NF}')
    awk -v n="$name" -v a="$nat" -v b="$pre" 'BEGIN { printf "%-40s native=%-9ss preloaded=%-9ss ratio=%.2fx\n", n, a, b, (b > 0 ? a / b : 0) }'
}
run_sysbench_time "sysbench mutex, 64 threads (time)" mutex --threads=64 --mutex-num=16 --mutex-locks=50000 --mutex-loops=50

echo "== core benchmarks (median of 3)"
bash scripts/bench-core.sh
echo "== echo server"
bash scripts/bench-io.sh
echo "== mktime with TZ unset"
bash scripts/bench-mktime.sh
echo "== MariaDB + sysbench (server native vs preloaded, client native and preloaded)"
CLIENT_PRELOAD=1 bash bench-mysql/run.sh --quick
