"""A component that changes under a running `airlock mcp` is not run until
it is approved: the code approved before goes on running, and the client is
asked (by elicitation, once per change: in a session as a request, on
2026-07-28 as an `input_required` result) whether to approve the new code;
approved, it is recorded and runs from that call on.

Usage: python3 tests/mcp/approve.py AIRLOCK WORKSPACE TOOL_DIR
  TOOL_DIR holds write.wasm; HOME is a fresh directory.
"""

import json
import os
import sys

import anyio
import mcp.types as types
from mcp import Client, ClientSession, StdioServerParameters, stdio_client


def recompiled(path: str) -> bytes:
    """The component with a custom section appended: other code, the same
    tool."""
    data = open(path, "rb").read()
    name = b"airlock-test"
    payload = bytes([len(name)]) + name + b"changed"
    return data + bytes([0, len(payload)]) + payload


def swap(component: str) -> None:
    """Replaces the component with other code of the same tool, at once."""
    changed = recompiled(component)
    with open(component + ".tmp", "wb") as f:
        f.write(changed)
    os.replace(component + ".tmp", component)


async def main(binary: str, workspace: str, tool_dir: str) -> None:
    asked = []
    reloaded = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            reloaded.set()

    async def on_elicit(ctx, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    args = ["--no-bundled", "--tools", tool_dir, "--workspace", workspace, "--mode", "acceptEdits", "mcp"]
    server = StdioServerParameters(command=binary, args=args)
    approvals = os.path.join(os.environ["HOME"], ".config/airlock/approved.json")
    async with stdio_client(server) as (read, write):
        async with ClientSession(
            read,
            write,
            read_timeout_seconds=30.0,
            elicitation_callback=on_elicit,
            message_handler=on_message,
        ) as session:
            await session.initialize()

            async def write_file(name: str):
                r = await session.call_tool(
                    "write", {"file_path": f"{workspace}/{name}", "content": "x"}
                )
                assert not r.is_error, r.content

            await write_file("one.txt")
            assert asked == [], asked

            swap(os.path.join(tool_dir, "write.wasm"))
            # The watcher sees the change and reloads (the change is held,
            # not served), then tells the session the tools changed.
            with anyio.fail_after(30):
                await reloaded.wait()
            await write_file("two.txt")
            assert len(asked) == 1, asked
            assert "changed since it was approved" in asked[0], asked[0]
            assert "airlock approve write" in asked[0], asked[0]
            recorded = json.load(open(approvals))
            assert len(recorded["tools"]["write"]) == 1, recorded

            # Asked once per change.
            await write_file("three.txt")
            assert len(asked) == 1, asked

    # A 2026-07-28 client (no session to ask on) is asked by an
    # `input_required` result, which the SDK answers and retries.
    async with Client(server, mode="auto", read_timeout_seconds=30.0,
                      elicitation_callback=on_elicit) as client:
        assert client.protocol_version == "2026-07-28", client.protocol_version

        async def write_modern(name: str):
            r = await client.call_tool("write", {"file_path": f"{workspace}/{name}", "content": "x"})
            assert not r.is_error, r.content

        await write_modern("four.txt")
        assert len(asked) == 1, asked
        swap(os.path.join(tool_dir, "write.wasm"))
        # Calls run the approved code until the reload holds the change.
        with anyio.fail_after(30):
            while len(asked) == 1:
                await write_modern("five.txt")
                await anyio.sleep(0.2)
        assert len(asked) == 2 and "changed since it was approved" in asked[1], asked
        recorded = json.load(open(approvals))
        assert len(recorded["tools"]["write"]) == 2, recorded
        await write_modern("six.txt")
        assert len(asked) == 2, asked
    print("approve ok")


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:4])
