"""Times one `read` of a 20-line file at a time through the official
Python `mcp` SDK, against `airlock` and against the SDK's own server
(`mcp_sdk_reference_server.py`: the same tool written with the SDK's
`MCPServer`), over stdio and over Streamable HTTP, in both protocol eras:
the legacy one (`ClientSession` and its `initialize` handshake) and
2026-07-28 (`Client(server, mode="auto")`, which probes with
`server/discover`; the reference serves 2026-07-28 on both transports).
Eight cells, each a session of its own (over stdio a server process of
its own; over HTTP one server per kind serves both eras), all open in the
same run: after warm-up calls (and every server idle), rounds time each
cell in turn, airlock and the reference one after the other for each
transport and era (which goes first alternating between rounds), so drift
hits both. Each reply must hold the file's text.

Prints a JSON line: for each cell (server_transport_era) the protocol
version it negotiated, the median of its per-round medians and its p99
over all calls (µs), then the ratio reference/airlock of the medians for
each transport and era.

Usage: python3 scripts/mcp_sdk_eras.py AIRLOCK [CALLS]
  (CALLS per cell, split into ROUNDS rounds; the Python with mcp==2.3.0,
  e.g. target/tmp/mcp-venv/bin/python)
"""

import contextlib
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

import anyio
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from mcp_raw_stdio import server_env, wait_until_idle

ROUNDS, WARMUP = 10, 100
REFERENCE = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                          "mcp_sdk_reference_server.py")]
SERVERS, TRANSPORTS, ERAS = ("airlock", "reference"), ("stdio", "http"), ("legacy", "2026")


class WrongReply(Exception):
    pass


@contextlib.contextmanager
def http_server(command: list, env: dict, log_path: str):
    """`command` serving over Streamable HTTP on a port of the system's
    choosing, its stderr in `log_path`: its URL, as it says it there."""
    with open(log_path, "w") as log:
        server = subprocess.Popen(command + ["--http", "127.0.0.1:0"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=log)
        try:
            deadline = time.monotonic() + 60
            # Read through a file of its own: `log`'s offset is the server's.
            while not (match := re.search(r"http://\S+/mcp", pathlib.Path(log_path).read_text())):
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{command[0]} did not say where it listens: "
                                     f"{pathlib.Path(log_path).read_text()!r}")
                time.sleep(0.05)
            yield match.group(0)
        finally:
            server.terminate()
            server.wait()


async def connect(stack: contextlib.AsyncExitStack, target, era: str):
    """A session of `target` (a URL, or a command over stdio) in `era`:
    the protocol version it negotiated, and its `call_tool`."""
    if era == "2026":
        client = await stack.enter_async_context(Client(target, mode="auto"))
        return client.protocol_version, client.call_tool
    if isinstance(target, str):
        read, write, *_ = await stack.enter_async_context(streamable_http_client(target))
    else:
        read, write = await stack.enter_async_context(stdio_client(target))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session.protocol_version, session.call_tool


async def timed(cell: str, call_tool, path: str, expected: str, calls: int) -> list:
    """`calls` reads through `call_tool`, each checked: their times in µs."""
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        result = await call_tool("read", {"file_path": path})
        times.append((time.perf_counter() - started) * 1e6)
        if result.is_error or not any(expected in getattr(c, "text", "") for c in result.content):
            raise WrongReply(f"{cell}: the reply does not hold the file's text: {result}")
    return times


def server_pids() -> list:
    """The processes this one started (the servers)."""
    tasks = f"/proc/{os.getpid()}/task"
    return [int(pid) for task in os.listdir(tasks)
            for pid in open(f"{tasks}/{task}/children").read().split()]


async def main(binary: str, calls: int) -> None:
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as workspace:
        workspace = os.path.realpath(workspace)
        path = os.path.join(workspace, "notes.txt")
        with open(path, "w") as f:
            f.writelines(f"line {i}\n" for i in range(20))
        expected = "\n".join(f"{n + 1:>6}\tline {n}" for n in range(20))
        env = server_env(home)
        commands = {"airlock": [binary, "--workspace", workspace, "mcp"], "reference": REFERENCE}
        with contextlib.ExitStack() as servers:
            targets = {}
            for server, command in commands.items():
                targets[server, "stdio"] = StdioServerParameters(
                    command=command[0], args=command[1:], env=env)
                targets[server, "http"] = servers.enter_context(
                    http_server(command, env, os.path.join(home, f"{server}-http.log")))
            async with contextlib.AsyncExitStack() as stack:
                sessions, protocols = {}, {}
                for server in SERVERS:
                    for transport in TRANSPORTS:
                        for era in ERAS:
                            cell = f"{server}_{transport}_{era}"
                            protocols[cell], sessions[cell] = await connect(
                                stack, targets[server, transport], era)
                            await timed(cell, sessions[cell], path, expected, WARMUP)
                for pid in server_pids():
                    wait_until_idle(pid)
                medians = {cell: [] for cell in sessions}
                times = {cell: [] for cell in sessions}
                for round_ in range(ROUNDS):
                    for transport in TRANSPORTS:
                        for era in ERAS:
                            for server in SERVERS[::1 if round_ % 2 == 0 else -1]:
                                cell = f"{server}_{transport}_{era}"
                                these = await timed(cell, sessions[cell], path, expected,
                                                    calls // ROUNDS)
                                medians[cell].append(statistics.median(these))
                                times[cell] += these
    out = {"calls_per_cell": calls // ROUNDS * ROUNDS}
    for cell in sessions:
        ordered = sorted(times[cell])
        out[cell] = {"protocol": protocols[cell],
                     "median_us": round(statistics.median(medians[cell]), 1),
                     "p99_us": round(ordered[int(len(ordered) * 0.99) - 1], 1)}
    for transport in TRANSPORTS:
        for era in ERAS:
            out[f"reference_over_airlock_{transport}_{era}"] = round(
                out[f"reference_{transport}_{era}"]["median_us"]
                / out[f"airlock_{transport}_{era}"]["median_us"], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    if len(sys.argv) < 2 or calls < ROUNDS:
        raise SystemExit(__doc__)
    try:
        anyio.run(main, sys.argv[1], calls)
    except* WrongReply as wrong:  # raised inside the SDK's task groups, nested
        while isinstance(wrong, BaseExceptionGroup):
            wrong = wrong.exceptions[0]
        raise SystemExit(wrong)
