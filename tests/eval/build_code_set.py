#!/usr/bin/env python3
"""Build the code-search sets of `cairn eval vault --code` from the crates in cargo's
registry on this machine (issue 58).

Each query is the first sentence of a documented function's `///` comment; the answer is
that function (`path#name`: a hit of that file whose heading path contains the name).
The corpus is the crates' source files holding those functions, with every `///` and
`//!` line removed, so the words of the query are not in the indexed code. Crates are
split by a hash of their name into a tuning part and a held-out part (separate corpora).

    python3 tests/eval/build_code_set.py OUT_DIR [tests/eval/vault-code/crates.txt]
    cairn eval vault --code --corpus OUT_DIR/tune/corpus --queries OUT_DIR/tune/queries.jsonl --qrels OUT_DIR/tune/qrels.tsv
    (and the same for OUT_DIR/heldout)

The checked-in `vault-code/crates.txt` lists the crate versions the figures in
docs/vault.md were measured on; given as the second argument, only those crates are read,
so the set is rebuilt as committed after the registry has gained crates.
"""

import hashlib
import json
import os
import re
import sys
from pathlib import Path

REGISTRY = Path.home() / ".cargo/registry/src"
SKIP = re.compile(r"(^windows|^winapi|-sys$|-impl$|-macros?$|derive|^wasm|^js-sys|^web-sys|^libc$|^linux-raw|^rustix$|^icu_|^zerocopy|^syn$|^proc-macro|^quote$)")
FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+\"C\"\s+)?fn\s+([A-Za-z_][A-Za-z0-9_]*)")
MAX_PER_FILE = 2
MAX_PER_CRATE = 6
MAX_QUERIES = 150
MAX_FILE_BYTES = 60_000


def first_sentence(doc_lines):
    text = []
    for l in doc_lines:
        if not l.strip():
            break
        text.append(l.strip())
    s = " ".join(text)
    s = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", s)
    s = re.sub(r"\[`?([^\]`]+)`?\]", r"\1", s)
    s = s.replace("`", "")
    m = re.match(r"(.+?[.!?])(\s|$)", s)
    s = m.group(1) if m else s
    return s.strip()


def crates(only=None):
    latest = {}
    for reg in REGISTRY.iterdir():
        for d in reg.iterdir():
            m = re.match(r"(.+)-(\d+\.\d+\.\d+.*)$", d.name)
            if not m or SKIP.search(m.group(1)) or not (d / "src").is_dir():
                continue
            if only is not None and d.name not in only:
                continue
            latest[m.group(1)] = max(latest.get(m.group(1), d), d, key=lambda p: p.name)
    return [latest[k] for k in sorted(latest)]


def functions(path):
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    out = []
    doc = []
    for line in lines:
        s = line.strip()
        if s.startswith("///"):
            doc.append(s[3:])
            continue
        if s.startswith("#[") and doc:
            continue
        m = FN.match(line)
        if m and doc:
            out.append((m.group(7), first_sentence(doc)))
        doc = []
    return out


def strip_docs(text):
    return "\n".join(l for l in text.splitlines() if not l.lstrip().startswith(("///", "//!"))) + "\n"


def part(name):
    return "tune" if int(hashlib.sha256(name.encode()).hexdigest(), 16) % 2 == 0 else "heldout"


def main(out, only=None):
    out = Path(out)
    sets = {"tune": [], "heldout": []}
    files = {"tune": {}, "heldout": {}}
    used = []
    for crate in crates(only):
        p = part(crate.name.rsplit("-", 1)[0])
        if len(sets[p]) >= MAX_QUERIES:
            continue
        took = 0
        for f in sorted((crate / "src").rglob("*.rs")):
            if took >= MAX_PER_CRATE:
                break
            if f.stat().st_size > MAX_FILE_BYTES or "test" in f.name:
                continue
            fns = functions(f)
            names = [n for n, _ in fns]
            picked = 0
            for name, q in fns:
                words = q.split()
                # Unambiguous in its file (the qrel matches a heading by substring).
                if sum(1 for n in names if name in n) != 1 or not 5 <= len(words) <= 30:
                    continue
                if q.lower().startswith(("see ", "this is", "safety", "deprecated")) or "#" in q:
                    continue
                if picked >= MAX_PER_FILE or took >= MAX_PER_CRATE or len(sets[p]) >= MAX_QUERIES:
                    break
                rel = f"{crate.name}/{f.relative_to(crate)}"
                sets[p].append((f"{p}-{len(sets[p]):03}", q, f"{rel}#{name}"))
                files[p][rel] = f
                picked += 1
                took += 1
        if took:
            used.append(crate.name)
    for p, qs in sets.items():
        d = out / p
        for rel, f in files[p].items():
            target = d / "corpus" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(strip_docs(f.read_text(encoding="utf-8", errors="replace")))
        with open(d / "queries.jsonl", "w") as fq:
            for qid, text, _ in qs:
                fq.write(json.dumps({"_id": qid, "text": text, "metadata": {"category": "doc-sentence"}}) + "\n")
        with open(d / "qrels.tsv", "w") as fr:
            fr.write("query-id\tcorpus-id\tscore\n")
            for qid, _, answer in qs:
                fr.write(f"{qid}\t{answer}\t1\n")
        print(f"{p}: {len(qs)} queries, {len(files[p])} files", file=sys.stderr)
    (out / "crates.txt").write_text("\n".join(used) + "\n")


if __name__ == "__main__":
    only = set(Path(sys.argv[2]).read_text().split()) if len(sys.argv) > 2 else None
    main(sys.argv[1], only)
