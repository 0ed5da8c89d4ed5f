"""Drives `airlock mcp --http` with the official Python `mcp` SDK: every
feature (common.py), a foreign Origin refused, and a load test: CLIENTS
sessions at once, each making CALLS concurrent calls; every reply must
arrive and carry its own call's answer. Prints the latency p50/p99.

Usage: python3 tests/mcp/http_client.py AIRLOCK WORKSPACE TOOL_DIR SPARE_TOOL
  As stdio_client.py; WORKSPACE also holds lines.txt with line k = "line-k".
"""

import contextlib
import re
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request

import anyio
from common import a_modern_client_is_served_natively, added_tool_is_announced, exercise
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

CLIENTS = 16
CALLS = 50
IN_FLIGHT = 4


@contextlib.contextmanager
def serve(binary: str, *args: str):
    server = subprocess.Popen(
        [binary, *args, "mcp", "--http", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True
    )
    try:
        line = server.stderr.readline()
        match = re.search(r"(http://\S+/mcp)", line)
        assert match, f"the server did not say where it listens: {line!r}"
        yield match.group(1)
    finally:
        server.terminate()
        server.wait()


async def load(url: str, workspace: str, client: int, latencies: list) -> None:
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=60.0) as session:
            await session.initialize()
            limit = anyio.Semaphore(IN_FLIGHT)

            async def call(i: int) -> None:
                line = client * CALLS + i + 1
                async with limit:
                    started = time.perf_counter()
                    r = await session.call_tool(
                        "read", {"file_path": f"{workspace}/lines.txt", "offset": line, "limit": 1}
                    )
                    latencies.append(time.perf_counter() - started)
                assert not r.is_error, r
                text = r.content[0].text
                assert f"line-{line}\n" in text + "\n" and text.count("line-") == 1, (line, text)

            async with anyio.create_task_group() as tg:
                for i in range(CALLS):
                    tg.start_soon(call, i)


def refused_origin(url: str) -> None:
    request = urllib.request.Request(
        url,
        data=b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
        headers={
            "Origin": "http://evil.example",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
    )
    try:
        urllib.request.urlopen(request)
        raise AssertionError("a foreign Origin was served")
    except urllib.error.HTTPError as e:
        assert e.code == 403, e.code


async def main(binary: str, workspace: str, tool_dir: str, spare: str) -> None:
    with serve(binary, "--workspace", workspace) as url:
        seen = await exercise(lambda: streamable_http_client(url), workspace)
        seen["modern client"] = await a_modern_client_is_served_natively(url, workspace)
        refused_origin(url)
        latencies = []
        started = time.perf_counter()
        with anyio.fail_after(240):
            async with anyio.create_task_group() as tg:
                for client in range(CLIENTS):
                    tg.start_soon(load, url, workspace, client, latencies)
        wall = time.perf_counter() - started
        assert len(latencies) == CLIENTS * CALLS, len(latencies)
    with serve(binary, "--no-bundled", "--tools", tool_dir) as url:
        await added_tool_is_announced(
            lambda: streamable_http_client(url), tool_dir, spare, "added.wasm"
        )
    cuts = statistics.quantiles(latencies, n=100)
    print("ok (http):", seen)
    print(
        f"load: {CLIENTS} clients x {CALLS} calls ({IN_FLIGHT} in flight each), "
        f"all {len(latencies)} replies matched; p50 {cuts[49] * 1000:.2f} ms, "
        f"p99 {cuts[98] * 1000:.2f} ms, {len(latencies) / wall:.0f} calls/s"
    )


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:5])
