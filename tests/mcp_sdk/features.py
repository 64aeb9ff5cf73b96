"""Drive the rest of MCP (resources, prompts, completion, logging, progress, cancellation,
subscriptions) on `cairn serve` or `cairn daemon` with the official MCP Python SDK.

Usage: python3 features.py < plan.json

The plan: {"stdio": [binary, "--db", db, "serve", flags...]} or {"url", "token"}; "mode"
("auto" probes server/discover and so speaks 2026-07-28, "legacy" forces initialize);
"doc_uri" (a readable vault document), "doc_file" (its file, edited here), "doc_path"
(its path for vault_update, or null when a daemon follows the file), "big_path" and
"big2_path" (large documents for progress and cancellation; "big2_uri" the second's
resource), "learning_uri",
"issue_uri", "outside_uri" (a URI outside the session's scope), "issue_prefix".
Prints one JSON object of what the SDK saw; the Rust test (tests/mcp_features.rs)
asserts on it; this script asserts nothing itself. Every wait is for an event (a
notification, a document becoming readable), polled against a deadline.
"""

import asyncio
import inspect
import json
import sys

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import PromptReference, ResourceTemplateReference


def describe(e: BaseException) -> str:
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(describe(x) for x in e.exceptions)
    return f"{type(e).__name__}: {e}"


async def until(ready, seconds: float) -> bool:
    """Poll `ready` (a predicate, or a coroutine function) until it holds: whether it did
    within `seconds` (a bound that only catches a hang)."""
    with anyio.move_on_after(seconds):
        while True:
            held = ready()
            if inspect.isawaitable(held):
                held = await held
            if held:
                return True
            await anyio.sleep(0.05)
    return False


async def attempt(coro):
    try:
        return {"ok": await coro}
    except Exception as e:  # noqa: BLE001 - reported to the test
        return {"error": describe(e)}


async def drive(client: Client, plan: dict, logs: list, notes: list) -> dict:
    out = {"lifecycle": "discover" if client.session.discover_result is not None else "initialize"}
    # Resources: every page, the templates, reads inside and outside the scope.
    uris, cursor, pages = [], None, 0
    while True:
        page = await client.list_resources(cursor=cursor)
        pages += 1
        uris += [r.uri for r in page.resources]
        cursor = page.next_cursor
        if not cursor:
            break
    out["resources"] = uris
    out["pages"] = pages
    templates = await client.list_resource_templates()
    out["templates"] = [t.uri_template for t in templates.resource_templates]

    async def read(uri):
        r = await client.read_resource(uri)
        return [{"uri": c.uri, "mime": c.mime_type, "text": getattr(c, "text", None)} for c in r.contents]

    out["read"] = {k: await attempt(read(plan[k])) for k in ("doc_uri", "learning_uri", "issue_uri", "outside_uri")}

    # Prompts and completion.
    prompts = await client.list_prompts()
    out["prompts"] = [p.name for p in prompts.prompts]

    async def prompt(name, args):
        r = await client.get_prompt(name, args)
        return [m.content.text for m in r.messages]

    out["start_work"] = await attempt(prompt("start_work", {}))
    out["record_learning"] = await attempt(
        prompt("record_learning", {"lesson": "Run migrations before seeding the test database"})
    )
    out["record_learning_missing"] = await attempt(prompt("record_learning", {}))
    done = await client.complete(PromptReference(type="ref/prompt", name="start_work"), {"name": "issue", "value": plan["issue_prefix"]})
    out["complete_issue"] = done.completion.values
    done = await client.complete(
        ResourceTemplateReference(type="ref/resource", uri="cairn://vault/{collection}/{+path}"),
        {"name": "path", "value": ""},
    )
    out["complete_path"] = done.completion.values

    # Logging: this session's own calls only.
    if out["lifecycle"] == "initialize":
        await client.set_logging_level("info")
    await client.call_tool("server_ping", {})
    await until(lambda: any(isinstance(l, dict) and l.get("tool") == "server_ping" for l in logs), 15)
    out["logs"] = list(logs)

    # Progress on a long call.
    progress = []

    async def on_progress(p, total, message):
        progress.append({"progress": p, "total": total, "message": message})

    r = await client.call_tool("vault_update", {"path": plan["big_path"]}, progress_callback=on_progress)
    out["big_update"] = {"is_error": bool(r.is_error), "structured": r.structured_content}
    out["progress"] = progress

    # Cancellation once the call is known to run: its first progress notification cancels
    # the call's scope, and the SDK sends notifications/cancelled.
    with anyio.CancelScope() as scope:

        async def running(p, total, message):
            scope.cancel()

        await client.call_tool("vault_update", {"path": plan["big2_path"]}, progress_callback=running)
    out["cancelled"] = scope.cancelled_caught

    # The cancelled call's work runs on to its end and commits whole (or fails and leaves
    # nothing): wait until the document is readable, then the same update finds it fully
    # indexed (changed: false); had it never become readable, not indexed at all.
    async def committed():
        try:
            await client.read_resource(plan["big2_uri"], cache_mode="bypass")
            return True
        except Exception:  # noqa: BLE001 - not indexed yet
            return False

    out["cancelled_committed"] = await until(committed, 300)
    r = await client.call_tool("vault_update", {"path": plan["big2_path"]})
    out["after_cancel"] = {"is_error": bool(r.is_error), "structured": r.structured_content}

    # A subscription notified when the document changes.
    updated = []

    async def edit():
        with open(plan["doc_file"], "a", encoding="utf-8") as f:
            f.write("\n\n## Added by the subscription test\n\nA new paragraph about rollbacks.\n")
        if plan.get("doc_path"):
            await client.call_tool("vault_update", {"path": plan["doc_path"]})

    if out["lifecycle"] == "discover":
        async with client.listen(resource_subscriptions=[plan["doc_uri"], plan["outside_uri"]], resources_list_changed=True) as sub:
            out["honored"] = list(sub.honored.resource_subscriptions or [])
            await edit()
            with anyio.move_on_after(15):
                async for event in sub:
                    updated.append(getattr(event, "uri", type(event).__name__))
                    if plan["doc_uri"] in updated:
                        break
    else:
        await client.subscribe_resource(plan["doc_uri"])
        out["subscribe_outside"] = await attempt(client.subscribe_resource(plan["outside_uri"]))
        await edit()
        await until(lambda: plan["doc_uri"] in notes, 15)
        updated = list(notes)
    out["updated"] = updated
    return out


async def main() -> None:
    plan = json.load(sys.stdin)
    logs, notes = [], []

    async def on_log(params):
        logs.append(params.data)

    async def on_message(message):
        root = getattr(message, "root", message)
        params = getattr(root, "params", None)
        uri = getattr(params, "uri", None)
        if uri is not None:
            notes.append(str(uri))

    if "stdio" in plan:
        binary, *args = plan["stdio"]
        target = StdioServerParameters(
            command=binary, args=args, env={"CAIRN_LOG": "warn", **plan.get("server_env", {})}
        )
        http = None
    else:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        http = create_mcp_http_client(headers={"Authorization": f"Bearer {plan['token']}"})
        target = streamable_http_client(plan["url"], http_client=http)
    try:
        client = Client(
            target,
            mode=plan.get("mode", "auto"),
            logging_callback=on_log,
            message_handler=on_message,
            log_level="info" if plan.get("mode", "auto") == "auto" else None,
        )
        async with client:
            out = await drive(client, plan, logs, notes)
    except BaseException as e:  # noqa: BLE001 - reported to the test
        out = {"error": describe(e)}
    finally:
        if http is not None:
            await http.aclose()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
