#!/usr/bin/env python3
"""Validate the learnings lifecycle set (format: see tests/eval/README.md, "The lifecycle set").

Usage: python3 tests/eval/check_lifecycle.py [tests/eval/learnings-lifecycle.jsonl]
Exits non-zero and lists every problem found; prints the set's figures when it is valid.
Standard library only.

Lines are applied in file order, so every reference (duplicate_of, near_miss_of, supersedes,
feedback, outcome) must point at something an earlier line created. Queries are run after
every other line has been applied, wherever they stand in the file.
"""
import collections, json, os, re, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_set import norm  # noqa: E402  (the normal form of add_learning, one copy)
from check_pairs import bad_char, check_text, json_lines  # noqa: E402  (one text check for every set)

CATEGORIES = ("identifier", "keyword", "paraphrase", "symptom")
TYPES = ("convention", "gotcha", "pattern")
VERDICTS = ("helped", "not_relevant", "wrong")
OUTCOMES = ("done", "approved")
SPLITS = ("tune", "holdout")
SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
ISSUE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,99}$")
FIELDS = {
    "learning": ({"type", "key", "project", "issue", "pattern"},
                 {"context", "applies_to", "learning_type", "duplicate_of", "supersedes", "near_miss_of"}),
    "feedback": ({"type", "learning", "issue", "outcome"}, set()),
    "outcome": ({"type", "issue", "outcome"}, set()),
    "query": ({"type", "key", "category", "query", "project", "relevant", "split"}, set()),
}


def relative_prefix(p):
    return (isinstance(p, str) and p.strip() and p == p.strip() and p[0] not in "/\\~"
            and not (len(p) > 1 and p[1] == ":") and ".." not in re.split(r"[/\\]", p) and not bad_char(p))


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    path = args[0] if args else "tests/eval/learnings-lifecycle.jsonl"
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        print(f"{path}: not valid UTF-8 ({e})")
        return 1

    errs = []
    L = {}              # key -> learning line (in file order)
    survivor = {}       # key -> the key it was merged into (itself when not a duplicate)
    group_issues = collections.defaultdict(set)   # surviving key -> issues that recorded it or a duplicate of it
    superseded_by = {}  # key -> key of the learning that superseded it
    normal_forms = {}   # (project, normal form) -> key
    issues = {}         # issue label -> project
    verdicts = {}       # (learning key, issue) -> outcome (the last one counts)
    replaced = 0
    feedback_lines = []
    outcomes = {}       # issue -> outcome
    Q = {}
    counts = collections.Counter()

    def use_issue(label, project, where):
        if not isinstance(label, str) or not ISSUE.match(label):
            errs.append(f"{where}: issue {label!r} (expected a label such as mono-12)")
            return
        if label in issues and issues[label] != project:
            errs.append(f"{where}: issue {label} belongs to project {issues[label]}, not {project}")
        issues.setdefault(label, project)

    def earlier(key, project, where, what):
        if key not in L:
            errs.append(f"{where}: {what} {key!r} is not an earlier learning")
            return False
        if L[key]["project"] != project:
            errs.append(f"{where}: {what} {key} is in project {L[key]['project']}, not {project}")
            return False
        return True

    for n, o in json_lines(text, errs):
        where = f"line {n}"
        if not isinstance(o, dict) or o.get("type") not in FIELDS:
            errs.append(f"{where}: type {o.get('type') if isinstance(o, dict) else o!r}")
            continue
        t = o["type"]
        counts[t] += 1
        required, optional = FIELDS[t]
        if required - set(o):
            errs.append(f"{where}: missing fields {sorted(required - set(o))}")
            continue
        if set(o) - required - optional:
            errs.append(f"{where}: unknown fields {sorted(set(o) - required - optional)}")

        if t == "learning":
            k = o["key"]
            where = f"line {n} ({k})"
            if not re.fullmatch(r"K\d{3,}", str(k)):
                errs.append(f"{where}: key {k!r} (expected K001...)")
            if k in L or k in Q:
                errs.append(f"{where}: duplicate key {k}")
                continue
            project = o["project"]
            if not isinstance(project, str) or not SLUG.match(project):
                errs.append(f"{where}: project {project!r}")
                continue
            use_issue(o["issue"], project, where)
            check_text(o, "pattern", 50, 2000, where, errs)
            if "context" in o:
                check_text(o, "context", 100, 10000, where, errs)
            if "learning_type" in o and o["learning_type"] not in TYPES:
                errs.append(f"{where}: learning_type {o['learning_type']!r}")
            a = o.get("applies_to", [])
            if not isinstance(a, list) or len(a) > 20:
                errs.append(f"{where}: applies_to must be a list of at most 20 paths")
            else:
                for p in a:
                    if not relative_prefix(p):
                        errs.append(f"{where}: applies_to entry {p!r} is not a relative path prefix")
            if isinstance(o.get("pattern"), str):
                nf = (project, norm(o["pattern"]))
                if nf in normal_forms:
                    errs.append(f"{where}: same normal form as {normal_forms[nf]} (add_learning refuses it before any merge rule)")
                normal_forms.setdefault(nf, k)
            rels = [r for r in ("duplicate_of", "near_miss_of", "supersedes") if r in o]
            if len(rels) > 1:
                errs.append(f"{where}: at most one of duplicate_of, near_miss_of, supersedes (has {rels})")
            survivor[k] = k
            for r in ("duplicate_of", "near_miss_of"):
                if r not in o:
                    continue
                tk = o[r]
                if not earlier(tk, project, where, r):
                    continue
                if survivor[tk] != tk:
                    errs.append(f"{where}: {r} {tk} is itself a duplicate of {survivor[tk]}; name the surviving learning")
                    continue
                if o["issue"] in group_issues[tk]:
                    errs.append(f"{where}: {r} {tk} was recorded by the same issue {o['issue']} (must be another issue)")
                if r == "duplicate_of":
                    if tk in superseded_by:
                        errs.append(f"{where}: duplicate_of {tk}, which {superseded_by[tk]} already superseded")
                    survivor[k] = tk
            if "supersedes" in o:
                s = o["supersedes"]
                if not isinstance(s, list) or not s or len(set(s)) != len(s):
                    errs.append(f"{where}: supersedes must be a non-empty list of distinct keys")
                else:
                    for tk in s:
                        if not earlier(tk, project, where, "supersedes"):
                            continue
                        if survivor[tk] != tk:
                            errs.append(f"{where}: supersedes {tk}, a duplicate of {survivor[tk]}; name the surviving learning")
                        elif tk in superseded_by:
                            errs.append(f"{where}: supersedes {tk}, which {superseded_by[tk]} already superseded; supersede the newest")
                        else:
                            superseded_by[tk] = k
            L[k] = o
            group_issues[survivor[k]].add(o["issue"])

        elif t == "feedback":
            lk = o["learning"]
            where = f"line {n} (feedback {lk})"
            if lk not in L:
                errs.append(f"{where}: learning {lk!r} is not an earlier learning")
                continue
            project = L[lk]["project"]
            use_issue(o["issue"], project, where)
            if o["outcome"] not in VERDICTS:
                errs.append(f"{where}: outcome {o['outcome']!r} (expected one of {', '.join(VERDICTS)})")
            if o["issue"] in group_issues[survivor[lk]]:
                errs.append(f"{where}: issue {o['issue']} recorded this learning (or a duplicate merged with it); no feedback on one's own learning")
            if (lk, o["issue"]) in verdicts:
                replaced += 1
            verdicts[(lk, o["issue"])] = o["outcome"]
            feedback_lines.append(o)

        elif t == "outcome":
            iss = o["issue"]
            where = f"line {n} (outcome {iss})"
            if iss not in issues:
                errs.append(f"{where}: issue {iss!r} is not mentioned by an earlier line")
            if o["outcome"] not in OUTCOMES:
                errs.append(f"{where}: outcome {o['outcome']!r} (expected one of {', '.join(OUTCOMES)})")
            if iss in outcomes:
                errs.append(f"{where}: issue {iss} already has an outcome")
            outcomes[iss] = o["outcome"]

        else:  # query
            k = o["key"]
            where = f"line {n} ({k})"
            if not re.fullmatch(r"Q\d{3,}", str(k)):
                errs.append(f"{where}: key {k!r} (expected Q001...)")
            if k in L or k in Q:
                errs.append(f"{where}: duplicate key {k}")
                continue
            if o["category"] not in CATEGORIES:
                errs.append(f"{where}: category {o['category']!r}")
            if o["split"] not in SPLITS:
                errs.append(f"{where}: split {o['split']!r}")
            check_text(o, "query", 1, 1000, where, errs)
            if not isinstance(o["relevant"], dict) or not o["relevant"]:
                errs.append(f"{where}: relevant must be a non-empty object")
                continue
            Q[k] = (n, o)

    if not text.endswith("\n"):
        errs.append("file does not end with a newline")

    # Queries run on the final state.
    projects = {l["project"] for l in L.values()}
    for k, (n, q) in Q.items():
        where = f"line {n} ({k})"
        if q["project"] not in projects:
            errs.append(f"{where}: project {q['project']!r} has no learnings")
        twos = 0
        for lk, g in q["relevant"].items():
            if g not in (1, 2):
                errs.append(f"{where}: grade {g!r} for {lk} (1 or 2)")
            if lk not in L:
                errs.append(f"{where}: relevant key {lk} is not a learning")
                continue
            if L[lk]["project"] != q["project"]:
                errs.append(f"{where}: relevant {lk} is in project {L[lk]['project']}, not {q['project']}")
            if survivor[lk] != lk:
                errs.append(f"{where}: relevant {lk} is a duplicate; list {survivor[lk]} instead")
            if lk in superseded_by:
                newest = lk
                while newest in superseded_by:
                    newest = superseded_by[newest]
                errs.append(f"{where}: relevant {lk} is superseded; list {newest} instead")
            twos += g == 2
        if not twos:
            errs.append(f"{where}: no grade-2 learning")
    cats = collections.Counter(q["category"] for _, q in Q.values())
    splits = collections.Counter(q["split"] for _, q in Q.values())
    for c in CATEGORIES:
        if not cats[c]:
            errs.append(f"no {c} query")
    for s in SPLITS:
        if not splits[s]:
            errs.append(f"no query in split {s}")
    if errs:
        print("\n".join(errs))
        print(f"{len(errs)} problem(s)")
        return 1

    # ---- summary ----
    dups = [k for k in L if survivor[k] != k]
    near = [k for k in L if "near_miss_of" in L[k]]
    succ = [k for k in L if "supersedes" in L[k]]
    originals = [k for k in L if survivor[k] == k and "near_miss_of" not in L[k] and "supersedes" not in L[k]]
    per_project = collections.Counter(l["project"] for l in L.values())
    print(f"lines: {dict(counts)}")
    print(f"learnings {len(L)} {dict(sorted(per_project.items()))}: originals {len(originals)}, duplicates {len(dups)}, "
          f"near misses {len(near)}, successors {len(succ)}; issues {len(issues)} "
          f"{dict(sorted(collections.Counter(issues.values()).items()))}")
    groups = collections.Counter(survivor[k] for k in dups)
    print(f"duplicate groups: {len(groups)} (sizes incl. the original: "
          f"{dict(sorted(collections.Counter(v + 1 for v in groups.values()).items()))}); "
          f"groups later superseded: {sum(1 for g in groups if g in superseded_by)}")

    def chain(k):
        c = [k]
        while c[-1] in superseded_by:
            c.append(superseded_by[c[-1]])
        return c
    heads = [k for k in superseded_by if not any(superseded_by.get(x) == k for x in superseded_by)]
    chains = [chain(h) for h in sorted(heads)]
    print(f"supersedes: {len(superseded_by)} superseded by {len(succ)} successors; chains: "
          + ", ".join(" -> ".join(c) for c in chains))

    final = collections.Counter(verdicts.values())
    fb_issues = {f["issue"] for f in feedback_lines}
    print(f"feedback: {len(feedback_lines)} lines from {len(fb_issues)} issues, "
          f"{dict(sorted(collections.Counter(f['outcome'] for f in feedback_lines).items()))}; "
          f"final verdicts {dict(sorted(final.items()))} ({replaced} replaced by a later line); "
          f"on duplicate keys {sum(1 for f in feedback_lines if survivor[f['learning']] != f['learning'])}, "
          f"on learnings superseded by the end {sum(1 for f in feedback_lines if f['learning'] in superseded_by)}")
    helped_done = {i for (lk, i), v in verdicts.items() if v == "helped" and i in outcomes}
    print(f"outcomes: {len(outcomes)} {dict(sorted(collections.Counter(outcomes.values()).items()))}; "
          f"issues with a final helped verdict and an outcome: {len(helped_done)}")

    print(f"queries {len(Q)}: {dict(sorted(cats.items()))}; splits {dict(sorted(splits.items()))}; "
          f"per project {dict(sorted(collections.Counter(q['project'] for _, q in Q.values()).items()))}")
    by_cat_split = collections.Counter((q["category"], q["split"]) for _, q in Q.values())
    print("  by category (tune/holdout): " + ", ".join(f"{c} {by_cat_split[(c, 'tune')]}/{by_cat_split[(c, 'holdout')]}" for c in CATEGORIES))
    answers = lambda q: [lk for lk, g in q["relevant"].items() if g == 2]  # noqa: E731
    stale_q = [k for k, (_, q) in Q.items() if any("supersedes" in L[a] for a in answers(q))]
    clutter_q = [k for k, (_, q) in Q.items() if any(a in groups for a in answers(q))]
    print(f"  answered by a successor (stale-answer queries): {len(stale_q)} "
          f"(tune {sum(Q[k][1]['split'] == 'tune' for k in stale_q)}, holdout {sum(Q[k][1]['split'] == 'holdout' for k in stale_q)})")
    print(f"  answered by a learning with merged duplicates (clutter queries): {len(clutter_q)} "
          f"(tune {sum(Q[k][1]['split'] == 'tune' for k in clutter_q)}, holdout {sum(Q[k][1]['split'] == 'holdout' for k in clutter_q)})")

    # evidence against the grades (final verdicts, duplicates mapped to their survivor)
    ev = collections.defaultdict(collections.Counter)
    for (lk, _), v in verdicts.items():
        ev[survivor[lk]][v] += 1
    relevant = {lk for _, q in Q.values() for lk in q["relevant"]}
    answer_set = {lk for _, q in Q.values() for lk in answers(q)}
    live = [k for k in L if survivor[k] == k and k not in superseded_by]
    print(f"evidence: answers {len(answer_set)}, of them with a helped verdict {sum(1 for k in answer_set if ev[k]['helped'])}, "
          f"with no feedback {sum(1 for k in answer_set if not ev[k])}, "
          f"with a not_relevant or wrong verdict {sum(1 for k in answer_set if ev[k]['not_relevant'] or ev[k]['wrong'])}")
    print(f"  live learnings never relevant to a query: {sum(1 for k in live if k not in relevant)}, "
          f"of them helped at least once {sum(1 for k in live if k not in relevant and ev[k]['helped'])}; "
          f"near misses with a not_relevant or wrong verdict {sum(1 for k in near if ev[k]['not_relevant'] or ev[k]['wrong'])}; "
          f"superseded learnings with a wrong verdict {sum(1 for k in superseded_by if ev[k]['wrong'])} of {len(superseded_by)}")
    lens = sorted(len(l["pattern"]) for l in L.values())
    print(f"shape: pattern {lens[0]}-{lens[-1]} characters (median {lens[len(lens) // 2]}), "
          f"{sum('context' in l for l in L.values())} with a context, "
          f"types {dict(sorted(collections.Counter(l.get('learning_type', '-') for l in L.values()).items()))}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # output piped into head
        sys.exit(0)
