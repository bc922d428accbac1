"""What every part of the benchmark shares: its constants, its error and log line, the MCP
messages and their checks, the statistics and how the report writes numbers, and the timing of
commands that take turns (`Side`, `Row`, `measure`, `sides_table`)."""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
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
WARMUP = 2  # untimed runs of each side before a row's measured ones


class BenchError(Exception):
    """A command failed or answered something unexpected: the benchmark stops."""


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def plural(n: int) -> str:
    return "s" if n > 1 else ""


# --- MCP messages and their checks ----------------------------------------------------------


def jsonrpc_line(msg: dict) -> bytes:
    return json.dumps(msg, separators=(",", ":")).encode()


def initialize_params() -> dict:
    return {"protocolVersion": PROTOCOL_VERSION, "capabilities": CLIENT_CAPABILITIES, "clientInfo": CLIENT_INFO}


def echo_request(id_: int, tool: str, message: str) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": id_,
        "method": "tools/call",
        "params": {"name": tool, "arguments": {"message": message}},
    }


def proxy_request(kind: str, id_: int, tool: str, message: str) -> dict:
    """A ping (`kind` "ping") or a call of the echo tool `tool` (`kind` "call")."""
    if kind == "ping":
        return {"jsonrpc": "2.0", "id": id_, "method": "ping"}
    return echo_request(id_, tool, message)


def texts(result) -> list:
    """The texts of a tools/call result's content."""
    content = result.get("content") if isinstance(result, dict) else None
    return [c.get("text") for c in content or [] if isinstance(c, dict) and c.get("type") == "text"]


def check_echo(what: str, msg: dict, id_: int, message: str) -> None:
    """`msg` must be the response to request `id_`: an echo result whose text is `message`."""
    res = msg.get("result")
    if msg.get("id") != id_ or not isinstance(res, dict) or res.get("isError") or texts(res) != [message]:
        raise BenchError(f"{what}: expected the echo {message!r} to request {id_}, got {json.dumps(msg)[:300]}")


def check_answer(what: str, kind: str, msg: dict, id_: int, message: str) -> None:
    """`msg` must answer request `id_` correctly: `{}` for a ping, the echo of `message` for a call."""
    if kind == "ping":
        if msg.get("id") != id_ or msg.get("result") != {}:
            raise BenchError(f"{what}: expected the empty result to ping {id_}, got {json.dumps(msg)[:300]}")
    else:
        check_echo(what, msg, id_, message)


def check_tools(what: str, tools: list, tool: str) -> None:
    names = [t.get("name") for t in tools if isinstance(t, dict)]
    if tool not in names:
        raise BenchError(f"{what}: tools/list has no `{tool}` among {len(names)} tools: {names[:20]}")


# --- statistics and numbers -----------------------------------------------------------------


def percentile(data: list[float], q: float) -> float:
    """The q-th percentile (0..100), interpolated linearly between the closest ranks."""
    xs = sorted(data)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(data) -> float:
    return statistics.median(data)


def ms(seconds: float) -> str:
    v = seconds * 1000
    if v < 10:
        return f"{v:.2f} ms"
    if v < 100:
        return f"{v:.1f} ms"
    return f"{v:.0f} ms"


def p_ms(xs: list[float], q: float | None = None) -> str:
    """The median (or the q-th percentile) of `xs`, in ms."""
    return ms(median(xs) if q is None else percentile(xs, q))


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} µs"


def kib(v: float) -> str:
    return f"{v / 1024:.1f} MiB" if v >= 1024 else f"{v:.0f} KiB"


def calls_s(v: float) -> str:
    return f"{v:,.0f}"


def spread(samples: list[float]) -> str:
    """The cells `median | p90 | min | max | runs` of a table row."""
    s = samples
    return f"{ms(median(s))} | {ms(percentile(s, 90))} | {ms(min(s))} | {ms(max(s))} | {len(s)}"


def ratio_words(direct: float, mcpx: float) -> str:
    r = direct / mcpx
    if r >= 1:
        return f"{r:.0f}x faster" if r >= 10 else f"{r:.1f}x faster"
    inv = mcpx / direct
    return f"{inv:.1f}x slower"


def vs_words(sup: float, unsup: float) -> str:
    r = sup / unsup
    if r >= 1:
        return f"{r:.2f}x the time ({ms(sup - unsup)} more)"
    return f"{r:.2f}x the time ({ms(unsup - sup)} less)"


def times_words(v: float) -> str:
    return f"{v:.2f}x" if v < 1 else f"{v:.1f}x" if v < 10 else f"{v:.0f}x"


def rate_ratio(v: float) -> str:
    return f"{v:.3f}x" if v < 0.01 else f"{v:.2f}x"


# --- commands that take turns ---------------------------------------------------------------


@dataclass
class Side:
    label: str  # what is shown in the table
    command: str  # the command, as a person would type it
    run: Callable[[], tuple[float, Any]]  # () -> (seconds, the direct client's milestones or None)
    samples: list[float] = field(default_factory=list)
    details: list = field(default_factory=list)  # the direct client's milestones

    @property
    def median(self) -> float:
        return median(self.samples)


@dataclass
class Row:
    key: str
    title: str
    what: str
    sides: list[Side]  # mcpx side(s) first, the direct client last
    request: str  # the direct client's request after initialize


def measure(row: Row, iterations: int, prepare: Callable[[Side], object] | None = None) -> None:
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


def sides_table(sides: list[Side]) -> list[str]:
    """Every side's command and times, one table row each."""
    lines = [
        "| | command | median | p90 | min | max | runs |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [f"| {side.label} | `{side.command}` | {spread(side.samples)} |" for side in sides]
    return lines
