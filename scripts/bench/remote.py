"""Section 9: remote servers. The fake server in its streamable HTTP mode (`--http 127.0.0.1:0`),
twice, answering with SSE streams (its default) and with JSON bodies (FAKE_HTTP_RESPONSE=json),
held by one private mcpx as `remote` and `remote-json` (`{"url": ...}`). For each, the rounds of
section 8 along three paths: the HTTP client straight to the server, `mcpx serve --server S`
(stdio) and the daemon's `/mcp/S` on TCP; then one-shot calls: `mcpx call S.echo` (a whole
process) against a client that opens a new session for its one call. Processes stopped as in
section 8, on failure too."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from .common import (
    STEP_TIMEOUT,
    WARMUP,
    BenchError,
    log,
    median,
    ms,
    p_ms,
    percentile,
    plural,
    rate_ratio,
    times_words,
    us,
)
from .http_client import HttpMcp, TcpHTTPConnection
from .mcpx import private_mcpx, stop_private
from .paths import (
    PROXY_BLOCK_SECONDS,
    PROXY_CALLERS,
    PROXY_WARMUP_CALLS,
    THROUGHPUT_WARMUP_SECONDS,
    HttpPath,
    cpu_per_call,
    rate,
    run_rounds,
    serve_path,
    stats_cells,
    tcp_path,
)
from .procs import Spawned, stop_spawned, tree_cpu_of
from .stdio_client import LineReader

# The fake server in its HTTP mode, twice: answering each request with an SSE stream (its
# default) and with one JSON body (FAKE_HTTP_RESPONSE=json). mcpx holds each as a remote server.
REMOTE_MODES: tuple[tuple[str, str, dict[str, str]], ...] = (
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


def read_url(spawned: Spawned) -> str:
    """The one line `http://127.0.0.1:<port>/mcp` that the fake server prints once it listens."""
    what = f"{spawned.name}: its URL"
    line = LineReader(spawned.proc.stdout.fileno()).line(time.monotonic() + STEP_TIMEOUT, what)
    if line is None:
        raise BenchError(
            f"{what}: closed its stdout without printing it (status {spawned.proc.poll()}){spawned.stderr_tail()}"
        )
    url = line.decode(errors="replace").strip()
    if not URL_RE.fullmatch(url):
        raise BenchError(f"{spawned.name} printed {url!r}, not http://127.0.0.1:<port>/mcp")
    return url


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
    c = HttpMcp(label, lambda: TcpHTTPConnection(port))
    try:
        c.connect()
        c.open()
        if c.session is None:
            raise BenchError(f"{label}: initialize: no Mcp-Session-Id")
        _, answered = c.call("call", "echo", "o")
        c.end(expect=200)
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


def run(args, tmp: Path, registry: list) -> RemoteResults:
    """The fake server in HTTP mode (SSE and JSON answers), reached directly and through mcpx:
    the rounds of section 8 for each path, then one-shot calls (`mcpx call` vs. a new session)."""
    fake = str(args.fake_server)
    base = tmp / "remote"
    base.mkdir()
    t_setup = time.monotonic()
    fakes: list[Spawned] = []  # stopped last
    spawned: list[Spawned] = []  # `mcpx serve`, stopped before mcpx, which is stopped before the fakes
    paths: dict[str, list] = {mode: [] for mode, _, _ in REMOTE_MODES}
    names = {mode: name for mode, name, _ in REMOTE_MODES}
    m = None
    try:
        clean_env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_", "MCPX_"))}
        for mode, _, extra in REMOTE_MODES:
            fakes.append(
                Spawned(
                    f"the fake server ({mode})",
                    [fake, "--http", "127.0.0.1:0"],
                    base / f"fake-{mode}.log",
                    env={**clean_env, **extra},
                    stdout=True,
                )
            )
        by_mode = dict(zip(names, fakes, strict=False))
        urls = {mode: read_url(f) for mode, f in by_mode.items()}
        m = private_mcpx(
            args.mcpx, base / "m", {names[mode]: {"url": urls[mode]} for mode in names}, registry, http=True
        )
        m.refresh(list(names.values()))
        status = m.status()
        mport = m.http_port(status)

        def instances_ok(st: dict) -> None:
            insts = {i.get("server"): i for i in st.get("instances", [])}
            for mode, name in names.items():
                i = insts.get(name) or {}
                if i.get("url") != urls[mode] or i.get("state") != "running":
                    raise BenchError(
                        f"remote: no running instance of `{name}` at {urls[mode]}: {json.dumps(st.get('instances'))[:400]}"
                    )

        instances_ok(status)
        daemon_pid = m.daemon_pid()
        ports = {mode: int(URL_RE.fullmatch(urls[mode]).group(1)) for mode in names}
        for mode, name in names.items():
            server = [by_mode[mode].proc.pid]
            paths[mode] += [
                tcp_path(
                    "direct", REMOTE_LABELS["direct"], ports[mode], "/mcp", "echo", tree_cpu_of(server, server=server)
                ),
                serve_path(
                    "serve1",
                    f"`mcpx serve --server {name}` (stdio)",
                    m,
                    spawned,
                    base / f"serve-{mode}.log",
                    "echo",
                    [daemon_pid],
                    "--server",
                    name,
                    server=server,
                ),
                tcp_path(
                    "mcp1",
                    f"mcpx daemon `/mcp/{name}` (HTTP)",
                    mport,
                    f"/mcp/{name}",
                    "echo",
                    tree_cpu_of([daemon_pid], server=server),
                ),
            ]
        mode_of = {id(p): mode for mode in paths for p in paths[mode]}
        order = [p for mode in paths for p in paths[mode]]
        run_rounds(
            "remote",
            order,
            args,
            t_setup,
            lambda: "tools/call medians: " + ", ".join(f"{mode_of[id(p)]} {p.key} {p_ms(p.stats.call)}" for p in order),
            lambda p: answers(mode_of[id(p)]),
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
                answered, total = oneshot_http(ports[mode], f"one-shot direct ({mode})")
                if k >= WARMUP:
                    cli[mode].mcpx.append(elapsed)
                    cli[mode].direct.append(total)
                    cli[mode].direct_answered.append(answered)

        for p in order:
            if isinstance(p, HttpPath):
                p.close()
        for f in fakes:
            f.check_alive("remote: after the rounds")
        status = m.status()
        instances_ok(status)
        if status.get("daemon", {}).get("pid") != daemon_pid:
            raise BenchError(
                f"remote: the daemon changed during the rounds: {daemon_pid} -> {status.get('daemon', {}).get('pid')}"
            )
    finally:
        stop_spawned(spawned, "remote")
        if m is not None:
            try:
                stop_private(m)  # before the fakes: `stop --all` ends mcpx's sessions with DELETE
                registry.remove(m)
            except BenchError as e:  # left in the registry: main's cleanup tries again and fails the run
                log(f"remote: stopping mcpx: {e}")
        stop_spawned(fakes, "remote")
    return RemoteResults(paths, cli, names, args.proxy_calls, args.proxy_rounds, args.proxy_seconds, its)


# --- the report -----------------------------------------------------------------------------


def summary(rr: RemoteResults) -> list[str]:
    modes = list(rr.paths)
    lines = [
        "| path (client -> ... -> fake server over HTTP) | "
        + " | ".join(
            f"fake answers {REMOTE_ANSWERS[m].split(' (')[0]}: `tools/call` median | vs. direct" for m in modes
        )
        + " |",
        "| --- |" + " ---: | ---: |" * len(modes),
    ]
    for i, key in enumerate(p.key for p in rr.paths[modes[0]]):
        cells = []
        for m in modes:
            d, c = median(rr.paths[m][0].stats.call), median(rr.paths[m][i].stats.call)
            cells += [ms(c), f"{times_words(c / d)} the time"]
        lines.append(f"| {REMOTE_LABELS[key]} | " + " | ".join(cells) + " |")
    cells = []
    for m in modes:
        c, d = median(rr.cli[m].mcpx), median(rr.cli[m].direct)
        cells += [ms(c), f"{times_words(c / d)} the time"]
    lines.append(
        "| `mcpx call S.echo` (one process per call) vs. a one-shot client (a new session per call) | "
        + " | ".join(cells)
        + " |"
    )
    return lines


def section(n: int, rr: RemoteResults, info: dict) -> list[str]:
    modes = list(rr.paths)
    names = " and ".join(f"`{rr.names[m]}` ({REMOTE_ANSWERS[m].split(' (')[0]} answers)" for m in modes)
    lines = [
        f"## {n}. Remote servers: through mcpx to a streamable HTTP server",
        "",
        "A remote MCP server (a `url` in the config) on loopback: the fake server in its HTTP mode "
        "(`mcpx-fake-server --http 127.0.0.1:0`, streamable HTTP on `/mcp`; `echo` answers at once), twice: answering "
        "every request with an SSE stream (its default) and with one JSON body (`FAKE_HTTP_RESPONSE=json`). One private "
        f"mcpx holds both, as {names}, each configured by its URL alone "
        f'(`{{"mcpServers": {{"remote": {{"url": "http://127.0.0.1:<port>/mcp"}}}}}}`), '
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
        f"throughput round per path first (3 and 0.1 s in the quick mode), then {rr.rounds} round{plural(rr.rounds)}, "
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
            lines.append(f"| {REMOTE_ANSWERS[m]} | {p.label} | {stats_cells(p.stats)} |")
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
        d_call, d_rate = median(d.call), rate(d.rounds)
        for p in rr.paths[m][1:]:
            c = median(p.stats.call)
            lines.append(
                f"| {REMOTE_ANSWERS[m]} | {p.label} | {times_words(c / d_call)} | {(c - d_call) * 1000:+.2f} ms "
                f"| {rate_ratio(rate(p.stats.rounds) / d_rate)} |"
            )
    lines.append("")
    by = {m: {p.key: p.stats for p in rr.paths[m]} for m in modes}
    if "sse" in by and "json" in by:
        sse_direct = median(by["sse"]["direct"].call)
        json_direct = median(by["json"]["direct"].call)
        sse_ping = median(by["sse"]["mcp1"].ping)
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
            cm, cd = median(rr.cli["sse"].mcpx), median(rr.cli["sse"].direct_answered)
            if cm < 0.02 and cd >= 0.035:
                lines += [
                    f"The same is behind the one-shot rows below with SSE answers: the one-shot client ({ms(cd)} until its "
                    "answer) sends its requests back to back and waits once, while `mcpx call` here does not "
                    f"({ms(cm)}): its calls come tens of milliseconds apart (the other one-shot runs go in between), and a "
                    "connection that has been quiet that long is acknowledged at once. `mcpx call`s back to back, with no "
                    "pause between them, wait the 40 ms too.",
                    "",
                ]
    lines += [
        f'One call per process: `mcpx call S.echo \'{{"message":"..."}}\'` (a whole process: the CLI asks the running '
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
        mm, dm = median(c.mcpx), median(c.direct)
        lines.append(
            f"| {REMOTE_ANSWERS[m]} | {ms(mm)} | {ms(percentile(c.mcpx, 90))} | {ms(dm)} | {ms(percentile(c.direct, 90))} "
            f"| {ms(median(c.direct_answered))} | **{times_words(mm / dm)} the time** |"
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
            mcpx_cpu = "-" if p.key == "direct" else us(cpu_per_call(rounds, "path"))
            lines.append(
                f"| {REMOTE_ANSWERS[m]} | {p.label} | {mcpx_cpu} | {us(cpu_per_call(rounds, 'server'))} "
                f"| {us(cpu_per_call(rounds, 'client'))} |"
            )
    lines.append("")
    return lines
