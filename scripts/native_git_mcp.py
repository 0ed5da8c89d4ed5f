#!/usr/bin/env python3
"""A warm `git status --short` through the whole pipeline (BENCHMARKS.md,
figure 16d): `airlock mcp` over stdio with git granted to `bash`, driven by
one raw JSON-RPC client, one call at a time; against the same client
running `git status --short` itself (a subprocess) in the same run, and the
same client's `bash` call of a builtin (`pwd`), which runs no program.

Usage: scripts/native_git_mcp.py AIRLOCK_BINARY [N] [HELPER] [--gap MS]
  N: calls of each kind (default 200).
  HELPER: a sandbox helper other than the airlock binary (`sandbox_helper`),
  e.g. target/release/examples/confine, to see what the helper's own start
  costs.
  --gap MS: a pause before each round, as an agent's calls come (default 0).
  As root the helper joins a pids cgroup, which on cgroup v1 waits for an
  RCU grace period unless another join came just before: compare
  `--gap 100` as root and as another user (`setpriv --reuid 65534 ...`).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("airlock")
    parser.add_argument("n", nargs="?", type=int, default=200)
    parser.add_argument("helper", nargs="?")
    parser.add_argument("--gap", type=float, default=0.0)
    args = parser.parse_args()
    airlock, n = args.airlock, args.n
    repo = tempfile.mkdtemp(prefix="git-bench-")
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@b"]
    subprocess.run(git + ["init", "-q"], cwd=repo, check=True)
    with open(os.path.join(repo, "a.txt"), "w") as f:
        f.write("a\n")
    subprocess.run(git + ["add", "a.txt"], cwd=repo, check=True)
    subprocess.run(git + ["commit", "-qm", "a"], cwd=repo, check=True)
    with open(os.path.join(repo, "a.txt"), "w") as f:
        f.write("b\n")
    home = tempfile.mkdtemp(prefix="git-bench-home-")
    env = {"HOME": home, "PATH": os.environ["PATH"]}
    config = os.path.join(home, "airlock.toml")
    with open(config, "w") as f:
        if args.helper:
            f.write(f"sandbox_helper = {json.dumps(os.path.abspath(args.helper))}\n")
    # Every tool compiled into this HOME's cache first: a fresh cache
    # compiles them in the background, on the cores the calls need.
    subprocess.run([airlock, "--config", config, "--workspace", repo, "list"],
                   env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = subprocess.Popen(
        [airlock, "--config", config, "--workspace", repo, "--allow-program", "git", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )

    def send(message):
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()

    def reply(id):
        while True:
            line = server.stdout.readline()
            if not line:
                sys.exit("the server closed its stdout")
            message = json.loads(line)
            if message.get("id") == id:
                return message

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}})
    reply(0)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(id, command):
        started = time.perf_counter()
        send({"jsonrpc": "2.0", "id": id, "method": "tools/call",
              "params": {"name": "bash", "arguments": {"command": command}}})
        answer = reply(id)
        elapsed = time.perf_counter() - started
        text = answer["result"]["content"][0]["text"]
        assert not answer["result"].get("isError"), text
        return elapsed, text

    id = 1
    times = {"pipeline": [], "builtin": [], "direct": []}
    for round in range(n + 20):
        time.sleep(args.gap / 1000)
        elapsed, text = call(id, "git status --short")
        assert text.strip() == "M a.txt", text
        id += 1
        builtin, _ = call(id, "pwd")
        id += 1
        started = time.perf_counter()
        out = subprocess.run(["git", "status", "--short"], cwd=repo, capture_output=True, check=True)
        direct = time.perf_counter() - started
        assert out.stdout.decode().strip() == "M a.txt"
        if round >= 20:
            times["pipeline"].append(elapsed)
            times["builtin"].append(builtin)
            times["direct"].append(direct)
    server.stdin.close()
    server.wait()
    median = {k: statistics.median(v) * 1000 for k, v in times.items()}
    print(f"git status --short, {n} calls each, medians:")
    print(f"  through airlock mcp (bash, confined): {median['pipeline']:.2f} ms")
    print(f"  bash `pwd` through airlock mcp:       {median['builtin']:.2f} ms")
    print(f"  the client running git itself:       {median['direct']:.2f} ms")
    print(f"  ratio pipeline / direct: {median['pipeline'] / median['direct']:.2f}x; "
          f"added: {median['pipeline'] - median['direct']:.2f} ms")


if __name__ == "__main__":
    main()
