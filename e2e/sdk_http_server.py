"""A remote MCP server built on the official Python MCP SDK, for the end-to-end tests.

usage: sdk_http_server.py <port> [json]

Serves streamable HTTP at http://127.0.0.1:<port>/mcp (answers as SSE streams, or
plain JSON with `json`). Tools: `echo {message}`, `progress {count}` (reports
`count` progress notifications, then answers) and `sleep {seconds}` (for
cancellation).
"""

import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("sdk-http-server")


@server.tool()
def echo(message: str) -> str:
    """Returns the message."""
    return f"sdk echo: {message}"


@server.tool()
async def progress(count: int, ctx: Context) -> str:
    """Reports `count` progress notifications 50 ms apart, then answers."""
    for i in range(count):
        await ctx.report_progress(i + 1, count, f"step {i + 1}")
        await anyio.sleep(0.05)
    return f"progress done {count}"


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleeps, then answers (a call to cancel)."""
    await anyio.sleep(seconds)
    return f"slept {seconds}"


if __name__ == "__main__":
    port = int(sys.argv[1])
    json_response = len(sys.argv) > 2 and sys.argv[2] == "json"
    server.run("streamable-http", host="127.0.0.1", port=port, json_response=json_response)
