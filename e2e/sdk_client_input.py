"""The official Python MCP SDK as a client of mcpx in MCP 2026-07-28, answering the
input a legacy server behind mcpx asks for, for the end-to-end tests.

usage: sdk_client_input.py stdio <mcpx binary>     (through `mcpx serve`)
       sdk_client_input.py http <url> <token>       (streamable HTTP at the daemon's /mcp)

Pinned to 2026-07-28, with an elicitation callback (it answers the fake server's form
with the name `sdk-<transport>` and age 7) and a sampling callback (it answers
`sampled by the sdk`). Calls `fake__elicit` and `fake__sample`; the SDK receives each
question as an `InputRequiredResult` and retries with the answer. Prints one JSON
object with what the calls returned and what the callbacks were asked, and exits
non-zero on any failure.
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

ASKED: list = []


def text_of(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def elicit(context, params):
    ASKED.append({"elicit": params.message})
    return types.ElicitResult(action="accept", content={"name": f"sdk-{sys.argv[1]}", "age": 7})


async def sample(context, params):
    ASKED.append({"sample": params.messages[0].content.text})
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="sampled by the sdk"), model="sdk-model"
    )


async def exercise(client: Client) -> dict:
    elicited = await client.call_tool("fake__elicit", {})
    sampled = await client.call_tool("fake__sample", {})
    return {
        "protocol": client.protocol_version,
        "elicit": text_of(elicited),
        "elicit_error": bool(elicited.is_error),
        "sample": text_of(sampled),
        "asked": ASKED,
    }


async def main() -> None:
    transport = sys.argv[1]
    options = {"mode": "2026-07-28", "elicitation_callback": elicit, "sampling_callback": sample}
    if transport == "stdio":
        # The SDK passes a child only a safe subset of the environment: hand on mcpx's own.
        env = {k: v for k, v in os.environ.items() if k.startswith("MCPX_")}
        server = StdioServerParameters(command=sys.argv[2], args=["serve"], env=env)
        async with Client(server, **options) as client:
            out = await exercise(client)
    else:
        headers = {"Authorization": f"Bearer {sys.argv[3]}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with Client(streamable_http_client(sys.argv[2], http_client=http), **options) as client:
                out = await exercise(client)
    print(json.dumps(out))


asyncio.run(main())
