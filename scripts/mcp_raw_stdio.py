"""The simplest client of `airlock mcp` over stdio: newline-delimited
JSON-RPC written and read on the pipes, no SDK. Times `sleep {"ms": 0}`
one call at a time and 64 in flight (rows 8 and 8b without criterion), to
compare binaries side by side, and `cat` echoing the same line (the pipe
floor) in the same run. Prints the median of each round's time per call.
With `--sockets`, stdin and stdout are stream sockets instead of pipes, as
Node's `child_process` gives a child (so Claude Code, the Inspector and
the TypeScript SDK), and the floor is `cat` over sockets too.

Usage: python3 scripts/mcp_raw_stdio.py [--sockets] AIRLOCK [ROUNDS]
"""

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

SOCKETS = False

SEQUENTIAL = 1000
BATCHES, IN_FLIGHT = 100, 64


def line(n: int, tool: str = "sleep", arguments: dict | None = None) -> bytes:
    """A `tools/call` of `tool` (by default `sleep {"ms": 0}`), one line."""
    arguments = {"ms": 0} if arguments is None else arguments
    return (json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                        "params": {"name": tool, "arguments": arguments}}) + "\n").encode()


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


def spawn(command: list, **options):
    """`command` with its stdin and stdout as pipes, or as stream sockets
    with `SOCKETS`: the process (its `stdin` a binary file either way),
    and the lines it writes."""
    if not SOCKETS:
        process = subprocess.Popen(command, bufsize=0, stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, **options)
        return process, Lines(process.stdout.fileno())
    ours_in, its_in = socket.socketpair()
    ours_out, its_out = socket.socketpair()
    process = subprocess.Popen(command, stdin=its_in.fileno(), stdout=its_out.fileno(),
                               **options)
    its_in.close()
    its_out.close()
    process.stdin = ours_in.makefile("wb", buffering=0)
    # The socket closes with the file: closing `stdin` is the end of input.
    ours_in.close()
    # Kept with the process, so the socket lives as long as it is read.
    process.output = ours_out
    return process, Lines(ours_out.fileno())


def cat_floor(rounds: int) -> float:
    cat, out = spawn(["cat"])
    per_round = []
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
    server, out = spawn(command, env=server_env(home), stderr=subprocess.DEVNULL)
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
    args = sys.argv[1:]
    if args[:1] == ["--sockets"]:
        SOCKETS = True
        args = args[1:]
    if not args:
        raise SystemExit(__doc__)
    main(args[0], int(args[1]) if len(args) > 1 else 4)
