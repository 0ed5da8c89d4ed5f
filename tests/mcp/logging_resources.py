"""Logging and resources over MCP with the official Python `mcp` SDK, over
stdio and Streamable HTTP: both are declared; a tool's log lines arrive as
`notifications/message` (logger: the tool), filtered by the session's level
(`info` until it sets one); a spilled result comes with a `resource_link`
that `resources/list` lists and `resources/read` returns whole; any other
URI (made up, a file outside the spill, another session's) is -32002.

Usage: python3 tests/mcp/logging_resources.py AIRLOCK WORKSPACE TOOL_DIR
  WORKSPACE holds a.txt and big.txt (line k is "line-k", 20000 lines);
  TOOL_DIR holds the `logger` test guest.
"""

import re
import sys

import anyio
from http_client import serve
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

RESOURCE_NOT_FOUND = -32002

LINES = [
    {"level": "trace", "message": "a trace line"},
    {"level": "debug", "message": "a debug line"},
    {"level": "info", "message": "Tool execution started"},
    {"level": "info", "message": "Tool processing data"},
    {"level": "warn", "message": "a warning"},
    {"level": "error", "message": "an error \x1b[31mred\x1b[0m"},
]


async def arrived(logs: list, n: int) -> None:
    """Waits until `logs` holds `n` lines (over HTTP they come on the
    session's standalone stream, not the call's)."""
    with anyio.fail_after(10):
        while len(logs) < n:
            await anyio.sleep(0.01)
    await anyio.sleep(0.1)
    assert len(logs) == n, logs


async def not_found(session: ClientSession, uri: str) -> None:
    try:
        await session.read_resource(uri)
    except MCPError as e:
        assert e.error.code == RESOURCE_NOT_FOUND, (uri, e.error)
        assert "only the results this session was given" in e.error.message, e.error
        return
    raise AssertionError(f"{uri} was served")


async def exercise(connect, workspace: str) -> str:
    """Returns the URI of the spilled result this session was given."""
    logs = []

    async def on_log(params):
        logs.append((params.level, params.logger, params.data))

    async with connect() as (read, write):
        async with ClientSession(
            read, write, read_timeout_seconds=60.0, logging_callback=on_log
        ) as session:
            init = await session.initialize()
            caps = init.capabilities
            assert caps.logging is not None, caps
            assert caps.resources is not None and not caps.resources.subscribe, caps

            # No level set: info and above.
            r = await session.call_tool("logger", {"lines": LINES})
            assert not r.is_error and r.content[0].text == "logged 6 lines", r
            await arrived(logs, 4)
            assert [level for level, _, _ in logs] == ["info", "info", "warning", "error"], logs
            assert all(logger == "logger" for _, logger, _ in logs), logs
            assert logs[3][2] == "an error red", f"the escapes go whole: {logs[3][2]!r}"

            # The conformance suite's scenario: debug, then lines 50 ms apart.
            logs.clear()
            await session.set_logging_level("debug")
            r = await session.call_tool("logger", {"lines": LINES, "gap_ms": 50})
            assert not r.is_error, r
            await arrived(logs, 6)
            assert [level for level, _, _ in logs] == [
                "debug",
                "debug",
                "info",
                "info",
                "warning",
                "error",
            ], logs
            assert [data for _, _, data in logs[:3]] == [
                "a trace line",
                "a debug line",
                "Tool execution started",
            ], logs

            logs.clear()
            await session.set_logging_level("error")
            await session.call_tool("logger", {"lines": LINES})
            await arrived(logs, 1)
            assert logs[0][0] == "error", logs

            # A spilled result: a link, listed, and read back whole.
            assert (await session.list_resources()).resources == []
            r = await session.call_tool("read", {"file_path": f"{workspace}/big.txt", "limit": 20000})
            assert not r.is_error, r
            preview = r.content[0].text
            size = int(re.search(r"Output too large \((\d+) characters", preview).group(1))
            links = [c for c in r.content if c.type == "resource_link"]
            assert len(links) == 1, r.content
            link = links[0]
            uri = str(link.uri)
            assert uri.startswith("file:///") and link.mime_type == "text/plain", link
            assert uri.removeprefix("file://") in preview, (uri, preview[:300])
            listed = await session.list_resources()
            assert [str(x.uri) for x in listed.resources] == [uri], listed
            assert listed.next_cursor is None, listed
            contents = (await session.read_resource(uri)).contents
            assert len(contents) == 1 and contents[0].mime_type == "text/plain", contents
            text = contents[0].text
            assert len(text) == size, (len(text), size)
            assert "line-1\n" in text and text.rstrip().endswith("line-20000"), text[-100:]
            templates = await session.list_resource_templates()
            assert templates.resource_templates == [], templates

            # Nothing else is served.
            await not_found(session, "file:///etc/passwd")
            await not_found(session, f"file://{workspace}/a.txt")
            await not_found(session, uri.removesuffix(".txt") + "-1.txt")
            await not_found(session, uri + "/../../a.txt")
            await not_found(session, "airlock://made-up")
    return uri


async def other_session_cannot_read(connect, uri: str) -> None:
    async with connect() as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=30.0) as session:
            await session.initialize()
            assert (await session.list_resources()).resources == []
            await not_found(session, uri)


async def main(binary: str, workspace: str, tool_dir: str) -> None:
    args = ["--workspace", workspace, "--tools", tool_dir]
    stdio = lambda: stdio_client(StdioServerParameters(command=binary, args=[*args, "mcp"]))
    await exercise(stdio, workspace)
    with serve(binary, *args) as url:
        http = lambda: streamable_http_client(url)
        uri = await exercise(http, workspace)
        await other_session_cannot_read(http, uri)
    print("ok: logging and resources over stdio and http")


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:4])
