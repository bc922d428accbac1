"""The sharing table, first in the report: N MCP clients (each a copy of the official TypeScript
SDK v2 client, e2e/sdk_share_client.mjs, as N agent sessions would run), all configured with the
same M real servers, either each starting its own servers over stdio, or each going through its
own `mcpx serve` to one daemon. With all N connected: how many processes run for them and the
total PSS of those processes (/proc/PID/smaps_rollup: each page counted once across them), then
a client's first tools/list and first call, as it measures them."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .common import BenchError, log, median
from .mcpx import Mcpx, private_mcpx, stop_private, strays
from .procs import cmdline, kill_survivors, memory_kib, process_tree
from .proxies import NODE22

CLIENT_JS = "sdk_share_client.mjs"  # under e2e/
READY_TIMEOUT = 180.0  # seconds for one client to list and call everything, cold


@dataclass
class Server:
    name: str
    command: list[str]
    env: dict[str, str]
    tool: str
    arguments: dict
    expect: str
    what: str  # for the report


@dataclass
class Side:
    """N clients of one kind, all connected at once."""

    processes: int
    pss_kib: int
    list_ms: list[float]  # each client's, in the order they started
    call_ms: list[float]


@dataclass
class ShareResults:
    servers: list[Server]
    sizes: list[int]
    own: dict[int, Side] = field(default_factory=dict)
    mcpx: dict[int, Side] = field(default_factory=dict)


def servers(args, tmp: Path) -> list[Server]:
    """The M real servers: three of the reference servers on Node 22, two Python ones."""
    e2e = args.e2e
    node = str(e2e / NODE22)

    def js(bin_name: str) -> str:
        return os.path.realpath(e2e / "node_modules" / ".bin" / bin_name)

    files = tmp / "share-files"
    files.mkdir()
    (files / "note.txt").write_text("shared\n")
    repo = tmp / "share-repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    venv = e2e / ".venv" / "bin"

    def pinned(dist: str) -> str:
        """The version of a Python distribution installed in e2e/.venv."""
        code = f"import importlib.metadata as m; print(m.version({dist!r}))"
        out = subprocess.run([str(venv / "python"), "-c", code], capture_output=True, text=True)
        return out.stdout.strip() or "unknown"

    return [
        Server(
            "everything",
            [node, js("mcp-server-everything"), "stdio"],
            {},
            "echo",
            {"message": "hi"},
            "hi",
            "`@modelcontextprotocol/server-everything` (Node)",
        ),
        Server(
            "memory",
            [node, js("mcp-server-memory")],
            {"MEMORY_FILE_PATH": str(tmp / "share-memory.jsonl")},
            "read_graph",
            {},
            "entities",
            "`@modelcontextprotocol/server-memory` (Node)",
        ),
        Server(
            "filesystem",
            [node, js("mcp-server-filesystem"), str(files)],
            {},
            "list_allowed_directories",
            {},
            str(files),
            "`@modelcontextprotocol/server-filesystem` (Node)",
        ),
        Server(
            "time",
            [str(venv / "mcp-server-time"), "--local-timezone", "UTC"],
            {},
            "get_current_time",
            {"timezone": "UTC"},
            "UTC",
            f"`mcp-server-time` {pinned('mcp-server-time')} (Python)",
        ),
        Server(
            "git",
            [str(venv / "mcp-server-git"), "--repository", str(repo)],
            {},
            "git_status",
            {"repo_path": str(repo)},
            "branch",
            f"`mcp-server-git` {pinned('mcp-server-git')} (Python)",
        ),
    ]


def own_config(srv: list[Server]) -> list[dict]:
    """A client that starts each server itself."""
    return [
        {
            "name": s.name,
            "command": s.command[0],
            "args": s.command[1:],
            "env": s.env,
            "calls": [{"tool": s.tool, "arguments": s.arguments, "expect": s.expect}],
        }
        for s in srv
    ]


def mcpx_config(srv: list[Server], m: Mcpx) -> list[dict]:
    """A client with one connection, `mcpx serve`, calling each server's tool through it."""
    calls = [{"tool": f"{s.name}__{s.tool}", "arguments": s.arguments, "expect": s.expect} for s in srv]
    env = {k: v for k, v in m.env.items() if k.startswith("MCPX_")}
    return [{"name": "mcpx", "command": str(m.binary), "args": ["serve"], "env": env, "calls": calls}]


def start_client(args, config: Path, log_file: Path) -> subprocess.Popen:
    env = {**os.environ, "MCPX_E2E_DIR": str(args.e2e)}
    with open(log_file, "ab") as err:
        return subprocess.Popen(
            [str(args.e2e / NODE22), str(args.e2e / CLIENT_JS), str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
        )


def ready(proc: subprocess.Popen, what: str, log_file: Path) -> dict:
    """The client's one line, once it listed and called everything."""
    assert proc.stdout is not None
    deadline = time.monotonic() + READY_TIMEOUT
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
            raise BenchError(f"{what}: no answer within {READY_TIMEOUT:.0f}s; {log_file.read_text()[-1500:]}")
        chunk = os.read(proc.stdout.fileno(), 4096)
        if not chunk:
            raise BenchError(f"{what}: exited with {proc.wait()}; {log_file.read_text()[-1500:]}")
        line += chunk
    return json.loads(line)


def measure(args, n: int, config: list[dict], base: Path, m: Mcpx | None) -> Side:
    """Starts `n` clients one after the other (each once the one before it answered), counts
    the processes serving them and their PSS, then closes them."""
    base.mkdir()
    path = base / "servers.json"
    path.write_text(json.dumps(config))
    clients: list[subprocess.Popen] = []
    seen: dict[int, list[str]] = {}
    answers = []
    try:
        for i in range(n):
            log_file = base / f"client{i}.log"
            clients.append(start_client(args, path, log_file))
            answers.append(ready(clients[-1], f"sharing: client {i + 1} of {n}", log_file))
        time.sleep(1.0)
        mine = {c.pid for c in clients}
        serving = set(process_tree(list(mine))) - mine
        if m is not None:
            serving |= set(strays(m))
        seen = {pid: cmdline(pid) for pid in serving}
        pss = sum(memory_kib(pid)["pss"] for pid in serving)
    finally:
        for c in clients:
            if c.stdin:
                c.stdin.close()
        for c in clients:
            try:
                c.wait(timeout=30)
            except subprocess.TimeoutExpired:
                c.kill()
                c.wait()
    if m is None:
        left = kill_survivors(seen)
        if left:
            raise BenchError(f"sharing: servers still running after their clients closed (now killed): {left}")
    return Side(len(seen), pss, [a["list_ms"] for a in answers], [a["call_ms"] for a in answers])


def run(args, tmp: Path, registry: list) -> ShareResults:
    srv = servers(args, tmp)
    res = ShareResults(srv, [1] if args.quick else [1, 5, 10])
    for n in res.sizes:
        log(f"sharing: {n} client(s), each starting its own {len(srv)} servers")
        res.own[n] = measure(args, n, own_config(srv), tmp / f"share-own-{n}", None)
        log(f"sharing: {n} client(s) through mcpx serve")
        entries = {s.name: {"command": s.command[0], "args": s.command[1:], "env": s.env} for s in srv}
        m = private_mcpx(args.mcpx, tmp / f"share-mcpx-{n}", entries, registry)
        res.mcpx[n] = measure(args, n, mcpx_config(srv, m), tmp / f"share-mcpx-{n}-clients", m)
        stop_private(m)
        registry.remove(m)
    return res


# --- the report -----------------------------------------------------------------------------


def mib(kib: float) -> str:
    return f"{kib / 1024:,.0f} MiB"


def ms(x: float) -> str:
    return f"{x:,.0f} ms" if x >= 10 else f"{x:.1f} ms"


def later(side: Side, what: str) -> str:
    """The median of the clients after the first, for one measure."""
    values = getattr(side, what)[1:]
    return ms(median(values)) if values else "-"


def rows(r: ShareResults, cells) -> list[str]:
    """One row per N: N, then `cells(own, through mcpx)`."""
    return [f"| {n} | " + " | ".join(cells(r.own[n], r.mcpx[n])) + " |" for n in r.sizes]


def table(r: ShareResults) -> list[str]:
    return [
        "| MCP clients | processes: own servers | through mcpx | total PSS: own servers | through mcpx | "
        "through mcpx, of own |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
        *rows(
            r,
            lambda own, mc: [
                str(own.processes),
                str(mc.processes),
                mib(own.pss_kib),
                mib(mc.pss_kib),
                f"{mc.pss_kib / own.pss_kib:.2f}×",
            ],
        ),
        "",
        "| MCP clients | first tools/list: own servers (median) | through mcpx, first client | later clients "
        "(median) | first call: own servers (median) | through mcpx, first client | later clients (median) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *rows(
            r,
            lambda own, mc: [
                ms(median(own.list_ms)),
                ms(mc.list_ms[0]),
                later(mc, "list_ms"),
                ms(median(own.call_ms)),
                ms(mc.call_ms[0]),
                later(mc, "call_ms"),
            ],
        ),
    ]


def section(r: ShareResults) -> list[str]:
    names = ", ".join(s.what for s in r.servers)
    return [
        "## Sharing: N agent sessions, one set of servers",
        "",
        f"N MCP clients, each a copy of the official TypeScript SDK v2 client (`e2e/{CLIENT_JS}`, "
        f"`@modelcontextprotocol/client`, on Node 22), all configured with the same {len(r.servers)} real servers: "
        f"{names}. *Own servers*: each client starts every server itself over stdio, as an agent session "
        "configured with them does. *Through mcpx*: each client starts `mcpx serve` instead, and every `serve` "
        "goes to one daemon, which runs each server once, under its supervisor. The clients start one after the "
        "other, each once the one before it has answered; each lists the tools and calls one tool of every "
        "server (checking the answers), then stays connected.",
        "",
        "With all N connected: the processes that serve them (own servers: the servers the clients started; "
        "through mcpx: the `serve` processes, the daemon, the supervisors and the servers), and their total "
        "PSS (`/proc/PID/smaps_rollup`, which splits each shared page among the processes that map it). The clients "
        "themselves are the same on both sides and not counted.",
        "",
        *table(r),
        "",
        "Times are each client's own, from its start until every first `tools/list` answered and until every "
        "first call answered. Through mcpx, the first client also starts the daemon and every server; a later "
        "client finds them running.",
        "",
    ]
