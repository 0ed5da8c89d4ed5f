"""The simplest client of `airlock mcp` over stdio: newline-delimited
JSON-RPC written and read on the pipes, no SDK. Times `sleep {"ms": 0}`
one call at a time and 64 in flight (rows 8 and 8b without criterion), to
compare binaries side by side, and `cat` echoing the same line (the pipe
floor) in the same run. Prints the median of each round's time per call.

Usage: python3 scripts/mcp_raw_stdio.py AIRLOCK [ROUNDS]
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SEQUENTIAL = 1000
BATCHES, IN_FLIGHT = 100, 64


def line(n: int) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                        "params": {"name": "sleep", "arguments": {"ms": 0}}}) + "\n").encode()


class Lines:
    def __init__(self, fd: int):
        self.fd, self.buffer = fd, b""

    def next(self) -> bytes:
        while b"\n" not in self.buffer:
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                raise SystemExit("the server closed its output")
            self.buffer += chunk
        one, _, self.buffer = self.buffer.partition(b"\n")
        return one


def cat_floor(rounds: int) -> float:
    cat = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    out, per_round = Lines(cat.stdout.fileno()), []
    for _ in range(rounds):
        started = time.perf_counter()
        for n in range(SEQUENTIAL):
            cat.stdin.write(line(n))
            out.next()
        per_round.append((time.perf_counter() - started) / SEQUENTIAL * 1e6)
    cat.stdin.close()
    cat.wait()
    return statistics.median(per_round)


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_until_idle(pid: int) -> None:
    """Returns once the process used under 2% of a core for a second."""
    while True:
        before = cpu_seconds(pid)
        time.sleep(1)
        if cpu_seconds(pid) - before < 0.02:
            return


def server_env(home: str) -> dict:
    """The environment of a server with `home` as its HOME and no configuration."""
    env = dict(os.environ, HOME=home, XDG_CACHE_HOME=os.path.join(home, "cache"))
    env.pop("AIRLOCK_CONFIG", None)
    env.pop("XDG_CONFIG_HOME", None)
    return env


def start(command: list, home: str, client: str):
    """Starts `command` (an `airlock mcp` server over stdio) with `home` as
    its HOME and no configuration, and initializes it as `client`: the
    process, and the lines it writes."""
    server = subprocess.Popen(command, env=server_env(home), bufsize=0, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = Lines(server.stdout.fileno())
    init = {"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": client, "version": "1"}}
    server.stdin.write((json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                    "params": init}) + "\n").encode())
    out.next()
    server.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    return server, out


def main(binary: str, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as workspace:
        server, out = start([binary, "--workspace", workspace, "mcp"], home, "raw")
        # The first calls wait for `sleep` to compile; the rest of the
        # bundled tools compile in the background meanwhile, and nothing
        # is timed until that is over.
        for n in range(300):
            server.stdin.write(line(n))
            out.next()
        wait_until_idle(server.pid)
        sequential, pipelined = [], []
        for _ in range(rounds):
            started = time.perf_counter()
            for n in range(SEQUENTIAL):
                server.stdin.write(line(n))
                reply = out.next()
            sequential.append((time.perf_counter() - started) / SEQUENTIAL * 1e6)
            assert b'"isError":false' in reply, reply
            started = time.perf_counter()
            for _ in range(BATCHES):
                server.stdin.write(b"".join(line(n) for n in range(IN_FLIGHT)))
                for _ in range(IN_FLIGHT):
                    out.next()
            pipelined.append((time.perf_counter() - started) / (BATCHES * IN_FLIGHT) * 1e6)
        server.stdin.close()
        server.wait()
    print(json.dumps({
        "cat_floor_us": round(cat_floor(rounds), 1),
        "one_at_a_time_us": round(statistics.median(sequential), 1),
        "in_flight_64_us_per_call": round(statistics.median(pipelined), 1),
    }))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 4)
