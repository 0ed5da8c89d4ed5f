"""MCP 2026-07-28's permission questions through the Python SDK in its
default `auto` mode, over stdio and over HTTP: a `write` that needs the
user's permission comes back `input_required`; the SDK asks its elicitation
callback and sends the call again with the answer. Accepted, the file is
written; declined, not allowed or dismissed, it is not, and the model is
told which;
"always", later writes in that context are not asked again, and another
context is asked anew. A `read` (no permission needed) is never asked.

Usage: python3 tests/mcp/mrtr.py AIRLOCK WORKSPACE
  The server runs in the default permission mode, so every write asks.
"""

import os
import re
import subprocess
import sys

import anyio
import mcp.types as types
from mcp import Client, StdioServerParameters


async def questions_are_asked(server, workspace: str, transport: str) -> None:
    answers = []
    asked = []

    async def on_elicit(ctx, params):
        asked.append(params.message)
        return answers.pop(0)

    async with Client(server, mode="auto", read_timeout_seconds=30.0,
                      elicitation_callback=on_elicit) as client:
        assert client.protocol_version == "2026-07-28", client.protocol_version

        async def write(name: str, context: str | None = None):
            meta = {"airlock/context": context} if context else None
            return await client.call_tool(
                "write", {"file_path": f"{workspace}/{transport}-{name}", "content": name},
                meta=meta)

        # Accepted: asked once, written.
        answers.append(types.ElicitResult(action="accept", content={"allow": True}))
        r = await write("accepted.txt")
        assert not r.is_error, r
        assert len(asked) == 1 and "write wants to run" in asked[0], asked
        assert f"{transport}-accepted.txt" in asked[0], asked[0]
        assert open(f"{workspace}/{transport}-accepted.txt").read() == "accepted.txt"

        # Declined: not written, and the model is told.
        answers.append(types.ElicitResult(action="decline"))
        r = await write("declined.txt")
        assert r.is_error and "declined" in r.content[0].text, r
        assert not os.path.exists(f"{workspace}/{transport}-declined.txt")

        # Accepted without "allow": not written either.
        answers.append(types.ElicitResult(action="accept", content={"allow": False}))
        r = await write("unchecked.txt")
        assert r.is_error and "did not allow" in r.content[0].text, r
        assert not os.path.exists(f"{workspace}/{transport}-unchecked.txt")

        # Dismissed (cancel): not written, and not called a decline.
        answers.append(types.ElicitResult(action="cancel"))
        r = await write("dismissed.txt")
        assert r.is_error and "dismissed without an answer" in r.content[0].text, r
        assert not os.path.exists(f"{workspace}/{transport}-dismissed.txt")
        assert len(asked) == 4, asked

        # A read needs no permission: nothing is asked.
        r = await client.call_tool("read", {"file_path": f"{workspace}/{transport}-accepted.txt"})
        assert not r.is_error and "accepted.txt" in r.content[0].text, r
        assert len(asked) == 4, asked

        # "Always", in a context of its own: asked once, then never again
        # in that context; the default context is still asked.
        answers.append(types.ElicitResult(action="accept", content={"allow": True, "always": True}))
        r = await write("always-1.txt", "new")
        assert not r.is_error, r
        context = (r.meta or {}).get("airlock/context")
        assert context and context.startswith("ctx_"), r.meta
        r = await write("always-2.txt", context)
        assert not r.is_error, r
        assert len(asked) == 5, asked
        answers.append(types.ElicitResult(action="accept", content={"allow": True}))
        r = await write("default-again.txt")
        assert not r.is_error, r
        assert len(asked) == 6, asked
        for name in ("always-1.txt", "always-2.txt", "default-again.txt"):
            assert os.path.exists(f"{workspace}/{transport}-{name}"), name
    print(f"{transport}: {len(asked)} questions asked and answered")


def serve_http(binary: str, workspace: str):
    server = subprocess.Popen([binary, "--workspace", workspace, "mcp", "--http", "127.0.0.1:0"],
                              stderr=subprocess.PIPE, text=True)
    # A first start says what it compiles before where it listens.
    for line in server.stderr:
        match = re.search(r"(http://\S+/mcp)", line)
        if match:
            return server, match.group(1)
    raise AssertionError("the server did not say where it listens")


async def main(binary: str, workspace: str) -> None:
    stdio = StdioServerParameters(command=binary, args=["--workspace", workspace, "mcp"])
    await questions_are_asked(stdio, workspace, "stdio")
    server, url = serve_http(binary, workspace)
    try:
        await questions_are_asked(url, workspace, "http")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:3])
