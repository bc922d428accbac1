"""What the soak's threads share: the private mcpx's configuration (and its edits), the timeline
of faults, and the ledger of calls with the rules that explain a failure."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.mcpx import ORPHAN_TIMEOUT

CALL_TIMEOUT_S = 20  # every server's callTimeout, and `mcpx call --timeout`
HANG_GRACE_S = 25  # on top of it: a daemon restarted by the call, the queue of an exclusive server
HANG_AFTER_S = CALL_TIMEOUT_S + HANG_GRACE_S  # a call not over by then is a hang
# A failure that a fault explains may follow it by this long: the daemon killed just before a
# call is restarted by the next `mcpx call`, and an instance killed is noticed when its next
# request fails.
LOOKBACK_S = 10.0

# The faults of the daemon, as the timeline names them: only these explain a broken
# connection, an SSE stream that ends without its answer, or a lost session.
DAEMON_FAULTS = ("kill daemon", "upgrade")


def now() -> float:
    return time.monotonic()


class Timeline:
    """The faults, each as [start, end, kind, server or None, detail]; a fault is in it from the
    moment it starts (`begin`), its end open (None) until `end`, so that a call failing while
    an upgrade still runs is explained by it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[list] = []

    def begin(self, kind: str, server: str | None = None) -> list:
        event = [now(), None, kind, server, ""]
        with self.lock:
            self.events.append(event)
        return event

    def end(self, event: list, server: str | None = None, detail: str = "") -> None:
        with self.lock:
            event[1], event[3], event[4] = now(), server or event[3], detail

    def closed(self) -> list[tuple]:
        """Every fault as (start, end, kind, server, detail), one still open ending now."""
        with self.lock:
            return [(s, e if e is not None else now(), k, srv, d) for s, e, k, srv, d in self.events]

    def during(self, start: float, end: float, kinds: tuple[str, ...], server: str | None = None) -> bool:
        """Whether a fault of `kinds` (on `server`, or on any server for a daemon fault) overlaps
        [start - LOOKBACK_S, end]."""
        for s, e, kind, srv, _ in self.closed():
            if (
                kind in kinds
                and e >= start - LOOKBACK_S
                and s <= end
                and (server is None or srv is None or srv == server)
            ):
                return True
        return False

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for _, _, kind, _, _ in self.closed():
            out[kind] = out.get(kind, 0) + 1
        return out


@dataclass
class Call:
    """One call and how it ended. `outcome`: answered, failed, wrong, hang or undocumented."""

    caller: str
    path: str  # shell, serve or http
    server: str
    op: str  # echo, progress, big, cancel, timeout
    token: str
    start: float
    end: float = 0.0
    outcome: str = ""
    kind: str = ""  # for a failure: what it was (exit 4, JSON-RPC -32603, connection lost, ...)
    detail: str = ""


@dataclass
class Ledger:
    """Every call of the run, appended once each when it ends."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    calls: list[Call] = field(default_factory=list)

    def add(self, call: Call) -> None:
        call.end = call.end or now()
        with self.lock:
            self.calls.append(call)

    def snapshot(self) -> list[Call]:
        with self.lock:
            return list(self.calls)


def fake_server(fake: Path, tag: str, **mcpx: object) -> dict:
    """A config entry of the fake server; `tag` gives each its own environment (its own instances)."""
    return {
        "command": str(fake),
        "env": {"CHAOS_SERVER": tag},
        "mcpx": {"orphanTimeout": ORPHAN_TIMEOUT, "callTimeout": f"{CALL_TIMEOUT_S}s", **mcpx},
    }


# The activity record's size during the soak, in bytes (`"activity": {"maxBytes": ...}`): the
# smallest it takes, so the soak checks the bound holds under calls, kills and upgrades.
ACTIVITY_CAP = 1 << 20


class Config:
    """The servers of the run's configuration file; every edit rewrites the file atomically (a
    temporary file renamed over it), so mcpx never reads half of one.

    Static servers, called by every caller: `shared` (one instance for every call), `excl`
    (exclusive: one call at a time per instance, at most 2 instances), `solo` (not supervised:
    the daemon's own child), `remote` (the fake server over streamable HTTP) and `fp` (its
    fingerprint changes). Dynamic servers `extra-N` come and go, called by the shell callers."""

    STATIC = ("shared", "excl", "solo", "remote", "fp")

    def __init__(self, path: Path, fake: Path, remote_url: str) -> None:
        self.path = path
        self.fake = fake
        self.lock = threading.Lock()
        self.generation = 0  # of `fp`'s fingerprint
        self.next_extra = 1
        self.removed: dict[str, float] = {}  # dynamic server -> when it was removed
        self.servers: dict[str, dict] = {
            "shared": fake_server(fake, "shared"),
            "excl": fake_server(fake, "excl", sharing="exclusive", max=2),
            "solo": fake_server(fake, "solo", supervised=False),
            "remote": {"url": remote_url, "mcpx": {"callTimeout": f"{CALL_TIMEOUT_S}s"}},
            "fp": fake_server(fake, "fp-0"),
        }
        self.write()

    def write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        config = {"activity": {"maxBytes": ACTIVITY_CAP}, "mcpServers": self.servers}
        tmp.write_text(json.dumps(config, indent=2) + "\n")
        os.replace(tmp, self.path)

    def names(self) -> list[str]:
        with self.lock:
            return list(self.servers)

    def dynamic(self) -> list[str]:
        with self.lock:
            return [n for n in self.servers if n not in self.STATIC]

    def add_server(self) -> str:
        with self.lock:
            name = f"extra-{self.next_extra}"
            self.next_extra += 1
            self.servers[name] = fake_server(self.fake, name)
            self.write()
            return name

    def remove_server(self, name: str) -> None:
        with self.lock:
            del self.servers[name]
            self.removed[name] = now()
            self.write()

    def change_fingerprint(self) -> str:
        with self.lock:
            self.generation += 1
            self.servers["fp"]["env"]["CHAOS_SERVER"] = f"fp-{self.generation}"
            self.write()
            return f"fp-{self.generation}"

    def removed_by(self, server: str, end: float) -> bool:
        with self.lock:
            at = self.removed.get(server)
        return at is not None and at <= end
