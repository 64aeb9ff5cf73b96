#!/usr/bin/env python3
"""Count the instructions a `search_learnings` costs, under callgrind (issue 59).

Instruction counts are repeatable on a loaded machine where wall time is not. The
script seeds a database with 300 learnings that resemble each other (the corpus of
tests/cost.rs), then runs `cairn serve` under `valgrind --tool=callgrind` twice: once
answering only `initialize` and one `server_ping`, once answering N never-seen searches
more. The difference over N is the instructions of one search, the server's start-up
and the model's load cancelled out. With `--repeat`, the N searches send the query of the
warm-up search again (each takes its vector from the cache).

    scripts/profile_search.py --bin target/debug/cairn --out /tmp/prof [--seed-bin B]
        [--db seeded.db] [--searches 20] [--warm 0] [--repeat] [--zipf 10000]

`--zipf N` seeds N learnings drawn as the load benchmark's large seed draws them
(`benches/learning_corpus.rs`, `Corpus::Zipf`: words with the frequencies of the
learnings of tests/eval, compound names made of them; Python's generator, so the same
construction, not the same texts) instead of the 300 similar ones, and the searches send
tests/eval/learnings.jsonl's queries (`--repeat`: its first).

`--get-issue` counts N `get_issue` calls instead (the per-call work without a search).
`--daemon` profiles `cairn daemon` instead, each call one HTTP POST with a session token
(the daemon's own start-up, warm-up and drain cancel out the same way); with
`--mcp-session` the calls go in one MCP session (protocol 2025-11-25, as the official
SDKs send them), whose answers rmcp writes as events of a stream.
`--warm K` sends K never-seen searches of other texts before counting, in both runs: the
code signatures grouping reads (kept per learning) are then read, and the counted
searches show a daemon's steady state rather than its first minute.
`--seed-bin` seeds with another binary (an older one whose database the newer one
migrates: both then search the same learnings); `--db` reuses a seeded database (copied
first). ONNX Runtime runs on one thread without spinning (`CAIRN_EMBED_THREADS=1`,
`CAIRN_EMBED_SPIN=off`): its spinning workers would make the counts vary.
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

SUBJECTS = [
    "billing", "checkout", "search index", "session cache", "image upload", "email queue",
    "auth tokens", "feature flags", "rate limiter", "audit log", "export job", "webhooks",
]


def learning(i):
    """tests/cost.rs's `learning(i)`."""
    subject = SUBJECTS[i % len(SUBJECTS)]
    slug = subject.replace(" ", "_")
    step = i // len(SUBJECTS)
    pattern = (f"When changing the {subject} code, run `make check-{slug}` and the step {step} "
               f"migration before release, or {subject} breaks in production")
    context = (f"Seen on the {subject} service: `src/{slug}/mod.rs` changed without "
               f"`make check-{slug}`, the release went out and failed at step {step} with a "
               f"timeout of {30 + step % 5} seconds; the fix was to run the checks first.")
    return pattern, context


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, CAIRN_EMBED_THREADS="1", CAIRN_EMBED_SPIN="off", CAIRN_LOG="warn")
ENV.setdefault("CAIRN_MODEL_DIR", os.path.join(REPO, "models/all-minilm-l6-v2-int8"))
ENV.setdefault("CAIRN_ORT_LIB", os.path.join(REPO, "models/onnxruntime/libonnxruntime.so"))


def cli(binary, db, *args):
    out = subprocess.run([binary, "--db", db, *args], env=ENV, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(args)}: {out.stderr}")
    return out.stdout.strip()


def rpc(n, method, params):
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params})


def session(calls):
    """The lines of one stdio session: the handshake, then `calls` (name, arguments)."""
    lines = [
        rpc(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "profile", "version": "0"}}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]
    for n, (name, args) in enumerate(calls, start=1):
        lines.append(rpc(n, "tools/call", {"name": name, "arguments": args}))
    return lines


def serve(cmd, db, issue, calls):
    """Run one session, each call after the previous answer; the answers."""
    p = subprocess.Popen(cmd + ["--db", db, "serve", "--no-daemon", "--issue-id", issue], env=ENV,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    answers = []
    lines = session(calls)
    for line in lines:
        p.stdin.write(line + "\n")
        p.stdin.flush()
        if '"id"' in line:
            answers.append(checked(json.loads(p.stdout.readline())))
    p.stdin.close()
    p.wait()
    return answers


def checked(answer):
    if "error" in answer or answer.get("result", {}).get("isError"):
        sys.exit(f"call failed: {answer}")
    return answer


def post(url, headers, body):
    """POST `body` to `url`: the JSON-RPC answer (a JSON body, or the event of an event
    stream that holds a result) and the response's headers."""
    req = urllib.request.Request(url, body, {
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        **headers})
    with urllib.request.urlopen(req, timeout=600) as r:
        text = r.read().decode()
        if r.headers.get("Content-Type", "").startswith("text/event-stream"):
            text = next(line[6:] for line in text.splitlines()
                        if line.startswith("data: ") and '"result":' in line)
        return (json.loads(text) if text else {}), r.headers


def serve_daemon(cmd, db, issue, calls, mcp_session=False):
    """`cairn daemon` answering `calls` over HTTP, one after the other; the answers. With
    `mcp_session`, in one MCP session (an `initialize` of protocol 2025-11-25 first, as
    the official SDKs do), else each call a request of its own."""
    token = cli(cmd[-1], db, "session", "new", "--issue-id", issue)
    found = db + ".daemon.json"
    if os.path.exists(found):
        os.remove(found)
    p = subprocess.Popen(cmd + ["--db", db, "daemon"], env=ENV,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not os.path.exists(found) or not os.path.getsize(found):
        if p.poll() is not None:
            sys.exit("the daemon exited before it listened")
        time.sleep(0.5)
    url = json.load(open(found))["url"]
    # Ready when its liveness answers (under callgrind the daemon is slow to serve).
    health = url.rsplit("/mcp", 1)[0] + "/health"
    while True:
        try:
            urllib.request.urlopen(health, timeout=30).read()
            break
        except OSError:
            if p.poll() is not None:
                sys.exit("the daemon exited before it answered /health")
            time.sleep(0.5)
    headers = {"Authorization": f"Bearer {token}"}
    if mcp_session:
        init = rpc(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                     "clientInfo": {"name": "profile", "version": "0"}})
        _, h = post(url, headers, init.encode())
        headers |= {"Mcp-Session-Id": h["Mcp-Session-Id"],
                    "MCP-Protocol-Version": "2025-11-25"}
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        post(url, headers, note.encode())
    answers = []
    for n, (name, args) in enumerate(calls, start=1):
        body = rpc(n, "tools/call", {"name": name, "arguments": args}).encode()
        answers.append(checked(post(url, headers, body)[0]))
    p.send_signal(signal.SIGTERM)
    p.wait()
    return answers


def eval_rows():
    """The rows of tests/eval/*.jsonl, file by file in name order."""
    d = os.path.join(REPO, "tests/eval")
    for name in sorted(f for f in os.listdir(d) if f.endswith(".jsonl")):
        for line in open(os.path.join(d, name)):
            try:
                yield json.loads(line)
            except ValueError:
                continue


def tokens(text):
    """benches/learning_corpus.rs's `tokens`."""
    out = []
    for t in re.split(r"[^\w./-]", text):
        t = t.strip(".-/")
        if t:
            out.append(t)
    return out


def zipf_learnings(n):
    """`n` learnings built as `Corpus::Zipf` builds them (see the module doc)."""
    counts, patterns, contexts, paths, learnings = {}, [], [], [], 0
    for v in eval_rows():
        if v.get("type") != "learning":
            continue
        learnings += 1
        pattern, context = v.get("pattern") or "", v.get("context") or ""
        patterns.append(len(tokens(pattern)))
        if context:
            contexts.append(len(tokens(context)))
        for t in tokens(pattern) + tokens(context):
            counts.setdefault(t, [0, len(counts)])[0] += 1
        paths += [p for p in v.get("applies_to") or [] if isinstance(p, str)]
    vocabulary = [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1][0], kv[1][1]))]
    parts = [t for t in vocabulary if len(t) >= 3 and t.isascii() and t.isalpha() and t.islower()]
    rng = random.Random(0x5EED)
    for _ in range(2 * len(vocabulary)):
        a, b = rng.choice(parts), rng.choice(parts)
        vocabulary.append(rng.choice([f"{a}_{b}", a + b[0].upper() + b[1:], f"{a}/{b}.rs"]))
    weights = [1 / rank for rank in range(1, len(vocabulary) + 1)]
    context_percent = len(contexts) * 100 // learnings

    def text(lengths, least):
        while True:
            words = rng.choices(vocabulary, weights, k=rng.choice(lengths))
            t = " ".join(words) + "."
            if len(t) >= least:
                return t

    rng = random.Random(42)
    out = []
    for _ in range(n):
        args = {"pattern": text(patterns, 50), "merge": False,
                "applies_to": [rng.choice(paths) for _ in range(rng.randrange(3))]}
        if rng.randrange(100) < context_percent:
            args["context"] = text(contexts, 100)
        out.append(("add_learning", args))
    return out


def eval_queries():
    return [v["query"] for v in eval_rows() if v.get("type") == "query"
            and v.get("query")][:218]


def seed(binary, db, zipf):
    cli(binary, db, "project", "create", "--slug", "shop", "--name", "shop")
    issue = cli(binary, db, "issue", "create", "--project", "shop", "--title", "corpus")
    if zipf:
        serve([binary], db, issue, zipf_learnings(zipf))
        return issue
    calls = []
    for i in range(300):
        pattern, context = learning(i)
        calls.append(("add_learning", {"pattern": pattern, "context": context,
                                       "applies_to": ["src/"]}))
    serve([binary], db, issue, calls)
    return issue


def instructions(out):
    total = 0
    for f in os.listdir(os.path.dirname(out)):
        if f.startswith(os.path.basename(out)):
            with open(os.path.join(os.path.dirname(out), f)) as fh:
                m = re.search(r"^summary: (\d+)", fh.read(), re.M)
                total += int(m.group(1)) if m else 0
    return total


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--bin", required=True)
    a.add_argument("--seed-bin")
    a.add_argument("--db")
    a.add_argument("--out", required=True)
    a.add_argument("--searches", type=int, default=20)
    a.add_argument("--warm", type=int, default=0,
                   help="never-seen searches of other texts before counting, in both runs")
    a.add_argument("--repeat", action="store_true")
    a.add_argument("--zipf", type=int, default=0,
                   help="seed this many learnings of the load benchmark's large corpus")
    a.add_argument("--get-issue", action="store_true",
                   help="N get_issue calls instead of searches (a call without a search)")
    a.add_argument("--daemon", action="store_true",
                   help="profile `cairn daemon`, the calls over HTTP, instead of `cairn serve`")
    a.add_argument("--mcp-session", action="store_true",
                   help="with --daemon: the calls in one MCP session (protocol 2025-11-25)")
    o = a.parse_args()
    os.makedirs(o.out, exist_ok=True)
    work = tempfile.mkdtemp()
    db = os.path.join(work, "cairn.db")
    if o.db:
        shutil.copy(o.db, db)
        issue = cli(o.bin, db, "issue", "create", "--project", "shop", "--title", "profile")
    else:
        seed(o.seed_bin or o.bin, db, o.zipf)
        issue = cli(o.bin, db, "issue", "create", "--project", "shop", "--title", "profile")
    # Every learning embedded and the index built by this binary before counting.
    cli(o.bin, db, "learnings", "reindex")
    if o.zipf:
        queries = eval_queries()
        texts = [queries[0] if o.repeat else queries[i % len(queries)] for i in range(o.searches)]
    else:
        texts = ["why does checkout break in production" if o.repeat
                 else f"why does {SUBJECTS[i % 12]} break in production after release {i}"
                 for i in range(o.searches)]
    searches = [("search_learnings", {"query": t, "limit": 10}) for t in texts]
    if o.get_issue:
        searches = [("get_issue", {"issue_id": issue})] * o.searches
    # The model loads at the first query: one search of its own in both runs. With
    # `--repeat` it is the repeated query, so that each counted search takes its vector
    # from the cache and keeps the code signatures the first one read.
    warm = searches[0][1]["query"] if o.repeat else "warm up the model"
    ping = [("server_ping", {}), ("search_learnings", {"query": warm})]
    ping += [("search_learnings", {"query": f"how is the {SUBJECTS[i % 12]} step {i} released",
                                   "limit": 10}) for i in range(o.warm)]
    counts = {}
    for label, calls in [("base", ping), ("searches", ping + searches)]:
        out = os.path.join(o.out, f"callgrind.{label}")
        for f in os.listdir(o.out):
            if f.startswith(f"callgrind.{label}"):
                os.remove(os.path.join(o.out, f))
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}.%p"]
        if o.daemon:
            answers = serve_daemon(cmd + [o.bin], db, issue, calls, o.mcp_session)
        else:
            answers = serve(cmd + [o.bin], db, issue, calls)
        counts[label] = instructions(out)
        if label == "searches" and not o.get_issue:
            last = answers[-1]["result"]["structuredContent"]
            print(f"last search: semantic {last['semantic']}, {last['count']} hits, "
                  f"{sum(len(h.get('similar', [])) for h in last['results'])} listed under them",
                  file=sys.stderr)
    per = (counts["searches"] - counts["base"]) / o.searches
    print(json.dumps({"bin": o.bin, "base": counts["base"], "searches": counts["searches"],
                      "n": o.searches, "per_search": round(per)}))
    shutil.copy(db, os.path.join(o.out, "seeded.db"))


if __name__ == "__main__":
    main()
