// The simplest Node client of `airlock mcp` over stdio: newline-delimited
// JSON-RPC over what `child_process` gives a child (stream sockets, as for
// Claude Code, the Inspector and the TypeScript SDK), no SDK. Times
// `sleep {"ms": 0}` one call at a time (row 8 from Node), and `cat` echoing
// the same line the same way (the floor). Prints one JSON line of medians.
//
// Usage: node scripts/mcp_raw_stdio.mjs AIRLOCK [CALLS]
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const WARMUP = 300;
const [binary, callsArg] = process.argv.slice(2);
if (!binary) throw new Error("usage: node scripts/mcp_raw_stdio.mjs AIRLOCK [CALLS]");
const calls = Number(callsArg || 3000);
const home = mkdtempSync(join(tmpdir(), "airlock-raw-home-"));
const workspace = mkdtempSync(join(tmpdir(), "airlock-raw-ws-"));
const env = { ...process.env, HOME: home, XDG_CACHE_HOME: join(home, "cache") };
delete env.AIRLOCK_CONFIG;
delete env.XDG_CONFIG_HOME;

// CPU seconds `pid` used so far (utime + stime, in clock ticks of 1/100 s).
const cpuTicks = (pid) => {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(")").pop().trim().split(" ");
  return Number(fields[11]) + Number(fields[12]);
};

// Returns once `pid` used under 2% of a core for a second (the bundled
// tools compile in the background after the first calls).
async function idle(pid) {
  for (;;) {
    const before = cpuTicks(pid);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    if (cpuTicks(pid) - before < 2) return;
  }
}

// Median microseconds per call of `command args`, after the handshake.
async function perCall(command, args, handshake) {
  const child = spawn(command, args, { stdio: ["pipe", "pipe", "ignore"], env });
  let buffer = "";
  let waiting = null;
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (data) => {
    buffer += data;
    let end;
    while ((end = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + 1);
      const reply = waiting;
      waiting = null;
      reply(line);
    }
  });
  const ask = (message) =>
    new Promise((resolve) => {
      waiting = resolve;
      child.stdin.write(JSON.stringify(message) + "\n");
    });
  await ask({
    jsonrpc: "2.0", id: 0, method: "initialize",
    params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw-node", version: "1" } },
  });
  if (handshake) child.stdin.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n");
  const call = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "sleep", arguments: { ms: 0 } } };
  const times = [];
  for (let i = 0; i < WARMUP + calls; i++) {
    if (i === WARMUP) await idle(child.pid);
    const started = process.hrtime.bigint();
    const reply = await ask(call);
    if (handshake && !reply.includes('"isError":false')) throw new Error(reply);
    if (i >= WARMUP) times.push(Number(process.hrtime.bigint() - started) / 1000);
  }
  child.stdin.end();
  await new Promise((resolve) => child.on("exit", resolve));
  times.sort((a, b) => a - b);
  return Math.round(times[times.length >> 1] * 10) / 10;
}

const floor = await perCall("cat", [], false);
const airlock = await perCall(binary, ["--workspace", workspace, "mcp"], true);
console.log(JSON.stringify({ calls, cat_floor_us: floor, one_at_a_time_us: airlock }));
rmSync(home, { recursive: true, force: true });
rmSync(workspace, { recursive: true, force: true });
