"""The dashboard at scale (`mcpx ui`, docs/ui.md): a private mcpx with 100 configured fake servers
(`fake0`..`fake99`, each listed once, so each has a running instance and a cached tool list), signed
in through `mcpx ui`'s one-time link; then the overview (`GET /`, the page with every server of
every file) fetched again and again on one keep-alive connection, timed from the request to the
last byte of the answer."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from .common import BenchError, log, median, percentile
from .http_client import TcpHTTPConnection
from .mcpx import fake_entry, private_mcpx

UI_SERVERS = 100  # configured servers
TARGET_MS = 100.0  # the target for the overview at that size


@dataclass
class UiResults:
    servers: int
    times: list[float]  # seconds per overview
    bytes: int  # the overview's size


def run(args, tmp: Path, registry: list) -> UiResults:
    names = [f"fake{i}" for i in range(UI_SERVERS)]
    servers = {name: fake_entry(args.fake_server, i) for i, name in enumerate(names)}
    m = private_mcpx(args.mcpx, tmp / "ui", servers, registry)
    m.refresh(names)
    _, out = m.run("ui", "--no-open", "--json")
    link = json.loads(out)
    port, path = int(link["port"]), link["url"][link["url"].index("/enter") :]
    conn = TcpHTTPConnection(port)
    host = {"Host": f"127.0.0.1:{port}"}
    conn.request("GET", path, headers=host)
    entered = conn.getresponse()
    entered.read()
    cookie = (entered.getheader("Set-Cookie") or "").split(";")[0]
    if entered.status != 200 or not cookie:
        raise BenchError(f"ui: the one-time link was refused: {entered.status}")
    runs = max(args.iterations, 3)
    log(f"ui: the overview of {UI_SERVERS} servers, 3 warm-up and {runs} measured fetches")
    times: list[float] = []
    size = 0
    for i in range(3 + runs):
        started = time.perf_counter()
        conn.request("GET", "/", headers={**host, "Cookie": cookie})
        answer = conn.getresponse()
        body = answer.read()
        took = time.perf_counter() - started
        if answer.status != 200 or b">fake99</a>" not in body:
            raise BenchError(f"ui: the overview is wrong ({answer.status}): {body[:300]!r}")
        if i >= 3:
            times.append(took)
        size = len(body)
    conn.close()
    return UiResults(UI_SERVERS, times, size)


def summary(u: UiResults) -> list[str]:
    ms = median(u.times) * 1000
    return [
        "| measure | now | target | met |",
        "| --- | --- | --- | --- |",
        f"| the dashboard's overview, {u.servers} configured servers | {ms:.1f} ms | ≤ {TARGET_MS:.0f} ms | "
        f"{'yes' if ms <= TARGET_MS else 'no'} |",
    ]


def section(n: int, u: UiResults) -> list[str]:
    return [
        f"## {n}. The dashboard at scale",
        "",
        __doc__.replace("\n", " ").strip() if __doc__ else "",
        "",
        "| servers | overview, median | p90 | max | size |",
        "| --- | --- | --- | --- | --- |",
        f"| {u.servers} | {median(u.times) * 1000:.1f} ms | {percentile(u.times, 90) * 1000:.1f} ms | "
        f"{max(u.times) * 1000:.1f} ms | {u.bytes / 1024:.0f} KiB |",
        "",
        *summary(u),
        "",
    ]
