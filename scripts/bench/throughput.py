"""Section 7: the throughput of one shared instance (the fake server, in its own private mcpx),
not whole processes: 1, 8 and 64 callers (threads of this process) each calling `echo` back to
back for a fixed time, through the daemon's MCP endpoint (streamable HTTP, POST /mcp on the
control socket, one MCP session and one keep-alive connection per caller, the tool named
`fake__echo`) vs. the same callers straight to one fake server over its stdio (a writer sends
each caller's next request once its answer is in, a reader thread matches answers by id).
Rounds of the two take turns; calls/s (median of the rounds), per-call latency, and the CPU
time per call of each process (the client, daemon, supervisor, server). Every answer's id and
text are checked."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .common import WARMUP, BenchError, calls_s, log, median, ms, percentile, plural, us
from .http_client import HttpMcp, UnixHTTPConnection
from .mcpx import fake_entry, private_mcpx
from .paths import THROUGHPUT_WARMUP_SECONDS, HttpPath, Round, StdioPath, all_latencies, cpu_per_call, rate
from .procs import Spawned, cpu_of, stop_spawned
from .stdio_client import StdioMcp

THROUGHPUT_CALLERS = (1, 8, 64)  # concurrent callers of one shared instance


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


def run(args, tmp: Path, registry: list) -> TputResults:
    fake = args.fake_server
    m = private_mcpx(args.mcpx, tmp / "t", {"fake": fake_entry(fake)}, registry)
    m.refresh(["fake"])
    before = m.instance("fake")
    daemon_pid, sup_pid, server_pid = before
    callers = THROUGHPUT_CALLERS
    # Each caller's MCP session, kept through the rounds; the daemon answers JSON, and nothing
    # but 202 to the notification.
    sock = str(Path(m.env["MCPX_RUNTIME_DIR"]) / "daemon.sock")
    clients = [
        HttpMcp(
            "daemon endpoint",
            lambda: UnixHTTPConnection(sock),
            accept="application/json",
            version_header=False,
            notified=(202,),
        )
        for _ in range(max(callers))
    ]
    daemon = HttpPath(
        "daemon",
        "through the daemon",
        clients,
        "fake__echo",
        cpu_of({"daemon": daemon_pid, "supervisor": sup_pid, "server": server_pid}),
    )
    sessions = {c.session for c in clients}
    if None in sessions or len(sessions) != len(clients):
        raise BenchError(
            f"the daemon endpoint gave {len(sessions - {None})} distinct sessions to {len(clients)} initializes"
        )
    spawned: list[Spawned] = []
    cases = [TputCase(n) for n in callers]
    try:
        server = Spawned("the fake server", [str(fake)], tmp / "tput-direct-stderr.log", stdio=True)
        spawned.append(server)
        client = StdioMcp(server.proc, "direct", server.stderr_tail)
        direct = StdioPath("direct", "direct", client, "echo", cpu_of({"server": server.proc.pid}))
        log(
            f"throughput: {len(callers)} caller counts ({', '.join(map(str, callers))}), each {WARMUP} warm-up rounds of "
            f"{THROUGHPUT_WARMUP_SECONDS:g}s and {args.throughput_repeats} measured round"
            f"{plural(args.throughput_repeats)} of {args.throughput_seconds:g}s of the daemon and the direct client in turn"
        )
        for case in cases:
            for _ in range(WARMUP):
                daemon.concurrent(case.callers, THROUGHPUT_WARMUP_SECONDS)
                direct.concurrent(case.callers, THROUGHPUT_WARMUP_SECONDS)
            for _ in range(args.throughput_repeats):
                case.daemon.append(daemon.concurrent(case.callers, args.throughput_seconds))
                case.direct.append(direct.concurrent(case.callers, args.throughput_seconds))
            log(
                f"throughput: {case.callers} caller{plural(case.callers)}: {rate(case.daemon):.0f} calls/s through the daemon, "
                f"{rate(case.direct):.0f} direct"
            )
    finally:
        stop_spawned(spawned, "throughput")
    if server.proc.returncode != 0:
        raise BenchError(
            f"direct: the fake server exited with status {server.proc.returncode} when its stdin closed{server.stderr_tail()}"
        )
    daemon.close(expect=204)
    after = m.instance("fake")
    if after != before:
        raise BenchError(
            f"throughput: the daemon, supervisor or server changed during the rounds (pids {before} -> {after})"
        )
    return TputResults(cases, args.throughput_seconds, args.throughput_repeats, server_pid)


# --- the report -----------------------------------------------------------------------------


def tput_ratio(daemon: float, direct: float) -> str:
    r = daemon / direct
    return f"{r:.2f}x" + (f" (direct {direct / daemon:.1f}x as many)" if r < 1 else "")


def summary(t: TputResults) -> list[str]:
    lines = [
        "| concurrent callers | through the daemon | direct | daemon / direct | latency through the daemon | latency direct |",
        "| ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for c in t.cases:
        d, s = rate(c.daemon), rate(c.direct)
        lines.append(
            f"| {c.callers} | {calls_s(d)} calls/s | {calls_s(s)} calls/s | **{tput_ratio(d, s)}** "
            f"| {ms(median(all_latencies(c.daemon)))} | {ms(median(all_latencies(c.direct)))} |"
        )
    return lines


def section(n: int, t: TputResults) -> list[str]:
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
                f"| {sum(r.calls for r in rounds):,} | {ms(median(lat))} | {ms(percentile(lat, 90))} |"
            )
    lines.append("")
    for c in t.cases:
        d, s = rate(c.daemon), rate(c.direct)
        lines += [
            f"With {c.callers} caller{plural(c.callers)}, the daemon serves **{calls_s(d)} calls/s, "
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
            f"With {c.callers} caller{plural(c.callers)}, mcpx (daemon and supervisor) spends {us(mcpx_cpu)} "
            f"of CPU time on a call, the server {us(cpu_per_call(c.daemon, 'server'))} (direct: "
            f"{us(cpu_per_call(c.direct, 'server'))}), the Python client {us(cpu_per_call(c.daemon, 'client'))} "
            f"(direct: {us(cpu_per_call(c.direct, 'client'))}).",
            "",
        ]
    return lines
