"""The official Python MCP SDK (2.3) as a client of mcpx in either era, for the era
matrix: each client era against each server era.

usage: sdk_era_client.py <mode> <servers> stdio <mcpx binary>    (through `mcpx serve`)
       sdk_era_client.py <mode> <servers> http <url> <token>      (streamable HTTP)

<mode> is `legacy` (initialize, 2025-11-25) or `2026-07-28` (pinned: no handshake).
<servers> is a comma-separated list of server names behind mcpx. For each server S it
calls `S__echo {message: "era"}`, reads the first resource whose URI starts with
`mcpx://S/`, gets the prompt `S__greet {name: "era"}` when S lists it, and calls
`S__ask {}` when S lists it, answering its elicitation with the name `py-<mode>`.
Prints one JSON object, `{"protocol", "servers": {S: {"echo", "read", "greet",
"ask"}}}` (null for what S does not offer), and exits non-zero on any failure.
"""

import asyncio
import json
import os
import sys

import httpx2
import mcp_types as types
from mcp import StdioServerParameters
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client


def text_of(result) -> str:
    if result.is_error:
        raise RuntimeError(f"a tool failed: {result.content}")
    return "".join(getattr(block, "text", "") for block in result.content)


async def elicit(context, params):
    return types.ElicitResult(action="accept", content={"name": f"py-{sys.argv[1]}"})


async def exercise(client: Client, servers: list) -> dict:
    tools = {t.name for t in (await client.list_tools()).tools}
    resources = [str(r.uri) for r in (await client.list_resources()).resources]
    prompts = {p.name for p in (await client.list_prompts()).prompts}
    seen = {}
    for server in servers:
        out = {"echo": text_of(await client.call_tool(f"{server}__echo", {"message": "era"}))}
        uri = next((u for u in resources if u.startswith(f"mcpx://{server}/")), None)
        out["read"] = (await client.read_resource(uri)).contents[0].text if uri else None
        greet = f"{server}__greet"
        out["greet"] = (await client.get_prompt(greet, {"name": "era"})).messages[0].content.text if greet in prompts else None
        ask = f"{server}__ask"
        out["ask"] = text_of(await client.call_tool(ask, {})) if ask in tools else None
        seen[server] = out
    return {"protocol": client.protocol_version, "servers": seen}


async def main() -> None:
    mode, servers, transport = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
    options = {"mode": mode, "elicitation_callback": elicit, "read_timeout_seconds": 60}
    if transport == "stdio":
        # The SDK passes a child only a safe subset of the environment: hand on mcpx's own.
        env = {k: v for k, v in os.environ.items() if k.startswith("MCPX_")}
        server = StdioServerParameters(command=sys.argv[4], args=["serve"], env=env)
        async with Client(server, **options) as client:
            out = await exercise(client, servers)
    else:
        headers = {"Authorization": f"Bearer {sys.argv[5]}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with Client(streamable_http_client(sys.argv[4], http_client=http), **options) as client:
                out = await exercise(client, servers)
    print(json.dumps(out))


asyncio.run(main())
