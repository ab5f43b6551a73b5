#!/usr/bin/env python3
"""Checks the layering of libfiberize/src (issue 15): the folders are layers, and a
module may import only modules of its own layer or of the layers below it.

Also reports any import circle (two files or more) and files over 600 lines (those named
in LONG_FILES with the reason they stay whole are allowed). Exit status 1 on any
violation. Reads `crate::a::b` paths, `use crate::{...}` groups and `super::` paths;
comments are ignored (doc links do not count as imports).

    python3 scripts/layers.py [-v]     # -v: print every module's imports
"""
import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "libfiberize", "src")

# Layer of each top-level module (lib.rs's table says the same).
LAYERS = {"lib": 99, "base": 0, "runtime": 1, "observe": 2, "signal": 3, "sync": 4, "io": 5, "thread": 6, "tz": 1}
# `tz` sits on `base` alone; rank 1 lets nothing but base below it, and nothing imports it.
MAX_LINES = 600
# The model-checked protocol files: libfiberize/tests/loom_protocols.rs compiles them
# as they are against loom's atomics, so they may use nothing of the crate but
# `crate::base::loom` (src/base/loom.rs) and each other (the test mounts them at the
# same paths).
PROTOCOL_FILES = {"io::waiter_slot", "runtime::signals::donor_signals", "runtime::sleep::park_state", "runtime::signals::signal_state", "runtime::sleep::sleep_state", "sync::lock_word", "sync::parking_quick", "sync::rwlock::word", "io::epoll_membership"}
LONG_FILES = {
    # file: why it stays whole
}


def modules():
    mods = {}
    for dirpath, _, files in os.walk(SRC):
        for f in files:
            if f.endswith(".rs"):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, SRC)[:-3]
                if rel.endswith("/mod"):
                    rel = rel[:-4]
                mods[rel.replace("/", "::")] = path
    return mods


def strip_comments(src):
    return re.sub(r"//[^\n]*", "", src)


def imports(name, src, names):
    def resolve(path):
        parts = path.split("::")
        for i in range(len(parts), 0, -1):
            m = "::".join(parts[:i])
            if m in names:
                return m
        return None

    found = set()
    src = strip_comments(src)
    for m in re.finditer(r"crate::\{([^;]*?)\}\s*;", src, re.S):
        for item in m.group(1).split(","):
            item = item.strip().split(" as ")[0].replace("{", "").replace("}", "").strip()
            r = resolve(item) if item else None
            if r:
                found.add(r)
    for m in re.finditer(r"crate::([a-z_][a-z_0-9]*(?:::[a-z_][a-z_0-9]*)*)", src):
        r = resolve(m.group(1))
        if r:
            found.add(r)
    base = name.split("::")[:-1]
    for m in re.finditer(r"super::([a-z_][a-z_0-9]*(?:::[a-z_][a-z_0-9]*)*)", src):
        r = resolve("::".join(base + [m.group(1)]))
        if r:
            found.add(r)
    # `use super::*` (one module split into files): the parent.
    if re.search(r"use super::\*", src) and base:
        found.add("::".join(base))
    # A child of a split module names its siblings without a prefix (`worker::f`), and
    # a folder's mod.rs names its children (`mod x;` and `pub use x::...` re-exports do
    # not count: they are the folder's API, not a use of the child's code).
    body = re.sub(r"(?m)^\s*(pub(\([a-z]+\))? )?(mod [a-z_]+;|use [a-z_]+::[^;]*;)", "", src)
    siblings = {n.split("::")[-1]: n for n in names if n.split("::")[:-1] == base}
    children = {n.split("::")[-1]: n for n in names if n.split("::")[:-1] == name.split("::")}
    for short, full in list(siblings.items()) + list(children.items()):
        if re.search(r"(?<![:\w])" + short + r"::[a-zA-Z_]", body):
            found.add(full)
    found.discard(name)
    return found


def longest_cycles(deps, limit):
    """Simple cycles longer than `limit` (each reported once, smallest rotation)."""
    out = set()
    nodes = sorted(deps)

    def dfs(start, v, path, on_path):
        for w in deps[v]:
            if w == start and len(path) > limit:
                out.add(tuple(path))
            elif w not in on_path and w > start and len(path) < 12:
                on_path.add(w)
                path.append(w)
                dfs(start, w, path, on_path)
                path.pop()
                on_path.discard(w)

    for s in nodes:
        dfs(s, s, [s], {s})
    return sorted(out)


def main():
    mods = modules()
    names = set(mods)
    deps = {m: imports(m, open(p).read(), names) for m, p in mods.items()}
    # A folder's mod.rs may re-export and wire its own children; it does not count
    # as importing them.
    errors = []
    for m, ds in sorted(deps.items()):
        top = m.split("::")[0]
        for d in sorted(ds):
            dtop = d.split("::")[0]
            if dtop == top:
                continue
            if LAYERS.get(dtop, 99) >= LAYERS.get(top, 99) and top != "lib":
                errors.append(f"layer: {m} (layer {LAYERS.get(top)}) imports {d} (layer {LAYERS.get(dtop)})")
    for m in sorted(PROTOCOL_FILES):
        if m not in mods:
            errors.append(f"protocol: {m} is listed in PROTOCOL_FILES but does not exist")
            continue
        text = re.sub(r"//[^\n]*", "", open(mods[m]).read())
        for path in sorted(set(re.findall(r"crate::[A-Za-z_][A-Za-z_0-9:]*", text))):
            if not path.startswith("crate::base::loom") and not any(
                path == "crate::" + q or path.startswith("crate::" + q + "::") for q in PROTOCOL_FILES
            ):
                errors.append(f"protocol: {m} uses {path}; a model-checked file may use only crate::base::loom and other protocol files")
    for c in longest_cycles(deps, 1):
        errors.append("circle of %d files: %s" % (len(c), " -> ".join(c + (c[0],))))
    for m, p in sorted(mods.items()):
        n = sum(1 for _ in open(p))
        rel = os.path.relpath(p, SRC)
        if n > MAX_LINES and rel not in LONG_FILES:
            errors.append(f"size: {rel} has {n} lines (over {MAX_LINES}; split it or say why in LONG_FILES)")
    if "-v" in sys.argv:
        for m in sorted(deps):
            print(m, "->", " ".join(sorted(deps[m])))
    for e in errors:
        print(e)
    print(f"layers: {len(mods)} modules, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
