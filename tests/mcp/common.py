"""What the stdio and HTTP client tests share: one session exercising every
MCP feature Airlock serves, and the list_changed check. Each function takes
`connect`, an async context manager factory yielding (read, write) streams
to a fresh server session."""

import json
import shutil
from contextlib import asynccontextmanager

import anyio
import mcp.types as types
from mcp import Client, ClientSession, MCPError


async def exercise(connect, workspace: str) -> dict:
    """List, call, a validation error, a tool error, progress, cancellation
    of a long call, permission by elicitation (accepted and declined), an
    unknown tool; then a session without elicitation is refused with a
    message saying how to allow the call."""
    progress = []
    asked = []
    answers = []

    async def on_progress(done, total, message):
        progress.append((done, total, message))

    async def on_elicit(ctx, params):
        asked.append(params.message)
        return answers.pop(0)

    async with connect() as (read, write):
        async with ClientSession(
            read, write, read_timeout_seconds=30.0, elicitation_callback=on_elicit
        ) as session:
            init = await session.initialize()
            assert init.server_info.name == "airlock", init
            assert init.capabilities.tools.list_changed is True, init.capabilities

            listed = await session.list_tools()
            names = [t.name for t in listed.tools]
            assert len(set(names)) == len(names), names
            assert {"read", "write", "edit", "sleep", "grep"} <= set(names), names
            again = await session.list_tools()
            assert [t.name for t in again.tools] == names, "a stable order"
            read = next(t for t in listed.tools if t.name == "read")
            assert read.annotations.read_only_hint is True, read.annotations
            assert read.annotations.destructive_hint is False, read.annotations
            assert read.input_schema["type"] == "object", read.input_schema
            assert read.meta["anthropic/alwaysLoad"] is True, read.meta
            write_tool = next(t for t in listed.tools if t.name == "write")
            assert write_tool.annotations.read_only_hint is False, write_tool.annotations

            ok = await session.call_tool("read", {"file_path": f"{workspace}/a.txt"})
            assert not ok.is_error and "hello mcp" in ok.content[0].text, ok

            bad = await session.call_tool("sleep", {"ms": -1})
            assert bad.is_error and "minimum" in bad.content[0].text, bad

            missing = await session.call_tool("read", {"file_path": f"{workspace}/nope.txt"})
            assert missing.is_error and "does not exist" in missing.content[0].text, missing

            slept = await session.call_tool("sleep", {"ms": 350}, progress_callback=on_progress)
            assert not slept.is_error, slept
            assert progress, "progress notifications arrive"
            values = [p[0] for p in progress]
            assert values == sorted(values), values

            # Cancel a long call. The exclusive `write` after it starts only
            # once nothing runs, so its finishing fast proves the long call
            # was stopped.
            with anyio.move_on_after(0.3):
                await session.call_tool("sleep", {"ms": 60000})
            answers.append(types.ElicitResult(action="accept", content={"allow": True}))
            with anyio.fail_after(10):
                wrote = await session.call_tool(
                    "write", {"file_path": f"{workspace}/b.txt", "content": "written"}
                )
            assert not wrote.is_error, wrote
            assert len(asked) == 1 and "write" in asked[0], asked
            with open(f"{workspace}/b.txt") as f:
                assert f.read() == "written"

            answers.append(types.ElicitResult(action="decline"))
            declined = await session.call_tool(
                "write", {"file_path": f"{workspace}/c.txt", "content": "no"}
            )
            assert declined.is_error and "declined" in declined.content[0].text, declined
            assert len(asked) == 2, asked

            try:
                await session.call_tool("nope", {})
                raise AssertionError("an unknown tool is a protocol error")
            except MCPError as e:
                assert "nope" in str(e), e

    async with connect() as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=30.0) as session:
            await session.initialize()
            refused = await session.call_tool(
                "write", {"file_path": f"{workspace}/d.txt", "content": "no"}
            )
            assert refused.is_error, refused
            assert "permissions.allow" in refused.content[0].text, refused

    return {"tools": len(names), "progress": len(progress), "questions": len(asked)}


@asynccontextmanager
async def watching(connect):
    """A session on a fresh server, and an event set when the server sends
    `notifications/tools/list_changed`."""
    changed = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with connect() as (read, write):
        async with ClientSession(
            read, write, read_timeout_seconds=30.0, message_handler=on_message
        ) as session:
            await session.initialize()
            yield session, changed


async def added_tool_is_announced(connect, tool_dir: str, spare: str, name: str) -> None:
    """The server watches `tool_dir`, which holds the `read` tool only: a
    component copied in is announced with list_changed, then listed and
    callable."""
    async with watching(connect) as (session, changed):
        before = [t.name for t in (await session.list_tools()).tools]
        assert before == ["read"], before
        shutil.copy(spare, f"{tool_dir}/{name}")
        with anyio.fail_after(20):
            await changed.wait()
        after = [t.name for t in (await session.list_tools()).tools]
        assert sorted(after) == ["read", "sleep"], after
        r = await session.call_tool("sleep", {"ms": 1})
        assert not r.is_error, r


async def a_deferred_tool_is_searched(connect, workspace: str) -> None:
    """`glob` is deferred (the config's `defer_loading`): it is not listed,
    `tool_search`'s description names it, a query finds it with its
    definition, the session is told the list changed, and then it is
    listed and called."""
    async with watching(connect) as (session, changed):
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert "glob" not in tools and "read" in tools, sorted(tools)
        assert "glob" in tools["tool_search"].description, tools["tool_search"].description
        assert tools["tool_search"].annotations.read_only_hint is True
        r = await session.call_tool("tool_search", {"query": "find files matching a glob pattern"})
        assert not r.is_error, r
        definition = json.loads(r.content[1].text)
        assert definition["name"] == "glob", r.content
        assert "pattern" in definition["input_schema"]["properties"], definition
        with anyio.fail_after(10):
            await changed.wait()
        listed = [t.name for t in (await session.list_tools()).tools]
        assert "glob" in listed, listed
        r = await session.call_tool("glob", {"pattern": "*.txt", "path": workspace})
        assert not r.is_error and "a.txt" in r.content[0].text, r


async def a_modern_client_is_served_natively(server, workspace: str) -> str:
    """A client that first asks for 2026-07-28 (`server/discover`) is served
    it, without `initialize`: it lists and calls tools. A call that names no
    context runs in the default context (no id is handed out); one that asks
    for a new context (`_meta["airlock/context"]: "new"`) is handed its id,
    which the next call takes back. Returns the version it settled on."""
    async with Client(server, mode="auto", read_timeout_seconds=30.0) as client:
        assert client.protocol_version == "2026-07-28", client.protocol_version
        listed = await client.list_tools()
        assert any(t.name == "read" for t in listed.tools), listed
        path = f"{workspace}/a.txt"
        r = await client.call_tool("read", {"file_path": path})
        assert not r.is_error and "hello mcp" in r.content[0].text, r
        assert "airlock/context" not in (r.meta or {}), r.meta
        r = await client.call_tool("read", {"file_path": path}, meta={"airlock/context": "new"})
        assert not r.is_error and "hello mcp" in r.content[0].text, r
        context = (r.meta or {}).get("airlock/context")
        assert context and context.startswith("ctx_"), r.meta
        again = await client.call_tool("read", {"file_path": path}, meta={"airlock/context": context})
        assert not again.is_error, again
        assert (again.meta or {}).get("airlock/context") == context, again.meta
        return client.protocol_version
