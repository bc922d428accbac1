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
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import select
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
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


def report(args, rows: list[Row], sup: SupResults, info: dict) -> str:
    lines = [
        "# Benchmarks",
        "",
        f"Produced by `{args.command}` on {info['date']}; every number below comes from that one run.",
        "",
        f"- machine: {info['nproc']} CPUs (`nproc`), {info['cpu']}, {info['mem']} RAM, Linux {info['kernel']}",
        f"- {info['mcpx_version']}, `{args.profile}` build (`{info['mcpx_rel']}`), commit {info['commit']}",
        f"- servers (e2e/package.json): {', '.join(info['servers'])}; "
        f"server-everything reports `{info['server_info']}` in `initialize`",
        f"- the fake server of sections {len(rows) + 1} to {len(rows) + 3}: mcpx-fake-server from this workspace "
        f"(`crates/mcpx-fake-server`), `{args.profile}` build (`{info['fake_rel']}`)",
        f"- Node.js {info['node']}, Python {info['python']} (the direct client and the timing harness)",
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
    ]
    for n, row in enumerate(rows, 1):
        lines += [f"## {n}. {row.title}", "", row.what, "", *row_table(row)]
    lines += supervisor_sections(len(rows) + 1, sup, args.kills)
    lines += reproduce_section(len(rows) + 1)
    return "\n".join(lines).rstrip() + "\n"


REPRODUCE = r"""
## How to reproduce

```sh
bash scripts/bench.sh                   # release build, @ITER@ runs per command, @KILLS@ kills per size,
                                        # @LAT@ calls per command in section @S3@; rewrites BENCHMARKS.md
bash scripts/bench.sh --iterations 100  # more runs (and --kills N, --latency-iterations N)
bash scripts/bench.sh --quick           # debug build, 3 runs, 1 kill per size, writes a temporary file
                                        # (what CI runs)
```

`scripts/bench.sh` builds mcpx and the fake server (`cargo build --release -p mcpx -p mcpx-fake-server`),
installs the servers into `e2e/` (`bash scripts/setup-e2e.sh`) and runs `scripts/bench.py` (Python
standard library only). That gives mcpx private state, cache and runtime directories and a config
holding only server-everything, all in a temporary directory, and one more such private mcpx for
each configuration of sections @S1@ to @S3@; at the end it stops every daemon and every server
(`mcpx status`, which starts a daemon that adopts any supervisor left by a kill, then
`mcpx stop --all`), checks that no server or supervisor is left, and removes the directory.

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
        .replace("@INIT@", init)
        .replace("@INITIALIZED@", '{"jsonrpc":"2.0","method":"notifications/initialized"}')
        .replace("@LIST@", '{"jsonrpc":"2.0","id":2,"method":"tools/list"}')
        .replace("@CALL@", json.dumps(call, separators=(",", ":")))
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
    p.add_argument("--command", default=None, help="how the benchmark was started, for the report's header")
    p.add_argument("--e2e", type=Path, default=ROOT / "e2e", help="the directory scripts/setup-e2e.sh installed into")
    a = p.parse_args()
    if a.iterations is None:
        a.iterations = 3 if a.quick else DEFAULT_ITERATIONS
    if a.kills is None:
        a.kills = 1 if a.quick else DEFAULT_KILLS
    if a.latency_iterations is None:
        a.latency_iterations = 3 if a.quick else DEFAULT_LATENCY_ITERATIONS
    if min(a.iterations, a.kills, a.latency_iterations) < 1:
        p.error("--iterations, --kills and --latency-iterations must be at least 1")
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
    try:
        rows, server_info = run_rows(args, mcpx, direct)
        sup = run_supervisor_rows(args, tmp, registry)
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
    text = report(args, rows, sup, info)
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
    for n, row in enumerate(rows, 1):
        print(f"{n}. {row.title}")
        print("\n".join(row_table(row)))
    print("\n".join(supervisor_sections(len(rows) + 1, sup, args.kills)))
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


if __name__ == "__main__":
    sys.exit(main())
