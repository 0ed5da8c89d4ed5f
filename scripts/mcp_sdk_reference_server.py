"""The reference server of `mcp_sdk_eras.py`: one tool, `read`, written
with the official Python `mcp` SDK's high-level server (`MCPServer`, the
former FastMCP), answering with the file's text numbered like `cat -n`
(as `airlock`'s `read` does, as text only: no structured output).

Over stdio by default; with `--http HOST:PORT`, over Streamable HTTP,
saying its URL on the first line of stderr, as `airlock mcp --http` does
(port 0: one of the system's choosing).

Usage: python3 scripts/mcp_sdk_reference_server.py [--http HOST:PORT]
"""

import socket
import sys

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer

server = MCPServer("reference")


@server.tool(structured_output=False)
async def read(file_path: str) -> str:
    """Reads a file: each line numbered like `cat -n`."""
    with open(file_path) as f:
        return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(f.read().splitlines(), 1))


async def serve_http(host: str, port: int) -> None:
    # IPPROTO_TCP named, or asyncio leaves Nagle on the connections (it
    # sets TCP_NODELAY only on sockets that say they are TCP), and a reply
    # sent as two writes waits for the client's delayed ACK (~40 ms).
    listener = socket.socket(proto=socket.IPPROTO_TCP)
    listener.bind((host, port))
    print(f"listening on http://{host}:{listener.getsockname()[1]}/mcp", file=sys.stderr, flush=True)
    config = uvicorn.Config(server.streamable_http_app(host=host), log_level="warning")
    await uvicorn.Server(config).serve(sockets=[listener])


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        host, port = sys.argv[2].rsplit(":", 1)
        anyio.run(serve_http, host, int(port))
    else:
        server.run("stdio")
