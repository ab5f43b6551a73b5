#!/usr/bin/env python3
"""Per-query counts from callgrind dumps, for bench-mysql/count.sh.

  count_summary.py summarize DUMP... --label L --per FUNC --json OUT [--lib NAME] [--questions N]
      Reads the callgrind dumps of one window of a server's run (--cache-sim=yes; one file
      per thread with --separate-threads=yes), sums the self cost of every function by ELF
      object, counts the calls of FUNC (a function that runs once per query) and of a few
      other candidates, writes the per-query figures to OUT (JSON) and prints the
      library's top functions per query. The thread that runs the library's monitor
      (its dump holds MONITOR) is also summed apart: its work is per tick, not per query,
      so its share per query grows as valgrind slows the server.
  count_summary.py table JSON...
      The per-query table of several runs (the median of the rounds of each label), then
      per label after the first of its connection count, the functions whose per-query
      instructions and 512 KB-cache misses differ most from that first one.

Self cost only (callgrind's inclusive cost of a call is skipped), so each instruction is
counted once, in the object whose code it is.
"""
import argparse
import json
import os
import statistics
import sys

# Functions that may run a fixed number of times per query (the normaliser is one of them;
# the others are printed per query as a check).
CANDIDATES = ["dispatch_command", "do_command", "mysqld_stmt_execute", "mysql_execute_command", "alloc_root"]
GROUPS = [("mariadbd", "mariadbd"), ("libfiberize", "libfiberize"), ("libc", "libc.so"), ("ld.so", "ld-linux")]
# How often a query waited and switched: the library's costs and the misses of the
# stacks follow these, and they follow timing (a request already there is no wait).
# (`park_current` is inlined into its callers, so that no frame of it stays live across
# the switch; `prepare_park` is the call every park makes before it.) Each entry lists
# alternatives, the first one found in a dump counted: I/O waits are the calls of
# `wait_parked`, which every I/O wait through the reactor makes; builds before it had
# only `ScheduledIo::wait`, whose calls included the direct waits (which a busy
# server does not make).
LIB_CALLS = {"io waits": ("fiberize_rt::io::scheduled_io::ScheduledIo::wait_parked",
                          "fiberize_rt::io::scheduled_io::ScheduledIo::wait"),
             "parks": ("fiberize_rt::runtime::scheduler::wake::prepare_park",
                       "fiberize_rt::runtime::scheduler::wake::park_current")}
# The library's monitor thread runs this function for its whole life.
MONITOR = "fiberize_rt::runtime::scheduler::monitor::monitor_main"


def base_name(fn):
    """`dispatch_command(enum_server_command, THD*, ...)` -> `dispatch_command`."""
    return fn.split("(", 1)[0].strip()


def group_of(ob):
    name = os.path.basename(ob)
    for g, needle in GROUPS:
        if needle in name:
            return g
    return "other"


def parse(path):
    """(events, {(object, function): [self cost per event]}, {(object, function): calls})."""
    events = []
    names = {"ob": {}, "fn": {}, "fl": {}}
    kind_of = {"ob": "ob", "cob": "ob", "fn": "fn", "cfn": "fn", "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl", "cfl": "fl"}
    cost = {}
    calls = {}
    ob = fn = None
    cob = cfn = None
    skip_next = False

    def resolve(kind, value):
        value = value.strip()
        if value.startswith("("):
            end = value.index(")")
            ident = value[1:end]
            rest = value[end + 1:].strip()
            if rest:
                names[kind][ident] = rest
            return names[kind].get(ident, "???")
        return value

    with open(path, errors="replace") as f:
        for line in f:
            if not line or line == "\n":
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                if skip_next:  # the inclusive cost of the call above
                    skip_next = False
                    continue
                parts = line.split()
                vals = [int(x) for x in parts[1:]]
                acc = cost.setdefault((ob, fn), [0] * len(events))
                for i, v in enumerate(vals):
                    acc[i] += v
                continue
            if line.startswith("events:"):
                events = line.split()[1:]
                continue
            key, sep, value = line.partition("=")
            if not sep:
                continue
            if key == "calls":
                n = int(value.split()[0])
                target = (cob if cob is not None else ob, cfn)
                calls[target] = calls.get(target, 0) + n
                skip_next = True
                cob = None
                continue
            kind = kind_of.get(key)
            if kind is None:
                continue
            name = resolve(kind, value)
            if kind == "fn":  # callgrind's recursion depth (`f'2`): one function
                name = name.rsplit("'", 1)[0] if name.rpartition("'")[2].isdigit() else name
            if key == "ob":
                ob = name
                cob = None
            elif key == "fn":
                fn = name
            elif key == "cob":
                cob = name
            elif key == "cfn":
                cfn = name
    return events, cost, calls


def parse_all(dumps):
    """The dumps of one window merged: (events, cost, calls, the monitor thread's cost)."""
    events, cost, calls, monitor = [], {}, {}, None
    for d in dumps:
        ev, c, k = parse(d)
        if not c:
            continue
        if events and ev != events:
            sys.exit(f"count_summary: {d} counts other events ({ev} against {events})")
        events = ev
        for key, vals in c.items():
            acc = cost.setdefault(key, [0] * len(events))
            for i, v in enumerate(vals):
                acc[i] += v
        for key, n in k.items():
            calls[key] = calls.get(key, 0) + n
        # (Only where threads dumped apart: one dump of all threads holds it too.)
        if len(dumps) > 1 and any(fn == MONITOR for _, fn in c):
            monitor = monitor or [0] * len(events)
            for vals in c.values():
                for i, v in enumerate(vals):
                    monitor[i] += v
    return events, cost, calls, monitor


def summarize(a):
    events, cost, calls, monitor = parse_all(a.dumps)
    if not cost:
        sys.exit(f"count_summary: no costs in {a.dumps[0]}... (was instrumentation on?)")
    idx = {e: i for i, e in enumerate(events)}
    by_base = {}
    for (ob, fn), n in calls.items():
        if group_of(ob or "") == "mariadbd":
            by_base[base_name(fn or "")] = by_base.get(base_name(fn or ""), 0) + n
    queries = by_base.get(a.per, 0)
    lib_fns = {}
    for (ob, fn), n in calls.items():
        if group_of(ob or "") == "libfiberize":
            lib_fns[fn] = lib_fns.get(fn, 0) + n
    lib_calls = {k: next((lib_fns[f] for f in v if f in lib_fns), 0) for k, v in LIB_CALLS.items()}
    if queries <= 0:
        sys.exit(f"count_summary: no calls of {a.per} in {a.dump}")

    def get(vals, e):
        return vals[idx[e]] if e in idx and idx[e] < len(vals) else 0

    want = ["Ir", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw"]
    totals = {g: {e: 0 for e in want} for g in ["all"] + [g for g, _ in GROUPS] + ["other"]}
    funcs = []
    for (ob, fn), vals in cost.items():
        g = group_of(ob or "")
        row = {e: get(vals, e) for e in want}
        for e in want:
            totals["all"][e] += row[e]
            totals[g][e] += row[e]
        funcs.append({"object": os.path.basename(ob or "???"), "group": g, "function": fn or "???",
                      **{e: row[e] / queries for e in want}})
    totals["monitor"] = {e: get(monitor, e) if monitor else 0 for e in want}
    per_query = {g: {e: v / queries for e, v in t.items()} for g, t in totals.items()}
    # Keep the functions that matter to any column (the table's differences read them).
    funcs.sort(key=lambda r: -(r["Ir"] + 50 * (r["ILmr"] + r["DLmr"] + r["DLmw"])))
    out = {"label": a.label, "dump": a.dumps[0], "per": a.per, "queries": queries,
           "questions": a.questions, "calls_per_query": {k: by_base.get(k, 0) / queries for k in CANDIDATES},
           "library_calls_per_query": {k: v / queries for k, v in lib_calls.items()},
           "per_query": per_query, "functions": funcs[:600]}
    with open(a.json, "w") as f:
        json.dump(out, f)
    checks = ", ".join(f"{k} {v:.3f}" for k, v in {**out["calls_per_query"], **out["library_calls_per_query"]}.items())
    q = f"; the server's Questions in the window {a.questions} ({a.questions / queries:.3f} per {a.per} call)" if a.questions else ""
    print(f"== {a.label}: {queries} calls of {a.per} in the window{q}; calls per query: {checks}")
    if monitor:
        print(f"   the library's monitor thread: {per_query['monitor']['Ir']:.0f} instructions per query "
              f"({get(monitor, 'Ir'):,} in the window)")
    lib = [r for r in funcs if r["group"] == "libfiberize"]
    show = [("Ir", lambda r: r["Ir"]), ("ILmr+DLmw (512 KB misses: instruction reads, data writes)", lambda r: r["ILmr"] + r["DLmw"])]
    if lib:
        for title, key in show:
            print(f"   {a.lib}: top {a.top} functions per query by {title}:")
            print("   %9s %7s %7s %7s %7s  %s" % ("Ir", "L1m", "ILmr", "DLmr", "DLmw", "function"))
            for r in sorted(lib, key=lambda r: -key(r))[:a.top]:
                print("   %9.1f %7.2f %7.2f %7.2f %7.2f  %s" % (r["Ir"], r["I1mr"] + r["D1mr"] + r["D1mw"], r["ILmr"], r["DLmr"], r["DLmw"], r["function"][:90]))
    for g in ("ld.so", "libc"):
        rows = sorted((r for r in funcs if r["group"] == g), key=lambda r: -r["Ir"])[:5]
        print(f"   {g}: top 5 by Ir per query: " + "; ".join(f"{base_name(r['function'])} {r['Ir']:.0f}" for r in rows))


def cell(v, d=0):
    return f"{v:,.{d}f}".replace(",", " ")


def table(a):
    runs = [json.load(open(p)) for p in a.jsons]
    labels = []
    by = {}
    for r in runs:
        if r["label"] not in by:
            labels.append(r["label"])
        by.setdefault(r["label"], []).append(r)

    def med(label, g, e):
        return statistics.median(r["per_query"][g][e] for r in by[label])

    print("| per query | instructions all | all but the monitor thread | in mariadbd | in libfiberize | in libc | in ld.so | L1 misses (I+D) | 512 KB misses: I / data reads / data writes | the library's I/O waits / parks |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for lb in labels:
        lib = med(lb, "libfiberize", "Ir")
        l1 = statistics.median(r["per_query"]["all"]["I1mr"] + r["per_query"]["all"]["D1mr"] + r["per_query"]["all"]["D1mw"] for r in by[lb])
        lc = [r.get("library_calls_per_query") for r in by[lb]]
        waits = " / ".join(f"{statistics.median(c[k] for c in lc):.2f}" for k in LIB_CALLS) if all(lc) and lc[0] else "—"
        but_monitor = statistics.median(r["per_query"]["all"]["Ir"] - r["per_query"].get("monitor", {}).get("Ir", 0) for r in by[lb])
        print(f"| {lb} | {cell(med(lb, 'all', 'Ir'))} | {cell(but_monitor)} | {cell(med(lb, 'mariadbd', 'Ir'))} | {cell(lib) if lib else '—'} | "
              f"{cell(med(lb, 'libc', 'Ir'))} | {cell(med(lb, 'ld.so', 'Ir'))} | {cell(l1)} | "
              f"{cell(med(lb, 'all', 'ILmr'))} / {cell(med(lb, 'all', 'DLmr'))} / {cell(med(lb, 'all', 'DLmw'))} | {waits} |")
    print()
    for lb in labels:
        r = by[lb][0]
        print(f"{lb}: normalised by {r['per']} ({', '.join(str(x['queries']) for x in by[lb])} calls in the window"
              + "".join(f", Questions {x['questions']}" for x in by[lb] if x.get("questions")) + "); per query: "
              + ", ".join(f"{k} {v:.2f}" for k, v in r["calls_per_query"].items()))
    # Differences against the first label of the same connection count.
    firsts = {}
    for lb in labels:
        conns = lb.rsplit("@", 1)[-1]
        if conns not in firsts:
            firsts[conns] = lb
            continue
        base = {(f["object"], f["function"]): f for f in by[firsts[conns]][0]["functions"]}
        mine = {(f["object"], f["function"]): f for f in by[lb][0]["functions"]}
        zero = {"Ir": 0, "ILmr": 0, "DLmr": 0, "DLmw": 0}
        keys = set(base) | set(mine)
        diff = [(k, {e: mine.get(k, zero)[e] - base.get(k, zero)[e] for e in zero}) for k in keys]
        for title, key in (("Ir", lambda d: d["Ir"]), ("512 KB misses (ILmr+DLmr+DLmw)", lambda d: d["ILmr"] + d["DLmr"] + d["DLmw"])):
            print(f"\n{lb} against {firsts[conns]}: the {a.top} largest differences per query in {title}:")
            for k, d in sorted(diff, key=lambda kd: -abs(key(kd[1])))[:a.top]:
                print(f"   {key(d):+9.1f}  (Ir {d['Ir']:+.0f}, ILmr {d['ILmr']:+.2f}, DLmr {d['DLmr']:+.2f}, DLmw {d['DLmw']:+.2f})  {k[0]}: {k[1][:80]}")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summarize")
    s.add_argument("dumps", nargs="+")
    s.add_argument("--label", required=True)
    s.add_argument("--per", default="dispatch_command")
    s.add_argument("--json", required=True)
    s.add_argument("--lib", default="libfiberize.so")
    s.add_argument("--questions", type=int, default=0)
    s.add_argument("--top", type=int, default=15)
    t = sub.add_parser("table")
    t.add_argument("jsons", nargs="+")
    t.add_argument("--top", type=int, default=15)
    a = p.parse_args()
    summarize(a) if a.cmd == "summarize" else table(a)


if __name__ == "__main__":
    main()
