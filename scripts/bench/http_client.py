"""The MCP client over streamable HTTP (MCP 2025-11-25, Transports): POSTs on a keep-alive
HTTP/1.1 connection, to the daemon's control socket (a unix socket) or to a TCP port, JSON or SSE
answers, carrying Mcp-Session-Id (and MCP-Protocol-Version) after `initialize`."""

from __future__ import annotations

import http.client
import json
import socket

from .client import McpClient
from .common import STEP_TIMEOUT, BenchError, jsonrpc_line

ACCEPT_ANY = "application/json, text/event-stream"


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP/1.1 to the daemon's control socket (a unix socket); keep-alive, as http.client does."""

    def __init__(self, socket_path: str) -> None:
        super().__init__("localhost", timeout=STEP_TIMEOUT)
        self.socket_path = socket_path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class TcpHTTPConnection(http.client.HTTPConnection):
    """HTTP/1.1 to 127.0.0.1:port with TCP_NODELAY."""

    def __init__(self, port: int) -> None:
        super().__init__("127.0.0.1", port, timeout=STEP_TIMEOUT)

    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class HttpMcp(McpClient):
    """One MCP session on an endpoint; `connection` makes a new (unconnected) HTTP connection.
    `accept` is the Accept header; `version_header` sends MCP-Protocol-Version after
    `initialize`; `notified` are the HTTP statuses `notifications/initialized` may get."""

    def __init__(
        self,
        label: str,
        connection,
        path: str = "/mcp",
        accept: str = ACCEPT_ANY,
        version_header: bool = True,
        notified: tuple[int, ...] = (200, 202, 204),
    ) -> None:
        super().__init__(label)
        self.connection, self.path, self.accept = connection, path, accept
        self.version_header, self.notified = version_header, notified
        self.session: str | None = None
        self.conn: http.client.HTTPConnection | None = None

    def connect(self) -> None:
        self.close()
        self.conn = self.connection()
        self.conn.connect()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def post(self, msg: dict, what: str) -> tuple[int, dict | None]:
        """(HTTP status, the JSON-RPC response to `msg`, or None for an empty body)."""
        headers = {"Content-Type": "application/json", "Accept": self.accept}
        if self.session is not None:
            headers["Mcp-Session-Id"] = self.session
        if self.version is not None and self.version_header:
            headers["MCP-Protocol-Version"] = self.version
        try:
            self.conn.request("POST", self.path, body=jsonrpc_line(msg), headers=headers)
            resp = self.conn.getresponse()
            if msg.get("method") == "initialize" and resp.status == 200:
                self.session = resp.getheader("Mcp-Session-Id")
            if (resp.getheader("Content-Type") or "").startswith("text/event-stream"):
                answer = self._sse(resp, msg.get("id"), what)
            else:
                body = resp.read()
                answer = None
                if body.strip():
                    try:
                        answer = json.loads(body)
                    except ValueError:
                        raise BenchError(
                            f"{self.label}: {what}: HTTP {resp.status} with a body that is not JSON: {body[:300]!r}"
                        ) from None
        except (OSError, http.client.HTTPException) as e:
            raise BenchError(f"{self.label}: {what}: {type(e).__name__}: {e}") from e
        return resp.status, answer

    def _sse(self, resp, id_, what: str) -> dict | None:
        """The response to request `id_` among the events of an SSE answer (read to its end)."""
        answer = None
        data: list[bytes] = []
        while True:
            line = resp.readline()
            if line and line.strip(b"\r\n"):
                line = line.rstrip(b"\r\n")
                if line.startswith(b"data:"):
                    data.append(line[6:] if line.startswith(b"data: ") else line[5:])
                continue
            if data:  # a blank line (or the end) ends an event
                try:
                    msg = json.loads(b"\n".join(data))
                except ValueError:
                    raise BenchError(
                        f"{self.label}: {what}: an SSE event that is not JSON: {b''.join(data)[:300]!r}"
                    ) from None
                data = []
                if isinstance(msg, dict) and "method" in msg and "id" in msg:
                    raise BenchError(
                        f"{self.label}: {what}: a request from the server, which this client does not serve: {json.dumps(msg)[:300]}"
                    )
                if isinstance(msg, dict) and "method" not in msg and msg.get("id") == id_:
                    answer = msg
            if not line:
                return answer

    def exchange(self, msg: dict, what: str) -> dict:
        status, answer = self.post(msg, what)
        if status != 200 or not isinstance(answer, dict):
            raise BenchError(f"{self.label}: {what}: HTTP {status}: {json.dumps(answer)[:300]}")
        return answer

    def notify(self, method: str) -> None:
        status, _ = self.post({"jsonrpc": "2.0", "method": method}, method)
        if status not in self.notified:
            raise BenchError(f"{self.label}: {method}: HTTP {status}, not {' or '.join(map(str, self.notified))}")

    def end(self, expect: int | None = None) -> None:
        """DELETE of the session, if there is one, on the open connection (or a new one, closed
        after). With `expect`, its HTTP status must be that; without, nothing is checked (a proxy
        may not support it)."""
        if self.session is None:
            return
        try:
            if self.conn is None:
                self.connect()
            self.conn.request("DELETE", self.path, headers={"Mcp-Session-Id": self.session})
            resp = self.conn.getresponse()
            resp.read()
        except (OSError, http.client.HTTPException) as e:
            if expect is not None:
                raise BenchError(f"{self.label}: DELETE: {type(e).__name__}: {e}") from e
            return
        finally:
            self.close()
        if expect is not None and resp.status != expect:
            raise BenchError(f"{self.label}: DELETE (session {self.session}): HTTP {resp.status}, not {expect}")
