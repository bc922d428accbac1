"""Sections 1 to 3: whole processes, `mcpx` against a direct client that runs the server itself.

Each row times whole processes, wall clock, from just before the process is spawned until
it has exited (and, for mcpx, its output has been read and checked). The two sides of a row
alternate (mcpx, direct, mcpx, direct, ...) so that machine noise hits both alike:

  ls    `mcpx ls` answered from the schema cache (daemon running, server-everything listed
        once before measuring), and `mcpx tools everything` (the full tool list, also from
        the cache), vs. a direct client: spawn server-everything, `initialize`,
        `notifications/initialized`, `tools/list`, close stdin, wait for the exit.
  call  `mcpx call everything.echo '{"message":"hi"}'` with the daemon and the server
        instance warm, vs. a direct client: spawn, `initialize`, `tools/call` echo, exit.
  cold  the same `mcpx call` with no daemon running (it starts the daemon and the server;
        `mcpx stop --all` runs, untimed, before each one), vs. the same direct client.

Every response is checked (the tool list has `echo`, the echo text comes back), so a broken
setup fails the benchmark instead of timing errors. mcpx runs with private state, cache and
runtime directories and its own config in a temporary directory."""

from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .common import (
    ECHO_ARGS,
    ECHO_MESSAGE,
    ECHO_TEXT,
    ROOT,
    STEP_TIMEOUT,
    BenchError,
    Row,
    Side,
    check_tools,
    log,
    measure,
    median,
    ms,
    ratio_words,
    sides_table,
    texts,
)
from .mcpx import Mcpx, private_mcpx
from .procs import close_pipes, stderr_tail
from .stdio_client import StdioMcp


@dataclass
class DirectResult:
    server_info: dict = field(default_factory=dict)
    tools: list = field(default_factory=list)
    # Seconds from just before the spawn: the initialize answer, the last answer, the exit.
    initialized: float = 0.0
    answered: float = 0.0
    exited: float = 0.0


class DirectClient:
    """What a client without mcpx does: spawns the server and speaks MCP over its stdio."""

    def __init__(self, command: list[str], cwd: Path, stderr_path: Path) -> None:
        self.command = command
        self.cwd = cwd
        self.stderr_path = stderr_path

    def session(self, op: str) -> tuple[float, DirectResult]:
        """One whole session (`op` is "list" or "call"); returns (seconds, what it learned)."""
        result = DirectResult()
        label = f"direct {op}"
        with open(self.stderr_path, "wb") as err:
            start = time.perf_counter()
            proc = subprocess.Popen(
                self.command, cwd=self.cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err
            )
            try:
                client = StdioMcp(proc, label, self._stderr_tail, answer_requests=True)
                result.server_info = client.open()["serverInfo"]
                result.initialized = client.initialized_at - start
                if op == "list":
                    result.tools = client.list_tools()
                    check_tools(label, result.tools, "echo")
                else:
                    res = client.request("tools/call", {"name": "echo", "arguments": {"message": ECHO_MESSAGE}})
                    if res.get("isError") or ECHO_TEXT not in texts(res):
                        raise BenchError(
                            f"{label}: tools/call echo: expected the text {ECHO_TEXT!r}, got {json.dumps(res)[:300]}"
                        )
                result.answered = time.perf_counter() - start
                proc.stdin.close()
                # Read to the end (any late notifications), then wait for the exit.
                deadline = time.monotonic() + STEP_TIMEOUT
                client.drain("after closing stdin", deadline)
                code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                elapsed = result.exited = time.perf_counter() - start
            except BaseException as e:
                proc.kill()
                proc.wait()
                if isinstance(e, subprocess.TimeoutExpired):
                    raise BenchError(
                        f"{label}: the server did not exit within {STEP_TIMEOUT:.0f}s of stdin closing"
                    ) from None
                if isinstance(e, OSError):  # a broken pipe, the server gone
                    raise BenchError(f"{label}: {e}{self._stderr_tail()}") from None
                raise
            finally:
                close_pipes(proc)
        if code != 0:
            raise BenchError(f"{label}: the server exited with status {code}{self._stderr_tail()}")
        return elapsed, result

    def _stderr_tail(self) -> str:
        return stderr_tail(self.stderr_path, "server")


def run(args, tmp: Path, registry: list) -> tuple[list[Row], dict]:
    """The rows of sections 1 to 3 (2 without the cold one); and what server-everything says it is."""
    server = args.e2e / "node_modules" / ".bin" / "mcp-server-everything"
    everything = {"command": str(server), "args": ["stdio"], "cwd": str(args.e2e)}
    mcpx = private_mcpx(args.mcpx, tmp / "m", {"everything": everything}, registry)
    direct = DirectClient([str(server), "stdio"], args.e2e, tmp / "direct-stderr.log")

    # A first direct session of each kind: what the server answers, to check mcpx against.
    _, listed = direct.session("list")
    n_tools = len(listed.tools)
    direct.session("call")
    log(f"server-everything ({listed.server_info.get('name')} {listed.server_info.get('version')}) has {n_tools} tools")

    # Daemon up, server-everything listed once: the schema cache is filled.
    mcpx.refresh(["everything"], "everything")
    # The server announces its capability-dependent tools with `notifications/tools/list_changed`
    # just after initializing, and the daemon re-reads the list then: wait until mcpx has every
    # tool the direct client saw (it has more: it declares more client capabilities).
    direct_names = {t.get("name") for t in listed.tools}
    deadline = time.monotonic() + 10
    while True:
        _, tools_json = mcpx.run("tools", "everything", "--json")
        mcpx_names = {t.get("name") for t in json.loads(tools_json)}
        if direct_names <= mcpx_names:
            break
        if time.monotonic() > deadline:
            raise BenchError(
                f"`mcpx tools everything` lacks tools the server listed: {sorted(direct_names - mcpx_names)}"
            )
        time.sleep(0.05)
    time.sleep(0.5)  # let any further re-read land before the count is taken
    _, ls_json = mcpx.run("ls", "--json")
    counts = [s.get("tools") for s in json.loads(ls_json) if s.get("name") == "everything"]
    if len(counts) != 1 or not isinstance(counts[0], int) or counts[0] < len(direct_names):
        raise BenchError(f"`mcpx ls --json` does not show everything with its tools:\n{ls_json[:1000]}")
    n_mcpx = counts[0]
    ls_row = re.compile(rf"^everything\s+{n_mcpx}\s", re.M)
    log(f"mcpx lists {n_mcpx} tools for server-everything")

    def tools_ok(out: str) -> bool:
        return out.count("\n") >= n_mcpx and re.search(r"^echo\s", out, re.M) is not None

    many = {scope: twenty(args, tmp, registry, scope) for scope in ("public", "private")}
    pinned = {mode: corpus(args, tmp, registry, mode) for mode in ("hold", "off")}

    def many_side(scope: str) -> Side:
        m = many[scope]
        return Side(
            "mcpx",
            f"mcpx ls (20 servers, {scope} listings, env with ${{secret:}})",
            lambda: m.checked(("ls", "--json"), twenty_listed, "not 20 servers with their tools"),
        )

    def corpus_side(mode: str) -> Side:
        m, want = pinned[mode]
        return Side(
            "mcpx",
            f"mcpx ls (the search corpus: {len(want)} servers, pinning {mode})",
            lambda: m.checked(("ls", "--json"), lambda out: corpus_listed(out, want), "not the corpus's servers"),
        )

    def direct_side(op: str) -> Side:
        what = "tools/list" if op == "list" else "tools/call echo"
        return Side("direct", f"spawn server-everything, initialize, {what}, exit", lambda: direct.session(op))

    def call_side() -> Side:
        call_args = ("call", "everything.echo", ECHO_ARGS)
        return Side(
            "mcpx",
            f"mcpx call everything.echo '{ECHO_ARGS}'",
            lambda: mcpx.checked(call_args, lambda out: ECHO_TEXT in out, f"no {ECHO_TEXT!r}"),
        )

    rows = []
    row = Row(
        "ls",
        "List the tools",
        "mcpx answers from its schema cache: the daemon is running and server-everything was "
        "listed once before measuring (`mcpx refresh everything`). `mcpx ls` shows every server "
        f"with its tool count; `mcpx tools everything` prints its {n_mcpx} tools with their "
        f"descriptions. The direct client gets {n_tools} tools from `tools/list`: server-everything "
        "registers some tools only for clients that declare the roots, sampling or elicitation "
        "capabilities, as mcpx does. Two more mcpx each hold 20 modern fake servers whose `env` "
        'reads a `${secret:}`, all listed and running: with `cacheScope: "public"` listings `ls` '
        'reads the cache as before; with `"private"` ones it also works out each server\'s '
        "authorization context (the entry expanded, its secret read, an HMAC) to find its listing. "
        "Two more hold the search corpus (the 227 tools of 19 real servers, served by fake servers "
        'through `FAKE_DEFINITIONS`), one with `"pinning": "hold"` (the default: `ls` compares '
        'every listing with its pins) and one with `"pinning": "off"`.',
        [
            Side("mcpx", "mcpx ls", lambda: mcpx.checked(("ls",), ls_row.search, f"no `everything {n_mcpx}` row")),
            many_side("public"),
            many_side("private"),
            corpus_side("hold"),
            corpus_side("off"),
            Side(
                "mcpx",
                "mcpx tools everything",
                lambda: mcpx.checked(("tools", "everything"), tools_ok, f"not the {n_mcpx} tools"),
            ),
            direct_side("list"),
        ],
        "tools/list",
    )
    measure(row, args.iterations)
    rows.append(row)

    row = Row(
        "call",
        "Call a tool (daemon and server warm)",
        "The daemon and the server-everything instance are running; every call goes to the same "
        "instance (its pid is checked before and after). The direct client starts the server for "
        "its one call, as a client without mcpx does.",
        [call_side(), direct_side("call")],
        "tools/call",
    )
    before = instance_pids(mcpx)
    measure(row, args.iterations)
    after = instance_pids(mcpx)
    if not before or before != after:
        raise BenchError(f"the server-everything instance changed during the warm calls (pids {before} -> {after})")
    rows.append(row)

    if not args.no_cold:
        boxed = sandboxed(args, tmp, registry)

        def fs_side(server: str, what: str) -> Side:
            fs_args = ("call", f"{server}.list_allowed_directories", "{}")
            return Side(
                "mcpx",
                f"mcpx call {server}.list_allowed_directories (server-filesystem, {what})",
                lambda: boxed.checked(fs_args, lambda out: "Allowed directories" in out, "no allowed directories"),
            )

        row = Row(
            "cold",
            "First call, no daemon running",
            "Before each mcpx run, `mcpx stop --all` (not timed) stops the daemon and the server, "
            "so the timed `mcpx call` starts the daemon, which starts server-everything, "
            "initializes it and lists its tools into the schema cache, then makes the call. The "
            "daemon and the server keep running after it (later calls are row 2), while the direct "
            "client, the same as in row 2, also waits for its server to exit. Another mcpx holds "
            'server-filesystem twice, once in a `"sandbox": {"preset": "node"}` (its supervisor '
            "confines it with Landlock and seccomp before exec) and once not; its first call is "
            "measured the same way.",
            [call_side(), fs_side("boxed", "sandboxed"), fs_side("open", "no sandbox"), direct_side("call")],
            "tools/call",
        )

        def prepare(side: Side) -> None:
            if side is row.sides[0]:
                mcpx.checked(("stop", "--all"), lambda out: "stopped" in out, "the daemon was not running")
            elif side is not row.sides[-1]:
                boxed.run("stop", "--all")

        measure(row, args.iterations, prepare)
        rows.append(row)
    return rows, listed.server_info


def instance_pids(mcpx: Mcpx) -> list[int]:
    insts = [i for i in mcpx.status().get("instances", []) if i.get("server") == "everything"]
    mcpx.track(*(i.get("pid") for i in insts), *(i.get("supervisor_pid") for i in insts))
    return sorted(i["pid"] for i in insts)


# --- the report -----------------------------------------------------------------------------


def cost_line(row: Row, marks: tuple[str, str], what: str, ratio: str) -> list[str]:
    """What the side whose command has `marks[0]` costs over the one with `marks[1]`, in a
    line (none when the row has not both)."""
    with_, without = ([s for s in row.sides if mark in s.command] for mark in marks)
    if not with_ or not without:
        return []
    a, b = with_[0].median, without[0].median
    return [f"{what} {100 * (a - b) / b:+.1f}% (median {ratio} = {ms(a)} / {ms(b)} = {a / b:.2f}).", ""]


def compared(row: Row) -> list[Side]:
    """The mcpx sides of `row` that run the direct client's server (server-everything): the
    server-filesystem sides of the cold row are compared with each other only."""
    return [side for side in row.sides[:-1] if "server-filesystem" not in side.command]


def row_table(row: Row) -> list[str]:
    direct = row.sides[-1]
    d_med = direct.median
    lines = [*sides_table(row.sides), ""]
    for side in compared(row):
        m_med = side.median
        lines.append(
            f"`{side.command}` is **{ratio_words(d_med, m_med)}** than the direct client "
            f"(direct median / mcpx median = {ms(d_med)} / {ms(m_med)} = {d_med / m_med:.1f})."
        )
        lines.append("")
    lines += cost_line(
        row, ("sandboxed", "no sandbox"), "A sandbox costs server-filesystem's first call", "sandboxed / not"
    )
    lines += cost_line(
        row, ("pinning hold", "pinning off"), "Pinning costs `mcpx ls` over the corpus", "with pinning / without"
    )
    if direct.details:
        init = median(d.initialized for d in direct.details)
        answered = median(d.answered for d in direct.details)
        exited = median(d.exited for d in direct.details)
        lines += [
            f"Inside the direct client's runs (medians, from the spawn): `initialize` answered after {ms(init)}, "
            f"`{row.request}` answered after {ms(answered)}, the server exited after {ms(exited)}; "
            f"{ms(exited - answered)} of waiting for it to exit once its stdin is closed. "
            "Counting the direct client only until its answer, "
            + "; ".join(f"`{side.command}` is {ratio_words(answered, side.median)}" for side in compared(row))
            + ".",
            "",
        ]
    return lines


def twenty(args, tmp: Path, registry: list, scope: str) -> Mcpx:
    """A private mcpx holding 20 modern fake servers with `cacheScope: SCOPE` listings
    (fresh for 10 minutes) and an `env` value from the secret store, each started and listed."""
    servers = {
        f"s{n:02}": {
            "command": str(args.fake_server),
            "env": {
                "FAKE_ERA": "2026-07-28",
                "FAKE_CACHE_SCOPE": scope,
                "FAKE_TTL_MS": "600000",
                "BENCH_TOKEN": "${secret:bench-token}",
                "BENCH_INSTANCE": str(n),
            },
            "mcpx": {"orphanTimeout": "10m"},
        }
        for n in range(20)
    }
    m = private_mcpx(args.mcpx, tmp / f"twenty-{scope}", servers, registry)
    m.env["MCPX_SECRET_STORE"] = "file"
    stored = subprocess.run(
        [str(m.binary), "secret", "set", "bench-token"],
        input=b"bench-value\n",
        env=m.env,
        capture_output=True,
        timeout=60,
    )
    if stored.returncode != 0:
        raise BenchError(f"`mcpx secret set bench-token` failed: {stored.stderr.decode(errors='replace')[-1000:]}")
    m.refresh(list(servers))
    listed = json.loads(m.run("ls", "--json")[1])
    if not twenty_listed(json.dumps(listed)):
        raise BenchError(
            f"`mcpx ls --json` of the 20 {scope} servers does not show their tools:\n{json.dumps(listed)[:1000]}"
        )
    return m


CORPUS = ROOT / "crates" / "mcpx-daemon" / "tests" / "search" / "corpus"


def corpus(args, tmp: Path, registry: list, pinning: str) -> tuple[Mcpx, dict[str, int]]:
    """A private mcpx with `"pinning": PINNING` holding one fake server per server of the search
    corpus, each listing exactly that server's tools (`FAKE_DEFINITIONS`), started and listed.
    Returns it and each server's tool count."""
    base = tmp / f"corpus-{pinning}"
    servers: dict = {}
    want: dict[str, int] = {}
    for n, file in enumerate(sorted(CORPUS.glob("*.json"))):
        listed = json.loads(file.read_text())
        name = f"c{n:02}"
        definitions = {"*": None, **{t["name"]: t for t in listed["tools"]}}
        defs = tmp / f"corpus-{pinning}-{name}.json"
        defs.write_text(json.dumps(definitions))
        servers[name] = {
            "command": str(args.fake_server),
            "env": {"FAKE_DEFINITIONS": str(defs)},
            "mcpx": {"orphanTimeout": "10m"},
        }
        want[name] = len(definitions) - 1
    m = private_mcpx(args.mcpx, base, servers, registry)
    (base / "config.json").write_text(json.dumps({"pinning": pinning, "mcpServers": servers}, indent=2) + "\n")
    m.refresh(list(servers))
    out = m.run("ls", "--json")[1]
    if not corpus_listed(out, want):
        raise BenchError(f"`mcpx ls --json` does not show the corpus's servers with their tools:\n{out[:2000]}")
    return m, want


def sandboxed(args, tmp: Path, registry: list) -> Mcpx:
    """A private mcpx holding server-filesystem (installed in e2e/) twice: `boxed` in a
    `node` sandbox that may write its directory, and `open` without one."""
    root = tmp / "sandboxed-files"
    root.mkdir()
    fs_bin = str(args.e2e / "node_modules" / ".bin" / "mcp-server-filesystem")
    servers = {
        "boxed": {
            "command": fs_bin,
            "args": [str(root)],
            "mcpx": {"orphanTimeout": "10m", "sandbox": {"preset": "node", "write": [str(root)]}},
        },
        "open": {"command": fs_bin, "args": [str(root)], "mcpx": {"orphanTimeout": "10m"}},
    }
    return private_mcpx(args.mcpx, tmp / "sandboxed", servers, registry)


def corpus_listed(out: str, want: dict[str, int]) -> bool:
    """Whether `mcpx ls --json` shows each corpus server with all its tools, none held."""
    rows = {r.get("name"): r for r in json.loads(out)}
    return all(rows.get(name, {}).get("tools") == n and not rows[name].get("held") for name, n in want.items())


def twenty_listed(out: str) -> bool:
    rows = json.loads(out)
    return len(rows) == 20 and all(isinstance(r.get("tools"), int) and r["tools"] > 0 for r in rows)


def summary_table(rows: list[Row]) -> list[str]:
    lines = [
        "| what | mcpx command | mcpx median | direct client median | mcpx is | direct client until its answer |",
        "| --- | --- | ---: | ---: | --- | --- |",
    ]
    for row in rows:
        direct = row.sides[-1]
        d_med = direct.median
        answered = median(d.answered for d in direct.details)
        for side in compared(row):
            m_med = side.median
            lines.append(
                f"| {row.title} | `{side.command}` | {ms(m_med)} | {ms(d_med)} | **{ratio_words(d_med, m_med)}** "
                f"| {ms(answered)}: mcpx is {ratio_words(answered, m_med)} |"
            )
    return lines


def sections(rows: list[Row]) -> list[str]:
    """Sections 1 to 3 of the report."""
    lines = []
    for n, row in enumerate(rows, 1):
        lines += [f"## {n}. {row.title}", "", row.what, "", *row_table(row)]
    return lines
