#!/usr/bin/env python3
"""Split a graded learnings set's queries into a tuning part and a held-out part, by
topic cluster, and write each query's `part` into the file (docs/learnings.md,
"Evaluation that cannot flatter").

A cluster is a connected component of the graph that links every query with the
learnings it grades (grade 1 or 2): two queries that share an answer, or an answer's
partly-useful neighbour, are in one cluster, so near-identical queries never straddle
the split. A cluster is held out when the SHA-256 of its first query key (in file
order) is 0 modulo 3: about a third of the clusters, fixed by the keys alone.

Usage: python3 tests/eval/split.py SET.jsonl            # write `part` into SET
       python3 tests/eval/split.py SET.jsonl --all-heldout   # a set used only held out
       python3 tests/eval/split.py SET.jsonl --check    # exit 1 if the file's parts differ
"""
import collections, hashlib, json, sys


def parts(queries):
    parent = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for q in queries:
        for k in q["relevant"]:
            parent[find("Q:" + q["key"])] = find("L:" + k)
    first = {}
    for q in queries:
        first.setdefault(find("Q:" + q["key"]), q["key"])
    out = {}
    for q in queries:
        key = first[find("Q:" + q["key"])]
        held = int(hashlib.sha256(key.encode()).hexdigest(), 16) % 3 == 0
        out[q["key"]] = "heldout" if held else "tune"
    return out


def main(argv):
    path = argv[0]
    lines = [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]
    queries = [d for d in lines if d["type"] == "query"]
    want = ({q["key"]: "heldout" for q in queries} if "--all-heldout" in argv
            else parts(queries))
    if "--check" in argv:
        wrong = [q["key"] for q in queries if q.get("part") != want[q["key"]]]
        if wrong:
            print(f"{path}: {len(wrong)} queries not in their part: {wrong[:10]}", file=sys.stderr)
            return 1
    else:
        with open(path, "w", encoding="utf-8") as f:
            for d in lines:
                if d["type"] == "query":
                    d["part"] = want[d["key"]]
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
    count = collections.Counter((want[q["key"]], q["category"]) for q in queries)
    for part in ("tune", "heldout"):
        cats = {c: n for (p, c), n in sorted(count.items()) if p == part}
        print(f"{part}: {sum(cats.values())} queries {cats}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
