"""A small MCP server (the official Python `mcp` SDK) that Airlock mounts as
`mcp__NAME__TOOL` tools in the tests: `echo` (read-only), `add` (structured
output), `slow` (progress, then sleeps; for cancellation), `fail` (an
`isError` result), `env` (what environment it was given) and `where`
(its working directory).

Usage: python3 tests/mcp/echo_server.py [MARKER_FILE]
  MARKER_FILE, when given, holds "running" while `slow` sleeps, then "done",
  or "cancelled" when the client cancelled the call.
  ECHO_GRANDCHILD, when set, is a file: the server starts a process of its
  own (`sleep`, as `npx` starts node) and writes its pid there.
  ECHO_EXITED, when set, is a file the server writes when it exits on its
  own (stdin closed), not killed.
"""

import os
import subprocess
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
    pidfile = os.environ.get("ECHO_GRANDCHILD")
    if pidfile:
        child = subprocess.Popen(
            ["sleep", "300"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
        )
        with open(pidfile + ".tmp", "w") as f:
            f.write(str(child.pid))
        os.rename(pidfile + ".tmp", pidfile)
    server.run("stdio")
    exited = os.environ.get("ECHO_EXITED")
    if exited:
        with open(exited, "w") as f:
            f.write("stdin closed")
