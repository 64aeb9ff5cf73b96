#!/usr/bin/env python3
"""The sealed evaluation: graded sets nobody tuning Cairn reads (protocol: tests/eval/README.md, "Sealed sets").

The sets live only in tests/eval/sealed/sets.tar.xz, whose SHA-256 is in tests/eval/sealed/MANIFEST.json.
This script unpacks them into a temporary directory, runs `cairn eval learnings` and `cairn eval vault` on
them and prints aggregate figures only (overall and per query kind, nDCG@10 and MRR@10, for Cairn's ranking,
BM25 alone, dense alone and their RRF); it never prints a query, a learning, a document or a per-query outcome.

    python3 tests/eval/sealed.py read --reader NAME [--note TEXT] [--cairn BIN]
        A reading: the figures, and a line appended to tests/eval/sealed/READS.log (date, commit, reader, note).
    python3 tests/eval/sealed.py floors --cairn BIN FLOOR...
        The floor check of the test suite: FLOOR is SCOPE:SYSTEM:METRIC[:KIND]=VALUE (SCOPE learnings or vault,
        pooled over the sets of that kind; SYSTEM cairn|bm25|dense|rrf; METRIC mrr10|ndcg10). Prints which
        floors hold and, for a floor that does not, the figure under it; exits 1 when one does not hold.
        Not a reading (nothing is decided but pass or fail), so nothing is logged.
    python3 tests/eval/sealed.py verify
        Check the archive against the manifest (hashes, members, counts); prints counts only.
    python3 tests/eval/sealed.py unpack DEST --reader NAME [--note TEXT]
        The sets' text into DEST, for a set writer adding or repairing a set (logged: reading the text
        rules the reader out of ranking work for the release).
    python3 tests/eval/sealed.py seal SRC_DIR --writer NAME
        Pack SRC_DIR (learnings/*.jsonl, vault/NAME/{corpus/,queries.jsonl,qrels/test.tsv}) into the archive
        and rewrite the manifest. Used by a set writer; the sources are not committed.
"""
import argparse
import datetime
import hashlib
import io
import json
import lzma
import os
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SEALED = os.path.join(HERE, "sealed")
ARCHIVE = os.path.join(SEALED, "sets.tar.xz")
MANIFEST = os.path.join(SEALED, "MANIFEST.json")
READS = os.path.join(SEALED, "READS.log")

SYSTEMS = ("cairn", "bm25", "dense", "rrf", "rrf-bm25-dense")
METRICS = ("mrr10", "ndcg10")
# The report's system names, per kind of set, mapped to the names printed here.
LEARNINGS_NAMES = {
    "cairn": "cairn",
    "lexical": "bm25",
    "dense": "dense",
    "rrf": "rrf",
    "rrf-lexical-dense": "rrf-bm25-dense",
}


def vault_name(name):
    if name.startswith("cairn"):
        return "cairn"
    if name.startswith("lexical-only"):
        return "bm25"
    if name.startswith("dense-only"):
        return "dense"
    if name.startswith("rrf"):
        return "rrf"
    return None


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def fail(msg):
    print(f"sealed: {msg}", file=sys.stderr)
    sys.exit(2)


# ---------------------------------------------------------------- the archive


def members_of(src):
    """The files of a source directory as (archive name, bytes), in a fixed order."""
    out = []
    for root, dirs, files in os.walk(src):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            rel = os.path.relpath(p, src).replace(os.sep, "/")
            if not (rel.startswith("learnings/") or rel.startswith("vault/")):
                fail(f"{rel}: only learnings/ and vault/ belong in a sealed source directory")
            with open(p, "rb") as fh:
                out.append((rel, fh.read()))
    return out


def counts_of(members):
    """Per set: learnings, queries, documents (no content)."""
    sets = {}
    for name, data in members:
        parts = name.split("/")
        if parts[0] == "learnings" and name.endswith(".jsonl"):
            s = sets.setdefault(name, {"kind": "learnings", "learnings": 0, "queries": 0, "categories": {}})
            for line in data.decode("utf-8").splitlines():
                if not line.strip():
                    continue
                o = json.loads(line)
                if o["type"] == "learning":
                    s["learnings"] += 1
                else:
                    s["queries"] += 1
                    s["categories"][o["category"]] = s["categories"].get(o["category"], 0) + 1
        elif parts[0] == "vault" and len(parts) >= 3:
            key = "vault/" + parts[1]
            s = sets.setdefault(key, {"kind": "vault", "documents": 0, "queries": 0, "categories": {}})
            if parts[2] == "corpus":  # every format the vault reads, not only Markdown
                s["documents"] += 1
            elif parts[2] == "queries.jsonl":
                for line in data.decode("utf-8").splitlines():
                    if line.strip():
                        o = json.loads(line)
                        s["queries"] += 1
                        c = o.get("metadata", {}).get("category", "all")
                        s["categories"][c] = s["categories"].get(c, 0) + 1
    return sets


def seal(src, writer):
    members = members_of(src)
    if not members:
        fail(f"{src}: nothing to seal")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    packed = lzma.compress(buf.getvalue(), preset=9)
    os.makedirs(SEALED, exist_ok=True)
    with open(ARCHIVE, "wb") as fh:
        fh.write(packed)
    manifest = {
        "archive": "sets.tar.xz",
        "sha256": sha256(packed),
        "sealed": datetime.date.today().isoformat(),
        "writer": writer,
        "members": {name: sha256(data) for name, data in members},
        "sets": counts_of(members),
    }
    with open(MANIFEST, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=1, sort_keys=True)
        fh.write("\n")
    print(f"sealed {len(members)} files into {os.path.relpath(ARCHIVE, REPO)} ({len(packed)} bytes)")


def unpack(dest):
    """Verify the archive against the manifest and unpack it into `dest`; returns the manifest."""
    with open(MANIFEST, encoding="utf-8") as fh:
        manifest = json.load(fh)
    with open(ARCHIVE, "rb") as fh:
        packed = fh.read()
    if sha256(packed) != manifest["sha256"]:
        fail("sets.tar.xz does not match MANIFEST.json (a sealed set is changed by re-sealing, see the README)")
    seen = {}
    with tarfile.open(fileobj=io.BytesIO(packed), mode="r:xz") as tar:
        for info in tar.getmembers():
            parts = info.name.split("/")
            if not info.isfile() or info.name.startswith("/") or ".." in parts:
                fail(f"unexpected archive member {info.name!r}")
            data = tar.extractfile(info).read()
            seen[info.name] = sha256(data)
            path = os.path.join(dest, *parts)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as out:
                out.write(data)
    if seen != manifest["members"]:
        fail("the archive's members differ from MANIFEST.json")
    return manifest


# ---------------------------------------------------------------- running the evaluation


def default_cairn():
    for p in ("target/release/cairn", "target/debug/cairn"):
        full = os.path.join(REPO, p)
        if os.path.exists(full):
            return full
    return "cairn"


def run_eval(cairn, scratch, args):
    """`cairn eval ... --json`; stdout parsed, stderr (progress) kept out of sight unless it fails."""
    cmd = [cairn, "--db", os.path.join(scratch, "unused.db"), "eval", *args, "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=scratch)
    if p.returncode != 0:
        tail = "\n".join(p.stderr.strip().splitlines()[-5:])
        fail(f"cairn eval {args[0]} failed ({p.returncode}):\n{tail}")
    return json.loads(p.stdout)


def summary(s):
    return {"queries": s["queries"], "mrr10": s["mrr10"], "ndcg10": s["ndcg10"]}


def figures(root):
    """Aggregate figures per set: {set: {"kind", "semantic", "systems": {system: {"overall", "categories"}}}}."""
    out = {}
    lpaths = sorted(
        os.path.join(root, "learnings", f) for f in os.listdir(os.path.join(root, "learnings")) if f.endswith(".jsonl")
    ) if os.path.isdir(os.path.join(root, "learnings")) else []
    if lpaths:
        report = run_eval(CAIRN, root, ["learnings", *lpaths])
        for s in report["sets"]:
            systems = {}
            for sy in s["systems"]:
                name = LEARNINGS_NAMES.get(sy["system"])
                if name:
                    systems[name] = {
                        "overall": summary(sy["overall"]),
                        "categories": {c: summary(v) for c, v in sy["categories"].items()},
                    }
            out["learnings/" + s["set"]] = {
                "kind": "learnings",
                "semantic": s.get("semantic_unavailable") is None,
                "systems": systems,
            }
    vroot = os.path.join(root, "vault")
    for name in sorted(os.listdir(vroot)) if os.path.isdir(vroot) else []:
        d = os.path.join(vroot, name)
        report = run_eval(CAIRN, root, [
            "vault",
            "--corpus", os.path.join(d, "corpus"),
            "--queries", os.path.join(d, "queries.jsonl"),
            "--qrels", os.path.join(d, "qrels", "test.tsv"),
        ])
        systems = {}
        for sy in report["systems"]:
            n = vault_name(sy["name"])
            if n and n not in systems:
                systems[n] = {
                    "overall": summary(sy["overall"]),
                    "categories": {c: summary(v) for c, v in sy["categories"].items()},
                }
        dense = systems.get("dense", {}).get("overall", {}).get("mrr10", 0.0)
        out["vault/" + name] = {"kind": "vault", "semantic": dense > 0.0, "systems": systems}
    return out


def pooled(sets, kind):
    """Query-weighted means over the sets of one kind (what one big set of their queries would give)."""
    acc = {}
    for s in sets.values():
        if s["kind"] != kind:
            continue
        for sy, f in s["systems"].items():
            rows = [("overall", f["overall"])] + sorted(f["categories"].items())
            for cat, v in rows:
                a = acc.setdefault(sy, {}).setdefault(cat, {"queries": 0, "mrr10": 0.0, "ndcg10": 0.0})
                a["queries"] += v["queries"]
                a["mrr10"] += v["mrr10"] * v["queries"]
                a["ndcg10"] += v["ndcg10"] * v["queries"]
    out = {}
    for sy, cats in acc.items():
        out[sy] = {"categories": {}}
        for cat, a in cats.items():
            n = max(a["queries"], 1)
            v = {"queries": a["queries"], "mrr10": a["mrr10"] / n, "ndcg10": a["ndcg10"] / n}
            if cat == "overall":
                out[sy]["overall"] = v
            else:
                out[sy]["categories"][cat] = v
    return out


def table(label, systems):
    first = systems.get("cairn") or next(iter(systems.values()))
    cats = sorted(first["categories"])
    lines = [f"\n{label} ({first['overall']['queries']} queries)\n"]
    head = "| system | nDCG@10 | MRR@10 |" + "".join(f" {c} ({first['categories'][c]['queries']}) nDCG / MRR |" for c in cats)
    lines.append(head)
    lines.append("|---|---|---|" + "---|" * len(cats))
    for sy in SYSTEMS:
        f = systems.get(sy)
        if not f:
            continue
        row = f"| {sy} | {f['overall']['ndcg10']:.3f} | {f['overall']['mrr10']:.3f} |"
        for c in cats:
            v = f["categories"].get(c)
            row += f" {v['ndcg10']:.3f} / {v['mrr10']:.3f} |" if v else " |"
        lines.append(row)
    return "\n".join(lines)


def commit():
    def git(*a):
        p = subprocess.run(["git", "-C", REPO, *a], capture_output=True, text=True)
        return p.stdout.strip() if p.returncode == 0 else ""
    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def log_reading(reader, note):
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    line = f"{when}\tcommit {commit()}\treader {reader}\t{note or '-'}\n"
    with open(READS, "a", encoding="utf-8") as fh:
        fh.write(line)
    return line.strip()


def read(reader, note):
    with tempfile.TemporaryDirectory(prefix="cairn-sealed-") as root:
        unpack(root)
        sets = figures(root)
    if not all(s["semantic"] for s in sets.values()):
        fail("the embedding model is unavailable, so dense figures are missing: fix that before a reading")
    print("sealed evaluation: aggregate figures only (rrf: learnings fuse the blend and dense, the vault dense and BM25)")
    for kind in ("learnings", "vault"):
        names = [n for n, s in sets.items() if s["kind"] == kind]
        for n in names:
            print(table(n, sets[n]["systems"]))
        if len(names) > 1:
            print(table(f"{kind}: all {len(names)} sets pooled", pooled(sets, kind)))
    line = log_reading(reader, note)
    print(f"\nrecorded in {os.path.relpath(READS, REPO)}: {line}")


def parse_floor(text):
    try:
        key, value = text.split("=", 1)
        parts = key.split(":")
        scope, system, metric = parts[:3]
        kind = parts[3] if len(parts) == 4 else None
        if scope not in ("learnings", "vault") or system not in SYSTEMS or metric not in METRICS or len(parts) > 4:
            raise ValueError
        return scope, system, metric, kind, float(value), key
    except ValueError:
        fail(f"floor {text!r}: expected SCOPE:SYSTEM:METRIC[:KIND]=VALUE, e.g. learnings:cairn:mrr10=0.80")


def floors(specs):
    wanted = [parse_floor(f) for f in specs]
    if not wanted:
        fail("no floor given")
    with tempfile.TemporaryDirectory(prefix="cairn-sealed-") as root:
        unpack(root)
        sets = figures(root)
    if not all(s["semantic"] for s in sets.values()):
        fail("the embedding model is unavailable: the floors need the dense half")
    ok = True
    for scope, system, metric, kind, floor, key in wanted:
        p = pooled(sets, scope).get(system)
        v = None
        if p:
            v = p["overall"] if kind is None else p["categories"].get(kind)
        if v is None:
            print(f"floor {key}: no such figure")
            ok = False
        elif v[metric] + 1e-9 < floor:
            print(f"floor {key} >= {floor:.3f}: FAILS at {v[metric]:.3f}")
            ok = False
        else:
            print(f"floor {key} >= {floor:.3f}: holds")
    sys.exit(0 if ok else 1)


def verify():
    with tempfile.TemporaryDirectory(prefix="cairn-sealed-") as root:
        manifest = unpack(root)
        recount = counts_of(
            [(n, open(os.path.join(root, *n.split("/")), "rb").read()) for n in manifest["members"]]
        )
        if recount != manifest["sets"]:
            fail("the manifest's counts differ from the archive")
        # The learnings sets pass the format checks of every set (smaller minimums: a
        # sealed set is one of several), every query in the held-out part.
        for name in sorted(n for n in manifest["members"] if n.startswith("learnings/")):
            path = os.path.join(root, *name.split("/"))
            for check in (
                ["check_set.py", path, "--min-learnings", "100", "--min-per-category", "20"],
                ["split.py", path, "--all-heldout", "--check"],
            ):
                p = subprocess.run([sys.executable, os.path.join(HERE, check[0]), *check[1:]],
                                   capture_output=True, text=True)
                if p.returncode != 0:
                    fail(f"{name}: {check[0]} failed:\n{p.stdout}{p.stderr}")
    for name, s in sorted(manifest["sets"].items()):
        size = f"{s['learnings']} learnings" if s["kind"] == "learnings" else f"{s['documents']} documents"
        print(f"{name}: {size}, {s['queries']} queries {dict(sorted(s['categories'].items()))}")
    print(f"archive matches the manifest (sha256 {manifest['sha256'][:16]}…)")


def main():
    global CAIRN
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("read", help="a logged reading: aggregate figures")
    r.add_argument("--reader", required=True, help="who reads (recorded in READS.log)")
    r.add_argument("--note", default="", help="why (recorded in READS.log)")
    r.add_argument("--cairn", default=None, help="the cairn binary (default: target/release, target/debug, PATH)")
    f = sub.add_parser("floors", help="the test suite's floor check (pass or fail, not logged)")
    f.add_argument("--cairn", default=None)
    f.add_argument("floor", nargs="+")
    sub.add_parser("verify", help="check the archive against the manifest")
    u = sub.add_parser("unpack", help="the sets' text, for a set writer (logged)")
    u.add_argument("dest")
    u.add_argument("--reader", required=True)
    u.add_argument("--note", default="")
    s = sub.add_parser("seal", help="pack a source directory into the archive")
    s.add_argument("src")
    s.add_argument("--writer", required=True)
    a = ap.parse_args()
    CAIRN = getattr(a, "cairn", None) or default_cairn()
    if os.sep in CAIRN:
        CAIRN = os.path.abspath(CAIRN)  # the evaluations run in the scratch directory
    if a.cmd in ("read", "unpack") and any(c in a.reader + a.note for c in "\t\n"):
        fail("--reader and --note are one line without tabs")
    if a.cmd == "read":
        read(a.reader, a.note)
    elif a.cmd == "unpack":
        if os.path.exists(a.dest) and os.listdir(a.dest):
            fail(f"{a.dest}: not empty")
        unpack(a.dest)
        print(f"unpacked into {a.dest}; recorded: {log_reading(a.reader, 'unpacked the text: ' + (a.note or '-'))}")
    elif a.cmd == "floors":
        floors(a.floor)
    elif a.cmd == "verify":
        verify()
    else:
        seal(a.src, a.writer)


CAIRN = "cairn"

if __name__ == "__main__":
    main()
