#!/usr/bin/env python3
"""Idle wake-ups, side by side: for each mcpx binary given (for example the release build
before a change and after it), a private daemon with 1, 10 and 100 idle fake servers, each
under its supervisor; after the servers started and a settling pause, the context switches of
the daemon (all its threads) and of every supervisor are counted over a window, from
/proc/<pid>/task/*/status (voluntary + involuntary: each is a wake-up). The binaries take
turns at each size, so machine noise hits them alike. Prints one Markdown table.

Usage: python3 scripts/measure_idle.py [--seconds S] LABEL=PATH [LABEL=PATH ...]
  e.g. python3 scripts/measure_idle.py before=/tmp/mcpx-old after=target/release/mcpx
(the fake server is target/release/mcpx-fake-server; build it with
cargo build --release -p mcpx -p mcpx-fake-server)
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from bench.mcpx import scratch_env
from bench.procs import supervisors, switches, woke

ROOT = Path(__file__).resolve().parent.parent
FAKE = ROOT / "target" / "release" / "mcpx-fake-server"
SIZES = (1, 10, 100)
# Longer than tokio's 10 s keep-alive of idle blocking threads, so the threads the start-up
# used have exited before the window opens.
SETTLE_S = 15.0


def measure(binary: Path, servers: int, seconds: float) -> tuple[float, float]:
    """Wake-ups per second of the daemon and of all supervisors together, with `servers`
    idle fake servers running under `binary`."""
    with tempfile.TemporaryDirectory(prefix="mcpx-idle-") as tmp:
        root = Path(tmp)
        servers_config = {f"s{i}": {"command": str(FAKE), "env": {"SERVER_ID": str(i)}} for i in range(servers)}
        env = scratch_env(root, servers_config)

        def mcpx(*args: str) -> None:
            subprocess.run([str(binary), *args], env=env, check=True, capture_output=True, timeout=300)

        try:
            mcpx("refresh")
            daemon = int((root / "run" / "daemon.pid").read_text().split()[0])
            sups = supervisors(root)
            if len(sups) != servers:
                raise SystemExit(f"{binary}: {len(sups)} supervisors running, expected {servers}")
            time.sleep(SETTLE_S)
            d0, s0 = switches(daemon), [switches(p) for p in sups]
            time.sleep(seconds)
            d1, s1 = switches(daemon), [switches(p) for p in sups]
            return woke(d0, d1) / seconds, sum(woke(a, b) for a, b in zip(s0, s1, strict=True)) / seconds
        finally:
            subprocess.run([str(binary), "stop", "--all"], env=env, capture_output=True, timeout=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0, help="the counting window (default 30)")
    parser.add_argument("binaries", nargs="+", metavar="LABEL=PATH")
    args = parser.parse_args()
    binaries = [(label, Path(path).resolve()) for label, path in (b.split("=", 1) for b in args.binaries)]
    rows = []
    for n in SIZES:
        for label, binary in binaries:
            daemon, sups = measure(binary, n, args.seconds)
            rows.append((n, label, daemon, sups))
            print(f"{n} servers, {label}: daemon {daemon:.2f}/s, supervisors {sups:.2f}/s", flush=True)
    print()
    print(f"Wake-ups per second over {args.seconds:.0f} s, idle (context switches, /proc/<pid>/task/*/status):")
    print()
    print("| idle servers | binary | daemon | all supervisors | per supervisor | total |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for n, label, daemon, sups in rows:
        print(f"| {n} | {label} | {daemon:.2f} | {sups:.2f} | {sups / n:.2f} | {daemon + sups:.2f} |")


if __name__ == "__main__":
    main()
