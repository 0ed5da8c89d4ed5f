"""Times one `read` call at a time through the official Python `mcp` SDK,
over stdio and over Streamable HTTP, against the same `airlock` binary in
the same run: prints a JSON line with each transport's median and p99 per
call (microseconds), and their ratio.

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
    out = {"calls": calls, "stdio": summary(stdio), "http": summary(http)}
    out["http_over_stdio"] = round(out["http"]["median_us"] / out["stdio"]["median_us"], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 500)
