#!/usr/bin/env bash
# The main job on a fresh machine: set up, build, index the bundled sample docs into the
# Knowledge Vault, answer a query, and record and find a learning. Uses its own database
# under target/demo/ so it never touches your index/.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cargo build --release --quiet
CAIRN=target/release/cairn
export CAIRN_DB=$PWD/target/demo/cairn.db
rm -rf target/demo && mkdir -p target/demo

say() { printf '\n== %s\n' "$*" >&2; }

say "Index the sample docs (samples/docs) into the vault"
"$CAIRN" reindex samples/docs --collection handbook

say "Ask the vault a question"
"$CAIRN" search "how should a client retry a failed request?" --top-k 3

say "Record a learning on an issue and find it again"
"$CAIRN" project create --slug larder --name "Larder" --path "$PWD/samples" >/dev/null 2>&1 || true
ISSUE=$("$CAIRN" issue create --project larder --title "Flaky checkout test")
"$CAIRN" learnings add --issue "$ISSUE" --type gotcha \
  --pattern "Checkout tests share the Redis test database, so run them with --test-threads=1 or give each test its own key prefix" \
  --context "Seen in the checkout suite: two tests reserving the same basket id raced on the shared Redis database and failed one run in ten. Key prefixes per test fixed it." \
  --applies-to tests/checkout/ >/dev/null
"$CAIRN" learnings search "redis flaky tests" --project larder

say "Connect an agent client to Cairn in a scratch project (Claude Code, with its hooks)"
SCRATCH=target/demo/scratch
rm -rf "$SCRATCH" && mkdir -p "$SCRATCH"
printf '# Scratch project\n\nRun the tests before pushing.\n' > "$SCRATCH/CLAUDE.md"
# A HOME of its own, so the demo leaves your own client configuration and ledger alone.
DEMO_HOME=$PWD/target/demo/home
mkdir -p "$DEMO_HOME"
(cd "$SCRATCH" && HOME=$DEMO_HOME "$OLDPWD/$CAIRN" connect claude-code --project larder --hooks --dry-run | head -20)
(cd "$SCRATCH" && HOME=$DEMO_HOME "$OLDPWD/$CAIRN" connect claude-code --project larder --hooks)
(cd "$SCRATCH" && HOME=$DEMO_HOME "$OLDPWD/$CAIRN" connect claude-code --project larder --hooks)
say "The session-start hook, as Claude Code runs it (no daemon here: it says nothing and exits 0)"
echo "{\"hook_event_name\":\"SessionStart\",\"cwd\":\"$PWD/$SCRATCH\",\"source\":\"startup\"}" \
  | HOME=$DEMO_HOME "$CAIRN" hook session-start --project larder; echo "exit $?"
say "Disconnect: CLAUDE.md is back byte for byte"
(cd "$SCRATCH" && HOME=$DEMO_HOME "$OLDPWD/$CAIRN" disconnect claude-code)
cat "$SCRATCH/CLAUDE.md"
