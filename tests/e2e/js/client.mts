// The TypeScript MCP client v2 (@modelcontextprotocol/client) against the real server, run by
// tests/e2e/test_clients.py with Node 22 (which strips the types itself).
//   node client.mts URL TOKEN legacy|auto|2026-07-28
// Lists the tools, calls mail_list_identities with progress requested, and prints one JSON line:
// {"protocolVersion", "instructions", "tools": [names], "result": CallToolResult}.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [url, token, mode] = process.argv.slice(2);
const versionNegotiation =
  mode === "2026-07-28" ? { mode: { pin: "2026-07-28" } } : { mode: mode as "legacy" | "auto" };

const client = new Client({ name: "pylota-ts-test", version: "1.0.0" }, { versionNegotiation });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
const listed = await client.listTools();
const result = await client.callTool({ name: "mail_list_identities", arguments: {} });
console.log(JSON.stringify({
  protocolVersion: client.getNegotiatedProtocolVersion(),
  instructions: client.getInstructions(),
  tools: listed.tools.map((tool) => tool.name),
  result,
}));
await client.close();
