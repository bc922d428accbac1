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


def report(args, rows: list[Row], info: dict) -> str:
    lines = [
        "# Benchmarks",
        "",
        f"Produced by `{args.command}` on {info['date']}; every number below comes from that one run.",
        "",
        f"- machine: {info['nproc']} CPUs (`nproc`), {info['cpu']}, {info['mem']} RAM, Linux {info['kernel']}",
        f"- {info['mcpx_version']}, `{args.profile}` build (`{info['mcpx_rel']}`), commit {info['commit']}",
        f"- servers (e2e/package.json): {', '.join(info['servers'])}; "
        f"server-everything reports `{info['server_info']}` in `initialize`",
        f"- Node.js {info['node']}, Python {info['python']} (the direct client and the timing harness)",
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
    ]
    for n, row in enumerate(rows, 1):
        lines += [f"## {n}. {row.title}", "", row.what, "", *row_table(row)]
    lines += reproduce_section()
    return "\n".join(lines).rstrip() + "\n"


REPRODUCE = r"""
## How to reproduce

```sh
bash scripts/bench.sh                   # release build, @ITER@ runs per command, rewrites BENCHMARKS.md
bash scripts/bench.sh --iterations 100  # more runs
bash scripts/bench.sh --quick           # debug build, 3 runs, writes a temporary file (what CI runs)
```

`scripts/bench.sh` builds mcpx (`cargo build --release -p mcpx`), installs the servers into
`e2e/` (`bash scripts/setup-e2e.sh`) and runs `scripts/bench.py` (Python standard library only).
That gives mcpx private state, cache and runtime directories and a config holding only
server-everything, all in a temporary directory; at the end it stops the daemon and every
server (`mcpx stop --all`) and removes the directory.

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

$mcpx stop --all; rm -rf /tmp/mcpx-b
```
"""


def reproduce_section() -> list[str]:
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
    p.add_argument("--command", default=None, help="how the benchmark was started, for the report's header")
    p.add_argument("--e2e", type=Path, default=ROOT / "e2e", help="the directory scripts/setup-e2e.sh installed into")
    a = p.parse_args()
    if a.iterations is None:
        a.iterations = 3 if a.quick else DEFAULT_ITERATIONS
    if a.iterations < 1:
        p.error("--iterations must be at least 1")
    a.mcpx = a.mcpx.resolve()
    if not os.access(a.mcpx, os.X_OK):
        p.error(f"{a.mcpx} is not an executable file (build it first: cargo build --release -p mcpx)")
    if a.profile is None:
        a.profile = a.mcpx.parent.name
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
    config = tmp / "config.json"
    config.write_text(
        json.dumps({"mcpServers": {"everything": {"command": str(server), "args": ["stdio"], "cwd": str(args.e2e)}}}, indent=2)
        + "\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPX_")}
    env.update(
        MCPX_STATE_DIR=str(tmp / "s"),
        MCPX_CACHE_DIR=str(tmp / "c"),
        MCPX_RUNTIME_DIR=str(tmp / "r"),
        MCPX_CONFIG=str(config),
    )
    mcpx = Mcpx(args.mcpx, env)
    direct = DirectClient([str(server), "stdio"], args.e2e, tmp / "direct-stderr.log")
    started = time.monotonic()
    failed = False
    try:
        rows, server_info = run_rows(args, mcpx, direct)
    except BenchError as e:
        failed = True
        print(f"bench: error: {e}", file=sys.stderr)
        log_file = tmp / "s" / "daemon.log"
        if log_file.exists():
            print("--- end of the daemon log ---\n" + log_file.read_text(errors="replace")[-3000:], file=sys.stderr)
    finally:
        try:
            mcpx.run("stop", "--all")
        except BenchError as e:
            failed = True  # a daemon left running is a failure too
            print(f"bench: error: stopping the daemon: {e}", file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
    if failed:
        return 1
    log(f"measured in {time.monotonic() - started:.0f}s")

    info = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": sh("nproc"),
        "cpu": cpu_model(),
        "mem": mem_total(),
        "kernel": os.uname().release,
        "mcpx_version": sh(str(args.mcpx), "--version"),
        "mcpx_rel": os.path.relpath(args.mcpx, ROOT),
        "commit": commit(),
        "servers": server_versions(args.e2e),
        "server_info": f"{server_info.get('name')} {server_info.get('version')}",
        "node": sh("node", "--version"),
        "python": sys.version.split()[0],
    }
    text = report(args, rows, info)
    if args.quick and args.output is None:
        fd, name = tempfile.mkstemp(prefix="mcpx-bench-", suffix=".md")
        os.close(fd)
        out = Path(name)
    else:
        out = args.output or ROOT / "BENCHMARKS.md"
    out.write_text(text)
    print("\n".join(summary_table(rows)))
    print()
    for n, row in enumerate(rows, 1):
        print(f"{n}. {row.title}")
        print("\n".join(row_table(row)))
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
    return sorted(i["pid"] for i in mcpx.status().get("instances", []) if i.get("server") == "everything")


if __name__ == "__main__":
    sys.exit(main())
