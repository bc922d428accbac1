"""The MCP client over a process's stdin and stdout (newline-delimited JSON-RPC): the direct
client of sections 1 to 3 (a server spawned for each session), and the stdio side of sections 7
to 9 (the fake server or `mcpx serve`, one pipe that many callers share, requests multiplexed by
id)."""

from __future__ import annotations

import json
import os
import queue
import select
import subprocess
import threading
import time

from .client import McpClient
from .common import STEP_TIMEOUT, BenchError, check_echo, echo_request, jsonrpc_line


class LineReader:
    """Lines, and newline-delimited JSON messages, from a pipe, with a deadline on each read."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = b""

    def line(self, deadline: float, what: str) -> bytes | None:
        """The next line, or None at end of file."""
        while True:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                line, self.buf = self.buf[:nl], self.buf[nl + 1 :]
                return line
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError(f"{what}: nothing read within {STEP_TIMEOUT:.0f}s")
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                if self.buf.strip():
                    raise BenchError(f"{what}: stdout closed in the middle of a line")
                return None
            self.buf += chunk

    def message(self, deadline: float, what: str) -> dict | None:
        """The next JSON message, or None at end of file."""
        while True:
            line = self.line(deadline, what)
            if line is None:
                return None
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
            except ValueError as e:
                raise BenchError(f"{what}: the server wrote a line that is not JSON ({e}): {line[:200]!r}") from e
            if not isinstance(msg, dict):
                raise BenchError(f"{what}: the server wrote a JSON line that is not an object: {line[:200]!r}")
            return msg


class StdioMcp(McpClient):
    """One MCP session on the pipes of `proc`. A request from the server fails the benchmark,
    unless `answer_requests`: then `roots/list` and `ping` are answered, anything else refused."""

    def __init__(self, proc: subprocess.Popen, label: str, stderr_tail, answer_requests: bool = False) -> None:
        super().__init__(label)
        self.proc = proc
        self.stderr_tail = stderr_tail  # () -> the end of the server's stderr, for an error message
        self.answer_requests = answer_requests
        self.fd = proc.stdin.fileno()
        self.reader = LineReader(proc.stdout.fileno())

    def write(self, msg: dict) -> None:
        try:
            os.write(self.fd, jsonrpc_line(msg) + b"\n")
        except OSError as e:  # a broken pipe: the server is gone
            raise BenchError(f"{self.label}: writing to the server: {e}{self.stderr_tail()}") from e

    def read(self, what: str, deadline: float | None = None) -> dict:
        """The next response (a message without a method); notifications are skipped."""
        while True:
            got = self.reader.message(deadline or time.monotonic() + STEP_TIMEOUT, f"{self.label}: {what}")
            if got is None:
                raise BenchError(f"{self.label}: {what}: the server closed its stdout{self.stderr_tail()}")
            if "method" not in got:
                return got
            if "id" in got:
                self._answer(got, what)

    def _answer(self, req: dict, what: str) -> None:
        if not self.answer_requests:
            raise BenchError(
                f"{self.label}: {what}: a request from the server, which this client does not serve: {json.dumps(req)[:300]}"
            )
        if req["method"] == "roots/list":
            self.write({"jsonrpc": "2.0", "id": req["id"], "result": {"roots": []}})
        elif req["method"] == "ping":
            self.write({"jsonrpc": "2.0", "id": req["id"], "result": {}})
        else:
            error = {"code": -32601, "message": f"not supported by this benchmark client: {req['method']}"}
            self.write({"jsonrpc": "2.0", "id": req["id"], "error": error})

    def exchange(self, msg: dict, what: str) -> dict:
        self.write(msg)
        return self.read(what, time.monotonic() + STEP_TIMEOUT)

    def notify(self, method: str) -> None:
        self.write({"jsonrpc": "2.0", "method": method})

    def drain(self, what: str, deadline: float) -> None:
        """Reads to the end of the server's output (any late messages)."""
        while self.reader.message(deadline, f"{self.label}: {what}") is not None:
            pass

    def multiplexed(self, callers: int, seconds: float, tool: str) -> tuple[int, float, list[float]]:
        """`callers` callers calling the echo tool `tool` back to back on the one pipe: a writer
        sends each caller's next call as soon as its answer is in, a reader thread matches the
        answers to the callers by id; so at most `callers` calls are in flight. Returns (calls,
        seconds from the start to the last answer, the latency of every call)."""
        todo: queue.SimpleQueue = queue.SimpleQueue()  # callers whose next call is due; None: the end
        outstanding: dict[int, tuple[int, str, float]] = {}  # id -> (caller, message, sent at)
        lats: list[float] = []
        errors: list[BaseException] = []
        last = [0.0]
        start = time.perf_counter()
        end = start + seconds

        def read() -> None:
            try:
                done = 0
                while done < callers:
                    got = self.read("tools/call")
                    t1 = time.perf_counter()
                    rid = got.get("id")
                    entry = outstanding.pop(rid, None) if isinstance(rid, int) else None
                    if entry is None:
                        raise BenchError(f"{self.label}: an answer to no outstanding request: {json.dumps(got)[:300]}")
                    caller, message, t0 = entry
                    check_echo(f"{self.label}: tools/call", got, got["id"], message)
                    lats.append(t1 - t0)
                    if t1 < end:
                        todo.put(caller)
                    else:
                        done += 1
                        last[0] = t1
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
            todo.put(None)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        for c in range(callers):
            todo.put(c)
        while (c := todo.get()) is not None:
            id_ = self.new_id()
            message = f"c{c}-{id_}"
            outstanding[id_] = (c, message, time.perf_counter())
            self.write(echo_request(id_, tool, message))
        reader.join(STEP_TIMEOUT)
        if reader.is_alive():
            raise BenchError(f"{self.label}: the reader did not finish")
        if errors:
            e = errors[0]
            raise e if isinstance(e, BenchError) else BenchError(f"{self.label}: {type(e).__name__}: {e}")
        return len(lats), last[0] - start, lats
