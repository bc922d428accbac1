"""The official Python MCP SDK (2.3) as a modern client of the fake server's modern era.

usage: sdk_fake_modern.py <mode> stdio <fake server binary>
       sdk_fake_modern.py <mode> http <url>

<mode> is the SDK's connect mode: `auto` (discover, then modern) or `2026-07-28`
(pinned). Lists and calls tools, resources and prompts, answers an elicitation
asked with an InputRequiredResult, and receives a tools/list_changed on a
subscriptions/listen stream; prints one JSON object with what it saw, and exits
non-zero on any failure.
"""

import asyncio
import json
import sys

import mcp_types as types
from mcp import Client, StdioServerParameters


def text_of(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def elicited(context, params):
    return types.ElicitResult(action="accept", content={"name": "Ada", "age": 36})


async def exercise(client: Client) -> dict:
    tools = await client.list_tools()
    echo = await client.call_tool("echo", {"message": "modern"})
    resources = await client.list_resources()
    read = await client.read_resource("fake://static")
    prompt = await client.get_prompt("greet", {"name": "Ada"})
    elicit = await client.call_tool("elicit", {})
    async with client.listen(tools_list_changed=True) as sub:
        await client.call_tool("add_tool", {"name": "fresh"})
        event = await asyncio.wait_for(sub.__aiter__().__anext__(), 10)
    return {
        "protocol": client.protocol_version,
        "tools": len(tools.tools),
        "echo": text_of(echo),
        "resources": [r.uri for r in resources.resources][:1],
        "read": read.contents[0].text,
        "prompt": prompt.messages[0].content.text,
        "elicit": text_of(elicit),
        "event": type(event).__name__,
    }


async def main() -> None:
    mode, transport, target = sys.argv[1], sys.argv[2], sys.argv[3]
    server = target if transport == "http" else StdioServerParameters(command=target, args=["--era", "2026-07-28"])
    async with Client(server, mode=mode, elicitation_callback=elicited, read_timeout_seconds=20) as client:
        out = await exercise(client)
    print(json.dumps(out))


asyncio.run(main())
