"""A small MCP server (the official Python `mcp` SDK) that Airlock mounts as
`mcp__NAME__TOOL` tools in the tests: `echo` (read-only), `add` (structured
output), `slow` (progress, then sleeps; for cancellation), `fail` (an
`isError` result), `env` (what environment it was given) and `where`
(its working directory).

Usage: python3 tests/mcp/echo_server.py [MARKER_FILE]
  MARKER_FILE, when given, holds "running" while `slow` sleeps, then "done",
  or "cancelled" when the client cancelled the call.
"""

import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("echo")
marker = sys.argv[1] if len(sys.argv) > 1 else None


@server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def echo(text: str) -> str:
    """Echoes the text back."""
    return f"echo: {text}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
def add(a: int, b: int) -> dict:
    """Adds two integers."""
    return {"sum": a + b}


@server.tool()
async def slow(seconds: float, ctx: Context) -> str:
    """Reports progress, then sleeps."""
    if marker:
        with open(marker, "w") as f:
            f.write("running")
    await ctx.report_progress(1, 2, "halfway")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        if marker:
            with open(marker, "w") as f:
                f.write("cancelled")
        raise
    if marker:
        with open(marker, "w") as f:
            f.write("done")
    return "done"


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ToolError(reason)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def env() -> str:
    """The names of the environment variables the server sees."""
    return ",".join(sorted(os.environ))


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def where() -> str:
    """The server's working directory."""
    return os.getcwd()


if __name__ == "__main__":
    server.run("stdio")
