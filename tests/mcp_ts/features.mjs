// Drive the rest of MCP (resources, prompts, completion, logging, progress, cancellation,
// subscriptions) on `cairn serve` or `cairn daemon` with the official MCP TypeScript SDK
// (1.x): the twin of tests/mcp_sdk/features.py.
//
// Usage: node features.mjs < plan.json
//
// The plan: {"stdio": [binary, "--db", db, "serve", flags...]} or {"url", "token"};
// "doc_uri" (a readable vault document), "doc_file" (its file, edited here), "doc_path"
// (its path for vault_update, or null when a daemon follows the file), "big_path" and
// "big2_path" (large documents for progress and cancellation; "big2_uri" the second's
// resource), "learning_uri",
// "issue_uri", "outside_uri" (a URI outside the session's scope), "issue_prefix". "mode"
// is ignored: this SDK always speaks the `initialize` lifecycle (2025-11-25).
// Prints one JSON object of what the SDK saw, the shape features.py prints for the
// initialize lifecycle ({"error": "..."} when the session failed); the Rust test
// asserts on it; this script asserts nothing itself. Every wait is for an event (a
// notification, a document becoming readable), polled against a deadline.
import { appendFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

// Long enough for vault_update embedding a large document with the real model.
const LONG = { timeout: 600_000, resetTimeoutOnProgress: true };

// Poll `ready` (a predicate, possibly async) until it holds: whether it did within `ms`
// (a bound that only catches a hang).
async function until(ready, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await ready()) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
}

function describe(e) {
  if (e instanceof AggregateError) return e.errors.map(describe).join("; ");
  return `${e?.name ?? "Error"}: ${e?.message ?? e}`;
}

async function attempt(promise) {
  try {
    return { ok: await promise };
  } catch (e) {
    return { error: describe(e) };
  }
}

const structured = (r) => ({ is_error: r.isError === true, structured: r.structuredContent ?? null });

async function drive(client, plan, logs, notes) {
  const out = { lifecycle: "initialize" };
  // Resources: every page, the templates, reads inside and outside the scope.
  const uris = [];
  let cursor;
  let pages = 0;
  for (;;) {
    const page = await client.listResources(cursor ? { cursor } : undefined);
    pages += 1;
    uris.push(...page.resources.map((r) => r.uri));
    cursor = page.nextCursor;
    if (!cursor) break;
  }
  out.resources = uris;
  out.pages = pages;
  const templates = await client.listResourceTemplates();
  out.templates = templates.resourceTemplates.map((t) => t.uriTemplate);

  const read = async (uri) => {
    const r = await client.readResource({ uri });
    return r.contents.map((c) => ({ uri: c.uri, mime: c.mimeType ?? null, text: c.text ?? null }));
  };
  out.read = {};
  for (const k of ["doc_uri", "learning_uri", "issue_uri", "outside_uri"]) {
    out.read[k] = await attempt(read(plan[k]));
  }

  // Prompts and completion.
  const prompts = await client.listPrompts();
  out.prompts = prompts.prompts.map((p) => p.name);
  const prompt = async (name, args) => {
    const r = await client.getPrompt({ name, arguments: args });
    return r.messages.map((m) => m.content?.text ?? null);
  };
  out.start_work = await attempt(prompt("start_work", {}));
  out.record_learning = await attempt(
    prompt("record_learning", { lesson: "Run migrations before seeding the test database" }),
  );
  out.record_learning_missing = await attempt(prompt("record_learning", {}));
  let done = await client.complete({
    ref: { type: "ref/prompt", name: "start_work" },
    argument: { name: "issue", value: plan.issue_prefix },
  });
  out.complete_issue = done.completion.values;
  done = await client.complete({
    ref: { type: "ref/resource", uri: "cairn://vault/{collection}/{+path}" },
    argument: { name: "path", value: "" },
  });
  out.complete_path = done.completion.values;

  // Logging: this session's own calls only.
  await client.setLoggingLevel("info");
  await client.callTool({ name: "server_ping", arguments: {} });
  await until(() => logs.some((l) => l?.tool === "server_ping"), 15_000);
  out.logs = [...logs];

  // Progress on a long call.
  const progress = [];
  const onprogress = (p) =>
    progress.push({ progress: p.progress, total: p.total ?? null, message: p.message ?? null });
  let r = await client.callTool({ name: "vault_update", arguments: { path: plan.big_path } }, undefined, {
    ...LONG,
    onprogress,
  });
  out.big_update = structured(r);
  out.progress = progress;

  // Cancellation once the call is known to run: its first progress notification aborts
  // the request's signal, which sends notifications/cancelled.
  const abort = new AbortController();
  out.cancelled = false;
  try {
    await client.callTool({ name: "vault_update", arguments: { path: plan.big2_path } }, undefined, {
      ...LONG,
      signal: abort.signal,
      onprogress: () => abort.abort(new Error("cancelled by the driver once the call ran")),
    });
  } catch (e) {
    if (!abort.signal.aborted) throw e;
    out.cancelled = true;
  }
  // The cancelled call's work runs on to its end and commits whole (or fails and leaves
  // nothing): wait until the document is readable, then the same update finds it fully
  // indexed (changed: false); had it never become readable, not indexed at all.
  out.cancelled_committed = await until(
    () =>
      client.readResource({ uri: plan.big2_uri }).then(
        () => true,
        () => false,
      ),
    300_000,
  );
  r = await client.callTool({ name: "vault_update", arguments: { path: plan.big2_path } }, undefined, LONG);
  out.after_cancel = structured(r);

  // A subscription notified when the document changes.
  await client.subscribeResource({ uri: plan.doc_uri });
  out.subscribe_outside = await attempt(client.subscribeResource({ uri: plan.outside_uri }));
  appendFileSync(plan.doc_file, "\n\n## Added by the subscription test\n\nA new paragraph about rollbacks.\n", "utf8");
  if (plan.doc_path) {
    await client.callTool({ name: "vault_update", arguments: { path: plan.doc_path } }, undefined, LONG);
  }
  await until(() => notes.includes(plan.doc_uri), 15_000);
  out.updated = [...notes];
  return out;
}

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const plan = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const logs = [];
const notes = [];
const transport = plan.stdio
  ? new StdioClientTransport({
      command: plan.stdio[0],
      args: plan.stdio.slice(1),
      env: { ...process.env, CAIRN_LOG: "warn" },
      stderr: "inherit",
    })
  : new StreamableHTTPClientTransport(new URL(plan.url), {
      requestInit: { headers: { Authorization: `Bearer ${plan.token}` } },
    });
const client = new Client({ name: "cairn-ts-features", version: "1.0.0" });
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
  logs.push(n.params.data);
});
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
  notes.push(String(n.params.uri));
});

let out;
try {
  await client.connect(transport);
  out = await drive(client, plan, logs, notes);
} catch (e) {
  out = { error: describe(e) };
}
try {
  await client.close();
} catch {
  // the result is what matters
}
process.stdout.write(JSON.stringify(out));
process.exit(0);
