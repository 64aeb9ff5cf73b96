#!/usr/bin/env python3
"""Print the import cycles between the crate's source files (strongly connected components
of the file-level `crate::`/`super::` reference graph, test modules included).

Usage: python3 scripts/module_cycles.py [src-dir]   (exit 1 when a cycle exists)
"""
import os
import re
import sys

src = sys.argv[1] if len(sys.argv) > 1 else "src"
mods = {}  # module path tuple -> file
for root, _, files in os.walk(src):
    for f in files:
        if not f.endswith(".rs"):
            continue
        rel = os.path.relpath(os.path.join(root, f), src)[:-3].split(os.sep)
        if rel in (["lib"], ["main"]):
            key = ()
        elif rel[-1] == "mod":
            key = tuple(rel[:-1])
        else:
            key = tuple(rel)
        mods[key] = os.path.join(root, f)

def resolve(path):
    # longest prefix of `path` that is a module file
    for n in range(len(path), -1, -1):
        if tuple(path[:n]) in mods:
            return tuple(path[:n])
    return ()

ident = r"[A-Za-z_][A-Za-z0-9_]*"
edges = {m: set() for m in mods}
for m, f in mods.items():
    text = open(f, encoding="utf-8").read()
    # drop comments
    text = re.sub(r"//[^\n]*", "", text)
    # expand `use crate::a::{b, c::d}` groups one level
    for mt in re.finditer(r"\b(crate|super)((?:::" + ident + r")*)::\{([^}]*)\}", text):
        base = [p for p in mt.group(2).split("::") if p]
        for item in mt.group(3).split(","):
            item = item.strip().split(" as ")[0]
            parts = [p for p in item.split("::") if p and p != "self"]
            start = list(m[:-1]) if mt.group(1) == "super" else []
            if mt.group(1) == "super" and os.path.basename(f) == "mod.rs":
                start = list(m[:-1])
            tgt = resolve(start + base + parts)
            if tgt != m:
                edges[m].add(tgt)
    for mt in re.finditer(r"\b(crate|super)((?:::" + ident + r")+)", text):
        parts = [p for p in mt.group(2).split("::") if p]
        start = list(m[:-1]) if mt.group(1) == "super" else []
        tgt = resolve(start + parts)
        if tgt != m:
            edges[m].add(tgt)

# Tarjan
index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(10000)
def strong(v):
    index[v] = low[v] = counter[0]; counter[0] += 1
    stack.append(v); on.add(v)
    for w in edges[v]:
        if w not in mods:
            continue
        if w not in index:
            strong(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v:
                break
        sccs.append(comp)
for v in mods:
    if v not in index:
        strong(v)
name = lambda k: "::".join(k) or "crate"
cycles = [sorted(map(name, c)) for c in sccs if len(c) > 1 and () not in c]
for c in sorted(cycles):
    print(f"cycle ({len(c)} modules): " + ", ".join(c))
print(f"{len(cycles)} cycle(s) among {len(mods)} modules")
sys.exit(1 if cycles else 0)
