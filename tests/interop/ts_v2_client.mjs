// Drive a trio-mcp server with the official TypeScript v2 client in auto mode (2026-07-28).
//   node ts_v2_client.mjs CLIENT_DIR URL
// CLIENT_DIR holds node_modules/@modelcontextprotocol/client; prints one JSON object.
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [clientDir, url] = process.argv.slice(2);
const require = createRequire(join(clientDir, "package.json"));
const entry = require.resolve("@modelcontextprotocol/client");
const sdk = await import(pathToFileURL(entry).href);
const { Client, StreamableHTTPClientTransport } = sdk;

const client = new Client(
  { name: "trio-mcp-interop-v2", version: "1.0.0" },
  { capabilities: { elicitation: {} }, versionNegotiation: { mode: "auto" } },
);
client.setRequestHandler("elicitation/create", async () => ({
  action: "accept",
  content: { name: "Linus" },
}));
const listChanged = [];
client.setNotificationHandler("notifications/tools/list_changed", (n) => listChanged.push(n.method));
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const seen = {};
seen.version = client.getNegotiatedProtocolVersion();
seen.tools = (await client.listTools()).tools.length;
const progress = [];
const withProgress = await client.callTool(
  { name: "test_tool_with_progress", arguments: {} },
  { onprogress: (p) => progress.push(p.progress) },
);
seen.progress = progress;
seen.progressResult = withProgress.content;
seen.header = (await client.callTool({ name: "test_x_mcp_header", arguments: { region: "eu-west ü" } })).content;
seen.mrtr = (await client.callTool({ name: "test_input_required_result_elicitation", arguments: {} })).content;
const subscription = await client.listen({ toolsListChanged: true });
seen.honored = subscription.honoredFilter;
await client.callTool({ name: "test_trigger_tool_change", arguments: {} });
for (let i = 0; i < 100 && listChanged.length === 0; i++) {
  await new Promise((resolve) => setTimeout(resolve, 50));
}
seen.listChanged = listChanged;
await subscription.close();
await client.close();
console.log(JSON.stringify(seen));
