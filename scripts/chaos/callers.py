"""The eight callers, each a thread calling back to back until the run ends: `mcpx call`
processes (`ShellCaller`), MCP clients over `mcpx serve`'s stdio (`ServeCaller`) and over the
daemon's `/mcp` on its socket (`HttpCaller`). Every call carries a token of its own that the
answer must echo; each ends in the ledger as answered, failed (and how), wrong, hang or
undocumented (a failure that neither the documentation nor a fault at that time explains)."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import threading
from pathlib import Path

from bench.common import BenchError, initialize_params, jsonrpc_line, texts
from bench.http_client import HttpMcp, UnixHTTPConnection
from bench.mcpx import Mcpx
from bench.procs import Spawned
from bench.stdio_client import LineReader

from .world import CALL_TIMEOUT_S, DAEMON_FAULTS, HANG_AFTER_S, Call, Config, Ledger, Timeline, now

BIG_BYTES = 1024 * 1024  # the text of a "big" call's answer (and of its request)
SHELL_EXITS = {3: "exit 3 (daemon error)", 4: "exit 4 (server error)", 5: "exit 5 (timeout)"}
# (op, weight): echo (after up to 200 ms), progress (3 notifications, then the token), big (1 MiB
# each way), cancel (Ctrl-C, or notifications/cancelled, during a 3 s echo), timeout (a 3 s echo
# with `--timeout 500ms`).
SHELL_OPS = (("echo", 4), ("progress", 2), ("big", 1), ("cancel", 1), ("timeout", 1))
SERVE_OPS = (("echo", 4), ("progress", 2), ("big", 1), ("cancel", 1))
HTTP_OPS = (("echo", 4), ("progress", 2), ("big", 1))


class Shared:
    """What every caller reads: the mcpx, the configuration, the timeline, the ledger, the stop
    flag, the temporary directory, and the one call whose expected answer is altered on purpose
    (`mismatch`, a caller name, to prove that a wrong answer is caught)."""

    def __init__(
        self, m: Mcpx, config: Config, timeline: Timeline, ledger: Ledger, tmp: Path, mismatch: str | None
    ) -> None:
        self.m, self.config, self.timeline, self.ledger, self.tmp = m, config, timeline, ledger, tmp
        self.stop = threading.Event()
        self.mismatch = mismatch
        self.daemon_waits = 0  # times an MCP client found no daemon to connect to, and waited
        self.started = now()
        self.misrouted: list[str] = []  # progress notifications that reached a client not theirs
        self.progress_seen = 0  # progress notifications the `mcpx serve` clients checked


def pick(rng: random.Random, weighted) -> str:
    return rng.choices([k for k, _ in weighted], [w for _, w in weighted])[0]


def arguments(rng: random.Random, op: str, token: str) -> tuple[str, dict]:
    """The tool and arguments of an op; every answer is the text `token`, or for "big" the
    1 MiB message (which starts with it)."""
    if op == "progress":
        return "progress", {"count": 3, "interval_ms": 40, "message": token}
    if op == "big":
        return "echo", {"message": token + "x" * (BIG_BYTES - len(token))}
    if op in ("cancel", "timeout"):
        return "echo", {"message": token, "delay_ms": 3000}
    return "echo", {"message": token, "delay_ms": rng.randrange(200)}


class Caller(threading.Thread):
    path = ""
    ops: tuple = ()

    def __init__(self, name: str, shared: Shared, seed: int) -> None:
        super().__init__(name=name, daemon=True)
        self.shared = shared
        self.rng = random.Random(f"{seed}-{name}")
        self.n = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.shared.stop.is_set():
                self.n += 1
                op = pick(self.rng, self.ops)
                server = self.rng.choice(self.servers())
                token = f"{self.name}-{self.n}-{self.rng.getrandbits(32):08x}"
                tool, args = arguments(self.rng, op, token)
                expected = args["message"]
                call = Call(self.name, self.path, server, op, token, now())
                self.one(call, tool, args, expected)
                self.shared.ledger.add(call)
        except BaseException as e:  # noqa: BLE001 - the driver's own failure, reported by main
            self.error = e
        finally:
            self.close()

    def servers(self) -> list[str]:
        return list(Config.STATIC)

    def one(self, call: Call, tool: str, args: dict, expected: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def result(self, call: Call, result, expected: str) -> None:
        """A tools/call result: the expected text (answered), a tool error (failed), or anything
        else (wrong: another caller's answer, or a corrupted one)."""
        got = texts(result)
        if self.shared.mismatch == self.name and got == [expected]:  # --self-check, once
            self.shared.mismatch = None
            expected += "-deliberate-mismatch"
        if isinstance(result, dict) and result.get("isError"):
            call.outcome, call.kind, call.detail = "failed", "isError result", " ".join(map(str, got))[:300]
        elif got == [expected]:
            call.outcome = "answered"
        else:
            call.outcome, call.kind = "wrong", "wrong answer"
            call.detail = f"expected {expected[:80]!r}, got {json.dumps(result)[:300]}"

    def explained(self, call: Call, kind: str, detail: str, since: float | None = None) -> None:
        """A failure that is expected only around a fault of the daemon: failed if one overlaps
        the call (or came after `since`), else undocumented."""
        call.end = now()
        ok = self.shared.timeline.during(call.start if since is None else since, call.end, DAEMON_FAULTS)
        call.outcome, call.kind, call.detail = ("failed" if ok else "undocumented"), kind, detail[:500]


class ShellCaller(Caller):
    """`mcpx call --json --timeout 20s SERVER.TOOL -` with the arguments on stdin; "cancel" sends
    SIGINT (Ctrl-C) after 0.1 to 1 s, "timeout" passes `--timeout 500ms`. The shell callers also
    call the dynamic servers."""

    path = "shell"
    ops = SHELL_OPS

    def servers(self) -> list[str]:
        return self.shared.config.names()

    def one(self, call: Call, tool: str, args: dict, expected: str) -> None:
        m = self.shared.m
        timeout = "500ms" if call.op == "timeout" else f"{CALL_TIMEOUT_S}s"
        argv = [str(m.binary), "call", "--json", "--timeout", timeout, f"{call.server}.{tool}", "-"]
        proc = subprocess.Popen(
            argv,
            env=m.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        timer = None
        if call.op == "cancel":
            timer = threading.Timer(
                self.rng.uniform(0.1, 1.0), lambda: None if proc.poll() is not None else proc.send_signal(signal.SIGINT)
            )
            timer.start()
        try:
            out, err = proc.communicate(jsonrpc_line(args), timeout=HANG_AFTER_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            call.outcome, call.kind, call.detail = "hang", "hang", f"`mcpx call` still running after {HANG_AFTER_S}s"
            return
        finally:
            if timer is not None:
                timer.cancel()
        call.end = now()
        rc = proc.returncode
        # The last line that is not a progress notification (`--json` prints those on stderr).
        stderr = [x for x in err.decode(errors="replace").strip().splitlines() if not x.startswith('{"jsonrpc"')]
        said = stderr[-1] if stderr else ""
        try:  # with --json an error is {"error": {"kind", "message"}} on stdout
            said = json.loads(out)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            pass
        if rc == 0:
            try:
                self.result(call, json.loads(out), expected)
            except ValueError:
                call.outcome, call.kind, call.detail = "wrong", "wrong answer", f"not JSON: {out[:300]!r}"
        elif rc == 5 and call.op == "timeout":
            call.outcome, call.kind, call.detail = "failed", "exit 5 (the --timeout 500ms asked for)", said[:300]
        elif rc in SHELL_EXITS:
            call.outcome, call.kind, call.detail = "failed", SHELL_EXITS[rc], said[:300]
        elif (
            rc in (130, -signal.SIGINT) and call.op == "cancel"
        ):  # killed by SIGINT before its handler: 130 to a shell too
            call.outcome, call.kind = "failed", "exit 130 (cancelled)"
        elif rc == 2 and self.shared.config.removed_by(call.server, call.end):
            call.outcome, call.kind, call.detail = "failed", "exit 2 (server removed)", said[:300]
        else:
            call.outcome, call.kind = "undocumented", f"exit {rc}"
            call.detail = f"stdout {out[-300:]!r}; stderr {' | '.join(stderr)[-500:]}"


def meta(args: dict, tool: str, server: str, op: str, token: str) -> dict:
    """The tools/call params through the aggregate (`<server>__<tool>`), with a progress token
    for a "progress" op."""
    params: dict = {"name": f"{server}__{tool}", "arguments": args}
    if op == "progress":
        params["_meta"] = {"progressToken": token}
    return params


class ServeCaller(Caller):
    """An MCP client of `mcpx serve` (stdio), one request at a time. "cancel" sends
    `notifications/cancelled` if no answer came within 0.1 to 1 s and then stops waiting (MCP
    2025-11-25, Cancellation: the answer may still come, and is ignored, but it is checked: a
    late answer must be the cancelled call's own). When `mcpx serve` exits, the call in flight is
    undocumented (serve outlives the daemon) and a new `mcpx serve` is started."""

    path = "serve"
    ops = SERVE_OPS

    def __init__(self, name: str, shared: Shared, seed: int) -> None:
        super().__init__(name, shared, seed)
        self.proc: Spawned | None = None
        self.reader: LineReader | None = None
        self.next_id = 1
        self.cancelled: dict[int, tuple[Call, str]] = {}  # id -> (the call, its expected answer)
        self.serves = 0
        self.tokens: set[str] = set()  # every call's token, its progress token too

    def open(self) -> None:
        self.close()
        self.serves += 1
        m = self.shared.m
        log = self.shared.tmp / f"{self.name}-{self.serves}.log"
        self.proc = Spawned(f"{self.name} (mcpx serve)", [str(m.binary), "serve"], log, env=m.env, stdio=True)
        self.reader = LineReader(self.proc.proc.stdout.fileno())
        self.cancelled.clear()
        id_ = self.send("initialize", initialize_params())
        got = self.wait(id_, now() + HANG_AFTER_S)
        if not isinstance(got, dict) or "result" not in got:
            raise BenchError(f"{self.name}: `mcpx serve` did not answer initialize: {got!r}{self.proc.stderr_tail()}")
        self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def close(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    def write(self, msg: dict) -> bool:
        try:
            self.proc.proc.stdin.write(jsonrpc_line(msg) + b"\n")
            self.proc.proc.stdin.flush()
            return True
        except OSError:
            return False

    def send(self, method: str, params: dict) -> int:
        id_ = self.next_id
        self.next_id += 1
        self.write({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})
        return id_

    def wait(self, id_: int, deadline: float):
        """The response to `id_`; "eof" when serve closed its stdout, "late" at the deadline.
        Requests from the server are answered; late answers to cancelled calls are checked."""
        while True:
            if now() >= deadline:
                return "late"
            try:
                msg = self.reader.message(deadline, self.name)
            except BenchError as e:
                if now() >= deadline:
                    return "late"
                raise BenchError(f"{self.name}: `mcpx serve` wrote something unreadable: {e}") from e
            if msg is None:
                return "eof"
            if "method" in msg:
                if "id" in msg:
                    self.answer_request(msg)
                elif msg["method"] == "notifications/progress":
                    self.check_progress(msg)
                continue
            rid = msg.get("id")
            if rid == id_:
                return msg
            late = self.cancelled.pop(rid, None) if isinstance(rid, int) else None
            if late is None:
                raise BenchError(f"{self.name}: an answer to no request of this client: {json.dumps(msg)[:300]}")
            call, expected = late
            if "result" in msg:
                self.result(call, msg["result"], expected)
                if call.outcome == "answered":  # it was answered after all, and correctly
                    call.kind = call.detail = ""

    def check_progress(self, msg: dict) -> None:
        """A progress notification must carry the token of one of this client's calls (the one
        in flight, or one cancelled): another's is a misrouted notification."""
        token = (msg.get("params") or {}).get("progressToken")
        self.shared.progress_seen += 1
        if token not in self.tokens:
            self.shared.misrouted.append(f"{self.name}: {json.dumps(msg)[:300]}")

    def answer_request(self, req: dict) -> None:
        if req["method"] == "roots/list":
            self.write({"jsonrpc": "2.0", "id": req["id"], "result": {"roots": []}})
        elif req["method"] == "ping":
            self.write({"jsonrpc": "2.0", "id": req["id"], "result": {}})
        else:
            error = {"code": -32601, "message": f"the chaos soak's client does not serve {req['method']}"}
            self.write({"jsonrpc": "2.0", "id": req["id"], "error": error})

    def one(self, call: Call, tool: str, args: dict, expected: str) -> None:
        if self.proc is None or self.proc.proc.poll() is not None:
            self.open()
        self.tokens.add(call.token)
        id_ = self.send("tools/call", meta(args, tool, call.server, call.op, call.token))
        deadline = call.start + HANG_AFTER_S
        if call.op == "cancel":
            got = self.wait(id_, now() + self.rng.uniform(0.1, 1.0))
            if got == "late":
                self.write(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": {"requestId": id_, "reason": "chaos"},
                    }
                )
                call.outcome, call.kind = "failed", "cancelled by the client"
                self.cancelled[id_] = (call, expected)
                return
        else:
            got = self.wait(id_, deadline)
        call.end = now()
        if got == "late":
            call.outcome, call.kind, call.detail = "hang", "hang", f"no answer from `mcpx serve` within {HANG_AFTER_S}s"
            self.close()
        elif got == "eof":
            status = self.proc.proc.wait()
            call.outcome, call.kind = "undocumented", "mcpx serve exited"
            call.detail = f"status {status}{self.proc.stderr_tail()}"[:500]
            self.close()
        elif "error" in got:
            err = got["error"] if isinstance(got["error"], dict) else {}
            call.outcome, call.kind, call.detail = (
                "failed",
                f"JSON-RPC {err.get('code')}",
                str(err.get("message"))[:300],
            )
        else:
            self.result(call, got.get("result"), expected)


class HttpCaller(Caller):
    """An MCP client of the daemon's `/mcp` on its unix socket (streamable HTTP), one request at
    a time, each on a new connection. While no daemon listens it waits (no call is counted).
    A broken connection, an SSE stream that ends without the answer, or an unknown session (404:
    a new daemon, or an upgraded one) is expected only around a fault of the daemon; the session
    is then opened again."""

    path = "http"
    ops = HTTP_OPS

    def __init__(self, name: str, shared: Shared, seed: int) -> None:
        super().__init__(name, shared, seed)
        sock = str(Path(shared.m.env["MCPX_RUNTIME_DIR"]) / "daemon.sock")

        def connection() -> UnixHTTPConnection:
            c = UnixHTTPConnection(sock)
            c.timeout = HANG_AFTER_S
            return c

        self.client = HttpMcp(name, connection)
        self.opened = False
        self.opened_at = 0.0  # when the session was opened: a later fault of the daemon ends it

    def close(self) -> None:
        self.client.close()

    def ensure_open(self) -> None:
        """Connects, and opens a session when there is none, waiting while no daemon answers."""
        while not self.shared.stop.is_set():
            try:
                self.client.connect()
                if not self.opened:
                    self.client.session = None
                    self.client.version = None
                    self.client.open()
                    self.opened, self.opened_at = True, now()
                    self.client.connect()
                return
            except (OSError, BenchError):
                self.shared.daemon_waits += 1
                self.shared.stop.wait(0.1)

    def one(self, call: Call, tool: str, args: dict, expected: str) -> None:
        self.ensure_open()
        call.start = now()
        msg = {
            "jsonrpc": "2.0",
            "id": self.client.new_id(),
            "method": "tools/call",
            "params": meta(args, tool, call.server, call.op, call.token),
        }
        try:
            status, got = self.client.post(msg, "tools/call")
        except BenchError as e:
            if now() - call.start >= HANG_AFTER_S - 1:
                call.outcome, call.kind, call.detail = "hang", "hang", str(e)[:300]
            else:
                self.explained(call, "connection lost", str(e))
            self.opened = False
            return
        finally:
            self.client.close()
        call.end = now()
        if status == 404:
            self.explained(call, "session lost (HTTP 404)", json.dumps(got)[:300], since=self.opened_at)
            self.opened = False
        elif status != 200:
            call.outcome, call.kind, call.detail = "undocumented", f"HTTP {status}", json.dumps(got)[:300]
            self.opened = False
        elif not isinstance(got, dict):
            self.explained(call, "stream ended without the answer", "")
            self.opened = False
        elif "error" in got:
            err = got["error"] if isinstance(got["error"], dict) else {}
            call.outcome, call.kind, call.detail = (
                "failed",
                f"JSON-RPC {err.get('code')}",
                str(err.get("message"))[:300],
            )
        else:
            self.result(call, got.get("result"), expected)
