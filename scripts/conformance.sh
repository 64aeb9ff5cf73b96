#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance) against
# `cairn daemon` (Streamable HTTP). See docs/conformance.md.
#
#   scripts/conformance.sh [CAIRN_BINARY]        # default: target/debug/cairn
#
# Installs Node.js 22 (npm's `node` package) and the pinned suite into
# $CAIRN_CONFORMANCE_CACHE (default target/conformance/) when they are absent, starts a
# daemon on a throwaway database, mints a session token, runs the scenarios of APPLICABLE
# below, each at the wire versions listed with it, stops the daemon and exits 1 if any
# check failed (other than the few FIXTURE_CHECKS). checks.json per scenario and the
# daemon's log go to $CAIRN_CONFORMANCE_OUT (default target/conformance/results/).
#
# Needs npm (on any Node.js >= 18) and the npm registry on the first run; the binary
# finds its embedding model as usual (models/, `bash models/fetch.sh`).
#
# The suite cannot send an Authorization header, which the daemon requires on every
# request, so it talks to scripts/conformance-proxy.mjs, a loopback proxy that adds
# `Authorization: Bearer <token>` and changes nothing else (the Host header keeps its
# name; only its port is rewritten to the daemon's).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${1:-$ROOT/target/debug/cairn}
CACHE=${CAIRN_CONFORMANCE_CACHE:-$ROOT/target/conformance}
OUT=${CAIRN_CONFORMANCE_OUT:-$CACHE/results}

# The newest published suite. 0.1.16 (npm's `latest` tag) has only the 2025-11-25
# scenarios; this one also speaks 2026-07-28, the stateless wire the daemon serves.
SUITE_VERSION=0.2.0-alpha.12
NODE_VERSION=22.23.3 # npm package `node`: the Node.js binary the suite runs on

# The protocol versions Cairn serves, in the order they are run.
WIRES=(2025-11-25 2026-07-28)

# Scenarios that apply to Cairn, and the wire versions each runs at (the suite runs a
# scenario at one protocol version per invocation: --spec-version).
APPLICABLE=(
    "server-initialize                         2025-11-25" # initialize + initialized
    "server-session-lifecycle                  2025-11-25" # an initialize opens a session; DELETE ends it, then 404
    "server-stateless                          2026-07-28" # SEP-2575: per-request _meta, server/discover, 404s, subscriptions/listen
    "logging-set-level                         2025-11-25" # logging/setLevel answers {}
    "ping                                      2025-11-25" # ping answers {}
    "tools-list                                2025-11-25 2026-07-28" # name, description, inputSchema on every tool
    "resources-list                            2025-11-25 2026-07-28" # uri and name on every resource
    "prompts-list                              2025-11-25 2026-07-28" # name and description on every prompt
    "sep-2164-resource-not-found               2026-07-28" # resources/read of an unknown URI: an error, not empty contents
    "caching                                   2026-07-28" # SEP-2549: ttlMs and cacheScope on list/read results
    "http-header-validation                    2026-07-28" # SEP-2243: Mcp-Method/Mcp-Name header checks, 400 + -32020
    "dns-rebinding-protection                  2025-11-25 2026-07-28" # foreign Host/Origin 4xx, loopback 2xx
    "server-sse-multiple-streams               2025-11-25 2026-07-28" # concurrent POSTs accepted (JSON answers are fine)
    "input-required-result-unsupported-methods 2026-07-28" # SEP-2322: no input_required on tools/list, prompts/list
)

# Checks (scenario/check-id) that need a diagnostic tool of the suite's reference server
# inside an otherwise applicable scenario: their FAILURE is reported, not counted.
FIXTURE_CHECKS=(
    server-stateless/sep-2575-server-rejects-undeclared-capability # tool `test_missing_capability`
    server-stateless/sep-2575-missing-capability-http-400          # tool `test_missing_capability`
)

# Not applicable. Most need a fixture of the suite's reference "everything" server (a
# tool, resource or prompt with a fixed test name and content) that Cairn does not and
# should not have; the rest test protocol extensions Cairn does not declare.
EXCLUDED=(
    completion-complete           # completion/complete for prompt `test_prompt_with_arguments` (passes: Cairn answers an empty list)
    tools-call-simple-text        # tool `test_simple_text` (passes by accident: the unknown-tool error is text content)
    tools-call-image              # tool `test_image_content`
    tools-call-audio              # tool `test_audio_content`
    tools-call-embedded-resource  # tool `test_embedded_resource`
    tools-call-mixed-content      # tool `test_multiple_content_types`
    tools-call-with-logging       # tool `test_tool_with_logging` (3 log notifications)
    tools-call-error              # tool `test_error_handling` (passes by accident: the unknown-tool error has isError: true)
    tools-call-with-progress      # tool `test_tool_with_progress` (3 progress notifications)
    tools-call-sampling           # tool `test_sampling` (sampling/createMessage to the client)
    tools-call-elicitation        # tool `test_elicitation` (elicitation/create to the client)
    json-schema-2020-12           # tool `json_schema_2020_12_tool` with $schema/$defs
    elicitation-sep1034-defaults  # tool `test_elicitation_sep1034_defaults`
    elicitation-sep1330-enums     # tool `test_elicitation_sep1330_enums`
    server-sse-polling            # tool `test_reconnection` and a session id (SEP-1699 resumable SSE)
    resources-read-text           # resource `test://static-text`
    resources-read-binary         # resource `test://static-binary`
    resources-templates-read      # template `test://template/{id}/data`
    resources-subscribe           # resource `test://watched-resource`: outside every session's reach, refused (docs/conformance.md)
    resources-unsubscribe         # the same
    prompts-get-simple            # prompt `test_simple_prompt`
    prompts-get-with-args         # prompt `test_prompt_with_arguments` (arg1, arg2)
    prompts-get-embedded-resource # prompt `test_prompt_with_embedded_resource`
    prompts-get-with-image        # prompt `test_prompt_with_image`
    http-custom-header-server-validation # SEP-2243 Mcp-Param headers: needs a tool with x-mcp-header annotations
    sep-2640-skills-directory     # extension io.modelcontextprotocol/skills, not declared
    sep-2640-skills-enumeration   # the same
    sep-2640-skills-manifest      # the same
    tasks-lifecycle               # extension io.modelcontextprotocol/tasks, not declared; tools `slow_compute`, `failing_job`, ...
    tasks-capability-negotiation  # the same
    tasks-wire-fields             # the same
    tasks-request-state-removal   # the same
    tasks-mrtr-input              # the same (tools `confirm_delete`, `multi_input`)
    tasks-request-headers         # the same
    tasks-dispatch-and-envelope   # the same
    tasks-status-notifications    # the same
    tasks-required-task-error     # the same
    tasks-mrtr-composition        # the same (tool `test_tool_with_task`)
    input-required-result-basic-elicitation       # SEP-2322: tool `test_input_required_result_elicitation`
    input-required-result-basic-sampling          # tool `test_input_required_result_sampling`
    input-required-result-basic-list-roots        # tool `test_input_required_result_list_roots`
    input-required-result-request-state           # tool `test_input_required_result_request_state`
    input-required-result-multiple-input-requests # tool `test_input_required_result_multiple_inputs`
    input-required-result-multi-round             # tool `test_input_required_result_multi_round`
    input-required-result-missing-input-response  # tool `test_input_required_result_elicitation`
    input-required-result-non-tool-request        # prompt `test_input_required_result_prompt`
    input-required-result-result-type             # tool `test_input_required_result_elicitation`
    input-required-result-tampered-state          # tool `test_input_required_result_tampered_state`
    input-required-result-capability-check        # tool `test_input_required_result_capabilities`
    input-required-result-ignore-extra-params     # tool `test_input_required_result_elicitation`
    input-required-result-validate-input          # tool `test_input_required_result_elicitation`
)

say() { printf 'conformance: %s\n' "$*" >&2; }

[[ -x $BIN ]] || { say "no executable cairn at $BIN (build it, or pass its path)"; exit 2; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
command -v npm >/dev/null || { say "npm is needed to install the suite"; exit 2; }

# --- Node.js 22 and the suite, cached ----------------------------------------------------
NODE_DIR=$CACHE/node-$NODE_VERSION
NODE=$NODE_DIR/node_modules/node/bin/node
if ! "$NODE" --version >/dev/null 2>&1; then
    say "installing node@$NODE_VERSION into $NODE_DIR"
    mkdir -p "$NODE_DIR"
    (cd "$NODE_DIR" && echo '{"private": true}' >package.json &&
        npm install --no-audit --no-fund --loglevel=error "node@$NODE_VERSION" >&2)
fi
[[ $("$NODE" --version) == v22.* ]] || { say "$NODE is not Node.js 22"; exit 2; }

SUITE_DIR=$CACHE/suite-$SUITE_VERSION
SUITE=$SUITE_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js
if [[ ! -f $SUITE ]]; then
    say "installing @modelcontextprotocol/conformance@$SUITE_VERSION into $SUITE_DIR"
    mkdir -p "$SUITE_DIR"
    (cd "$SUITE_DIR" && echo '{"private": true}' >package.json &&
        npm install --no-audit --no-fund --loglevel=error \
            "@modelcontextprotocol/conformance@$SUITE_VERSION" >&2)
fi
[[ $("$NODE" "$SUITE" --version) == "$SUITE_VERSION" ]] ||
    { say "the suite at $SUITE is not $SUITE_VERSION"; exit 2; }

# Every scenario of the suite must be classified above, so that a new suite version
# cannot bring scenarios nobody looked at.
known=" ${EXCLUDED[*]} "
for entry in "${APPLICABLE[@]}"; do
    read -r s versions <<<"$entry"
    known+="$s "
    for v in $versions; do
        [[ " ${WIRES[*]} " == *" $v "* ]] || { say "$s: $v is not in WIRES"; exit 2; }
    done
done
unclassified=()
while read -r s; do
    [[ $known == *" $s "* ]] || unclassified+=("$s")
done < <("$NODE" "$SUITE" list --server | sed -n 's/^  - \([^ ]*\).*/\1/p')
if ((${#unclassified[@]})); then
    say "scenarios neither in APPLICABLE nor in EXCLUDED of $0: ${unclassified[*]}"
    exit 2
fi

# --- a daemon on a throwaway database -----------------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cairn-conformance.XXXXXX")
DB=$WORK/cairn.db
DAEMON_PID=
PROXY_PID=
cleanup() {
    local rc=$?
    if [[ -n $PROXY_PID ]] && kill "$PROXY_PID" 2>/dev/null; then
        wait "$PROXY_PID" 2>/dev/null || true
    fi
    if [[ -n $DAEMON_PID ]] && kill "$DAEMON_PID" 2>/dev/null; then
        # SIGTERM drains calls in flight (--drain-seconds 2); give it 15 s in all.
        for _ in $(seq 1 150); do
            kill -0 "$DAEMON_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$DAEMON_PID" 2>/dev/null && say "the daemon did not stop on SIGTERM"
        wait "$DAEMON_PID" 2>/dev/null || true
    fi
    mkdir -p "$OUT" && cp "$WORK/daemon.log" "$OUT/daemon.log" 2>/dev/null || true
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cairn() { "$BIN" --db "$DB" "$@"; }

cairn project create --slug conf --name "Conformance" --prefix CONF >/dev/null
ISSUE=$(cairn issue create --project conf --title "MCP conformance run")
"$BIN" --db "$DB" daemon --listen 127.0.0.1:0 --drain-seconds 2 >"$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!

# The daemon writes its URL to <db>.daemon.json once it listens.
for _ in $(seq 1 600); do
    [[ -s $DB.daemon.json ]] && break
    kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$WORK/daemon.log" >&2; say "the daemon exited"; exit 1; }
    sleep 0.1
done
[[ -s $DB.daemon.json ]] || { say "the daemon wrote no $DB.daemon.json in 60 s"; exit 1; }
DAEMON_URL=$("$NODE" -p 'JSON.parse(require("fs").readFileSync(process.argv[1])).url' "$DB.daemon.json")
DAEMON_PORT=$("$NODE" -p 'new URL(process.argv[1]).port' "$DAEMON_URL")
say "daemon pid $DAEMON_PID at $DAEMON_URL"

TOKEN=$(cairn session new --issue "$ISSUE" --agent-type worker --ttl 1h)

CAIRN_TOKEN=$TOKEN "$NODE" "$ROOT/scripts/conformance-proxy.mjs" 0 "$DAEMON_PORT" \
    >"$WORK/proxy.port" 2>>"$WORK/daemon.log" &
PROXY_PID=$!
for _ in $(seq 1 100); do
    [[ -s $WORK/proxy.port ]] && break
    sleep 0.1
done
PROXY_PORT=$(head -n1 "$WORK/proxy.port")
[[ -n $PROXY_PORT ]] || { say "the proxy did not start"; exit 1; }
URL=http://127.0.0.1:$PROXY_PORT/mcp

# Wait until the daemon answers MCP through the proxy (any answer but the proxy's 502).
"$NODE" -e '
const url = process.argv[1];
const body = JSON.stringify({jsonrpc: "2.0", id: 0, method: "ping"});
(async () => {
  for (let i = 0; i < 300; i++) {
    try {
      const r = await fetch(url, {method: "POST", body, headers: {
        "content-type": "application/json", accept: "application/json, text/event-stream"}});
      if (r.status !== 502) process.exit(0);
    } catch {}
    await new Promise((res) => setTimeout(res, 100));
  }
  console.error("no answer from " + url);
  process.exit(1);
})();' "$URL"

# --- the scenarios ---------------------------------------------------------------------------
# Prints one line per failed check of the checks.json files under a directory; exits 1
# when one of them is not a FIXTURE_CHECK, or when there is no checks.json at all.
evaluate() {
    "$NODE" -e '
const fs = require("fs"), path = require("path");
const [dir, scenario, fixtures] = process.argv.slice(1);
const fixture = new Set(fixtures.split(" ").filter(Boolean));
const files = fs.readdirSync(dir, {recursive: true}).filter((f) => path.basename(f) === "checks.json");
if (files.length === 0) { console.log("    no checks.json: the scenario did not run"); process.exit(1); }
let bad = 0;
for (const f of files) {
  for (const c of JSON.parse(fs.readFileSync(path.join(dir, f), "utf8"))) {
    if (c.status !== "FAILURE") continue;
    const known = fixture.has(`${scenario}/${c.id}`);
    if (!known) bad++;
    console.log(`    ${known ? "fixture" : "FAIL"} ${c.id}: ${c.errorMessage ?? c.description}`);
  }
}
process.exit(bad ? 1 : 0);' "$1" "$2" "${FIXTURE_CHECKS[*]}"
}

rm -rf "${OUT:?}/runs" && mkdir -p "$OUT/runs"
passed=0
failed=()
report=()
# All 2025-11-25 runs first, then the 2026-07-28 ones, on one daemon and one token, as a
# client that upgrades would: a 2026-07-28 request must not see state that 2025-11-25
# requests left on the token's server (the log level of logging/setLevel, for one).
for v in "${WIRES[@]}"; do
    for entry in "${APPLICABLE[@]}"; do
        read -r s versions <<<"$entry"
        [[ " $versions " == *" $v "* ]] || continue
        dir=$OUT/runs/$v/$s
        mkdir -p "$dir"
        # The suite's own exit status counts fixture checks too: evaluate() decides.
        "$NODE" "$SUITE" server --url "$URL" --scenario "$s" --spec-version "$v" \
            --output-dir "$dir" >"$dir/output.txt" 2>&1 || true
        if lines=$(evaluate "$dir" "$s"); then
            passed=$((passed + 1))
            report+=("  pass  $s @ $v")
        else
            failed+=("$s@$v")
            report+=("  FAIL  $s @ $v   ($dir/output.txt)")
        fi
        [[ -n $lines ]] && report+=("$lines")
    done
done

echo "MCP conformance $SUITE_VERSION against $BIN"
printf '%s\n' "${report[@]}"
echo "$passed passed, ${#failed[@]} failed; ${#EXCLUDED[@]} scenarios not applicable (see $0)"
((${#failed[@]} == 0))
