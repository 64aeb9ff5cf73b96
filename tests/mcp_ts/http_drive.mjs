// Drive `cairn daemon` with the official MCP TypeScript SDK's StreamableHTTPClientTransport.
//
// Usage: node http_drive.mjs URL TOKEN < calls.json
//
// stdin holds a JSON array of calls: [{"tool": name, "arguments": {...}}, ...]. The script
// connects to URL with `Authorization: Bearer TOKEN` (the 2025-11-25 `initialize`
// lifecycle), lists tools, makes each call in order through `client.callTool` (which
// validates structuredContent against the tool's outputSchema and throws when it does not
// match), and prints one JSON object on stdout:
// {"server", "tools": [names], "calls": [{"tool", "threw", "is_error", "structured", "envelope"}]},
// or {"error": "..."} when the client could not connect. The Rust test (tests/daemon.rs)
// asserts on it; this script asserts nothing itself.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { runCalls } from "./calls.mjs";

const [url, token] = process.argv.slice(2);
const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const calls = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "cairn-ts-http-driver", version: "1.0.0" });
try {
  await client.connect(transport);
} catch (e) {
  process.stdout.write(JSON.stringify({ error: String(e?.message ?? e) }));
  process.exit(0);
}
const out = { server: client.getServerVersion()?.name ?? null, tools: [], calls: [] };
out.tools = (await client.listTools()).tools.map((t) => t.name);
out.calls = await runCalls(client, calls);
await client.close();
process.stdout.write(JSON.stringify(out));
