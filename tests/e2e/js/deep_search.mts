// mail_deep_search through the TypeScript MCP client v2 (@modelcontextprotocol/client), run by
// tests/e2e/test_deep_search.py with Node 22.
//   node deep_search.mts URL TOKEN legacy|2026-07-28 ARGUMENTS_JSON
// Calls mail_deep_search with a progress callback and prints one JSON line per event:
// {"progress": {progress, total, message}} for each notification, then {"result": CallToolResult}.
// A line "close" on stdin closes the client at once, mid-call, and exits (prints {"closed": true}).
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createInterface } from "node:readline";

const [url, token, mode, argumentsJson] = process.argv.slice(2);
const versionNegotiation =
  mode === "2026-07-28" ? { mode: { pin: "2026-07-28" } } : { mode: mode as "legacy" | "auto" };

const client = new Client({ name: "pylota-ts-test", version: "1.0.0" }, { versionNegotiation });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);

createInterface({ input: process.stdin }).on("line", async (line) => {
  if (line.trim() === "close") {
    await client.close();
    console.log(JSON.stringify({ closed: true }));
    process.exit(0);
  }
});

const result = await client.callTool(
  { name: "mail_deep_search", arguments: JSON.parse(argumentsJson) },
  {
    timeout: 60_000,
    onprogress: (progress) => console.log(JSON.stringify({ progress })),
  },
);
console.log(JSON.stringify({ result }));
await client.close();
process.exit(0);
