"""The paths of sections 7 to 9: one endpoint and the clients that load it, measured in blocks
of requests from one caller (latency) and in throughput rounds of many callers at once; and the
rounds of sections 8 and 9, in which the paths take turns."""

from __future__ import annotations

import contextlib
import shlex
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .common import STEP_TIMEOUT, BenchError, calls_s, log, median, p_ms, plural
from .http_client import HttpMcp, TcpHTTPConnection
from .mcpx import Mcpx
from .procs import Spawned, cpu_spent, tree_cpu_of
from .stdio_client import StdioMcp

PROXY_CALLERS = 8  # concurrent callers of the throughput rounds of sections 8 and 9
PROXY_BLOCK_SECONDS = 2.0  # a latency block ends after this long even if its count is not reached
PROXY_WARMUP_CALLS = 50  # untimed pings and calls per path before the rounds (3 with --quick)
THROUGHPUT_WARMUP_SECONDS = 0.3  # per warm-up round (0.1 in sections 8 and 9 with --quick)


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


def rate(rounds: list[Round]) -> float:
    """Calls per second, the median of the rounds."""
    return median(r.rate for r in rounds)


def all_latencies(rounds: list[Round]) -> list[float]:
    return [x for r in rounds for x in r.latencies]


def cpu_per_call(rounds: list[Round], name: str) -> float:
    """Seconds of CPU time of process `name` per completed call, over every round."""
    return sum(r.cpu[name] for r in rounds) / sum(r.calls for r in rounds)


@dataclass
class PathStats:
    ping: list[float] = field(default_factory=list)  # seconds per ping, one caller
    call: list[float] = field(default_factory=list)  # seconds per tools/call, one caller
    rounds: list[Round] = field(default_factory=list)  # the throughput rounds


def stats_cells(s: PathStats) -> str:
    """The cells `pings | ping median | ping p99 | calls | call median | call p99 | calls/s | latency`."""
    return (
        f"{len(s.ping):,} | {p_ms(s.ping)} | {p_ms(s.ping, 99)} | {len(s.call):,} | {p_ms(s.call)} | {p_ms(s.call, 99)} "
        f"| {calls_s(rate(s.rounds))} | {p_ms(all_latencies(s.rounds))}"
    )


class McpPath:
    """An endpoint reached by `clients` (opened here, each with `tools/list` offering `tool`);
    `cpu` samples the CPU time of the processes whose share a round reports."""

    transport = ""

    def __init__(self, key: str, label: str, clients: list, tool: str, cpu) -> None:
        self.key, self.label, self.clients, self.tool, self.cpu = key, label, clients, tool, cpu
        self.stats = PathStats()
        with self.connected(len(clients)):
            for c in clients:
                c.open(tool)

    def connected(self, n: int):
        """A context in which the first `n` clients are connected."""
        return contextlib.nullcontext()

    def load(self, callers: int, seconds: float) -> tuple[int, float, list[float]]:
        raise NotImplementedError

    def sequential(self, kind: str, count: int, limit: float, into: list[float] | None) -> None:
        """`count` pings or calls one after the other (at most `limit` seconds); latencies into `into`."""
        with self.connected(1):
            end = time.perf_counter() + limit
            for _ in range(count):
                t0, t1 = self.clients[0].call(kind, self.tool, "s")
                if into is not None:
                    into.append(t1 - t0)
                if t1 >= end:
                    break

    def concurrent(self, callers: int, seconds: float) -> Round:
        """A throughput round: `callers` callers calling the echo tool back to back."""
        with self.connected(callers):
            before = self.cpu()
            calls, elapsed, lats = self.load(callers, seconds)
            return Round(calls, elapsed, lats, cpu_spent(before, self.cpu()))


class StdioPath(McpPath):
    """One stdio session (`client`), which concurrent callers share."""

    transport = "stdio"

    def __init__(self, key: str, label: str, client: StdioMcp, tool: str, cpu) -> None:
        super().__init__(key, label, [client], tool, cpu)

    def load(self, callers: int, seconds: float) -> tuple[int, float, list[float]]:
        return self.clients[0].multiplexed(callers, seconds, self.tool)


class HttpPath(McpPath):
    """Callers of one streamable HTTP endpoint, each with its own MCP session (its client) and, for
    each block or round, its own keep-alive connection."""

    transport = "streamable HTTP"

    @contextlib.contextmanager
    def connected(self, n: int):
        clients = self.clients[:n]
        try:
            for c in clients:
                c.connect()
            yield
        finally:
            for c in clients:
                c.close()

    def load(self, callers: int, seconds: float) -> tuple[int, float, list[float]]:
        def caller(i: int, end: float, lat: list[float]) -> int:
            n = 0
            while time.perf_counter() < end:
                t0, t1 = self.clients[i].call("call", self.tool, f"c{i}")
                lat.append(t1 - t0)
                n += 1
            return n

        return run_callers(callers, seconds, caller)

    def close(self, expect: int | None = None) -> None:
        """Ends every client's session (see `HttpMcp.end`)."""
        for c in self.clients:
            c.end(expect)


def tcp_path(key: str, label: str, port: int, path: str, tool: str, cpu) -> HttpPath:
    """PROXY_CALLERS clients of http://127.0.0.1:port/path."""
    clients = [HttpMcp(label, lambda: TcpHTTPConnection(port), path) for _ in range(PROXY_CALLERS)]
    return HttpPath(key, label, clients, tool, cpu)


def spawned_path(
    key: str,
    label: str,
    spawned: list[Spawned],
    name: str,
    argv: list[str],
    log: Path,
    tool: str,
    env=None,
    cpu_roots=(),
    **cpu_more,
) -> StdioPath:
    """A path over the stdio of a process started for it (added to `spawned`); its CPU time
    ("path") is that of the process's tree and of `cpu_roots`', and each of `cpu_more` another."""
    s = Spawned(name, argv, log, env=env, stdio=True)
    spawned.append(s)
    return StdioPath(
        key, label, StdioMcp(s.proc, label, s.stderr_tail), tool, tree_cpu_of([*cpu_roots, s.proc.pid], **cpu_more)
    )


def serve_path(
    key: str, label: str, m: Mcpx, spawned: list[Spawned], log: Path, tool: str, cpu_roots, *args: str, **cpu_more
) -> StdioPath:
    """`mcpx serve ARGS` of `m` as a stdio path (see `spawned_path`)."""
    argv = [str(m.binary), "serve", *args]
    return spawned_path(
        key, label, spawned, shlex.join(["mcpx", "serve", *args]), argv, log, tool, m.env, cpu_roots, **cpu_more
    )


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
        except BaseException as e:  # noqa: BLE001 - reported below
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


def run_rounds(what: str, paths: list[McpPath], args, t_setup: float, progress, guard=None) -> None:
    """Warm-up pings, calls and a short throughput round per path, then `args.proxy_rounds`
    rounds in which every path in turn does a block of pings and a block of calls (one caller,
    `args.proxy_calls` of each over all rounds) and a throughput round of PROXY_CALLERS callers
    (`args.proxy_seconds`). `progress()` says what to log after a round; `guard(path)`, a context
    for each path's work (to name it in a failure)."""
    guard = guard or (lambda p: contextlib.nullcontext())
    rounds = args.proxy_rounds
    per_round = max(1, args.proxy_calls // rounds)
    warm = 3 if args.quick else PROXY_WARMUP_CALLS
    warm_seconds = 0.1 if args.quick else THROUGHPUT_WARMUP_SECONDS
    log(
        f"{what}: {len(paths)} paths set up in {time.monotonic() - t_setup:.1f}s; {warm} warm-up pings and calls and a "
        f"{warm_seconds:g}s round each, then {rounds} round{plural(rounds)} of {per_round} pings, {per_round} calls "
        f"and {args.proxy_seconds:g}s of {PROXY_CALLERS} callers per path, the paths in turn"
    )
    for p in paths:
        with guard(p):
            p.sequential("ping", warm, PROXY_BLOCK_SECONDS, None)
            p.sequential("call", warm, PROXY_BLOCK_SECONDS, None)
            p.concurrent(PROXY_CALLERS, warm_seconds)
    for r in range(rounds):
        for p in paths:
            with guard(p):
                p.sequential("ping", per_round, PROXY_BLOCK_SECONDS, p.stats.ping)
                p.sequential("call", per_round, PROXY_BLOCK_SECONDS, p.stats.call)
                p.stats.rounds.append(p.concurrent(PROXY_CALLERS, args.proxy_seconds))
        log(f"{what}: round {r + 1} of {rounds} done ({progress()})")
