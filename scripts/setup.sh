#!/usr/bin/env bash
# Set up a fresh machine for Cairn: Rust toolchain check, Python packages used by the
# tests (the official MCP SDK as a real client; ONNX Runtime + tokenizers for the
# independent embedding reference), the official TypeScript SDK and the MCP Inspector
# (pinned in tests/mcp_ts/package-lock.json, installed with `npm ci`; Node 20+), the
# agent CLIs whose own commands read back what `cairn connect` writes (Claude Code, Codex,
# Gemini CLI: pinned in tests/agents/package-lock.json, `npm ci`),
# PostgreSQL's server binaries (the tests start a throwaway cluster; Debian's
# `postgresql` package, installed with apt-get when missing and running as root), and
# the embedding model under models/.
# Idempotent: a second run only verifies. Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

# `--browser`: also what the web page's tests need (tests/web.rs): Debian's Chromium and
# ChromeDriver, Selenium and Pillow, nginx and openssl (the TLS proxy in front). The demo
# (scripts/demo.sh) runs without it.
BROWSER=0
for arg in "$@"; do
  case "$arg" in
    --browser) BROWSER=1 ;;
    *) printf '[setup] unknown option %s (known: --browser)\n' "$arg" >&2; exit 2 ;;
  esac
done

say() { printf '[setup] %s\n' "$*" >&2; }

command -v cargo >/dev/null || { say "cargo not found: install Rust (rustup) first"; exit 1; }
command -v python3 >/dev/null || { say "python3 not found"; exit 1; }
command -v node >/dev/null || { say "node not found: install Node.js 20 or later"; exit 1; }
command -v npm >/dev/null || { say "npm not found: install Node.js 20 or later"; exit 1; }
NODE_MAJOR=$(node -p 'process.versions.node.split(".")[0]')
[ "$NODE_MAJOR" -ge 20 ] || { say "node $NODE_MAJOR found; Node.js 20 or later is needed"; exit 1; }

PY_PKGS=(mcp==2.3.0 onnxruntime==1.31.1 tokenizers numpy prometheus-client==0.23.1)
if python3 -c 'import mcp, onnxruntime, tokenizers, numpy, prometheus_client' 2>/dev/null; then
  say "python packages present"
else
  say "installing python packages: ${PY_PKGS[*]}"
  python3 -m pip install --quiet --disable-pip-version-check "${PY_PKGS[@]}" >&2
fi

# The TypeScript SDK and the Inspector CLI, exactly as locked.
if [ -f tests/mcp_ts/node_modules/.package-lock.json ] \
   && cmp -s tests/mcp_ts/package-lock.json tests/mcp_ts/node_modules/.package-lock.json.src 2>/dev/null; then
  say "node packages present"
else
  say "installing node packages (npm ci in tests/mcp_ts)"
  (cd tests/mcp_ts && npm ci --no-audit --no-fund --loglevel=error >&2)
  cp tests/mcp_ts/package-lock.json tests/mcp_ts/node_modules/.package-lock.json.src
fi

# The agent CLIs (tests/connect.rs runs them offline with HOME in a temp dir).
if [ -f tests/agents/node_modules/.package-lock.json ] \
   && cmp -s tests/agents/package-lock.json tests/agents/node_modules/.package-lock.json.src 2>/dev/null; then
  say "agent CLIs present"
else
  say "installing the agent CLIs (npm ci in tests/agents)"
  (cd tests/agents && npm ci --no-audit --no-fund --loglevel=error >&2)
  cp tests/agents/package-lock.json tests/agents/node_modules/.package-lock.json.src
fi

# `ensure WHAT PACKAGE HINT TEST...`: run TEST; when it fails, install the Debian PACKAGE
# with apt-get (as root), else stop with HINT.
ensure() {
  local what=$1 package=$2 hint=$3
  shift 3
  if "$@"; then
    say "$what present"
  elif [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    say "installing $what (apt-get install $package)"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$package" >&2
  else
    say "$hint"
    exit 1
  fi
}

# PostgreSQL 15+: tests/common/pg.rs runs initdb and pg_ctl from /usr/lib/postgresql/*/bin
# (or PATH) and fails loudly without them.
has_postgres() { compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null; }
ensure postgresql postgresql \
  "PostgreSQL not found: install PostgreSQL 15 or later (Debian: apt-get install postgresql)" \
  has_postgres

# The attack tests (tests/impostor.rs) run an impostor as another user (`nobody`, through
# util-linux's setpriv) with the system's Python: the one on PATH may live in root's
# home, which other users cannot enter.
ensure "system python" python3 \
  "/usr/bin/python3 not found: install the system's python3 (Debian: apt-get install python3)" \
  test -x /usr/bin/python3

if [ "$BROWSER" = 1 ]; then
  ensure chromium chromium "Chromium not found (Debian: apt-get install chromium)" \
    test -x /usr/bin/chromium
  ensure chromedriver chromium-driver \
    "ChromeDriver not found (Debian: apt-get install chromium-driver)" \
    test -x /usr/bin/chromedriver
  # The TLS-terminating proxy the web page is tested behind, and its certificate.
  ensure nginx nginx-light "nginx not found (Debian: apt-get install nginx-light)" \
    test -x /usr/sbin/nginx
  ensure openssl openssl "openssl not found (Debian: apt-get install openssl)" \
    test -x /usr/bin/openssl
  if python3 -c 'import selenium, PIL' 2>/dev/null; then
    say "selenium and pillow present"
  else
    say "installing python packages: selenium pillow"
    python3 -m pip install --quiet --disable-pip-version-check selenium==4.51.0 pillow==13.0.0 >&2
  fi
fi

if [ -x models/fetch.sh ] || [ -f models/fetch.sh ]; then
  bash models/fetch.sh
fi
say "done"
