#!/usr/bin/env python3
"""Validate the learning-pairs set (format: see tests/eval/README.md, "learning-pairs.jsonl").

Usage: python3 tests/eval/check_pairs.py [tests/eval/learning-pairs.jsonl] [--min-pairs N] [--min-holdout F]
Exits non-zero and lists every problem found; prints the set's figures when it is valid.
Standard library only.
"""
import collections, json, os, re, sys, unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_set import norm  # noqa: E402  (the normal form of add_learning, one copy)

LABELS = {
    "duplicate": ("paraphrase", "restatement"),
    "distinct": ("negation", "version", "tool", "path", "value", "topic", "unrelated"),
}
KIND_LABEL = {k: lab for lab, kinds in LABELS.items() for k in kinds}
KINDS = tuple(KIND_LABEL)
TYPES = ("convention", "gotcha", "pattern")
SPLITS = ("tune", "holdout")
TEXT_MIN, TEXT_MAX = 40, 1500


def bad_char(s):
    """First character that is not allowed: control characters other than \\n (\\t and \\r
    included) and format characters (bidirectional controls, zero-width, tags)."""
    for i, c in enumerate(s):
        if c == "\n":
            continue
        if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn"):
            return f"U+{ord(c):04X} at {i}"
    return None


def words(p):
    return set(re.findall(r"[a-z0-9]+", p.lower()))


def json_lines(text, errs):
    """(line number, object) for each non-empty line of JSONL text; a line that is not JSON
    is an error (also check_lifecycle.py's)."""
    for n, line in enumerate(text.split("\n"), 1):
        if not line:
            continue
        try:
            yield n, json.loads(line)
        except ValueError as e:
            errs.append(f"line {n}: not JSON ({e})")


def check_text(o, field, lo, hi, where, errs):
    """A text field: a string of lo-hi characters, trimmed, without hidden characters
    (also check_lifecycle.py's)."""
    t = o.get(field)
    if not isinstance(t, str):
        errs.append(f"{where}: {field} must be a string")
        return
    if not (lo <= len(t) <= hi):
        errs.append(f"{where}: {field} length {len(t)} (allowed {lo}-{hi})")
    if t != t.strip():
        errs.append(f"{where}: {field} has leading or trailing whitespace")
    if bad_char(t):
        errs.append(f"{where}: {field} has {bad_char(t)}")


def check_learning(o, where, errs):
    if not isinstance(o, dict):
        errs.append(f"{where}: not an object")
        return
    allowed = {"pattern", "context", "applies_to", "learning_type"}
    if set(o) - allowed:
        errs.append(f"{where}: unknown fields {sorted(set(o) - allowed)}")
    for field in ("pattern", "context"):
        if field not in o:
            if field == "pattern":
                errs.append(f"{where}: missing pattern")
            continue
        check_text(o, field, TEXT_MIN, TEXT_MAX, where, errs)
    if o.get("learning_type") not in TYPES:
        errs.append(f"{where}: learning_type {o.get('learning_type')!r}")
    a = o.get("applies_to")
    if not isinstance(a, list) or len(a) > 20:
        errs.append(f"{where}: applies_to must be a list of at most 20 paths")
        return
    for pfx in a:
        if (not isinstance(pfx, str) or not pfx.strip() or pfx != pfx.strip() or pfx[0] in "/\\~"
                or (len(pfx) > 1 and pfx[1] == ":") or ".." in re.split(r"[/\\]", pfx) or bad_char(pfx)):
            errs.append(f"{where}: applies_to entry {pfx!r} is not a relative path prefix")


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    opts = {}
    for i, a in enumerate(argv):
        if a.startswith("--") and i + 1 < len(argv):
            opts[a] = argv[i + 1]
            if argv[i + 1] in args:
                args.remove(argv[i + 1])
    path = args[0] if args else "tests/eval/learning-pairs.jsonl"
    min_pairs = int(opts.get("--min-pairs", 300))
    min_holdout = float(opts.get("--min-holdout", 0.30))
    errs, rows, ids, seen_pairs = [], [], set(), {}
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        print(f"{path}: not valid UTF-8 ({e})")
        return 1
    for n, o in json_lines(text, errs):
        where = f"line {n}"
        if not isinstance(o, dict):
            errs.append(f"{where}: not an object")
            continue
        pid = o.get("id")
        where = f"line {n} ({pid})"
        required = {"id", "a", "b", "label", "kind", "split"}
        if required - set(o):
            errs.append(f"{where}: missing fields {sorted(required - set(o))}")
        if set(o) - required:
            errs.append(f"{where}: unknown fields {sorted(set(o) - required)}")
        if not re.fullmatch(r"P\d{3,}", str(pid)):
            errs.append(f"{where}: id {pid!r} (expected P001...)")
        if pid in ids:
            errs.append(f"{where}: duplicate id {pid}")
        ids.add(pid)
        if o.get("label") not in LABELS:
            errs.append(f"{where}: label {o.get('label')!r}")
        if o.get("kind") not in KINDS:
            errs.append(f"{where}: kind {o.get('kind')!r}")
        elif o.get("label") in LABELS and KIND_LABEL[o["kind"]] != o["label"]:
            errs.append(f"{where}: kind {o['kind']} belongs to label {KIND_LABEL[o['kind']]}, not {o['label']}")
        if o.get("split") not in SPLITS:
            errs.append(f"{where}: split {o.get('split')!r}")
        check_learning(o.get("a"), f"{where} a", errs)
        check_learning(o.get("b"), f"{where} b", errs)
        a, b = o.get("a"), o.get("b")
        if isinstance(a, dict) and isinstance(b, dict) and isinstance(a.get("pattern"), str) and isinstance(b.get("pattern"), str):
            if norm(a["pattern"]) == norm(b["pattern"]):
                errs.append(f"{where}: a and b have the same normal form (add_learning already refuses that)")
            key = frozenset((a["pattern"], b["pattern"]))
            if key in seen_pairs:
                errs.append(f"{where}: same pair of patterns as {seen_pairs[key]}")
            seen_pairs[key] = pid
            rows.append(o)
    if not text.endswith("\n"):
        errs.append("file does not end with a newline")

    total = len(rows)
    by_split = collections.Counter(r.get("split") for r in rows)
    by_kind_split = collections.Counter((r.get("kind"), r.get("split")) for r in rows)
    by_kind = collections.Counter(r.get("kind") for r in rows)
    if total < min_pairs:
        errs.append(f"only {total} pairs (< {min_pairs})")
    for s in SPLITS:
        if not by_split[s]:
            errs.append(f"no pair in split {s}")
    if total and by_split["holdout"] / total < min_holdout:
        errs.append(f"holdout is {by_split['holdout'] / total:.1%} of pairs (< {min_holdout:.0%})")
    for k in KINDS:
        if by_kind[k] >= 3:
            for s in SPLITS:
                if not by_kind_split[(k, s)]:
                    errs.append(f"kind {k} ({by_kind[k]} pairs) has no pair in split {s}")
    if errs:
        print("\n".join(errs))
        print(f"{len(errs)} problem(s)")
        return 1

    by_label = collections.Counter(r["label"] for r in rows)
    by_label_split = collections.Counter((r["label"], r["split"]) for r in rows)
    print(f"{total} pairs: " + ", ".join(
        f"{lab} {by_label[lab]} ({by_label[lab] / total:.0%}; tune {by_label_split[(lab, 'tune')]}, holdout {by_label_split[(lab, 'holdout')]})"
        for lab in LABELS))
    print(f"splits: tune {by_split['tune']}, holdout {by_split['holdout']} ({by_split['holdout'] / total:.1%})")
    print("kind          label      total  tune  holdout  mean word-Jaccard(a,b)")
    for k in KINDS:
        rs = [r for r in rows if r["kind"] == k]
        if not rs:
            continue
        jac = [len(words(r["a"]["pattern"]) & words(r["b"]["pattern"])) / len(words(r["a"]["pattern"]) | words(r["b"]["pattern"])) for r in rs]
        print(f"{k:<13} {KIND_LABEL[k]:<10} {len(rs):>5} {by_kind_split[(k, 'tune')]:>5} {by_kind_split[(k, 'holdout')]:>8}  {sum(jac) / len(jac):.2f}")
    dup_types = sum(r["a"]["learning_type"] != r["b"]["learning_type"] for r in rows if r["label"] == "duplicate")
    same_all = sum(r["a"]["learning_type"] == r["b"]["learning_type"] and sorted(r["a"]["applies_to"]) == sorted(r["b"]["applies_to"])
                   for r in rows if r["label"] == "distinct")
    lens = sorted(len(x["pattern"]) for r in rows for x in (r["a"], r["b"]))
    ctx = sum("context" in x for r in rows for x in (r["a"], r["b"]))
    types = collections.Counter(x["learning_type"] for r in rows for x in (r["a"], r["b"]))
    print(f"duplicates whose two learning_types differ: {dup_types}; distinct pairs with the same learning_type and applies_to: {same_all}")
    print(f"patterns: {len(lens)} texts, {lens[0]}-{lens[-1]} characters (median {lens[len(lens) // 2]}), {ctx} with a context; "
          f"types {dict(sorted(types.items()))}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # output piped into head
        sys.exit(0)
