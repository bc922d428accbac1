// The official TypeScript MCP SDK v2 client (@modelcontextprotocol/client, pinned in
// package.json) as a client of mcpx in MCP 2026-07-28, for the end-to-end tests.
//
// usage: node sdk_client_v2.mjs <mode> stdio <mcpx binary>
//        node sdk_client_v2.mjs <mode> http <url> <token>
//
// <mode> is `auto` (probe server/discover, fall back to initialize) or `2026-07-28`
// (pinned). Lists the aggregate's tools, resources and prompts, calls
// `everything__echo` and `fake__echo`, reads one resource of each of
// server-everything and the fake, gets `fake__greet`; prints one JSON object with what
// it saw, and exits non-zero on any failure. mcpx's own environment (MCPX_*) is handed
// to `mcpx serve`.
//
// The SDK is taken from the node_modules of $MCPX_E2E_DIR when it is set, else of
// this script's directory.

import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const e2e = process.env.MCPX_E2E_DIR ?? dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(e2e, "package.json"));
const { Client, StreamableHTTPClientTransport } = require("@modelcontextprotocol/client");
const { StdioClientTransport, getDefaultEnvironment } = require("@modelcontextprotocol/client/stdio");

const [mode, kind, target, token] = process.argv.slice(2);
let transport;
if (kind === "stdio") {
  const env = getDefaultEnvironment();
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith("MCPX_")) env[k] = v;
  }
  transport = new StdioClientTransport({ command: target, args: ["serve"], env, stderr: "inherit" });
} else {
  transport = new StreamableHTTPClientTransport(new URL(target), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
}
const negotiation = mode === "auto" ? "auto" : { pin: mode };
const client = new Client({ name: "mcpx-e2e-ts-v2", version: "1.0.0" }, { versionNegotiation: { mode: negotiation } });
await client.connect(transport);

const text = (result) => result.content.map((block) => block.text ?? "").join("");
const tools = await client.listTools();
const resources = await client.listResources();
const prompts = await client.listPrompts();
const echo = await client.callTool({ name: "everything__echo", arguments: { message: "from the sdk" } });
const fake = await client.callTool({ name: "fake__echo", arguments: { message: "to the fake" } });
const read = {};
for (const server of ["everything", "fake"]) {
  const uri = resources.resources.map((r) => r.uri).find((u) => u.startsWith(`mcpx://${server}/`));
  read[server] = (await client.readResource({ uri })).contents.length > 0;
}
const greet = await client.getPrompt({ name: "fake__greet", arguments: { name: "sdk" } });
const out = {
  protocol: client.getNegotiatedProtocolVersion(),
  tools: tools.tools.map((t) => t.name),
  resources: resources.resources.length,
  prompts: prompts.prompts.map((p) => p.name),
  echo: text(echo),
  fake: text(fake),
  read,
  greet: greet.messages[0].content.text,
};
await client.close();
console.log(JSON.stringify(out));
