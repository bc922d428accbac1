"""What the two MCP clients (`StdioMcp` over a process's pipes, `HttpMcp` over streamable HTTP)
share: request ids, the opening handshake, the tool list, and one checked ping or echo call."""

from __future__ import annotations

import json
import time

from .common import BenchError, check_answer, check_tools, initialize_params, proxy_request


class McpClient:
    """A client session; a transport supplies `exchange` (one request, its response) and `notify`."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.next_id = 1
        self.initialized_at = 0.0  # time.perf_counter() when initialize was answered
        self.version: str | None = None  # the protocol version the server chose

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def exchange(self, msg: dict, what: str) -> dict:
        """Sends the request `msg`; returns the JSON-RPC response to it."""
        raise NotImplementedError

    def notify(self, method: str) -> None:
        raise NotImplementedError

    def request(self, method: str, params: dict | None = None) -> dict:
        """A request with the next id; returns its result (an error answer fails)."""
        id_ = self.new_id()
        msg: dict = {"jsonrpc": "2.0", "id": id_, "method": method}
        if params is not None:
            msg["params"] = params
        got = self.exchange(msg, method)
        if got.get("id") != id_ or "error" in got or not isinstance(got.get("result"), dict):
            raise BenchError(f"{self.label}: {method}: {json.dumps(got)[:300]}")
        return got["result"]

    def open(self, tool: str | None = None) -> dict:
        """`initialize` (its answer checked) and `notifications/initialized`; then, given a tool,
        `tools/list`, which must offer it. Returns the initialize result."""
        init = self.request("initialize", initialize_params())
        if not isinstance(init.get("protocolVersion"), str) or not isinstance(init.get("serverInfo"), dict):
            raise BenchError(f"{self.label}: initialize: not an initialize result: {json.dumps(init)[:300]}")
        self.initialized_at = time.perf_counter()
        self.version = init["protocolVersion"]
        self.notify("notifications/initialized")
        if tool is not None:
            check_tools(self.label, self.list_tools(), tool)
        return init

    def list_tools(self) -> list:
        """Every tool of `tools/list`, following its pages."""
        tools: list = []
        params: dict = {}
        while True:
            page = self.request("tools/list", params or None)
            if not isinstance(page.get("tools"), list):
                raise BenchError(f"{self.label}: tools/list: no `tools` array: {json.dumps(page)[:300]}")
            tools += page["tools"]
            if not page.get("nextCursor"):
                return tools
            params = {"cursor": page["nextCursor"]}

    def call(self, kind: str, tool: str, message_prefix: str) -> tuple[float, float]:
        """One ping (`kind` "ping") or call of the echo tool `tool` (`kind` "call"), checked;
        returns (sent at, answered at)."""
        id_ = self.new_id()
        message = f"{message_prefix}-{id_}"
        msg = proxy_request(kind, id_, tool, message)
        t0 = time.perf_counter()
        got = self.exchange(msg, kind)
        t1 = time.perf_counter()
        check_answer(f"{self.label}: {kind}", kind, got, id_, message)
        return t0, t1
