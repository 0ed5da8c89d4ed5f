"""Another caller's canary during a flood, over the wire (rows 10d and 10e):
one caller keeps 1,000 `sleep` calls of 20 s in flight (held slots), or
200 calls spinning in wasm (the `hostile` test guest's `loop`, a tight loop
until the call's time limit: a `bash` loop ends after bashkit's 100,000
commands, within a second in a release build), while another times `read`
calls of a 20-line file one at a time. Over Streamable HTTP the two callers are two
sessions (each request on a connection of its own, as many as the flood
needs); over stdio they are two 2026-07-28 contexts of one client (a
session's own calls wait their turn in its context by design). Each
canary runs 10 s during the flood, after 5 s alone (the baseline, same
run).

Prints one JSON line: p50 and p99 in ms, per transport and flood, quiet
and flooded, the cores the server used while the canary ran, and how many
of the flood's calls were still running when the canary ended. A canary
held past the window is one figure of that length.

Usage: python3 scripts/mcp_flood.py AIRLOCK
  (the test guests built: `cargo build -p airlock-tests`)
"""

import asyncio
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from mcp_raw_stdio import cpu_seconds, server_env

PROTOCOL = "2025-06-18"
FLOODS = {"sleep": (1000, "sleep", {"ms": 20000}),
          "spin": (200, "hostile", {"attack": "loop"})}
HOSTILE = (pathlib.Path(__file__).resolve().parent.parent
           / "target/guests/wasm32-wasip2/guest/airlock_test_hostile.wasm")
QUIET_S, FLOODED_S, SETTLE_S = 5, 10, 3


def grants(home: str, workspace: str) -> list:
    """The workspace, and a tool directory holding the spinning guest."""
    tools = os.path.join(home, "tools")
    os.makedirs(tools, exist_ok=True)
    shutil.copy(HOSTILE, tools)
    return ["--workspace", workspace, "--tools", tools]


def percentiles(times: list) -> dict:
    times = sorted(times)
    return {"p50_ms": round(statistics.median(times), 3),
            "p99_ms": round(times[max(0, int(len(times) * 0.99) - 1)], 3), "n": len(times)}


async def busy(pid: int, measured) -> dict:
    """`measured`'s figures, with the cores the server kept busy meanwhile
    (a spinning flood that stopped would flatter the canary)."""
    started, cpu = time.monotonic(), cpu_seconds(pid)
    figures = await measured
    figures["server_cores"] = round((cpu_seconds(pid) - cpu) / (time.monotonic() - started), 2)
    return figures


async def canary(call, seconds: float) -> dict:
    times = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.perf_counter()
        answer = await call()
        times.append((time.perf_counter() - started) * 1000)
        if b"line 20" not in answer:
            raise SystemExit(f"the canary got {answer[:300]!r}")
    return percentiles(times)


class Http:
    """`airlock mcp --http`: each request a POST on a connection of its own."""

    def __init__(self, port: int):
        self.port = port

    async def post(self, body: dict, session: str | None = None) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        data = json.dumps(body).encode()
        head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
                "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                f"MCP-Protocol-Version: {PROTOCOL}\r\nContent-Length: {len(data)}\r\n"
                "Connection: close\r\n")
        if session:
            head += f"Mcp-Session-Id: {session}\r\n"
        writer.write(head.encode() + b"\r\n" + data)
        await writer.drain()
        answer = await reader.read()
        writer.close()
        return answer

    async def session(self, name: str) -> str:
        init = {"protocolVersion": PROTOCOL, "capabilities": {},
                "clientInfo": {"name": name, "version": "1"}}
        answer = await self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                  "params": init})
        session = re.search(rb"(?i)mcp-session-id: *(\S+)", answer).group(1).decode()
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        return session


async def over_http(airlock: str, home: str, workspace: str, flood: str) -> dict:
    server = subprocess.Popen([airlock, *grants(home, workspace), "mcp", "--http", "127.0.0.1:0"],
                              env=server_env(home), stderr=subprocess.PIPE, text=True)
    try:
        port = None
        while port is None:
            found = re.search(r"127\.0\.0\.1:(\d+)", server.stderr.readline())
            port = found and int(found.group(1))
        http = Http(port)
        flooder, other = await http.session("flooder"), await http.session("canary")
        read = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "read", "arguments": {"file_path": f"{workspace}/a.txt"}}}
        # The first call waits for the tools' first compile (a fresh
        # cache): not a figure of either window.
        await http.post(read, other)
        quiet = await canary(lambda: http.post(read, other), QUIET_S)
        count, tool, arguments = FLOODS[flood]
        calls = []
        for n in range(count):
            body = {"jsonrpc": "2.0", "id": 100 + n, "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments}}
            calls.append(asyncio.create_task(http.post(body, flooder)))
            if n % 50 == 49:
                # Connections opened all at once would pass the bound on
                # pending ones, which closes the oldest.
                await asyncio.sleep(0.05)
        await asyncio.sleep(SETTLE_S)
        flooded = await busy(server.pid, canary(lambda: http.post(read, other), FLOODED_S))
        running = sum(not c.done() for c in calls)
        for call in calls:
            call.cancel()
        return {"quiet": quiet, "flooded": flooded, "flood_running_at_end": running}
    finally:
        server.kill()
        server.wait()


class Stdio:
    """`airlock mcp` on pipes, spoken 2026-07-28: each call names its context."""

    def __init__(self, airlock: str, home: str, workspace: str):
        self.server = subprocess.Popen([airlock, *grants(home, workspace), "mcp"],
                                       env=server_env(home), stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.waiting, self.next = {}, 0
        self.loop = asyncio.get_running_loop()
        self.loop.add_reader(self.server.stdout.fileno(), self.readable)
        self.buffer = b""

    def readable(self):
        self.buffer += os.read(self.server.stdout.fileno(), 1 << 20)
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            answer = self.waiting.pop(json.loads(line).get("id"), None)
            if answer:
                answer.set_result(line)

    def call(self, tool: str, arguments: dict, context: str | None = None):
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "flood", "version": "1"}}
        if context:
            meta["airlock/context"] = context
        self.next += 1
        self.waiting[self.next] = self.loop.create_future()
        self.server.stdin.write((json.dumps({
            "jsonrpc": "2.0", "id": self.next, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": meta}}) + "\n").encode())
        self.server.stdin.flush()
        return self.waiting[self.next]


async def over_stdio(airlock: str, home: str, workspace: str, flood: str) -> dict:
    stdio = Stdio(airlock, home, workspace)
    try:
        read = ("read", {"file_path": f"{workspace}/a.txt"})
        first = json.loads(await stdio.call(*read, context="new"))
        context = first["result"]["_meta"]["airlock/context"]
        quiet = await canary(lambda: stdio.call(*read), QUIET_S)
        count, tool, arguments = FLOODS[flood]
        calls = [stdio.call(tool, arguments, context) for _ in range(count)]
        await asyncio.sleep(SETTLE_S)
        flooded = await busy(stdio.server.pid, canary(lambda: stdio.call(*read), FLOODED_S))
        running = sum(not c.done() for c in calls)
        return {"quiet": quiet, "flooded": flooded, "flood_running_at_end": running}
    finally:
        stdio.server.kill()
        stdio.server.wait()


async def main(airlock: str) -> None:
    if not HOSTILE.is_file():
        raise SystemExit(f"{HOSTILE} is missing: build the test guests (cargo build -p airlock-tests)")
    figures = {}
    for transport, measure in (("http", over_http), ("stdio", over_stdio)):
        for flood in FLOODS:
            with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as workspace:
                with open(os.path.join(workspace, "a.txt"), "w") as f:
                    f.writelines(f"line {n}\n" for n in range(1, 21))
                figures[f"{transport}_{flood}"] = await measure(airlock, home, workspace, flood)
    print(json.dumps(figures))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
