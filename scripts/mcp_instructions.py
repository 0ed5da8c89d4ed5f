"""Instructions the `airlock mcp` server executes per `tools/call`
(`sleep {"ms": 0}` over stdio, or the call given with `--call`), counted
by valgrind's callgrind: one call at a time, and 64 in flight. Unlike a
time, the count does not move with the machine's load, so two binaries
can be compared on a busy machine.

Only the calls are counted: the server starts with instrumentation off,
answers warm-up calls, compiles its tools, and is switched on for the
counted calls alone. Under valgrind the instance pool cannot reserve its
address space, so the engine allocates instances on demand (it logs a
warning): compare binaries with each other, not with a native profile.

Usage: python3 scripts/mcp_instructions.py AIRLOCK [CALLS] [--call TOOL JSON]
(needs valgrind; takes a few minutes, most of it the tools' compilation).
`--call glob '{"pattern": "*.txt"}'` counts a tool that declares a
preflight export (`validate`), whose uses instantiate it twice.
"""

import glob
import json
import os
import subprocess
import sys
import tempfile

from mcp_raw_stdio import line, start, wait_until_idle

IN_FLIGHT = 64


def count(binary: str, calls: int, in_flight: int, home: str, workspace: str,
          tool: str, arguments: dict) -> int:
    """Instructions the server executed over `calls` calls of `tool` sent
    `in_flight` at a time."""
    out_file = os.path.join(home, "callgrind.out")
    for old in glob.glob(out_file + "*"):
        os.remove(old)
    server, out = start(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                         f"--callgrind-out-file={out_file}", binary, "--workspace", workspace,
                         "mcp"], home, "instructions")
    for n in range(100):
        server.stdin.write(line(n, tool, arguments))
        out.next()
    # The other tools compile in the background: wait until that is over.
    wait_until_idle(server.pid)
    for n in range(50):
        server.stdin.write(line(n, tool, arguments))
        out.next()
    subprocess.run(["callgrind_control", "-i", "on", str(server.pid)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    for _ in range(calls // in_flight):
        server.stdin.write(b"".join(line(n, tool, arguments) for n in range(in_flight)))
        for _ in range(in_flight):
            reply = out.next()
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


def main(binary: str, calls: int, tool: str, arguments: dict) -> None:
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as workspace:
        print(json.dumps({
            "call": f"{tool} {json.dumps(arguments)}",
            "instructions_per_call_one_at_a_time":
                count(binary, calls, 1, home, workspace, tool, arguments),
            "instructions_per_call_64_in_flight":
                count(binary, max(calls, IN_FLIGHT), IN_FLIGHT, home, workspace, tool,
                      arguments),
        }))


if __name__ == "__main__":
    args = sys.argv[1:]
    tool, arguments = "sleep", {"ms": 0}
    if "--call" in args:
        at = args.index("--call")
        tool, arguments = args[at + 1], json.loads(args[at + 2])
        del args[at:at + 3]
    if not args:
        raise SystemExit(__doc__)
    main(args[0], int(args[1]) if len(args) > 1 else 640, tool, arguments)
