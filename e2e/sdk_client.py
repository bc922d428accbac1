"""The official Python MCP SDK as a client of mcpx, for the end-to-end tests.

usage: sdk_client.py stdio <mcpx binary>      (through `mcpx serve`)
       sdk_client.py http <url> <token>        (streamable HTTP at the daemon's /mcp)

Lists the aggregate of every configured server and calls one tool of each of
server-everything, server-memory and mcp-server-time; prints one JSON object with
what it saw, and exits non-zero on any failure.
"""

import asyncio
import json
import os
import sys

import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


def text_of(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def exercise(read, write) -> dict:
    async with ClientSession(read, write) as session:
        init = await session.initialize()
        listed = await session.list_tools()
        names = sorted(tool.name for tool in listed.tools)
        echo = await session.call_tool("everything__echo", {"message": "from the sdk"})
        graph = await session.call_tool("memory__read_graph", {})
        now = await session.call_tool("time__get_current_time", {"timezone": "UTC"})
        return {
            "protocol": init.protocol_version,
            "tools": names,
            "echo": text_of(echo),
            "graph_error": bool(graph.is_error),
            "time": text_of(now),
        }


async def main() -> None:
    mode = sys.argv[1]
    if mode == "stdio":
        # The SDK passes a child only a safe subset of the environment: hand on mcpx's own.
        env = {k: v for k, v in os.environ.items() if k.startswith("MCPX_")}
        params = StdioServerParameters(command=sys.argv[2], args=["serve"], env=env)
        async with stdio_client(params) as streams:
            out = await exercise(streams[0], streams[1])
    else:
        headers = {"Authorization": f"Bearer {sys.argv[3]}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as client:
            async with streamable_http_client(sys.argv[2], http_client=client) as streams:
                out = await exercise(streams[0], streams[1])
    print(json.dumps(out))


asyncio.run(main())
