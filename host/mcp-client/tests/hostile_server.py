"""A hostile MCP server over stdio, JSON-RPC by hand (no SDK): it answers
`initialize`, then sends what its mode says.

Usage: python3 hostile_server.py MODE
  pages        tools/list: pages of 50 tools, each with a `nextCursor`, forever
  many-tools   tools/list: one page of 20,000 tools
  deep-schema  tools/list: a tool whose input schema nests 51 levels deep (within
               serde_json's 128)
  big-schema   tools/list: a tool whose input schema is 100 KiB of JSON
  big-listing  tools/list: pages of 40 tools with 100 KiB descriptions (4 MiB
               a page), each with a `nextCursor`, forever
  long-line    tools/list: one line of 512 MiB, no newline
  long-result  tools/list: a tool `big`; tools/call: one line of 512 MiB,
               no newline
"""

import json
import sys
import time

MODE = sys.argv[1]
MIB = 1 << 20


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def tool(name, schema=None):
    return {"name": name, "inputSchema": schema or {"type": "object"}}


def long_line(prefix):
    """Writes `prefix` then 512 MiB of `x`, no newline, and waits to be killed."""
    out = sys.stdout.buffer
    try:
        out.write(prefix.encode())
        chunk = b"x" * MIB
        for _ in range(512):
            out.write(chunk)
        out.flush()
    except BrokenPipeError:
        sys.exit(0)
    time.sleep(3600)


def tools_list(id, cursor):
    if MODE == "pages":
        page = int(cursor or 0)
        tools = [tool(f"t{page}_{i}") for i in range(50)]
        return {"tools": tools, "nextCursor": str(page + 1)}
    if MODE == "many-tools":
        return {"tools": [tool(f"t{i}") for i in range(20_000)]}
    if MODE == "deep-schema":
        schema = {"type": "object"}
        for _ in range(25):
            schema = {"type": "object", "properties": {"a": schema}}
        return {"tools": [tool("deep", schema)]}
    if MODE == "big-schema":
        schema = {"type": "object", "description": "x" * (100 * 1024)}
        return {"tools": [tool("big", schema)]}
    if MODE == "big-listing":
        page = int(cursor or 0)
        tools = [dict(tool(f"t{page}_{i}"), description="x" * (100 * 1024)) for i in range(40)]
        return {"tools": tools, "nextCursor": str(page + 1)}
    if MODE == "long-line":
        long_line(f'{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"')
    return {"tools": [tool("big")]}


for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue
    id, method = request["id"], request.get("method")
    params = request.get("params") or {}
    if method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"},
        }
    elif method == "tools/list":
        result = tools_list(id, params.get("cursor"))
    elif method == "tools/call" and MODE == "long-result":
        long_line(f'{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"')
    else:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}})
        continue
    send({"jsonrpc": "2.0", "id": id, "result": result})
