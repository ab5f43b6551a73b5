#!/usr/bin/env bash
# Counts, not timings, of the runtime's hot paths: instructions (and, with CACHE=1,
# simulated misses of 32 KB L1s and a 512 KB last level) per operation, under
# `valgrind --tool=callgrind`, for one or more builds of the library side by side. Each
# scenario of test-apps/bench/count_core.c runs twice, with N and 2N operations, and the
# difference divided by N * THREADS is the cost of one operation (start-up and exit
# cancel out). One worker (FIBERIZE_WORKERS=1): valgrind runs one thread at a time, and
# an idle second worker's polling would count too. Deterministic up to the monitor's
# time-driven work (a few instructions per operation from run to run).
#
#   bash scripts/count-core.sh
#   CONFIGS="before=/tmp/before.so after=target/release/libfiberize.so" CACHE=1 bash scripts/count-core.sh
#
# pingpong:1000 is the cold case: 2 000 fibers take turns, so each wait finds its fiber,
# its stack and its descriptor's state out of the 512 KB cache, and with CACHE=1 its
# misses per operation count the lines a wait and its wake-up touch cold (two of each
# per round trip; docs/RESULTS.md#fiber-hot-lines).
#
# pollaway:1 is the TPC-C client's statement with its server elsewhere: the answer comes
# from a native process 1 ms later, so the worker runs dry at every wait and sleeps in
# epoll_wait, and its count is one side's whole wait: park, idle, harvest, wake-up
# (docs/RESULTS.md#client-wait-anatomy).
#
# Environment (defaults in brackets): CONFIGS ["this=target/release/libfiberize.so"]
# (NAME=LIB ...), SCENARIOS ["pingpong:16:500 pingpong:1:2000 pingpong:1000:20 pollpong:16:500 pollaway:1:200 yield:4:5000 sleep:64:100"]
# (NAME:THREADS_OR_PAIRS:N), CACHE [0], TOP [0] (the library's N costliest functions
# per operation, for each config).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { sudo -n true 2>/dev/null && SUDO=sudo || SUDO=; $SUDO apt-get install -y valgrind >/dev/null; }
CONFIGS=${CONFIGS:-"this=target/release/libfiberize.so"}
if [[ "$CONFIGS" == *target/release/libfiberize.so* ]]; then
    cargo build --release -p interpose >/dev/null 2>&1 || cargo build --release -p interpose
fi
SCENARIOS=${SCENARIOS:-"pingpong:16:500 pingpong:1:2000 pingpong:1000:20 pollpong:16:500 pollaway:1:200 yield:4:5000 sleep:64:100"}
CACHE=${CACHE:-0}
TOP=${TOP:-0}
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
cc -O2 -pthread -o "$WORK/count_core" test-apps/bench/count_core.c
vg=(valgrind --tool=callgrind)
[ "$CACHE" = 1 ] && vg+=(--cache-sim=yes --I1=32768,8,64 --D1=32768,8,64 --LL=524288,8,64)

printf "%-20s %-10s %s\n" scenario config "per operation (all objects; the library's own instructions in brackets)"
for sc in $SCENARIOS; do
    IFS=: read -r name threads n <<<"$sc"
    for cfg in $CONFIGS; do
        label=${cfg%%=*}; lib=$(realpath "${cfg#*=}")
        # Every thread keeps a kernel thread under the preload too (its donor), and
        # valgrind's table holds 500 by default: a pair is two.
        for k in 1 2; do
            FIBERIZE_WORKERS=1 LD_PRELOAD="$lib" "${vg[@]}" --max-threads=$((2 * threads + 100)) --callgrind-out-file="$WORK/$label.$k.out" \
                "$WORK/count_core" "$name" $((k * n)) "$threads" >"$WORK/out" 2>"$WORK/vg.log" ||
                { echo "count-core: $name under $label failed (see below)"; tail -5 "$WORK/vg.log"; exit 1; }
            grep -q "^done=$name" "$WORK/out" || { echo "count-core: $name under $label printed no result"; exit 1; }
        done
        python3 - "$WORK/$label.1.out" "$WORK/$label.2.out" $((n * threads)) "$name:$threads" "$label" "$lib" "$TOP" <<'PY'
import collections, re, sys
one, two, ops, scen, label, lib, top = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], int(sys.argv[7])
def read(path):
    """Self cost per (object, function) and the event names of a callgrind file."""
    names, events, cost = {}, [], collections.defaultdict(lambda: None)
    ob = fn = None
    in_call = False
    def name(tok):
        m = re.match(r"\((\d+)\)(?: (.*))?", tok)
        if not m:
            return tok
        if m.group(2):
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), "?")
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith(("ob=", "fn=")):
            v = name(line[3:])
            if line[0] == "o":
                ob = v
            else:
                fn = v
        elif line.startswith(("cob=", "cfn=")):
            name(line[4:])
        elif line.startswith("calls="):
            in_call = True
        elif line[:1].isdigit() or line[:1] in "+-*":
            if in_call:  # the inclusive cost of a call: not this function's own
                in_call = False
                continue
            parts = [int(x) for x in line.split()[1:]]
            key = (ob, fn)
            old = cost[key] or [0] * len(events)
            cost[key] = [a + b for a, b in zip(old, parts + [0] * (len(events) - len(parts)))]
    return events, cost
events, a = read(one)
_, b = read(two)
def per(keys):
    return [sum((b[k] or [0] * len(events))[i] - (a[k] or [0] * len(events))[i] for k in keys) / ops for i in range(len(events))]
every = set(a) | set(b)
total = per(every)
ours = per([k for k in every if k[0] == lib])
shown = "  ".join(f"{e} {t:.0f} ({o:.0f})" if e == "Ir" else f"{e} {t:.1f}" for e, t, o in zip(events, total, ours))
print(f"{scen:<20} {label:<10} {shown}")
if top:
    rows = sorted(((per([k])[0], k[1]) for k in every if k[0] == lib), reverse=True)[:top]
    for v, f in rows:
        print(f"{'':31}{v:6.0f}  {f[:100]}")
PY
    done
done
