"""Drive `cairn daemon` with the official MCP Python SDK's Streamable HTTP client.

Usage: python3 http_drive.py URL TOKEN < calls.json

stdin holds a JSON array of calls: [{"tool": name, "arguments": {...}}, ...]. The script
connects to URL with `Authorization: Bearer TOKEN` (MCP_MODE=legacy forces the
2025-11-25 initialize handshake; the default "auto" probes `server/discover`), lists
tools, makes each call in order, and prints one JSON object on stdout:
{"lifecycle", "tools": [names], "calls": [{"tool", "is_error", "structured", "text", "envelope"}]},
or {"error": "..."} when the client could not connect or a call raised.
The Rust test (tests/daemon.rs) asserts on it; this script asserts nothing itself.
"""

import asyncio
import json
import os
import sys

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from drive import run_calls  # the same call loop as the stdio driver (this directory)


async def drive(url: str, token: str, calls: list) -> dict:
    out = {"tools": [], "calls": []}
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    mode = os.environ.get("MCP_MODE", "auto")
    async with http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            listed = await client.list_tools()
            out["tools"] = [t.name for t in listed.tools]
            out["lifecycle"] = "discover" if client.session.discover_result is not None else "initialize"
            out["calls"] = await run_calls(client, calls)
    return out


def describe(e: BaseException) -> str:
    """An exception and, for a group, everything inside it."""
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(describe(x) for x in e.exceptions)
    return f"{type(e).__name__}: {e}"


async def main() -> None:
    url, token = sys.argv[1:3]
    calls = json.load(sys.stdin)
    try:
        out = await drive(url, token, calls)
    except BaseException as e:  # noqa: BLE001 - reported to the test, which asserts on it
        out = {"error": describe(e)}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
