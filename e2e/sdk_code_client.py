"""The official Python MCP SDK as a client of `mcpx serve --code`, for the end-to-end tests.

usage: sdk_code_client.py <mcpx binary> <code>

Lists the tools (expects mcpx_types and mcpx_exec), asks mcpx_types for the declarations
of server `memory`, runs <code> with mcpx_exec, then tries to read /etc/passwd the same
way; prints one JSON object with what it saw, and exits non-zero on any failure.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client


def text_of(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def main(mcpx: str, code: str) -> dict:
    params = StdioServerParameters(command=mcpx, args=["serve", "--code"], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            types = await session.call_tool("mcpx_types", {"servers": ["memory"]})
            ran = await session.call_tool("mcpx_exec", {"code": code})
            escape = await session.call_tool("mcpx_exec", {"code": "return await Deno.readTextFile('/etc/passwd')"})
            return {
                "tools": sorted(tool.name for tool in listed.tools),
                "types": text_of(types),
                "exec": text_of(ran),
                "exec_error": bool(ran.is_error),
                "escape": text_of(escape),
                "escape_error": bool(escape.is_error),
            }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
