// Row 8g through the TypeScript MCP SDK: one `read` at a time over stdio
// and over Streamable HTTP against the same `airlock` binary in one run,
// beside two baselines measured the same way: the same call as a bare
// `fetch` POST (Node's HTTP client with no SDK around it, against the same
// server), and the SDK's own reference server (reference_server.mjs) over
// both transports. Prints one JSON line of medians (microseconds).
//
// Usage: cd scripts/ts-sdk && npm install && node read.mjs AIRLOCK [CALLS]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { spawn } from "node:child_process";
import { mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const WARMUP = 100;
const [binary, callsArg] = process.argv.slice(2);
if (!binary) throw new Error("usage: node read.mjs AIRLOCK [CALLS]");
const calls = Number(callsArg || 500);
const home = mkdtempSync(join(tmpdir(), "airlock-ts-home-"));
const workspace = realpathSync(mkdtempSync(join(tmpdir(), "airlock-ts-ws-")));
const file = join(workspace, "notes.txt");
writeFileSync(file, Array.from({ length: 20 }, (_, i) => `line ${i}\n`).join(""));
const env = { ...process.env, HOME: home, XDG_CACHE_HOME: join(home, "cache") };
delete env.AIRLOCK_CONFIG;
delete env.XDG_CONFIG_HOME;
const airlock = ["--workspace", workspace, "mcp"];
const reference = new URL("reference_server.mjs", import.meta.url).pathname;

const median = (times) => {
  const sorted = [...times].sort((a, b) => a - b);
  return Math.round(sorted[Math.floor(sorted.length / 2)] * 10) / 10;
};

// `calls` timed calls of `once`, after WARMUP untimed ones.
async function timed(once) {
  const times = [];
  for (let i = 0; i < WARMUP + calls; i++) {
    const started = process.hrtime.bigint();
    await once(i);
    if (i >= WARMUP) times.push(Number(process.hrtime.bigint() - started) / 1000);
  }
  return median(times);
}

async function sdk(transport) {
  const client = new Client({ name: "airlock-bench", version: "1" });
  await client.connect(transport);
  const read = { name: "read", arguments: { file_path: file } };
  const result = await timed(async () => {
    const reply = await client.callTool(read);
    if (reply.isError) throw new Error(JSON.stringify(reply));
  });
  await client.close();
  return result;
}

async function bareFetch(url) {
  const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
  const post = (message) => fetch(url, { method: "POST", headers, body: JSON.stringify(message) });
  const init = await post({
    jsonrpc: "2.0", id: 0, method: "initialize",
    params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "floor", version: "1" } },
  });
  headers["mcp-session-id"] = init.headers.get("mcp-session-id");
  headers["mcp-protocol-version"] = "2025-06-18";
  await init.text();
  await (await post({ jsonrpc: "2.0", method: "notifications/initialized" })).text();
  return timed(async (i) => {
    const reply = await post({
      jsonrpc: "2.0", id: i + 1, method: "tools/call",
      params: { name: "read", arguments: { file_path: file } },
    });
    const text = await reply.text();
    if (!text.includes(`"id":${i + 1},`) || !text.includes("line 19")) throw new Error(text);
  });
}

// Starts `command args` serving HTTP; resolves to its URL and the process.
function httpServer(command, args) {
  const child = spawn(command, args, { env, stdio: ["ignore", "ignore", "pipe"] });
  return new Promise((resolve, reject) => {
    let said = "";
    child.stderr.on("data", (chunk) => {
      said += chunk;
      const url = said.match(/(http:\/\/\S+\/mcp)/);
      if (url) resolve({ url: url[1], child });
    });
    child.on("exit", () => reject(new Error(`the server exited: ${said}`)));
  });
}

const out = { calls };
out.airlock_stdio = await sdk(new StdioClientTransport({ command: binary, args: airlock, env, stderr: "ignore" }));
{
  const { url, child } = await httpServer(binary, [...airlock, "--http", "127.0.0.1:0"]);
  out.airlock_http = await sdk(new StreamableHTTPClientTransport(new URL(url)));
  out.bare_fetch = await bareFetch(url);
  child.removeAllListeners("exit");
  child.kill();
}
out.reference_stdio = await sdk(new StdioClientTransport({ command: process.execPath, args: [reference], env, stderr: "ignore" }));
{
  const { url, child } = await httpServer(process.execPath, [reference, "http"]);
  out.reference_http = await sdk(new StreamableHTTPClientTransport(new URL(url)));
  child.removeAllListeners("exit");
  child.kill();
}
const ratio = (a, b) => Math.round((a / b) * 100) / 100;
out.airlock_http_over_stdio = ratio(out.airlock_http, out.airlock_stdio);
out.bare_fetch_over_airlock_stdio = ratio(out.bare_fetch, out.airlock_stdio);
out.reference_http_over_stdio = ratio(out.reference_http, out.reference_stdio);
console.log(JSON.stringify(out));
rmSync(home, { recursive: true, force: true });
rmSync(workspace, { recursive: true, force: true });
process.exit(0);
