// The TypeScript MCP SDK v2 client (@modelcontextprotocol/client, pinned in package.json)
// and a transport to mcpx, for the end-to-end clients written against it:
// `transport("stdio", <mcpx binary>)` runs `mcpx serve`, handing it mcpx's own
// environment (MCPX_*); `transport("http", <url>, <token>)` is the daemon's /mcp over
// streamable HTTP with a bearer token.
//
// The SDK is taken from the node_modules of $MCPX_E2E_DIR when it is set, else of
// this script's directory.

import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const e2e = process.env.MCPX_E2E_DIR ?? dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(e2e, "package.json"));
const sdk = require("@modelcontextprotocol/client");
const { StdioClientTransport, getDefaultEnvironment } = require("@modelcontextprotocol/client/stdio");

export const Client = sdk.Client;

export function transport(kind, target, token) {
  if (kind === "stdio") {
    const env = getDefaultEnvironment();
    for (const [k, v] of Object.entries(process.env)) {
      if (k.startsWith("MCPX_")) env[k] = v;
    }
    return new StdioClientTransport({ command: target, args: ["serve"], env, stderr: "inherit" });
  }
  return new sdk.StreamableHTTPClientTransport(new URL(target), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
}
