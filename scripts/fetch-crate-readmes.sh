#!/usr/bin/env bash
# A public Markdown corpus for `cairn eval vault`: the README of every crates.io package
# in Cargo.lock, fetched by cargo (crates.io) into the cargo registry and copied to
# OUT/<crate>.md (default target/eval/crate-readmes). No public BEIR set ships inside a
# package this machine's registries serve (see docs/vault.md), so this is the public set;
# its queries and judgements are tests/eval/crate-readmes/.
#
#   scripts/fetch-crate-readmes.sh [OUT]
#   cairn eval vault --corpus target/eval/crate-readmes \
#       --queries tests/eval/crate-readmes/queries.jsonl \
#       --qrels tests/eval/crate-readmes/qrels/test.tsv
#
# Several versions of one crate: the highest wins. A README identical to one already
# copied (crate families sharing one file, e.g. clap and clap_builder) is skipped, so
# each text is one document; crates are visited in name order.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/eval/crate-readmes}
cargo fetch --locked >/dev/null
registry=${CARGO_HOME:-$HOME/.cargo}/registry/src
rm -rf "$out" && mkdir -p "$out"
# name<TAB>version of every crates.io package, highest version last per name.
python3 - "$registry" "$out" <<'PY'
import hashlib, pathlib, re, sys, tomllib
registry, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
lock = tomllib.loads(pathlib.Path("Cargo.lock").read_text())
best = {}
def key(v):
    return [int(x) if x.isdigit() else x for x in re.split(r"[.+-]", v)]
for p in lock["package"]:
    if "registry+" not in p.get("source", ""):
        continue
    if p["name"] not in best or key(p["version"]) > key(best[p["name"]]):
        best[p["name"]] = p["version"]
seen, kept = set(), []
for name in sorted(best):
    for d in registry.glob(f"*/{name}-{best[name]}"):
        readme = d / "README.md"
        if not readme.is_file():
            continue
        text = readme.read_bytes()
        h = hashlib.sha256(text).hexdigest()
        if h in seen or len(text) < 200:
            continue
        seen.add(h)
        (out / f"{name}.md").write_bytes(text)
        kept.append(f"{name} {best[name]}")
        break
(out / ".crates").write_text("\n".join(kept) + "\n")
print(f"{len(kept)} READMEs in {out}", file=sys.stderr)
PY
