"""A small MCP server (the official Python `mcp` SDK) that tries what a
hostile server would, for the tests of confined servers: `read` and
`write` a path, `connect` to a TCP port on loopback, `fetch` a URL (through
the proxy its environment names, as any HTTP client), `detach` a process
that leaves its session (`setsid sleep SECONDS`), and `where` (its working
directory, HOME and uid). Each failure comes back as an `isError` result
holding the error the server saw.

Usage: python3 tests/mcp/probe_server.py
"""

import os
import socket
import subprocess
import urllib.error
import urllib.request

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("probe")


def attempt(action):
    try:
        return action()
    except OSError as e:
        raise ToolError(f"{type(e).__name__}: {e.strerror}") from e


@server.tool()
def read(path: str) -> str:
    return attempt(lambda: open(path).read())


@server.tool()
def write(path: str, text: str) -> str:
    def go():
        with open(path, "w") as f:
            f.write(text)
        return "wrote"

    return attempt(go)


@server.tool()
def connect(port: int) -> str:
    def go():
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return "connected"

    return attempt(go)


@server.tool()
def fetch(url: str) -> str:
    try:
        return urllib.request.urlopen(url, timeout=5).read().decode()
    except urllib.error.HTTPError as e:
        raise ToolError(f"HTTP {e.code}: {e.read().decode().strip()}") from e
    except urllib.error.URLError as e:
        raise ToolError(f"URLError: {e.reason}") from e


@server.tool()
def detach(seconds: str) -> str:
    subprocess.Popen(["setsid", "sleep", seconds], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return "started"


@server.tool()
def where() -> str:
    return f"{os.getcwd()} {os.environ.get('HOME')} {os.getuid()}"


if __name__ == "__main__":
    server.run()
