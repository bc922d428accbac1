// Declarations of what the mcpx code-mode runtime defines besides the servers'
// namespaces (those come from `mcpx types`).

declare namespace mcpx {
  /** A tool's whole result (MCP 2025-11-25, Server Features, Tools, "Tool Result"). */
  interface Result {
    content: Array<{ type: string; [key: string]: unknown }>;
    structuredContent?: { [key: string]: unknown };
    isError?: boolean;
    _meta?: { [key: string]: unknown };
  }
  /** What a tool call rejects with: the server's error, or an `isError` result (`kind` "tool"). */
  class ToolError extends Error {
    kind: string;
    code?: number;
    result?: Result;
  }
  /** The same tool, answering its whole result and never rejecting for `isError`. */
  function raw<A>(tool: (args: A) => Promise<unknown>): (args: A) => Promise<Result>;
}
