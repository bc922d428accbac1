#!/usr/bin/env python3
"""Side by side: the release mcpx as built (line tables) and the same binary with its debug
information stripped (what `strip = "debuginfo"` in the release profile makes): file size,
`mcpx ls` wall time against a running daemon, and each supervisor's unshared memory (USS,
from /proc/<pid>/smaps_rollup), alternating the two binaries round by round.

Usage: python3 scripts/measure_strip.py [ROUNDS]   (after cargo build --release -p mcpx -p mcpx-fake-server)
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.mcpx import scratch_env
from bench.procs import supervisors

ROOT = Path(__file__).resolve().parent.parent
RELEASE = ROOT / "target" / "release"
SERVERS = 5


def uss_kib(pid: int) -> int:
    """Private_Clean + Private_Dirty of a process, in KiB."""
    total = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:")):
            total += int(line.split()[1])
    return total


def one_round(binary: Path, ls_runs: int) -> tuple[list[float], list[int]]:
    """Starts a private daemon with SERVERS fake servers from `binary`, times `mcpx ls`,
    reads the supervisors' USS, stops everything."""
    with tempfile.TemporaryDirectory(prefix="mcpx-strip-") as tmp:
        root = Path(tmp)
        fake = str(RELEASE / "mcpx-fake-server")
        env = scratch_env(root, {f"s{i}": {"command": fake} for i in range(SERVERS)})

        def mcpx(*args: str) -> None:
            subprocess.run([str(binary), *args], env=env, check=True, capture_output=True)

        try:
            for i in range(SERVERS):
                mcpx("call", f"s{i}.echo", '{"message":"up"}')
            times = []
            for _ in range(ls_runs):
                start = time.perf_counter()
                mcpx("ls")
                times.append((time.perf_counter() - start) * 1000)
            uss = [uss_kib(pid) for pid in supervisors(root)]
        finally:
            subprocess.run([str(binary), "stop", "--all"], env=env, capture_output=True)
        return times, uss


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    built = RELEASE / "mcpx"
    stripped_dir = Path(tempfile.mkdtemp(prefix="mcpx-stripped-"))
    stripped = stripped_dir / "mcpx"
    shutil.copy2(built, stripped)
    subprocess.run(["strip", "--strip-debug", str(stripped)], check=True)
    results: dict[str, tuple[list[float], list[int]]] = {"line tables": ([], []), "stripped": ([], [])}
    for _ in range(rounds):
        for name, binary in (("line tables", built), ("stripped", stripped)):
            times, uss = one_round(binary, 20)
            results[name][0].extend(times)
            results[name][1].extend(uss)
    print("| binary | size | `mcpx ls` median | supervisor USS median |")
    print("|---|---|---|---|")
    for name, binary in (("line tables", built), ("stripped", stripped)):
        times, uss = results[name]
        size = binary.stat().st_size / 1e6
        print(f"| {name} | {size:.1f} MB | {statistics.median(times):.2f} ms | {statistics.median(uss)} KiB |")
    shutil.rmtree(stripped_dir)


if __name__ == "__main__":
    main()
