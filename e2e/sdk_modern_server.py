"""A server built on the official Python MCP SDK (2.3), which speaks MCP 2026-07-28
(and the legacy era), for the tests of modern servers behind mcpx.

usage: sdk_modern_server.py stdio
       sdk_modern_server.py <port>

On stdio, or streamable HTTP at http://127.0.0.1:<port>/mcp. Tools: `echo {message}`
and `pid {}` (its process id); a resource `sdk://greeting`; a prompt `greet {name}`.
"""

import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("sdk-modern-server")


@server.tool()
def echo(message: str) -> str:
    """Returns the message."""
    return f"sdk echo: {message}"


@server.tool()
def pid() -> str:
    """Returns the server's process id."""
    return str(os.getpid())


@server.resource("sdk://greeting")
def greeting() -> str:
    """A fixed greeting."""
    return "hello from the sdk"


@server.prompt()
def greet(name: str) -> str:
    """Greets someone."""
    return f"Hello, {name}!"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
