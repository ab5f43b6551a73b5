#!/usr/bin/env bash
# mktime throughput, natively and under libfiberize.so (issue 4).
#
#   scripts/bench-mktime.sh [SECONDS_PER_RUN] [REPEATS]
#
# Builds the library and test-apps/c/bench_mktime.c, then for 1 and 8 threads with TZ
# unset (the systemd-daemon case: glibc stats /etc/localtime in every mktime) runs the
# benchmark natively, preloaded, and preloaded with FIBERIZE=off (the rest of the
# library disabled, the tz throttle still on), interleaved, REPEATS times (default 3),
# and prints the median calls/s of each and the ratios to native.
# Env: FIBERIZE_LIB (default target/release/libfiberize.so), THREADS (default "1 8").
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-2}
repeats=${2:-3}
threads_list=${THREADS:-"1 8"}

cargo build --release -p interpose >&2
lib=${FIBERIZE_LIB:-$PWD/target/release/libfiberize.so}
mkdir -p target/bench
bin=target/bench/bench_mktime
cc -O2 -Wall -pthread -o "$bin" test-apps/c/bench_mktime.c

rate() { # rate THREADS ENV... -> calls/s
    local t=$1
    shift
    env -u TZ -u FIBERIZE -u FIBERIZE_TZ -u LD_PRELOAD "$@" "$bin" "$t" "$secs" | sed -n 's/.*calls_per_sec=\([0-9]*\).*/\1/p'
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "mktime calls/s, TZ unset (/etc/localtime -> $(readlink -f /etc/localtime 2>/dev/null || echo '?')), ${secs}s per run, median of $repeats, $(nproc) CPUs, glibc $(ldd --version | head -1 | awk '{print $NF}')"
printf '%-8s %14s %14s %8s %16s %8s\n' threads native preloaded ratio "FIBERIZE=off" ratio
for t in $threads_list; do
    n="" p="" o=""
    for _ in $(seq "$repeats"); do
        n="$n $(rate "$t")"
        p="$p $(rate "$t" LD_PRELOAD="$lib")"
        o="$o $(rate "$t" LD_PRELOAD="$lib" FIBERIZE=off)"
    done
    n=$(echo "$n" | median) p=$(echo "$p" | median) o=$(echo "$o" | median)
    printf '%-8s %14s %14s %7.1fx %16s %7.1fx\n' "$t" "$n" "$p" "$(awk -v a="$p" -v b="$n" 'BEGIN{print a/b}')" "$o" "$(awk -v a="$o" -v b="$n" 'BEGIN{print a/b}')"
done
