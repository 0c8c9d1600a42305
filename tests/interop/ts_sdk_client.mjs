// Drive a trio-mcp server with the official TypeScript SDK client (v1).
//   node ts_sdk_client.mjs SDK_DIR URL [streamable|sse]
// SDK_DIR holds node_modules/@modelcontextprotocol/sdk; prints one JSON object.
// `sse` uses the 2024-11-05 HTTP+SSE transport (URL is then the /sse stream).
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, url, kind = "streamable"] = process.argv.slice(2);
const esm = (p) =>
  import(pathToFileURL(join(sdkDir, "node_modules/@modelcontextprotocol/sdk/dist/esm", p)).href);
const { Client } = await esm("client/index.js");
const { StreamableHTTPClientTransport } = await esm("client/streamableHttp.js");
const { SSEClientTransport } = await esm("client/sse.js");
const {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ToolListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
} = await esm("types.js");

const client = new Client(
  { name: "trio-mcp-interop", version: "1.0.0" },
  { capabilities: { sampling: {}, elicitation: {} } },
);
client.setRequestHandler(CreateMessageRequestSchema, async (request) => ({
  role: "assistant",
  content: { type: "text", text: `node says ${request.params.messages[0].content.text}` },
  model: "node-model",
}));
client.setRequestHandler(ElicitRequestSchema, async () => ({
  action: "accept",
  content: { username: "node", email: "n@o.de" },
}));
const notifications = [];
client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => notifications.push(n.method));
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => notifications.push(n.method));
const transport =
  kind === "sse"
    ? new SSEClientTransport(new URL(url))
    : new StreamableHTTPClientTransport(new URL(url));
await client.connect(transport);
const seen = {};
seen.server = client.getServerVersion();
seen.sessionId = kind === "sse" ? "string" : typeof transport.sessionId;
seen.tools = (await client.listTools()).tools.map((t) => t.name).sort();
seen.echo = (await client.callTool({ name: "echo", arguments: { text: "from node" } })).content;
const progress = [];
const withProgress = await client.callTool(
  { name: "test_tool_with_progress", arguments: {} },
  undefined,
  { onprogress: (p) => progress.push([p.progress, p.total]) },
);
seen.progressResult = withProgress.content;
seen.progress = progress;
seen.add = (await client.callTool({ name: "add", arguments: { a: 20, b: 22 } })).structuredContent;
seen.resource = (await client.readResource({ uri: "test://static-text" })).contents;
seen.prompt = (
  await client.getPrompt({ name: "test_prompt_with_arguments", arguments: { arg1: "x", arg2: "y" } })
).messages;
seen.completion = (
  await client.complete({
    ref: { type: "ref/prompt", name: "test_prompt_with_arguments" },
    argument: { name: "arg1", value: "py" },
  })
).completion;
seen.sampling = (await client.callTool({ name: "test_sampling", arguments: { prompt: "hi" } })).content;
seen.elicitation = (
  await client.callTool({ name: "test_elicitation", arguments: { message: "who?" } })
).content;
await client.subscribeResource({ uri: "test://watched-resource" });
await client.callTool({ name: "test_trigger_tool_change", arguments: {} });
await client.callTool({ name: "test_trigger_resource_update", arguments: {} });
for (let i = 0; i < 100 && notifications.length < 2; i++) {
  await new Promise((resolve) => setTimeout(resolve, 50));
}
seen.notifications = notifications.sort();
if (kind !== "sse") {
  // the server closes the call's stream mid-call; the client resumes it
  seen.reconnection = (await client.callTool({ name: "test_reconnection", arguments: {} })).content;
  await transport.terminateSession();
}
await client.close();
console.log(JSON.stringify(seen));
