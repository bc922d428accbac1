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
// The SDK and the transport come from sdk_v2_transport.mjs.

import { Client, transport as connect } from "./sdk_v2_transport.mjs";

const [mode, kind, target, token] = process.argv.slice(2);
const transport = connect(kind, target, token);
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
