"""The faults, one at a time at seeded random times (exponential gaps, 4 s on average unless --fault-gap says otherwise): kill -9
of the daemon, of a supervisor or of a server (a supervised one's child, or the unsupervised
`solo`); `mcpx upgrade` (alternately to a copy of the binary and back); and edits of the
configuration: add a server, remove one, change `fp`'s fingerprint (its environment). Each done
goes into the timeline with its start and end; one that cannot be done (nothing to kill) is
skipped, and an upgrade that fails is kept as a fault failure."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
from pathlib import Path

from bench.procs import alive

from .callers import Shared, pick
from .watch import daemon_pid

MEAN_GAP_S = 4.0
FAULTS = (
    ("kill daemon", 2),
    ("kill supervisor", 2),
    ("kill child", 2),
    ("upgrade", 1.5),
    ("add server", 1),
    ("remove server", 1),
    ("fingerprint", 1),
)
MAX_DYNAMIC = 3  # dynamic servers at once; past it, "add server" removes one instead
COMMAND_TIMEOUT_S = 60


class Faults(threading.Thread):
    def __init__(self, shared: Shared, seed: int, binaries: list[Path], mean_gap: float = MEAN_GAP_S) -> None:
        super().__init__(name="faults", daemon=True)
        self.mean_gap = mean_gap
        self.shared = shared
        self.rng = random.Random(f"{seed}-faults")
        self.binaries = binaries  # the upgrades go to each in turn
        self.upgrades = 0
        self.skipped: dict[str, int] = {}
        self.failures: list[str] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.shared.stop.wait(self.rng.expovariate(1 / self.mean_gap)):
                kind = pick(self.rng, FAULTS)
                if not self.do(kind):
                    self.skipped[kind] = self.skipped.get(kind, 0) + 1
        except BaseException as e:  # noqa: BLE001 - the driver's own failure, reported by main
            self.error = e

    def mcpx(self, *args: str) -> subprocess.CompletedProcess:
        m = self.shared.m
        return subprocess.run(
            [str(m.binary), *args], env=m.env, stdin=subprocess.DEVNULL, capture_output=True, timeout=COMMAND_TIMEOUT_S
        )

    def do(self, kind: str) -> bool:
        """Does one fault; False when there was nothing to do it to."""
        timeline, config = self.shared.timeline, self.shared.config
        if kind == "kill daemon":
            pid = daemon_pid(self.shared.m)
            if pid is None:
                return False
            self.shared.m.track(pid)
            event = timeline.begin(kind)
            os.kill(pid, signal.SIGKILL)
            timeline.end(event, detail=f"pid {pid}")
        elif kind in ("kill supervisor", "kill child"):
            return self.kill_instance(kind)
        elif kind == "upgrade":
            self.upgrades += 1
            binary = self.binaries[self.upgrades % len(self.binaries)]
            event = timeline.begin(kind)
            try:
                done = self.mcpx("upgrade", "--binary", str(binary))
                ok, said = done.returncode == 0, done.stderr.decode(errors="replace").strip()[-300:]
            except subprocess.TimeoutExpired:
                ok, said = False, f"did not finish within {COMMAND_TIMEOUT_S}s"
            timeline.end(event, detail=str(binary))
            if not ok:
                self.failures.append(f"`mcpx upgrade --binary {binary}`: {said}")
        elif kind == "add server" and len(config.dynamic()) < MAX_DYNAMIC:
            event = timeline.begin(kind)
            timeline.end(event, config.add_server())
        elif kind in ("add server", "remove server"):
            names = config.dynamic()
            if not names:
                return False
            name = self.rng.choice(names)
            event = timeline.begin("remove server", name)
            config.remove_server(name)
            timeline.end(event)
        elif kind == "fingerprint":
            event = timeline.begin(kind, "fp")
            timeline.end(event, detail=config.change_fingerprint())
        return True

    def kill_instance(self, kind: str) -> bool:
        """kill -9 of a running instance's supervisor or server, found with `mcpx status --json`."""
        try:
            done = self.mcpx("status", "--json")
            insts = json.loads(done.stdout).get("instances", []) if done.returncode == 0 else []
        except (subprocess.TimeoutExpired, ValueError, AttributeError):
            return False
        field = "supervisor_pid" if kind == "kill supervisor" else "pid"
        for i in insts:
            self.shared.m.track(i.get("pid"), i.get("supervisor_pid"))
        targets = [i for i in insts if isinstance(i.get(field), int) and alive(i[field])]
        if not targets:
            return False
        inst = self.rng.choice(sorted(targets, key=lambda i: i[field]))
        event = self.shared.timeline.begin(kind, inst.get("server"))
        os.kill(inst[field], signal.SIGKILL)
        self.shared.timeline.end(event, detail=f"pid {inst[field]}")
        return True
