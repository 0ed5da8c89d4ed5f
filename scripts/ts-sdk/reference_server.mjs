// The TypeScript SDK's own server (McpServer) with one `read` tool, as a
// baseline for read.mjs: over stdio by default, or Streamable HTTP on
// 127.0.0.1 with `http` (it prints its URL on stderr).
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { z } from "zod";

function server() {
  const s = new McpServer({ name: "reference", version: "1" });
  s.tool("read", { file_path: z.string() }, async ({ file_path }) => ({
    content: [{ type: "text", text: readFileSync(file_path, "utf8") }],
  }));
  return s;
}

if (process.argv[2] === "http") {
  const sessions = {};
  const http = createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    let transport = sessions[req.headers["mcp-session-id"]];
    if (!transport) {
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => (sessions[id] = transport),
      });
      await server().connect(transport);
    }
    await transport.handleRequest(req, res, body ? JSON.parse(body) : undefined);
  });
  http.listen(0, "127.0.0.1", () => console.error(`http://127.0.0.1:${http.address().port}/mcp`));
} else {
  await server().connect(new StdioServerTransport());
}
