"""Drive `cairn serve` with the official MCP Python SDK and print what it saw as JSON.

Usage: python3 drive.py CAIRN_BIN DB [serve flags...] < calls.json

stdin holds a JSON array of calls: [{"tool": name, "arguments": {...}}, ...]. The script
connects with the SDK's default client (mode "auto": it probes `server/discover` first),
lists tools, makes each call in order, and prints one JSON object on stdout:
{"tools": [names], "instructions": the server's instructions as the SDK holds them,
 "calls": [{"tool", "is_error", "structured", "text", "envelope"}...]}.
"envelope" is the error envelope parsed from the text content of a failed call (what an
agent reading the SDK's result sees), null for a success.
The Rust test asserts on it; this script asserts nothing itself.
"""

import asyncio
import json
import os
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def main() -> None:
    binary, db, *flags = sys.argv[1:]
    calls = json.load(sys.stdin)
    params = StdioServerParameters(
        command=binary,
        args=["--db", db, "serve", *flags],
        env={"CAIRN_LOG": "warn"},
    )
    out = {"tools": [], "calls": []}
    # MCP_MODE=legacy forces the initialize handshake; the default probes server/discover.
    mode = os.environ.get("MCP_MODE", "auto")
    async with Client(params, mode=mode) as client:
        listed = await client.list_tools()
        out["tools"] = [t.name for t in listed.tools]
        # Which lifecycle the SDK settled on: "discover" (2026-07-28+) or "initialize".
        out["lifecycle"] = "discover" if client.session.discover_result is not None else "initialize"
        out["instructions"] = client.instructions
        out["calls"] = await run_calls(client, calls)
    json.dump(out, sys.stdout)


async def run_calls(client: Client, calls: list) -> list:
    """Make each call in order; what the SDK returned for each (also http_drive.py's)."""
    seen = []
    for call in calls:
        result = await client.call_tool(call["tool"], call.get("arguments", {}))
        text = "".join(getattr(c, "text", "") for c in result.content)
        seen.append(
            {
                "tool": call["tool"],
                "is_error": bool(result.is_error),
                "structured": result.structured_content,
                "text": text,
                "envelope": json.loads(text) if result.is_error else None,
            }
        )
    return seen


if __name__ == "__main__":
    asyncio.run(main())
