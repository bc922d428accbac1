"""The command line: one table of options, with the defaults (and the quick mode's) of the
numbers that set how long each section measures."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from .common import ROOT

# (flags, add_argument keywords); a number's "quick" is its default with --quick, and its help
# ends with both defaults.
OPTIONS: list[tuple[str, dict]] = [
    ("--mcpx", dict(type=Path, required=True, help="the mcpx binary to time")),
    ("--profile", dict(default=None, help="the cargo profile it was built with (default: from its path)")),
    ("--quick", dict(action="store_true", help="3 runs per command; write a temporary file, not BENCHMARKS.md")),
    ("--iterations", dict(type=int, default=30, quick=3, help="measured runs per command")),
    ("--output", dict(type=Path, default=None, help="where to write the report (default BENCHMARKS.md)")),
    ("--no-cold", dict(action="store_true", help="skip the row with no daemon running")),
    (
        "--fake-server",
        dict(
            type=Path,
            default=None,
            help="the mcpx-fake-server binary, for the supervisor sections (default: next to --mcpx)",
        ),
    ),
    ("--kills", dict(type=int, default=10, quick=1, help="measured kill -9s of the daemon per size")),
    (
        "--latency-iterations",
        dict(type=int, default=100, quick=3, help="measured calls per command, supervised vs. not"),
    ),
    ("--throughput-seconds", dict(type=float, default=3.0, quick=1.0, help="seconds per measured throughput round")),
    (
        "--throughput-repeats",
        dict(type=int, default=5, quick=1, help="measured throughput rounds per side and number of callers"),
    ),
    (
        "--proxy-calls",
        dict(
            type=int,
            default=2000,
            quick=10,
            help="measured pings and calls (each) per path in the proxy comparison and the remote servers' section",
        ),
    ),
    (
        "--proxy-rounds",
        dict(
            type=int,
            default=5,
            quick=1,
            help="rounds of the proxy comparison and of the remote servers' section, the paths taking turns in each",
        ),
    ),
    (
        "--proxy-seconds",
        dict(
            type=float,
            default=2.0,
            quick=0.2,
            help="seconds per throughput round in the proxy comparison and the remote servers' section",
        ),
    ),
    (
        "--hotpath-seconds",
        dict(
            type=float,
            default=5.0,
            quick=0.2,
            help="seconds of each throughput run in the hot path section (16 and 64 callers)",
        ),
    ),
    (
        "--hotpath-calls",
        dict(type=int, default=2000, quick=20, help="calls of each one-connection latency run in the hot path section"),
    ),
    (
        "--hotpath-rounds",
        dict(type=int, default=3, quick=1, help="rounds of the hot path section, the paths taking turns in each"),
    ),
    ("--load", dict(type=Path, default=None, help="the mcpx-load binary (default: next to --mcpx)")),
    (
        "--rust-peer",
        dict(
            type=Path,
            default=None,
            help="the Rust mcp-proxy 0.6.0 binary for the hot path section (scripts/bench.sh builds it; never in --quick)",
        ),
    ),
    ("--only-hotpath", dict(action="store_true", help="run only the hot path section and print it (writes no report)")),
    ("--only-proxies", dict(action="store_true", help="run only the proxy comparison and print it (writes no report)")),
    (
        "--only-remote",
        dict(action="store_true", help="run only the remote servers' section and print it (writes no report)"),
    ),
    ("--only-code", dict(action="store_true", help="run only the code mode section and print it (writes no report)")),
    ("--only-ui", dict(action="store_true", help="run only the dashboard's section and print it (writes no report)")),
    (
        "--only-scale",
        dict(action="store_true", help="run only the hot path and at-scale sections and print their targets"),
    ),
    (
        "--only-sharing",
        dict(action="store_true", help="run only the sharing table (N clients, M real servers) and print it"),
    ),
    ("--command", dict(default=None, help="how the benchmark was started, for the report's header")),
    ("--e2e", dict(type=Path, default=ROOT / "e2e", help="the directory scripts/setup-e2e.sh installed into")),
]

# The numbers' defaults without --quick, by option name (`iterations`, `kills`, ...).
DEFAULTS = {flag[2:].replace("-", "_"): kw["default"] for flag, kw in OPTIONS if "quick" in kw}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="scripts/bench",
        description="Time mcpx against a direct MCP client and write BENCHMARKS.md (see scripts/bench.sh).",
    )
    quick = {}
    for flag, kw in OPTIONS:
        kw = dict(kw)
        if "quick" in kw:
            name = flag[2:].replace("-", "_")
            quick[name] = (kw.pop("quick"), kw["default"], kw["type"], flag)
            kw["help"] += f" (default {kw['default']:g}, {quick[name][0]:g} with --quick)"
            kw["default"] = None
        p.add_argument(flag, **kw)
    a = p.parse_args()
    for name, (quick_value, default, kind, flag) in quick.items():
        if getattr(a, name) is None:
            setattr(a, name, quick_value if a.quick else default)
        value = getattr(a, name)
        if kind is int and value < 1:
            p.error(f"{flag} must be at least 1")
        if kind is float and value <= 0:
            p.error(f"{flag} must be more than 0")
    a.mcpx = a.mcpx.resolve()
    if not os.access(a.mcpx, os.X_OK):
        p.error(f"{a.mcpx} is not an executable file (build it first: cargo build --release -p mcpx)")
    if a.profile is None:
        a.profile = a.mcpx.parent.name
    a.fake_server = (a.fake_server or a.mcpx.parent / "mcpx-fake-server").resolve()
    if not os.access(a.fake_server, os.X_OK):
        p.error(
            f"{a.fake_server} is not an executable file (build it first: cargo build --release -p mcpx-fake-server)"
        )
    a.load = (a.load or a.mcpx.parent / "mcpx-load").resolve()
    if not os.access(a.load, os.X_OK):
        p.error(f"{a.load} is not an executable file (build it first: cargo build --release -p mcpx-load)")
    if a.command is None:
        a.command = shlex.join(["python3", "scripts/bench", *sys.argv[1:]])
    a.e2e = a.e2e.resolve()
    return a
