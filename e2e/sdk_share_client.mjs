// One MCP client of the benchmark's sharing table (scripts/bench/sharing.py), on the official
// TypeScript MCP SDK v2 client (@modelcontextprotocol/client, pinned in package.json), as an
// agent session would run it: it connects to each of its servers, lists their tools and calls
// one tool, then stays connected until its stdin closes.
//
// usage: node sdk_share_client.mjs <servers.json>
//
// servers.json: [{"name", "command", "args", "env", "calls": [{"tool", "arguments", "expect"}]}]:
// each entry is one stdio connection (a server of its own, or `mcpx serve`), then its calls, each
// of whose text must hold `expect`. Prints one JSON line once every connection answered:
// {"list_ms": ..., "call_ms": ..., "tools": N}, the time from the start until every connection's
// first tools/list answered, and until every first call answered (all connections at once, as a
// client starts its servers together). Exits non-zero on any failure.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const e2e = process.env.MCPX_E2E_DIR ?? dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(e2e, "package.json"));
const { Client } = require("@modelcontextprotocol/client");
const { StdioClientTransport, getDefaultEnvironment } = require("@modelcontextprotocol/client/stdio");

const servers = JSON.parse(readFileSync(process.argv[2], "utf8"));
const started = performance.now();
const clients = [];
const text = (result) => result.content.map((block) => block.text ?? "").join("");

const listed = await Promise.all(
  servers.map(async (s) => {
    const env = { ...getDefaultEnvironment(), ...(s.env ?? {}) };
    const transport = new StdioClientTransport({ command: s.command, args: s.args ?? [], env, stderr: "ignore" });
    const client = new Client({ name: "mcpx-bench-share", version: "1.0.0" });
    await client.connect(transport);
    clients.push(client);
    const tools = await client.listTools();
    return { client, s, tools: tools.tools.length, at: performance.now() };
  }),
);
const listMs = Math.max(...listed.map((l) => l.at)) - started;
const called = await Promise.all(
  listed.flatMap(({ client, s }) =>
    s.calls.map(async (c) => {
      const result = await client.callTool({ name: c.tool, arguments: c.arguments ?? {} });
      const got = text(result);
      if (result.isError || !got.includes(c.expect)) {
        throw new Error(`${s.name}: ${c.tool} answered ${JSON.stringify(got).slice(0, 300)}`);
      }
      return performance.now();
    }),
  ),
);
const callMs = Math.max(...called) - started;
console.log(JSON.stringify({ list_ms: listMs, call_ms: callMs, tools: listed.reduce((n, l) => n + l.tools, 0) }));

// Connected until told to go: the benchmark counts the processes and their memory meanwhile.
process.stdin.resume();
process.stdin.on("end", async () => {
  await Promise.all(clients.map((c) => c.close()));
  process.exit(0);
});
