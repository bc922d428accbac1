"""The daemon watched over its lifetimes: its pid (from `daemon.pid`, checked to be this run's),
its open descriptors and its RSS, sampled every 200 ms; a lifetime ends when the daemon is
killed or upgraded. Within each lifetime long enough to judge, the descriptors must stay flat."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from bench.mcpx import Mcpx
from bench.procs import alive

from .world import Timeline, now

SAMPLE_S = 0.2
# The growth allowed within one lifetime, in descriptors, between the fewest open in its second
# quarter and the fewest open in its last. The second, because a new daemon starts its instances
# on the first calls; the fewest, because each caller's connection (8) and each call in flight
# come and go; the slack, because instances started later each keep a few open for good (a
# supervisor's attach socket, an unsupervised server's three pipes, a remote server's
# connections): 8 servers at most at up to 4 each. A leak of one descriptor per call or per
# request outgrows it within seconds under this load (40 calls a second or so).
FD_SLACK = 32
MIN_LIFETIME_S = 5.0  # shorter lifetimes are reported, not judged
MIN_SAMPLES = 20


def daemon_pid(m: Mcpx) -> int | None:
    """The pid in this run's `daemon.pid`, if that process runs with this run's runtime directory."""
    runtime = m.env["MCPX_RUNTIME_DIR"]
    try:
        pid = int((Path(runtime) / "daemon.pid").read_text().split()[0])
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except (OSError, ValueError, IndexError):
        return None
    if not alive(pid) or f"MCPX_RUNTIME_DIR={runtime}".encode() not in env:
        return None
    return pid


def record_bytes(m: Mcpx) -> int:
    """What the activity record's files take on disk (allocated blocks, as `du` counts)."""
    total = 0
    try:
        for entry in os.scandir(Path(m.env["MCPX_STATE_DIR"]) / "activity"):
            try:
                total += entry.stat(follow_symlinks=False).st_blocks * 512
            except OSError:
                pass
    except OSError:
        pass
    return total


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


@dataclass
class Lifetime:
    pid: int
    samples: list[tuple[float, int, int]]  # (time, descriptors, RSS KiB)

    @property
    def seconds(self) -> float:
        return self.samples[-1][0] - self.samples[0][0]

    @property
    def judged(self) -> bool:
        return self.seconds >= MIN_LIFETIME_S and len(self.samples) >= MIN_SAMPLES

    @property
    def growth(self) -> int:
        """Fewest descriptors open in the last quarter minus fewest in the second."""
        q = max(1, len(self.samples) // 4)
        return min(s[1] for s in self.samples[-q:]) - min(s[1] for s in self.samples[q : 2 * q])


class Watch(threading.Thread):
    def __init__(self, m: Mcpx, stop: threading.Event) -> None:
        super().__init__(name="watch", daemon=True)
        self.m, self.stop = m, stop
        self.samples: list[tuple[float, int, int, int]] = []  # (time, pid, descriptors, RSS KiB)
        self.record_max = 0  # the most the activity record's files took on disk, in bytes

    def run(self) -> None:
        while not self.stop.wait(SAMPLE_S):
            self.record_max = max(self.record_max, record_bytes(self.m))
            pid = daemon_pid(self.m)
            if pid is None:
                continue
            self.m.track(pid)
            try:
                fds = len(os.listdir(f"/proc/{pid}/fd"))
            except OSError:
                continue
            rss = rss_kib(pid)
            if rss is not None:
                self.samples.append((now(), pid, fds, rss))

    def lifetimes(self, timeline: Timeline) -> list[Lifetime]:
        """The samples cut into lifetimes: at a new pid, and at each upgrade (samples taken
        while one runs belong to neither side)."""
        upgrades = [(s, e) for s, e, kind, _, _ in timeline.closed() if kind == "upgrade"]
        out: list[Lifetime] = []
        key = None
        for t, pid, fds, rss in self.samples:
            if any(s <= t <= e for s, e in upgrades):
                key = None
                continue
            k = (pid, sum(1 for _, e in upgrades if e < t))
            if k != key:
                out.append(Lifetime(pid, []))
                key = k
            out[-1].samples.append((t, fds, rss))
        return out
