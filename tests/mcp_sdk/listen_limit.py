"""Ask `subscriptions/listen` (protocol 2026-07-28) for more documents than a listen may
watch, through the official MCP Python SDK, and print which the acknowledgment honored.

Usage: python3 listen_limit.py < plan.json, plan {"stdio": [binary, args...], "uris": [...]}.
Prints {"honored": [...]} (or {"error": "..."}); the Rust test (tests/mcp_features.rs)
asserts on it.
"""

import asyncio
import json
import sys

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters


def describe(e: BaseException) -> str:
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(describe(x) for x in e.exceptions)
    code = getattr(getattr(e, "error", None), "code", None)
    return f"{type(e).__name__} {code}: {e}"


async def main() -> None:
    plan = json.load(sys.stdin)
    binary, *args = plan["stdio"]
    target = StdioServerParameters(command=binary, args=args, env={"CAIRN_LOG": "warn"})
    out = {}
    try:
        async with Client(target, mode="auto") as client:
            with anyio.fail_after(60):
                async with client.listen(resource_subscriptions=plan["uris"]) as sub:
                    out["honored"] = list(sub.honored.resource_subscriptions or [])
    except BaseException as e:  # noqa: BLE001 - reported to the test
        out["error"] = describe(e)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
