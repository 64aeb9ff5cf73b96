// Drive `cairn serve` with the official MCP TypeScript SDK (1.x) and print what it saw.
//
// Usage: node drive.mjs CAIRN_BIN DB [serve flags...] < calls.json
//
// stdin holds a JSON array of calls: [{"tool": name, "arguments": {...}}, ...]. The
// script connects with the SDK's stdio client (the 2025-11-25 `initialize` lifecycle),
// lists tools, makes each call in order through `client.callTool` (which validates a
// result's structuredContent against the tool's outputSchema with ajv and throws when
// it does not match), and prints one JSON object on stdout:
// {"server": name, "instructions": the server's instructions as the SDK holds them,
//  "tools": [names], "warnings": [console output of the SDK],
//  "calls": [{"tool", "threw", "is_error", "structured", "envelope"}...]}.
// "threw" is the SDK's exception message (null when the call reached the caller);
// "envelope" is the error envelope parsed from a failed call's text content. The Rust
// test asserts on this output; this script asserts nothing itself.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { runCalls } from "./calls.mjs";

const [binary, db, ...flags] = process.argv.slice(2);
const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const calls = JSON.parse(Buffer.concat(chunks).toString("utf8"));

// ajv prints "unknown format ... ignored" warnings through console.warn/log; collect
// them so that the test can assert there are none.
const warnings = [];
for (const level of ["warn", "log", "error"]) {
  console[level] = (...args) => warnings.push(args.map(String).join(" "));
}

const transport = new StdioClientTransport({
  command: binary,
  args: ["--db", db, "serve", ...flags],
  env: { ...process.env, CAIRN_LOG: "warn" },
  stderr: "inherit",
});
const client = new Client({ name: "cairn-ts-driver", version: "1.0.0" });
await client.connect(transport);
const out = {
  server: client.getServerVersion()?.name ?? null,
  instructions: client.getInstructions() ?? null,
  tools: [],
  warnings,
  calls: [],
};
const listed = await client.listTools();
out.tools = listed.tools.map((t) => t.name);
out.calls = await runCalls(client, calls);
await client.close();
process.stdout.write(JSON.stringify(out));
