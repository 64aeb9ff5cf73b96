#!/usr/bin/env python3
"""Validate a learnings evaluation set (format: see tests/eval/README.md).

Usage: python3 tests/eval/check_set.py [tests/eval/learnings.jsonl] [--min-learnings N] [--min-per-category N]
Exits non-zero and lists every problem found; prints the set's figures when it is valid.
"""
import collections, json, re, sys, unicodedata

CATEGORIES = ("keyword", "paraphrase", "symptom", "identifier")
TYPES = ("convention", "gotcha", "pattern")
SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


def bad_char(s):
    for i, c in enumerate(s):
        if c in "\t\n":
            continue
        if c == "\r" or unicodedata.category(c) in ("Cc", "Cf"):
            return f"U+{ord(c):04X} at {i}"
    return None


def norm(p):
    return " ".join(re.sub(r"[^\w]+|_", " ", p.lower()).split())


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    path = args[0] if args else "tests/eval/learnings.jsonl"
    opts = dict(zip(argv[::1], argv[1::1]))
    min_l = int(opts.get("--min-learnings", 150))
    min_c = int(opts.get("--min-per-category", 25))
    errs, L, Q = [], {}, {}
    pats = set()
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        where = f"line {n}"
        try:
            o = json.loads(line)
        except ValueError as e:
            errs.append(f"{where}: not JSON ({e})")
            continue
        k = o.get("key")
        if k in L or k in Q:
            errs.append(f"{where}: duplicate key {k}")
        if o.get("type") == "learning":
            allowed = {"type", "key", "project", "pattern", "context", "applies_to", "learning_type", "quality", "verified"}
            if set(o) - allowed:
                errs.append(f"{where}: unknown fields {set(o) - allowed}")
            if not re.fullmatch(r"L\d{3,}", str(k)):
                errs.append(f"{where}: learning key {k!r}")
            if not SLUG.match(str(o.get("project", ""))):
                errs.append(f"{where}: project {o.get('project')!r}")
            p = o.get("pattern", "")
            if not (50 <= len(p.strip()) <= 2000) or p != p.strip():
                errs.append(f"{where}: pattern length {len(p)} / untrimmed")
            if bad_char(p):
                errs.append(f"{where}: pattern has {bad_char(p)}")
            np = (o.get("project"), norm(p))
            if np in pats:
                errs.append(f"{where}: duplicate pattern in project")
            pats.add(np)
            if "context" in o:
                c = o["context"]
                if not (100 <= len(c.strip()) <= 10000) or c != c.strip():
                    errs.append(f"{where}: context length {len(c)} / untrimmed")
                if bad_char(c):
                    errs.append(f"{where}: context has {bad_char(c)}")
            a = o.get("applies_to", [])
            if not isinstance(a, list) or len(a) > 20:
                errs.append(f"{where}: applies_to")
            for pfx in a:
                if not pfx.strip() or pfx[0] in "/\\~" or (len(pfx) > 1 and pfx[1] == ":") or ".." in re.split(r"[/\\]", pfx):
                    errs.append(f"{where}: applies_to entry {pfx!r}")
            if o.get("learning_type") not in TYPES:
                errs.append(f"{where}: learning_type {o.get('learning_type')!r}")
            if "quality" in o and not (isinstance(o["quality"], int) and 0 <= o["quality"] <= 100):
                errs.append(f"{where}: quality {o['quality']!r}")
            if not isinstance(o.get("verified"), bool):
                errs.append(f"{where}: verified must be a bool")
            L[k] = o
        elif o.get("type") == "query":
            allowed = {"type", "key", "category", "query", "project", "relevant", "cross_project", "part"}
            if set(o) - allowed:
                errs.append(f"{where}: unknown fields {set(o) - allowed}")
            if o.get("part", "tune") not in ("tune", "heldout"):
                errs.append(f"{where}: part {o.get('part')!r} (tune or heldout; tests/eval/split.py writes it)")
            if not re.fullmatch(r"Q\d{3,}", str(k)):
                errs.append(f"{where}: query key {k!r}")
            if o.get("category") not in CATEGORIES:
                errs.append(f"{where}: category {o.get('category')!r}")
            t = o.get("query", "")
            if not (1 <= len(t.strip()) <= 1000) or bad_char(t):
                errs.append(f"{where}: query text")
            if not isinstance(o.get("relevant"), dict) or not o["relevant"]:
                errs.append(f"{where}: relevant must be a non-empty object")
            Q[k] = o
        else:
            errs.append(f"{where}: type {o.get('type')!r}")
    for k, q in Q.items():
        rel = q.get("relevant") or {}
        for lk, g in rel.items():
            if lk not in L:
                errs.append(f"{k}: relevant key {lk} is not a learning")
            if g not in (1, 2):
                errs.append(f"{k}: grade {g!r} for {lk}")
        twos = [lk for lk, g in rel.items() if g == 2 and lk in L]
        if not twos:
            errs.append(f"{k}: no grade-2 learning")
        elif not q.get("cross_project") and not any(L[lk]["project"] == q["project"] for lk in twos):
            errs.append(f"{k}: no grade-2 learning in its own project {q['project']}")
        if q["project"] not in {l["project"] for l in L.values()}:
            errs.append(f"{k}: project {q['project']} has no learnings")
    cats = collections.Counter(q["category"] for q in Q.values())
    if len(L) < min_l:
        errs.append(f"only {len(L)} learnings (< {min_l})")
    for c in CATEGORIES:
        if cats[c] < min_c:
            errs.append(f"only {cats[c]} {c} queries (< {min_c})")
    if errs:
        print("\n".join(errs))
        print(f"{len(errs)} problem(s)")
        return 1
    projects = collections.Counter(l["project"] for l in L.values())
    rated = [l["quality"] for l in L.values() if "quality" in l]
    grades = collections.Counter(g for q in Q.values() for g in q["relevant"].values())
    print(f"{len(L)} learnings {dict(projects)}; {len(Q)} queries {dict(cats)}")
    print(f"rated {len(rated)} (low <=40: {sum(r <= 40 for r in rated)}, high >=80: {sum(r >= 80 for r in rated)}), "
          f"unrated {len(L) - len(rated)}, verified {sum(l['verified'] for l in L.values())}, "
          f"with context {sum('context' in l for l in L.values())}")
    print(f"grades: {dict(sorted(grades.items()))}; cross_project queries {sum(bool(q.get('cross_project')) for q in Q.values())}")
    used = {lk for q in Q.values() for lk in q["relevant"]}
    print(f"learnings relevant to some query: {len(used)}; never relevant (pure distractors): {len(L) - len(used)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
