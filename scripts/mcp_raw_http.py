"""The simplest client of `airlock mcp` over Streamable HTTP against the
simplest one over stdio: one `read` of a 20-line file at a time, as
JSON-RPC POSTs on one kept-alive connection (`http.client`, `TCP_NODELAY`,
no SDK) and as newline-delimited JSON-RPC on the pipes
(`mcp_raw_stdio.py`'s client). Both servers run side by side in one HOME,
and their rounds alternate. Row 8g without an SDK (row 8i): what an SDK
adds on top of these figures is the SDK's.

Prints the median of each round's per-call median, and the ratio.

Usage: python3 scripts/mcp_raw_http.py AIRLOCK [ROUNDS]
"""

import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from mcp_raw_stdio import server_env, start, wait_until_idle

CALLS, WARMUP = 1000, 300
PROTOCOL = "2025-06-18"


def read_call(n: int, path: str) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                       "params": {"name": "read", "arguments": {"file_path": path}}})


class Http:
    """A session of `airlock mcp --http` on one kept-alive connection."""

    def __init__(self, binary: str, home: str, workspace: str):
        self.log = open(os.path.join(home, "http.log"), "w+")
        self.server = subprocess.Popen(
            [binary, "--workspace", workspace, "mcp", "--http", "127.0.0.1:0"],
            env=server_env(home), stdout=subprocess.DEVNULL, stderr=self.log)
        address = self.address()
        self.connection = http.client.HTTPConnection(*address)
        self.connection.connect()
        self.connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.headers = {"Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream"}
        init = {"protocolVersion": PROTOCOL, "capabilities": {},
                "clientInfo": {"name": "raw-http", "version": "1"}}
        response = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                              "params": init})
        self.headers["Mcp-Session-Id"] = response.getheader("Mcp-Session-Id")
        self.headers["MCP-Protocol-Version"] = PROTOCOL
        response.read()
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}).read()

    def address(self):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self.log.seek(0)
            match = re.search(r"http://([\d.]+):(\d+)/mcp", self.log.read())
            if match:
                return match.group(1), int(match.group(2))
            if self.server.poll() is not None:
                raise SystemExit(f"the HTTP server exited ({self.server.returncode})")
            time.sleep(0.05)
        raise SystemExit("the HTTP server did not say where it listens within 60 s")

    def post(self, message):
        body = message if isinstance(message, str) else json.dumps(message)
        self.connection.request("POST", "/mcp", body, self.headers)
        return self.connection.getresponse()

    def call(self, line: str) -> bytes:
        return self.post(line).read()

    def close(self):
        self.connection.close()
        self.server.terminate()
        self.server.wait()
        self.log.close()


def per_call(call, path: str, calls: int) -> float:
    """The median time of `calls` calls, in µs; the last reply must be a success."""
    times = []
    for n in range(calls):
        started = time.perf_counter()
        reply = call(read_call(n, path))
        times.append(time.perf_counter() - started)
    assert b'"isError":false' in reply, reply
    return statistics.median(times) * 1e6


def main(binary: str, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as workspace:
        workspace = os.path.realpath(workspace)
        path = os.path.join(workspace, "twenty.txt")
        with open(path, "w") as f:
            f.writelines(f"line {i}\n" for i in range(20))
        stdio, out = start([binary, "--workspace", workspace, "mcp"], home, "raw-stdio")

        def stdio_call(line: str) -> bytes:
            stdio.stdin.write(line.encode() + b"\n")
            return out.next()

        http_session = Http(binary, home, workspace)
        try:
            for call in (stdio_call, http_session.call):
                per_call(call, path, WARMUP)
            wait_until_idle(stdio.pid)
            wait_until_idle(http_session.server.pid)
            over_stdio, over_http = [], []
            for _ in range(rounds):
                over_stdio.append(per_call(stdio_call, path, CALLS))
                over_http.append(per_call(http_session.call, path, CALLS))
        finally:
            http_session.close()
            stdio.stdin.close()
            stdio.wait()
    stdio_us, http_us = statistics.median(over_stdio), statistics.median(over_http)
    print(json.dumps({"calls": CALLS * rounds, "stdio_us": round(stdio_us, 1),
                      "http_us": round(http_us, 1),
                      "http_over_stdio": round(http_us / stdio_us, 2)}))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3)
