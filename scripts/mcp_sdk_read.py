"""Times one `read` call at a time through the official Python `mcp` SDK,
over stdio and over Streamable HTTP, against the same `airlock` binary in
the same run: prints a JSON line with each transport's median and p99 per
call (microseconds), and their ratio. Also the floor of the SDK's HTTP
client: the same call as a bare POST with `httpx2` (what the SDK sends
requests with), no SDK around it, against the same server.

Usage: python3 scripts/mcp_sdk_read.py AIRLOCK [CALLS]
  (run by scripts/bench.py with the tests' Python, which has mcp==2.3.0)
"""

import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

WARMUP = 50


@contextlib.contextmanager
def http_server(binary: str, env: dict, workspace: str):
    server = subprocess.Popen(
        [binary, "--workspace", workspace, "mcp", "--http", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = server.stderr.readline()
        match = re.search(r"(http://\S+/mcp)", line)
        assert match, f"the server did not say where it listens: {line!r}"
        yield match.group(1)
    finally:
        server.terminate()
        server.wait()


async def timed(session: ClientSession, path: str, calls: int) -> list:
    await session.initialize()
    times = []
    for i in range(WARMUP + calls):
        started = time.perf_counter()
        result = await session.call_tool("read", {"file_path": path})
        elapsed = time.perf_counter() - started
        assert not result.is_error, result
        if i >= WARMUP:
            times.append(elapsed * 1e6)
    return times


def bare_http(url: str, path: str, calls: int) -> list:
    """The same `read` as bare JSON-RPC POSTs through `httpx2` on one
    connection, in a session of its own."""
    import httpx2

    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    init = {"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "floor", "version": "1"}}
    times = []
    with httpx2.Client() as client:
        reply = client.post(url, headers=headers,
                            json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        headers["mcp-session-id"] = reply.headers["mcp-session-id"]
        headers["mcp-protocol-version"] = "2025-06-18"
        client.post(url, headers=headers,
                    json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        for i in range(WARMUP + calls):
            call = {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                    "params": {"name": "read", "arguments": {"file_path": path}}}
            started = time.perf_counter()
            reply = client.post(url, headers=headers, json=call)
            assert f'"id":{i + 1},' in reply.text and '"isError":false' in reply.text, reply.text
            elapsed = time.perf_counter() - started
            if i >= WARMUP:
                times.append(elapsed * 1e6)
    return times


def summary(times: list) -> dict:
    times = sorted(times)
    return {
        "median_us": round(statistics.median(times), 1),
        "p99_us": round(times[int(len(times) * 0.99) - 1], 1),
    }


async def main(binary: str, calls: int) -> None:
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as ws:
        env = dict(os.environ, HOME=home, XDG_CACHE_HOME=os.path.join(home, "cache"))
        env.pop("AIRLOCK_CONFIG", None)
        env.pop("XDG_CONFIG_HOME", None)
        path = os.path.join(os.path.realpath(ws), "notes.txt")
        with open(path, "w") as f:
            f.write("".join(f"line {i}\n" for i in range(20)))
        params = StdioServerParameters(
            command=binary, args=["--workspace", os.path.realpath(ws), "mcp"], env=env
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                stdio = await timed(session, path, calls)
        with http_server(binary, env, os.path.realpath(ws)) as url:
            async with streamable_http_client(url) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    http = await timed(session, path, calls)
            floor = bare_http(url, path, calls)
    out = {"calls": calls, "stdio": summary(stdio), "http": summary(http),
           "http_client_floor": summary(floor)}
    out["http_over_stdio"] = round(out["http"]["median_us"] / out["stdio"]["median_us"], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 500)
