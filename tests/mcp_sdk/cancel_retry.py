"""Cancel a `vault_update` through the official MCP Python SDK as soon as it reports
progress (so it is running), retry it at once, and print what the retry answered.

Usage: python3 cancel_retry.py < plan.json, plan {"stdio": [binary, args...], "path": P}.
Prints {"cancelled": bool, "retry": {"is_error", "structured"}}; the Rust test
(tests/mcp_features.rs) asserts on it.
"""

import asyncio
import json
import sys

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def main() -> None:
    plan = json.load(sys.stdin)
    binary, *args = plan["stdio"]
    target = StdioServerParameters(command=binary, args=args, env={"CAIRN_LOG": "warn"})
    out = {}
    async with Client(target, mode="legacy") as client:
        # Cancelling the call's scope makes the SDK send notifications/cancelled.
        with anyio.CancelScope() as scope:

            async def on_progress(progress, total, message):
                scope.cancel()

            await client.call_tool("vault_update", {"path": plan["path"]}, progress_callback=on_progress)
        out["cancelled"] = scope.cancelled_caught
        r = await client.call_tool("vault_update", {"path": plan["path"]})
        out["retry"] = {"is_error": bool(r.is_error), "structured": r.structured_content}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
