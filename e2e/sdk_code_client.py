"""The official Python MCP SDK as a client of `mcpx serve --code`, for the end-to-end tests.

usage: sdk_code_client.py <mcpx binary> <code> [<mode>]

Lists the tools (expects mcpx_types and mcpx_exec), asks mcpx_types for the declarations
of server `memory`, runs <code> with mcpx_exec, then tries to read /etc/passwd the same
way; prints one JSON object with what it saw, and exits non-zero on any failure. With
<mode> (the SDK's `mode`, e.g. `2026-07-28`), it uses the SDK's `Client` in that mode
instead of a `ClientSession` (which speaks the `initialize` era).
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client import Client


def text_of(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def exercise(client, protocol) -> dict:
    listed = await client.list_tools()
    types = await client.call_tool("mcpx_types", {"servers": ["memory"]})
    ran = await client.call_tool("mcpx_exec", {"code": CODE})
    escape = await client.call_tool("mcpx_exec", {"code": "return await Deno.readTextFile('/etc/passwd')"})
    return {
        "protocol": protocol,
        "tools": sorted(tool.name for tool in listed.tools),
        "types": text_of(types),
        "exec": text_of(ran),
        "exec_error": bool(ran.is_error),
        "escape": text_of(escape),
        "escape_error": bool(escape.is_error),
    }


async def main(mcpx: str, mode: str | None) -> dict:
    params = StdioServerParameters(command=mcpx, args=["serve", "--code"], env=dict(os.environ))
    if mode:
        async with Client(params, mode=mode) as client:
            return await exercise(client, client.protocol_version)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            initialized = await session.initialize()
            return await exercise(session, initialized.protocol_version)


if __name__ == "__main__":
    CODE = sys.argv[2]
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[3] if len(sys.argv) > 3 else None))))
