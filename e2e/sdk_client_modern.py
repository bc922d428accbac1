"""The official Python MCP SDK as a client of mcpx in MCP 2026-07-28, for the end-to-end tests.

usage: sdk_client_modern.py <mode> stdio <mcpx binary>     (through `mcpx serve`)
       sdk_client_modern.py <mode> http <url> <token>       (streamable HTTP at the daemon's /mcp)

<mode> is the SDK's `mode`: `auto` (probe server/discover, fall back to initialize) or
`2026-07-28` (pinned: no probe). Lists the aggregate's tools, resources and prompts,
calls `everything__echo` and `fake__echo`, reads one resource and gets one prompt of
each of server-everything and the fake server; prints one JSON object with what it
saw, and exits non-zero on any failure.
"""

import asyncio
import json
import os
import sys

import httpx2
from mcp import StdioServerParameters
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client


def text_of(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def exercise(client: Client) -> dict:
    tools = await client.list_tools()
    resources = await client.list_resources()
    prompts = await client.list_prompts()
    echo = await client.call_tool("everything__echo", {"message": "from the sdk"})
    fake = await client.call_tool("fake__echo", {"message": "to the fake"})
    read = {}
    for server in ("everything", "fake"):
        uri = next(str(r.uri) for r in resources.resources if str(r.uri).startswith(f"mcpx://{server}/"))
        contents = (await client.read_resource(uri)).contents
        read[server] = bool(contents)
    greet = await client.get_prompt("fake__greet", {"name": "sdk"})
    simple = next(
        p.name for p in prompts.prompts if p.name.startswith("everything__") and not any(a.required for a in p.arguments or [])
    )
    everything_prompt = await client.get_prompt(simple, {})
    return {
        "protocol": client.protocol_version,
        "tools": [t.name for t in tools.tools],
        "resources": len(resources.resources),
        "prompts": [p.name for p in prompts.prompts],
        "echo": text_of(echo),
        "fake": text_of(fake),
        "read": read,
        "greet": greet.messages[0].content.text,
        "everything_prompt": len(everything_prompt.messages),
    }


async def main() -> None:
    mode, transport = sys.argv[1], sys.argv[2]
    if transport == "stdio":
        # The SDK passes a child only a safe subset of the environment: hand on mcpx's own.
        env = {k: v for k, v in os.environ.items() if k.startswith("MCPX_")}
        server = StdioServerParameters(command=sys.argv[3], args=["serve"], env=env)
        async with Client(server, mode=mode) as client:
            out = await exercise(client)
    else:
        headers = {"Authorization": f"Bearer {sys.argv[4]}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with Client(streamable_http_client(sys.argv[3], http_client=http), mode=mode) as client:
                out = await exercise(client)
    print(json.dumps(out))


asyncio.run(main())
