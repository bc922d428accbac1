"""A server built on the official Python MCP SDK (2.3), which speaks MCP 2026-07-28
(and the legacy era), for the tests of modern servers behind mcpx.

usage: sdk_modern_server.py stdio
       sdk_modern_server.py <port>

On stdio, or streamable HTTP at http://127.0.0.1:<port>/mcp. Tools: `echo {message}`,
`pid {}` (its process id) and `ask {}`, which asks its caller for a name (an
elicitation, as an `InputRequiredResult` in 2026-07-28) and returns what came back; a
resource `sdk://greeting`; a prompt `greet {name}`.
"""

import os
import sys
from typing import Annotated

from pydantic import BaseModel

from mcp.server.mcpserver import Elicit, ElicitationResult, MCPServer, Resolve

server = MCPServer("sdk-modern-server")


@server.tool()
def echo(message: str) -> str:
    """Returns the message."""
    return f"sdk echo: {message}"


@server.tool()
def pid() -> str:
    """Returns the server's process id."""
    return str(os.getpid())


class Name(BaseModel):
    """The answer `ask` wants."""

    name: str


def ask_name() -> Elicit[Name]:
    """The question `ask` puts to its caller."""
    return Elicit("What is your name?", Name)


@server.tool()
def ask(answer: Annotated[ElicitationResult[Name], Resolve(ask_name)]) -> str:
    """Asks the caller for a name and returns the answer."""
    if answer.action == "accept":
        return f"sdk heard: {answer.data.name}"
    return f"sdk heard: {answer.action}"


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
