#!/usr/bin/env python3
"""Check that ARCHITECTURE.md names only paths and items that exist.

Every backticked span is read as one of:

- a repository path (`src/vault/live.rs`, `docs/`, `tests/common/mod.rs`): it exists. A
  bare file or folder name (`live.rs`, `tools/`) exists somewhere under `src/`, `tests/`,
  `benches/`, `crates/`, `docs/` or `scripts/` (the section around it says where);
- a Rust path (`vault::browse::document_chunks`, `Store::read`, `cli::main()`): its
  leading segments are modules of the crate (or of the test crate, for `common::...`),
  matched against the end of a module's path, and each following segment is an item,
  method, field or variant defined in the crate's sources (the first one in the module's
  own files when a module was matched);
- a call (`all_tools()`, `.bound()`): a function or method of that name is defined;
- anything else (tool names, JSON keys, commands, protocol methods) is not checked.

Usage: python3 scripts/check_architecture.py [ARCHITECTURE.md]   (exit 1 when a name is
missing, listing each with its line)
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "ARCHITECTURE.md")
TREES = ["src", "tests", "benches", "crates", "docs", "scripts"]
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"

# Every file and folder of the checked trees, relative to the root.
files, dirs = set(), set()
for tree in TREES:
    for base, subdirs, names in os.walk(os.path.join(ROOT, tree)):
        subdirs[:] = [d for d in subdirs if d not in ("node_modules", "target")]
        rel = os.path.relpath(base, ROOT)
        dirs.add(rel)
        files.update(os.path.join(rel, n) for n in names)


def modules(src, prefix=()):
    """Module path (tuple) -> its file, for the crate whose root is `src`/lib.rs (or the
    test crate whose root is tests/tests.rs)."""
    out = {}
    for base, _, names in os.walk(src):
        for n in names:
            if not n.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(base, n), src)[:-3].split(os.sep)
            if rel in (["lib"], ["main"], ["tests"]):
                key = ()
            elif rel[-1] == "mod":
                key = tuple(rel[:-1])
            else:
                key = tuple(rel)
            out[prefix + key] = os.path.join(base, n)
    return out


mods = modules(os.path.join(ROOT, "src"))
mods.update(modules(os.path.join(ROOT, "tests"), ("#tests",)))
mods.update(modules(os.path.join(ROOT, "crates/vectors/src"), ("cairn_vectors",)))
sources = {f: open(os.path.join(ROOT, f), encoding="utf-8").read() for f in files if f.endswith(".rs")}
texts = {os.path.relpath(p, ROOT): sources[os.path.relpath(p, ROOT)] for p in mods.values()}

DEFINES = r"(?:fn|struct|enum|trait|const|static|type|mod|macro_rules!|union)\s+{name}\b"
# Names the document uses as placeholders or quotes from elsewhere, not as this
# repository's: the module-cycle script's example folders, the spec's function name, the
# phase contracts' folder in an agent's project.
NOT_OURS = {"a/", "b/", "computeEffectiveTools()", "prompts/phases/"}
# The standard prelude's names, and the crates Cargo.toml depends on: not checked.
PRELUDE = {"From", "Into", "Option", "Result", "Vec", "String", "Box", "Arc", "Default", "Drop", "Iterator", "Send", "Sync", "std", "core", "alloc"}
CARGO = open(os.path.join(ROOT, "Cargo.toml"), encoding="utf-8").read()
EXTERNAL = {m.replace("-", "_") for m in re.findall(r"^([a-z][a-z0-9_-]*)\s*=", CARGO, re.M)}


def defined_in(name, text):
    """Whether `text` defines `name`: an item, a re-export, a field or an enum variant."""
    n = re.escape(name)
    if re.search(DEFINES.format(name=n), text) or re.search(rf"\buse\b[^;]*\b{n}\b[^;]*;", text):
        return True
    if name[0].isupper():  # an enum variant
        return bool(re.search(rf"^\s*{n}\s*(?:,|\(|\{{|=)", text, re.M))
    return bool(re.search(rf"^\s*(?:pub(?:\([a-z]+\))?\s+)?{n}:\s", text, re.M))  # a field


def defined_anywhere(name):
    return any(defined_in(name, t) for t in sources.values())


def defined_for(owner, name):
    """Whether `name` is defined in a file that defines or implements the type `owner`
    (its methods, fields, variants and associated items)."""
    o = re.escape(owner)
    homes = [
        t
        for t in sources.values()
        if re.search(rf"\b(?:struct|enum|trait|type|union)\s+{o}\b|\bimpl\b[^{{;]*\b{o}\b[^{{;]*\{{", t)
    ]
    return any(defined_in(name, t) for t in homes)


def check_rust_path(token):
    """None when the Rust path `token` resolves, else why not."""
    token = re.sub(r"<.*>", "", token)  # generic arguments
    token = re.sub(r"\(.*\)$", "", token)  # call arguments
    segs = [s for s in token.split("::") if s]
    if segs and segs[0] == "crate":
        segs = segs[1:]
    if segs and (segs[0] in PRELUDE or segs[0] in EXTERNAL):
        return None
    if not segs or any(not re.fullmatch(IDENT + r"|\*", s) for s in segs):
        return None  # not a Rust path after all (a glob like `*_race*`, an operator)
    segs = [s for s in segs if s != "*"]
    # The longest run of leading segments that ends some module's path.
    for k in range(len(segs), 0, -1):
        matched = [m for m in mods if len(m) >= k and m[len(m) - k :] == tuple(segs[:k])]
        if matched:
            break
    else:
        k, matched = 0, []
    rest = segs[k:]
    if not rest:
        return None
    first, later = rest[0], rest[1:]
    if matched:
        own = [texts[os.path.relpath(mods[m], ROOT)] for m in matched]
        inner = [t for m in mods for mm in matched if m[: len(mm)] == mm for t in [texts[os.path.relpath(mods[m], ROOT)]]]
        if not any(defined_in(first, t) for t in own + inner):
            return f"`{first}` is not defined in module {'::'.join(segs[:k])}"
    elif not defined_anywhere(first):
        return f"`{first}` is defined nowhere"
    owner = first
    for s in later:
        if owner[0].isupper():
            if not defined_for(owner, s):
                return f"`{s}` is not defined for `{owner}`"
        elif not defined_anywhere(s):
            return f"`{s}` is defined nowhere"
        owner = s
    return None


def check_path(token):
    """None when the repository path `token` exists, else why not."""
    path = token.rstrip("/")
    if "*" in path or "<" in path or "…" in path:
        path = re.split(r"[*<…]", path)[0].rstrip("/")  # the fixed part of a pattern
        if not path:
            return None
    full = os.path.join(ROOT, path)
    if os.path.exists(full):
        return None
    if "/" in path and path.split("/")[0] in TREES + [".ci", "models", "migrations", "index", "samples", "crates", ".cargo"]:
        return f"{token} does not exist"
    # A name relative to the section's folder: anywhere in the checked trees.
    tail = os.sep + path
    if any(f.endswith(tail) for f in files) or any(d.endswith(tail) for d in dirs):
        return None
    return f"{token} does not exist (nor under any of {', '.join(TREES)})"


PATHLIKE = re.compile(r"^\.?[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-*<>…]*)*$")
EXT = (".rs", ".md", ".py", ".sh", ".json", ".toml", ".mjs", ".sql", ".jsonl", ".tsv")


def classify(token):
    token = token.strip()
    if not token or token in NOT_OURS or " " in token or token.startswith(("/", "<", "http", "cairn://", "postgres://")):
        return None
    if "::" in token:
        return check_rust_path
    if re.fullmatch(r"\.?" + IDENT + r"\(\)", token):
        return lambda t: None if defined_anywhere(t.strip(".()")) else f"`{t}` is defined nowhere"
    if PATHLIKE.match(token) and (token.endswith(EXT) or token.endswith("/") or "/" in token):
        first = token.split("/")[0]
        is_repo = first in TREES + [".ci", "models", "migrations", "index", "samples", ".cargo"]
        if token.endswith(EXT) or token.endswith("/") or is_repo:
            return check_path
    return None


def main():
    problems = []
    in_code = False
    for no, line in enumerate(open(DOC, encoding="utf-8"), 1):
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        for token in re.findall(r"`([^`]+)`", line):
            check = classify(token)
            why = check(token) if check else None
            if why:
                problems.append(f"{os.path.basename(DOC)}:{no}: {why}")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} names in {os.path.basename(DOC)} that do not exist")
        return 1
    print(f"{os.path.basename(DOC)}: every path and Rust item it names exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
