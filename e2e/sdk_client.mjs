// The official TypeScript MCP SDK (pinned in package.json) as a client of mcpx, for
// the end-to-end tests.
//
// usage: node sdk_client.mjs <mcpx binary> <tool> [<tool> ...]
//
// Launches `mcpx serve` the way MCP clients built on the SDK do: the child's
// environment is the SDK's getDefaultEnvironment() (HOME, LOGNAME, PATH, SHELL, TERM,
// USER), plus MCPX_TEST_RUN_USER when it is set (the tests' stand-in for /run/user).
// Calls each tool with no arguments and prints a JSON array of the text of each
// result; exits non-zero on any failure.
//
// The SDK is taken from the node_modules of $MCPX_E2E_DIR when it is set (where
// scripts/setup-e2e.sh installed it), else of this script's directory.

import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const e2e = process.env.MCPX_E2E_DIR ?? dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(e2e, "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport, getDefaultEnvironment } = require("@modelcontextprotocol/sdk/client/stdio.js");

const [mcpx, ...tools] = process.argv.slice(2);
const env = getDefaultEnvironment();
if (process.env.MCPX_TEST_RUN_USER !== undefined) {
  env.MCPX_TEST_RUN_USER = process.env.MCPX_TEST_RUN_USER;
}
const transport = new StdioClientTransport({ command: mcpx, args: ["serve"], env, stderr: "inherit" });
const client = new Client({ name: "mcpx-e2e-ts", version: "1.0.0" });
await client.connect(transport);
const texts = [];
for (const name of tools) {
  const result = await client.callTool({ name, arguments: {} });
  if (result.isError) {
    throw new Error(`${name} failed: ${JSON.stringify(result)}`);
  }
  texts.push(result.content.map((block) => block.text ?? "").join(""));
}
await client.close();
console.log(JSON.stringify(texts));
