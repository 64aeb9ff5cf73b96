#!/usr/bin/env bash
# Set up a fresh machine for Cairn: Rust toolchain check, Python packages used by the
# tests (the official MCP SDK as a real client; ONNX Runtime + tokenizers for the
# independent embedding reference), and the embedding model under models/.
# Idempotent: a second run only verifies. Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[setup] %s\n' "$*" >&2; }

command -v cargo >/dev/null || { say "cargo not found: install Rust (rustup) first"; exit 1; }
command -v python3 >/dev/null || { say "python3 not found"; exit 1; }

PY_PKGS=(mcp==2.3.0 onnxruntime==1.31.1 tokenizers numpy)
if python3 -c 'import mcp, onnxruntime, tokenizers, numpy' 2>/dev/null; then
  say "python packages present"
else
  say "installing python packages: ${PY_PKGS[*]}"
  python3 -m pip install --quiet --disable-pip-version-check "${PY_PKGS[@]}" >&2
fi

if [ -x models/fetch.sh ] || [ -f models/fetch.sh ]; then
  bash models/fetch.sh
fi
say "done"
