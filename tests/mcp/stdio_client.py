"""Drives `airlock mcp` over stdio with the official Python `mcp` SDK (the
checks are in common.py).

Usage: python3 tests/mcp/stdio_client.py AIRLOCK WORKSPACE TOOL_DIR SPARE_TOOL
  WORKSPACE holds a.txt ("hello mcp"); TOOL_DIR holds only the `read`
  component; SPARE_TOOL is the `sleep` component, copied into TOOL_DIR
  while a server watches it.
"""

import sys
import tempfile

import anyio
from common import (
    a_deferred_tool_is_searched,
    a_modern_client_is_served_natively,
    added_tool_is_announced,
    exercise,
)
from mcp import StdioServerParameters, stdio_client


async def main(binary: str, workspace: str, tool_dir: str, spare: str) -> None:
    def connect(*args):
        return lambda: stdio_client(StdioServerParameters(command=binary, args=list(args)))

    seen = await exercise(connect("--workspace", workspace, "mcp"), workspace)
    seen["modern client"] = await a_modern_client_is_served_natively(
        StdioServerParameters(command=binary, args=["--workspace", workspace, "mcp"]), workspace
    )
    await added_tool_is_announced(
        connect("--no-bundled", "--tools", tool_dir, "mcp"), tool_dir, spare, "added.wasm"
    )
    with tempfile.NamedTemporaryFile("w", suffix=".toml") as config:
        config.write("[tools.glob]\ndefer_loading = true\n")
        config.flush()
        await a_deferred_tool_is_searched(
            connect("--config", config.name, "--workspace", workspace, "mcp"), workspace
        )
    print("ok (stdio):", seen)


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:5])
