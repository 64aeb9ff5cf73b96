#!/usr/bin/env python3
"""Print the import cycles of the crate (strongly connected components of the
`crate::`/`super::` reference graph, test modules included), at two levels:

- files: one module imports another that (through others) imports it;
- folders: a reference from a module under folder `a/` to one under a sibling `b/`
  (siblings: the first components where their paths differ, at least one of them a
  folder) is an edge `a/ -> b/`; a cycle of such edges is a folder-level cycle, even
  when no file-level cycle exists (`a/x` uses `b/y`, `b/z` uses `a/w`).

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

def sccs_of(nodes, out):
    """Strongly connected components of the graph `out` (node -> set of nodes)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def strong(v):
        index[v] = low[v] = counter[0]; counter[0] += 1
        stack.append(v); on.add(v)
        for w in out.get(v, ()):
            if w not in nodes:
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
            found.append(comp)

    for v in nodes:
        if v not in index:
            strong(v)
    return found


name = lambda k: "::".join(k) or "crate"
cycles = [sorted(map(name, c)) for c in sccs_of(set(mods), edges) if len(c) > 1 and () not in c]
for c in sorted(cycles):
    print(f"cycle ({len(c)} modules): " + ", ".join(c))
print(f"{len(cycles)} cycle(s) among {len(mods)} modules")

folders = {m[:d] for m in mods for d in range(1, len(m))}
siblings = {}
for m, targets in edges.items():
    for t in targets:
        if t not in mods:
            continue
        d = 0
        while d < min(len(m), len(t)) and m[d] == t[d]:
            d += 1
        if d >= len(m) or d >= len(t):
            continue  # a module and its own ancestor
        a, b = m[: d + 1], t[: d + 1]
        if a in folders or b in folders:
            siblings.setdefault(a, set()).add(b)
nodes = set(siblings) | {b for v in siblings.values() for b in v}
folder_name = lambda k: name(k) + ("/" if k in folders else "")
folder_cycles = [sorted(map(folder_name, c)) for c in sccs_of(nodes, siblings) if len(c) > 1]
for c in sorted(folder_cycles):
    print(f"folder cycle ({len(c)}): " + ", ".join(c))
print(f"{len(folder_cycles)} cycle(s) among {len(folders)} folders")
sys.exit(1 if cycles or folder_cycles else 0)
