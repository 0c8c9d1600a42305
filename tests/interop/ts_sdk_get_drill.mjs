// Hold a session's GET stream with the official TypeScript SDK client (v1), for
// the replica-failure drill of tests/proxy/test_replicas_interop.py.
//   node ts_sdk_get_drill.mjs SDK_DIR URL COUNT
// The same lines as python_sdk_get_drill.py: {"session"}, {"updated"} per
// resource-updated notification, {"get", "last_event_id"} per GET response
// (the client's own resumptions included); a line `end` on stdin exits.
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const [sdkDir, url, count] = process.argv.slice(2);
const esm = (p) =>
  import(pathToFileURL(join(sdkDir, "node_modules/@modelcontextprotocol/sdk/dist/esm", p)).href);
const { Client } = await esm("client/index.js");
const { StreamableHTTPClientTransport } = await esm("client/streamableHttp.js");
const { ResourceUpdatedNotificationSchema } = await esm("types.js");

const say = (what) => process.stdout.write(JSON.stringify(what) + "\n");
let getOpen;
const opened = new Promise((resolve) => (getOpen = resolve));
const observing = async (input, init) => {
  const response = await fetch(input, init);
  if (init?.method === "GET") {
    const lastEventId = new Headers(init.headers).get("last-event-id");
    say({ get: response.status, last_event_id: lastEventId });
    if (response.status === 200) getOpen();
  }
  return response;
};
const client = new Client({ name: "trio-mcp-drill", version: "1.0.0" }, { capabilities: {} });
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) =>
  say({ updated: n.params.uri }),
);
const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: observing });
await client.connect(transport);
await opened;
for (let n = 1; n <= Number(count); n++) {
  await client.subscribeResource({ uri: `test://template/${n}/data` });
}
say({ session: transport.sessionId });
for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() === "end") break;
}
await transport.terminateSession();
await client.close();
process.exit(0); // (stdin would keep Node running)
