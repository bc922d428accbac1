"""Section 11: the hot path against its targets. One run, every path set up side by side and
driven by the workspace's load generator `mcpx-load` (Rust, tokio; every answer checked):
the same fake server directly (its own streamable HTTP answering JSON, and its stdio), through
mcpx (`/mcp/fake` and `/mcp` on the daemon's TCP listener, `mcpx serve`, `/mcp` on the control
socket) and through the peers (the Rust `mcp-proxy` crate, when built; supergateway; the Python
mcp-proxy). In rounds, each path in turn: 16 connections calling back to back (calls/s), then
one connection calling one call after the other (latency). Then `mcpx ls` as a whole process and
the daemon's peak RSS while relaying a 16 MiB result. Each target row: today's figure (from
2026-12-01), this run's, the target, met or not."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from . import wrk
from .common import STEP_TIMEOUT, BenchError, log, median, plural
from .http_client import HttpMcp, UnixHTTPConnection
from .mcpx import fake_entry, private_mcpx
from .procs import Spawned, free_port, stop_spawned, wait_port
from .proxies import MCP_PROXY, NODE22, SUPERGATEWAY_JS

CONNECTIONS = 16  # the throughput rows' concurrent connections (as `wrk -t2 -c16`)
CPU_CALLERS = 64  # the CPU row's concurrent callers
RECORD_ROUNDS = 7  # rounds of the record's and the export's sides (full mode), the others' rounds included
BIG_BYTES = 16 * 1024 * 1024  # the relayed result of the memory row
RUST_PEER_VERSION = "0.6.0"
WRK_PATHS = ("direct", "mcp1", "rust")  # the paths wrk drives too
TODAY_DATE = "2026-12-01"


@dataclass
class HotPath:
    key: str
    label: str
    target: list[str]  # mcpx-load's arguments after the options: `http URL` or `stdio -- CMD`
    tool: str
    env: dict | None = None
    pids: list[str] = field(default_factory=list)  # mcpx-load `--pid name=PID`s of its throughput rounds
    tput: list[dict] = field(default_factory=list)  # mcpx-load reports, one per round
    lat: list[dict] = field(default_factory=list)
    wrk: list[dict] = field(default_factory=list)  # wrk reports (scripts/bench/wrk.py), one per round
    wrk_pids: dict[str, int] = field(default_factory=dict)  # the processes whose CPU wrk's rounds count

    def wrk_rate(self) -> float:
        return median(r["calls_per_s"] for r in self.wrk)

    def cpu(self, key: str = "tput") -> float:
        """Median over the rounds of the CPU µs per call of every named process together, under
        mcpx-load (`tput`) or wrk (`wrk`)."""
        reports = getattr(self, key)
        return median(sum(v for k, v in r["cpu_us_per_call"].items() if k != "self") for r in reports)

    def rate(self) -> float:
        return median(r["calls_per_s"] for r in self.tput)

    def p50(self) -> float:
        """Median over the rounds of the one-connection p50, µs."""
        return median(r["latency_us"]["p50"] for r in self.lat)

    def p99(self) -> float:
        return median(r["latency_us"]["p99"] for r in self.lat)


@dataclass
class HotResults:
    http: list[HotPath]  # direct first
    stdio: list[HotPath]  # direct stdio, then `mcpx serve`
    cpu: list[dict]  # the 64-caller reports (control socket: the row of record)
    cpu_tcp: list[dict]  # the same load on `/mcp/fake` over TCP, kept-alive connections
    ls: list[float]  # seconds per `mcpx ls`
    rss: list[dict]  # per fresh daemon: idle and peak KiB
    rounds: int
    seconds: float
    calls: int
    rust_peer: str | None  # why it is missing, or None when measured
    versions: dict
    record: dict[str, list[dict]]  # "on"/"off"/"otel"/"dead": the side-by-side reports (see run)
    record_lost: int  # entries the record lost under that load (dropped or not written)
    spans: dict[str, dict]  # "otel"/"dead": that mcpx's daemon status after the rounds
    wrk: str | None  # wrk's version, or None when it is not installed


def timed(args, callers: int, tool: str, warm: str, *target: str) -> dict:
    """`callers` connections calling `tool` back to back for the hot path's seconds, after a
    warm-up of `warm` seconds; `target` is the rest of the command line (`--pid`s, the mode
    and where)."""
    argv = ["-c", str(callers), "--seconds", str(args.hotpath_seconds), "--warmup", warm, "--tool", tool]
    return load(args, *argv, *target)


def load(args, *argv: str, env: dict | None = None) -> dict:
    """One mcpx-load run; its JSON report. Fails the benchmark if any answer was wrong."""
    cmd = [str(args.load), *argv]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT * 4)
    except subprocess.TimeoutExpired:
        raise BenchError(f"`{' '.join(cmd)}` did not finish within {STEP_TIMEOUT * 4:.0f}s") from None
    if proc.returncode != 0:
        raise BenchError(f"`{' '.join(cmd)}` failed: {proc.stderr.strip()[-2000:]}")
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise BenchError(f"`{' '.join(cmd)}` printed something that is not JSON: {proc.stdout[:300]}") from None


def start_fake_http(fake: Path, base: Path, spawned: list) -> str:
    """The fake server's own streamable HTTP, answering JSON: its URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_", "MCPX_"))}
    env["FAKE_HTTP_RESPONSE"] = "json"
    s = Spawned(
        "the fake server (HTTP)", [str(fake), "--http", "127.0.0.1:0"], base / "direct-http.log", env=env, stdout=True
    )
    spawned.append(s)
    line = s.proc.stdout.readline().decode().strip()
    if not line.startswith("http://127.0.0.1:"):
        raise BenchError(f"the fake server in HTTP mode printed {line!r}, not its URL{s.stderr_tail()}")
    return line


def start_rust_peer(binary: Path, fake: Path, base: Path, spawned: list) -> tuple[str, int]:
    """The Rust mcp-proxy in front of the fake server (one stdio backend): its URL and pid."""
    port = free_port()
    config = base / "rust-peer.toml"
    config.write_text(
        '[proxy]\nname = "bench"\nseparator = "__"\n\n[proxy.listen]\nhost = "127.0.0.1"\n'
        f'port = {port}\n\n[[backends]]\nname = "fake"\ntransport = "stdio"\ncommand = {json.dumps(str(fake))}\n'
    )
    # Its log at warnings only, as the other peers run (it logs every session at `info`).
    env = dict(os.environ, RUST_LOG="warn")
    s = Spawned("mcp-proxy (Rust)", [str(binary), "--config", str(config)], base / "rust-peer.log", env=env)
    spawned.append(s)
    wait_port(port, s)
    # Its standalone MCP endpoint is `/` (the crate's README, "Quick Start").
    return f"http://127.0.0.1:{port}/", s.proc.pid


def run(args, tmp: Path, registry: list) -> HotResults:
    fake = args.fake_server
    e2e = args.e2e
    base = tmp / "h"
    base.mkdir()
    spawned: list[Spawned] = []
    try:
        node, sg_js, mcp_proxy = e2e / NODE22, e2e / SUPERGATEWAY_JS, e2e / MCP_PROXY
        sg_port, mp_port = free_port(), free_port()
        sg = Spawned(
            "supergateway",
            [
                str(node),
                str(sg_js),
                "--stdio",
                str(fake),
                "--outputTransport",
                "streamableHttp",
                "--logLevel",
                "none",
                "--stateful",
                "--port",
                str(sg_port),
            ],
            base / "sg.log",
        )
        spawned.append(sg)
        mp = Spawned(
            "mcp-proxy (Python)",
            [str(mcp_proxy), "--port", str(mp_port), "--host", "127.0.0.1", "--log-level", "WARNING", "--", str(fake)],
            base / "mp.log",
        )
        spawned.append(mp)
        direct_url = start_fake_http(fake, base, spawned)
        m = private_mcpx(args.mcpx, base / "m", {"fake": fake_entry(fake)}, registry, http=True)
        m.refresh(["fake"])
        port = m.http_port(m.status())
        daemon, sup, server = m.instance("fake")
        # The same mcpx with the activity record off, for its cost side by side.
        off = {"activity": {"enabled": False}}
        m_off = private_mcpx(args.mcpx, base / "m-off", {"fake": fake_entry(fake)}, registry, http=True, settings=off)
        m_off.refresh(["fake"])
        # And with the OpenTelemetry export on: to a live collector (the test suite's OTLP/HTTP
        # receiver, answering without decoding), and to a port nobody listens on.
        collector_port = free_port()
        collector = Spawned(
            "OTLP receiver",
            [str(e2e / ".venv/bin/python"), str(e2e / "otlp_receiver.py"), "--discard", "--port", str(collector_port)],
            base / "otlp.log",
        )
        spawned.append(collector)
        wait_port(collector_port, collector)
        sides = {
            "otel": f"http://127.0.0.1:{collector_port}",
            "dead": f"http://127.0.0.1:{free_port()}",
        }
        exporting = {}
        for side, endpoint in sides.items():
            mx = private_mcpx(
                args.mcpx,
                base / f"m-{side}",
                {"fake": fake_entry(fake)},
                registry,
                http=True,
                settings={"otel": {"endpoint": endpoint}},
            )
            mx.refresh(["fake"])
            exporting[side] = mx
        record_urls = {
            "on": (f"http://127.0.0.1:{port}/mcp/fake", daemon),
            "off": (f"http://127.0.0.1:{m_off.http_port(m_off.status())}/mcp/fake", m_off.instance("fake")[0]),
        }
        for side, mx in exporting.items():
            record_urls[side] = (f"http://127.0.0.1:{mx.http_port(mx.status())}/mcp/fake", mx.instance("fake")[0])
        record: dict[str, list[dict]] = {side: [] for side in record_urls}
        rust_peer, rust_pid = None, 0
        if args.quick:
            rust_why = "not built in the quick mode"
        elif args.rust_peer is None or not args.rust_peer.exists():
            rust_why = (
                f"not installed (scripts/bench.sh builds it into e2e/rust-mcp-proxy; --rust-peer {args.rust_peer})"
            )
        else:
            rust_why = None
            try:
                rust_peer, rust_pid = start_rust_peer(args.rust_peer, fake, base, spawned)
                load(args, "-c", "1", "--calls", "1", "--warmup", "0", "--tool", "fake__echo", "http", rust_peer)
            except BenchError as e:
                # Measure what exists: the section says why the peer is missing.
                rust_peer, rust_why = None, f"left out: it did not answer as configured ({str(e)[:300]})"
                log(f"hotpath: the Rust mcp-proxy {rust_why}")
        http = [
            HotPath("direct", "direct (the fake server's own HTTP, JSON answers)", ["http", direct_url], "echo"),
            HotPath(
                "mcp1",
                "mcpx `/mcp/fake`",
                ["http", f"http://127.0.0.1:{port}/mcp/fake"],
                "echo",
                pids=["--pid", f"daemon={daemon}", "--pid", f"supervisor={sup}"],
                wrk_pids={"daemon": daemon, "supervisor": sup},
            ),
            HotPath("mcp", "mcpx `/mcp` (aggregate)", ["http", f"http://127.0.0.1:{port}/mcp"], "fake__echo"),
        ]
        if rust_peer is not None:
            http.append(
                HotPath(
                    "rust",
                    f"Rust `mcp-proxy` {RUST_PEER_VERSION}",
                    ["http", rust_peer],
                    "fake__echo",
                    pids=["--pid", f"peer={rust_pid}"],
                    wrk_pids={"peer": rust_pid},
                )
            )
        wait_port(sg_port, sg)
        wait_port(mp_port, mp)
        http.append(HotPath("sg", "supergateway `--stateful`", ["http", f"http://127.0.0.1:{sg_port}/mcp"], "echo"))
        http.append(HotPath("mp", "mcp-proxy (Python)", ["http", f"http://127.0.0.1:{mp_port}/mcp"], "echo"))
        stdio = [
            HotPath("stdio", "direct stdio (the fake server)", ["stdio", "--", str(fake)], "echo"),
            HotPath("serve", "`mcpx serve`", ["stdio", "--", str(args.mcpx), "serve"], "fake__echo", env=m.env),
        ]
        warm = "0.05" if args.quick else "1"
        sock = str(Path(m.env["MCPX_RUNTIME_DIR"]) / "daemon.sock")
        pids = ["--pid", f"daemon={daemon}", "--pid", f"supervisor={sup}", "--pid", f"server={server}"]
        cpu: list[dict] = []
        cpu_tcp: list[dict] = []
        wrk_bin = wrk.available()
        log(
            f"hotpath: {args.hotpath_rounds} round{plural(args.hotpath_rounds)} of {len(http)} HTTP paths "
            f"({CONNECTIONS} connections for {args.hotpath_seconds:g} s, then {args.hotpath_calls} calls on one), "
            f"{len(stdio)} stdio paths and {CPU_CALLERS} callers on the control socket"
        )

        def record_round(r: int) -> None:
            """Every side of the record's and the export's cost once: the same load on each
            mcpx in turn, the order flipped each round, so a drift of the machine falls on all."""
            order = list(record_urls)
            for side in order if r % 2 == 0 else reversed(order):
                url, pid = record_urls[side]
                record[side].append(timed(args, CONNECTIONS, "echo", warm, "--pid", f"daemon={pid}", "http", url))

        for r in range(args.hotpath_rounds):
            for p in http:
                common = ["--tool", p.tool, "--warmup", warm]
                p.tput.append(timed(args, CONNECTIONS, p.tool, warm, *p.pids, *p.target))
                p.lat.append(load(args, "-c", "1", "--calls", str(args.hotpath_calls), *common, *p.target))
            for p in stdio:
                p.lat.append(
                    load(
                        args,
                        "-c",
                        "1",
                        "--calls",
                        str(args.hotpath_calls),
                        "--tool",
                        p.tool,
                        "--warmup",
                        warm,
                        *p.target,
                        env=p.env,
                    )
                )
            cpu.append(timed(args, CPU_CALLERS, "fake__echo", warm, *pids, "http", "--unix", sock, "/mcp"))
            cpu_tcp.append(timed(args, CPU_CALLERS, "echo", warm, *pids, "http", f"http://127.0.0.1:{port}/mcp/fake"))
            record_round(r)
            if wrk_bin is not None:
                ordered = [p for p in http if p.key in WRK_PATHS]
                for p in ordered if r % 2 == 0 else reversed(ordered):
                    url = p.target[-1]
                    p.wrk.append(wrk.run(wrk_bin, url, p.tool, args.hotpath_seconds, base, p.key, p.wrk_pids))
            log(f"hotpath: round {r + 1}: " + ", ".join(f"{p.key} {p.tput[-1]['calls_per_s']:.0f}/s" for p in http))
        # Ratios of a few percent want more rounds than the paths' rows.
        record_rounds = args.hotpath_rounds if args.quick else max(args.hotpath_rounds, RECORD_ROUNDS)
        for r in range(args.hotpath_rounds, record_rounds):
            record_round(r)
        log(f"hotpath: {record_rounds} rounds of the record's and the export's sides")
        if m.instance("fake") != (daemon, sup, server):
            raise BenchError("hotpath: mcpx's daemon, supervisor or server changed during the rounds")
        ls = time_ls(m, args.iterations)
        # Measured with entries dropped, the record would look cheaper than it is.
        record_lost = int(m.status().get("daemon", {}).get("activity_lost", 0))
        spans = {side: mx.status().get("daemon", {}) for side, mx in exporting.items()}
    finally:
        stop_spawned(spawned, "hotpath")
    rss = [relay_rss(args, base / f"rss{i}", registry) for i in range(1 if args.quick else 3)]
    versions = {"rust_peer": RUST_PEER_VERSION if rust_peer else None}
    wrk_version = wrk.version(wrk_bin) if wrk_bin else None
    return HotResults(
        http,
        stdio,
        cpu,
        cpu_tcp,
        ls,
        rss,
        args.hotpath_rounds,
        args.hotpath_seconds,
        args.hotpath_calls,
        rust_why,
        versions,
        record,
        record_lost,
        spans,
        wrk_version,
    )


def time_ls(m, runs: int) -> list[float]:
    """`mcpx ls` (the daemon running, the fake server started), 2 warm-up runs then `runs` timed:
    wall clock from spawn to exit."""
    for _ in range(2):
        m.run("ls")
    return [m.run("ls")[0] for _ in range(max(runs, 3))]


def status_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of a process, KiB, from /proc/PID/status."""
    got = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            got[key] = int(rest.split()[0])
    return got


def relay_rss(args, base: Path, registry: list) -> dict:
    """A fresh private mcpx with the fake server running: the daemon's RSS once idle, then its
    peak RSS after relaying one `big` result of BIG_BYTES through `/mcp/fake` on the control
    socket."""
    m = private_mcpx(args.mcpx, base, {"fake": fake_entry(args.fake_server)}, registry)
    m.refresh(["fake"])
    daemon, _, _ = m.instance("fake")
    sock = str(Path(m.env["MCPX_RUNTIME_DIR"]) / "daemon.sock")
    client = HttpMcp("rss", lambda: UnixHTTPConnection(sock), path="/mcp/fake")
    client.connect()
    client.open()
    idle = status_kib(daemon)
    result = client.request("tools/call", {"name": "big", "arguments": {"line_bytes": BIG_BYTES}})
    text = "".join(c.get("text", "") for c in result.get("content", []) if isinstance(c, dict))
    if len(text) < BIG_BYTES // 2:
        raise BenchError(f"hotpath: the big result came back with {len(text)} characters of text")
    client.end()
    after = status_kib(daemon)
    m.run("stop", "--all")
    return {"idle": idle["VmRSS"], "hwm_before": idle["VmHWM"], "peak": after["VmHWM"]}


# --- the report -----------------------------------------------------------------------------


def us_(v: float) -> str:
    return f"{v:,.0f} µs"


def signed_us(v: float) -> str:
    return f"{'+' if v >= 0 else '−'}{abs(v):,.0f} µs"


def targets(h: HotResults) -> list[tuple[str, str, str, str, str]]:
    """(measure, today, now, target, met) for each target row."""
    paths = {p.key: p for p in h.http + h.stdio}
    d, m1 = paths["direct"], paths["mcp1"]
    rust = paths.get("rust")
    ratio = m1.rate() / d.rate()
    added = m1.p50() - d.p50()
    peer_note = f"; Rust peer {rust.rate() / d.rate():.2f}×" if rust else f"; Rust peer {h.rust_peer}"
    met_tput = ratio >= 0.9 and (rust is None or m1.rate() > rust.rate())
    peer_added = rust.p50() - d.p50() if rust else None
    met_lat = added <= 90 and (peer_added is None or added < peer_added)
    serve_added = paths["serve"].p50() - paths["stdio"].p50()
    cpu = median(r["cpu_us_per_call"]["daemon"] + r["cpu_us_per_call"]["supervisor"] for r in h.cpu)
    ls_ms = median(h.ls) * 1000
    mult = median((r["peak"] - r["idle"]) * 1024 / BIG_BYTES for r in h.rss)
    unmeasured = "" if rust else " (peer not measured)"
    on, off = h.record["on"], h.record["off"]
    on_rate, off_rate = median(r["calls_per_s"] for r in on), median(r["calls_per_s"] for r in off)

    def paired(a: str, b: str) -> tuple[float, float]:
        """Side `a` against `b`, round by round (each pair measured minutes apart at most):
        the median of the rounds' throughput ratios, and of their daemon CPU differences."""
        pairs = list(zip(h.record[a], h.record[b], strict=True))
        ratio = median(x["calls_per_s"] / y["calls_per_s"] for x, y in pairs)
        cpu = median(x["cpu_us_per_call"]["daemon"] - y["cpu_us_per_call"]["daemon"] for x, y in pairs)
        return ratio, cpu

    record_ratio, record_cpu = paired("on", "off")
    otel_ratio, otel_cpu = paired("otel", "on")
    dead_ratio, dead_cpu = paired("dead", "on")
    cpu_of = {side: median(r["cpu_us_per_call"]["daemon"] for r in runs) for side, runs in h.record.items()}
    rate_of = {side: median(r["calls_per_s"] for r in runs) for side, runs in h.record.items()}
    p50_of = {side: median(r["latency_us"]["p50"] for r in runs) for side, runs in h.record.items()}
    live, dead = h.spans["otel"], h.spans["dead"]
    return [
        (
            "`/mcp/<server>` throughput, 16 connections, against direct",
            "0.57×",
            f"{ratio:.2f}× ({m1.rate():,.0f} / {d.rate():,.0f} calls/s{peer_note})",
            "≥ 0.9×, and above the Rust peer",
            ("yes" if met_tput else "no") + unmeasured,
        ),
        (
            "`/mcp/<server>` added latency per sequential call",
            "+172 µs",
            signed_us(added) + (f" (Rust peer {signed_us(peer_added)})" if peer_added is not None else ""),
            "≤ +90 µs, and below the Rust peer",
            ("yes" if met_lat else "no") + unmeasured,
        ),
        (
            "`serve` added latency per sequential call, over direct stdio",
            "+0.42 ms",
            f"+{serve_added / 1000:.2f} ms",
            "≤ 0.2 ms",
            "yes" if serve_added <= 200 else "no",
        ),
        (
            f"daemon + supervisor CPU per call, {CPU_CALLERS} callers",
            "172 µs",
            us_(cpu),
            "≤ 60 µs",
            "yes" if cpu <= 60 else "no",
        ),
        (
            f"the activity record's cost, {CONNECTIONS} connections on `/mcp/<server>`, on against off",
            "-",
            f"daemon CPU {record_cpu:+.1f} µs per call; {record_ratio:.3f}× (medians {on_rate:,.0f} / {off_rate:,.0f} "
            f"calls/s); {h.record_lost:,} entries lost",
            "≤ +5 µs, and ≥ 0.95×, none lost",
            "yes" if record_cpu <= 5 and record_ratio >= 0.95 and h.record_lost == 0 else "no",
        ),
        (
            f"the OpenTelemetry export's cost, {CONNECTIONS} connections on `/mcp/<server>`, to a live collector "
            "against no export",
            "-",
            f"daemon CPU {otel_cpu:+.1f} µs per call ({cpu_of['otel']:.1f} / {cpu_of['on']:.1f} µs); "
            f"{otel_ratio:.3f}× (medians {rate_of['otel']:,.0f} / {rate_of['on']:,.0f} calls/s); "
            f"{live.get('spans_exported', 0):,} spans exported, {live.get('spans_dropped', 0):,} dropped",
            "shown side by side; no span dropped",
            "yes" if live.get("spans_dropped", 0) == 0 and live.get("spans_exported", 0) > 0 else "no",
        ),
        (
            f"calls with the collector stopped, {CONNECTIONS} connections on `/mcp/<server>`, against no export",
            "-",
            f"{dead_ratio:.3f}× (medians {rate_of['dead']:,.0f} / {rate_of['on']:,.0f} calls/s); "
            f"p50 {p50_of['dead']:,.0f} / {p50_of['on']:,.0f} µs; daemon CPU {dead_cpu:+.1f} µs per "
            f"call; {dead.get('spans_dropped', 0):,} spans counted dropped",
            "≥ 0.95× the throughput, and the spans counted",
            "yes" if dead_ratio >= 0.95 and dead.get("spans_dropped", 0) > 0 else "no",
        ),
        ("`mcpx ls`, whole process", "1.95 ms", f"{ls_ms:.2f} ms", "≤ 1 ms", "yes" if ls_ms <= 1 else "no"),
        (
            "daemon peak RSS over idle, relaying a 16 MiB result",
            "3.5–4.7× the message",
            f"{mult:.1f}× the message",
            "≤ 2×",
            "yes" if mult <= 2 else "no",
        ),
    ]


def summary(h: HotResults) -> list[str]:
    lines = [f"| measure | today ({TODAY_DATE}) | now | target | met |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {' | '.join(row)} |" for row in targets(h)]
    return lines


def section(n: int, h: HotResults, info: dict) -> list[str]:
    d = h.http[0]
    s0 = h.stdio[0]
    lines = [
        f"## {n}. The hot path: targets",
        "",
        "Every path set up side by side in one run and driven by the workspace's load generator, `mcpx-load` "
        "(`crates/mcpx-load`: Rust, tokio, one keep-alive HTTP/1.1 connection and one MCP session per caller, or one "
        "`mcpx serve` or server process per caller; every answer's id and text checked, each call's message distinct). "
        f"In each of {h.rounds} round{plural(h.rounds)}, every HTTP path in turn: {CONNECTIONS} connections calling "
        f"the echo tool back to back for {h.seconds:g} s (calls/s), then one connection making {h.calls} calls one "
        "after the other (latency: the median per call); then the stdio paths (one caller, the same calls) and "
        f"{CPU_CALLERS} callers on the daemon's control socket (`/mcp`, CPU time per call of the daemon, the "
        "supervisor and the server, user + system from the OS); then the activity record's cost: the same "
        f"{CONNECTIONS} connections on `/mcp/fake` of this mcpx (the record on, as by default) and of a second one "
        'configured `"activity": {"enabled": false}`, and of two more with the OpenTelemetry export on (`"otel": '
        '{"endpoint": ...}`): one to a live OTLP/HTTP collector (the test suite\'s receiver, answering without '
        "decoding), one to a port nobody listens on; in turn, the order flipped each round, with the daemon's CPU "
        f"time per call, over {len(h.record['on'])} round{plural(len(h.record['on']))} (these rows' ratios and CPU differences are the medians of "
        "each round's, the two sides measured back to back). Each run of the load generator starts with an untimed warm-up. "
        f'The figures are medians over the rounds. "Today" is the issue\'s figures, measured on {TODAY_DATE} with '
        "`wrk` and the Python client on this kind of machine.",
        "",
        f"| measure | today ({TODAY_DATE}) | now | target | met |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += [f"| {' | '.join(row)} |" for row in targets(h)]
    lines += [
        "",
        f"The paths ({CONNECTIONS} connections: calls/s and its ratio to direct; one connection: latency per call, and "
        "its p50 minus direct's):",
        "",
        f"| path | calls/s, {CONNECTIONS} connections | vs. direct | p50, one connection | p99 | added over direct |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for p in h.http:
        lines.append(
            f"| {p.label} | {p.rate():,.0f} | {p.rate() / d.rate():.2f}× | {us_(p.p50())} | {us_(p.p99())} | {signed_us(p.p50() - d.p50())} |"
        )
    for p in h.stdio:
        lines.append(
            f"| {p.label} | - | - | {us_(p.p50())} | {us_(p.p99())} | {signed_us(p.p50() - s0.p50())} (over direct stdio) |"
        )
    if h.rust_peer:
        lines += ["", f"The Rust `mcp-proxy` {RUST_PEER_VERSION} is {h.rust_peer}."]

    def per_call(reports: list[dict]) -> tuple[float, dict]:
        per = {k: median(r["cpu_us_per_call"][k] for r in reports) for k in ("daemon", "supervisor", "server", "self")}
        return median(r["calls_per_s"] for r in reports), per

    rate, per = per_call(h.cpu)
    tcp_rate, tcp = per_call(h.cpu_tcp)
    rss = h.rss
    lines += [
        "",
        f"{CPU_CALLERS} callers on `/mcp` (control socket, the row of record): {rate:,.0f} calls/s; CPU per call: daemon "
        f"{us_(per['daemon'])}, supervisor {us_(per['supervisor'])}, server {us_(per['server'])}, the load generator "
        f"{us_(per['self'])}. Every request on the control socket is a connection of its own (so that a stop or an "
        f"upgrade drains without dropping a request already sent). The same {CPU_CALLERS} callers on `/mcp/fake` over TCP, "
        f"each on one kept-alive connection: {tcp_rate:,.0f} calls/s; daemon {us_(tcp['daemon'])}, supervisor "
        f"{us_(tcp['supervisor'])}, server {us_(tcp['server'])}. The OS counts CPU time in clock ticks (10 ms), so a row "
        "needs many calls to be exact.",
        "",
        f"`mcpx ls` (one server, the daemon running): median {median(h.ls) * 1000:.2f} ms over {len(h.ls)} runs, wall "
        "clock from spawn to exit.",
        "",
        f"Memory: a fresh private mcpx per sample ({len(rss)}), the fake server started; the daemon's `VmRSS` once idle, "
        f"then one `tools/call big` of {BIG_BYTES // (1024 * 1024)} MiB through `/mcp/fake` on the control socket and "
        "the daemon's `VmHWM` (peak RSS) after it: "
        + "; ".join(f"idle {r['idle'] / 1024:.1f} MiB, peak {r['peak'] / 1024:.1f} MiB" for r in rss)
        + ". The row's multiple is (peak − idle) / message size, the median of the samples.",
        "",
    ]
    return lines
