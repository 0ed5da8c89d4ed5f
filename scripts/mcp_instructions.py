"""Instructions the `airlock mcp` server executes per `tools/call`
(`sleep {"ms": 0}` over stdio), counted by valgrind's callgrind: one call
at a time, and 64 in flight. Unlike a time, the count does not move with
the machine's load, so two binaries can be compared on a busy machine.

Only the calls are counted: the server starts with instrumentation off,
answers warm-up calls, compiles its tools, and is switched on for the
counted calls alone. Under valgrind the instance pool cannot reserve its
address space, so the engine allocates instances on demand (it logs a
warning): compare binaries with each other, not with a native profile.

Usage: python3 scripts/mcp_instructions.py AIRLOCK [CALLS]
(needs valgrind; takes a few minutes, most of it the tools' compilation)
"""

import glob
import json
import os
import subprocess
import sys
import tempfile
import time

IN_FLIGHT = 64


def line(n: int) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                        "params": {"name": "sleep", "arguments": {"ms": 0}}}) + "\n").encode()


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def count(binary: str, calls: int, in_flight: int, home: str, workspace: str) -> int:
    """Instructions the server executed over `calls` calls sent
    `in_flight` at a time."""
    out_file = os.path.join(home, "callgrind.out")
    for old in glob.glob(out_file + "*"):
        os.remove(old)
    env = dict(os.environ, HOME=home, XDG_CACHE_HOME=os.path.join(home, "cache"))
    env.pop("AIRLOCK_CONFIG", None)
    env.pop("XDG_CONFIG_HOME", None)
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no",
         f"--callgrind-out-file={out_file}", binary, "--workspace", workspace, "mcp"],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        bufsize=0)
    buffer = b""

    def next_line() -> bytes:
        nonlocal buffer
        while b"\n" not in buffer:
            chunk = os.read(server.stdout.fileno(), 1 << 20)
            if not chunk:
                raise SystemExit("the server closed its output")
            buffer += chunk
        one, _, buffer = buffer.partition(b"\n")
        return one

    init = {"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "instructions", "version": "1"}}
    server.stdin.write((json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                    "params": init}) + "\n").encode())
    next_line()
    server.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    for n in range(100):
        server.stdin.write(line(n))
        next_line()
    # The other tools compile in the background: wait until that is over.
    while True:
        before = cpu_seconds(server.pid)
        time.sleep(2)
        if cpu_seconds(server.pid) - before < 0.1:
            break
    for n in range(50):
        server.stdin.write(line(n))
        next_line()
    subprocess.run(["callgrind_control", "-i", "on", str(server.pid)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    for _ in range(calls // in_flight):
        server.stdin.write(b"".join(line(n) for n in range(in_flight)))
        for _ in range(in_flight):
            reply = next_line()
    assert b'"isError":false' in reply, reply
    subprocess.run(["callgrind_control", "-i", "off", str(server.pid)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    server.stdin.close()
    server.wait()
    total = 0
    for path in glob.glob(out_file + "*"):
        for text in open(path):
            if text.startswith("totals:"):
                total += int(text.split()[1])
    return total // (calls // in_flight * in_flight)


def main(binary: str, calls: int) -> None:
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as workspace:
        print(json.dumps({
            "instructions_per_call_one_at_a_time": count(binary, calls, 1, home, workspace),
            "instructions_per_call_64_in_flight":
                count(binary, max(calls, IN_FLIGHT), IN_FLIGHT, home, workspace),
        }))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 640)
