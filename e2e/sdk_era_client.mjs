// The official TypeScript MCP SDK v2 client (@modelcontextprotocol/client, pinned in
// package.json) as a client of mcpx, for the era matrix: each client era against each
// server era.
//
// usage: node sdk_era_client.mjs <mode> <servers> stdio <mcpx binary>
//        node sdk_era_client.mjs <mode> <servers> http <url> <token>
//
// <mode> is a protocol version the client is pinned to (`2026-07-28`). <servers> is a
// comma-separated list of server names behind mcpx. For each server S it calls
// `S__echo {message: "era"}`, reads the first resource whose URI starts with
// `mcpx://S/`, gets the prompt `S__greet {name: "era"}` when S lists it, and calls
// `S__ask {}` when S lists it, answering its elicitation with the name `ts-<mode>`.
// Prints one JSON object, `{"protocol", "servers": {S: {"echo", "read", "greet",
// "ask"}}}` (null for what S does not offer), and exits non-zero on any failure.
// mcpx's own environment (MCPX_*) is handed to `mcpx serve`.
//
// The SDK and the transport come from sdk_v2_transport.mjs.

import { Client, transport as connect } from "./sdk_v2_transport.mjs";

const [mode, servers, kind, target, token] = process.argv.slice(2);
const transport = connect(kind, target, token);
const client = new Client(
  { name: "mcpx-era-ts", version: "1.0.0" },
  { capabilities: { elicitation: {} }, versionNegotiation: { mode: { pin: mode } } },
);
client.setRequestHandler("elicitation/create", async () => ({ action: "accept", content: { name: `ts-${mode}` } }));
await client.connect(transport);

const text = (result) => {
  if (result.isError) throw new Error(`a tool failed: ${JSON.stringify(result)}`);
  return result.content.map((block) => block.text ?? "").join("");
};
const tools = new Set((await client.listTools()).tools.map((t) => t.name));
const resources = (await client.listResources()).resources.map((r) => r.uri);
const prompts = new Set((await client.listPrompts()).prompts.map((p) => p.name));
const seen = {};
for (const server of servers.split(",")) {
  const out = { echo: text(await client.callTool({ name: `${server}__echo`, arguments: { message: "era" } })) };
  const uri = resources.find((u) => u.startsWith(`mcpx://${server}/`));
  out.read = uri ? (await client.readResource({ uri })).contents[0].text : null;
  const greet = `${server}__greet`;
  out.greet = prompts.has(greet)
    ? (await client.getPrompt({ name: greet, arguments: { name: "era" } })).messages[0].content.text
    : null;
  const ask = `${server}__ask`;
  out.ask = tools.has(ask) ? text(await client.callTool({ name: ask, arguments: {} })) : null;
  seen[server] = out;
}
const out = { protocol: client.getNegotiatedProtocolVersion(), servers: seen };
await client.close();
console.log(JSON.stringify(out));
