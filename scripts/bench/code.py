"""Section 10: code mode. (a) A script making three calls (`mcpx exec`, with and without its type
check, each confined by the kernel and `--unconfined`) against three `mcpx call`s, to warm
server-everything, taking turns. (b) The bytes an MCP
client receives for one task, done with plain tool calls over `mcpx serve` and with `mcpx serve
--code`: read a file with server-filesystem, store one entity per line in server-memory, and get
the entities' names back. Every output and answer is checked."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .common import STEP_TIMEOUT, BenchError, Row, Side, jsonrpc_line, measure, ms, sides_table
from .mcpx import Mcpx, private_mcpx
from .stdio_client import LineReader

THREE = (
    "const a = await everything.echo({ message: 'one' });\n"
    "const b = await everything.echo({ message: 'two' });\n"
    "const c = await everything.echo({ message: 'three' });\n"
    "return [a, b, c].map((r) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('')).join(' ')"
)
THREE_OUT = "Echo: one Echo: two Echo: three\n"

FACTS = "Ada wrote the first program\nGrace built a compiler\nKaren designed a language\n"
# The task through serve --code: one script.
TASK = (
    "const file = await files.read_text_file({ path: FILE });\n"
    "const entities = String(file.content).trim().split('\\n').map((line: string) => "
    "({ name: line.split(' ')[0], entityType: 'person', observations: [line] }));\n"
    "await memory.create_entities({ entities });\n"
    "const graph = await memory.read_graph({});\n"
    "return graph.entities.map((e: { name: string }) => e.name).sort();"
)
NAMES = ["Ada", "Grace", "Karen"]


@dataclass
class CodeResults:
    row: Row
    plain: dict  # what the client received and sent, per step, with plain tool calls
    code: dict  # the same with serve --code
    deno: str


def run(args, tmp: Path, registry: list) -> CodeResults:
    e2e = args.e2e
    deno = e2e / "node_modules" / ".bin" / "deno"
    fs_bin = e2e / "node_modules" / ".bin" / "mcp-server-filesystem"
    for p in (deno, fs_bin):
        if not os.access(p, os.X_OK):
            raise BenchError(f"{p} is missing; run bash scripts/setup-e2e.sh")
    bin_ = lambda name: str(e2e / "node_modules" / ".bin" / name)  # noqa: E731
    root = tmp / "code-files"
    root.mkdir()
    (root / "facts.txt").write_text(FACTS)
    m = private_mcpx(
        args.mcpx,
        tmp / "code",
        {
            "everything": {"command": bin_("mcp-server-everything"), "args": ["stdio"]},
            "files": {"command": str(fs_bin), "args": [str(root)]},
            "memory": {"command": bin_("mcp-server-memory"), "env": {"MEMORY_FILE_PATH": str(tmp / "memory.jsonl")}},
        },
        registry,
    )
    m.env["MCPX_DENO"] = str(deno)
    m.run("call", "everything.echo", '{"message":"warm"}')

    def three_calls():
        total = 0.0
        for word in ("one", "two", "three"):
            elapsed, out = m.run("call", "everything.echo", json.dumps({"message": word}))
            if out != f"Echo: {word}\n":
                raise BenchError(f"`mcpx call everything.echo` printed {out!r}")
            total += elapsed
        return total, None

    def exec_side(check: bool, confined: bool = True):
        args_ = ("exec",) + (() if check else ("--no-check",)) + (() if confined else ("--unconfined",)) + (THREE,)
        return lambda: (m.checked(args_, lambda out: out == THREE_OUT, f"it did not print {THREE_OUT!r}")[0], None)

    row = Row(
        key="code",
        title="A script making three calls against three `mcpx call`s",
        what="three echo calls to warm server-everything",
        sides=[
            Side("script, no type check", "mcpx exec --no-check '<three calls>'", exec_side(False)),
            Side(
                "script, no type check, unconfined",
                "mcpx exec --no-check --unconfined '<three calls>'",
                exec_side(False, False),
            ),
            Side("script, type-checked", "mcpx exec '<three calls>'", exec_side(True)),
            Side("script, type-checked, unconfined", "mcpx exec --unconfined '<three calls>'", exec_side(True, False)),
            Side("three commands", "mcpx call everything.echo ... (x3)", three_calls),
        ],
        request="",
    )
    measure(row, max(3, args.iterations // 3))

    task = TASK.replace("FILE", json.dumps(str(root / "facts.txt")))
    plain = plain_task(m, root / "facts.txt")
    (tmp / "memory.jsonl").unlink(missing_ok=True)
    m.run("restart", "memory")
    code = code_task(m, task)
    return CodeResults(
        row, plain, code, subprocess.run([str(deno), "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    )


class Session:
    """One MCP session over `mcpx serve ARGS`, counting the bytes each way."""

    def __init__(self, m: Mcpx, *args: str) -> None:
        self.proc = subprocess.Popen(
            [str(m.binary), "serve", *args],
            env=m.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.reader = LineReader(self.proc.stdout.fileno())
        self.received = 0
        self.sent = 0
        self.next = 1

    def request(self, method: str, params: dict) -> dict:
        id_ = self.next
        self.next += 1
        line = jsonrpc_line({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}) + b"\n"
        self.sent += len(line)
        self.proc.stdin.write(line)
        self.proc.stdin.flush()
        deadline = time.monotonic() + STEP_TIMEOUT * 4
        while True:
            raw = self.reader.line(deadline, f"mcpx serve: {method}")
            if raw is None:
                raise BenchError(f"mcpx serve ended before answering {method}")
            self.received += len(raw) + 1
            msg = json.loads(raw)
            if msg.get("id") == id_ and "method" not in msg:
                if "error" in msg:
                    raise BenchError(f"mcpx serve: {method}: {msg['error']}")
                return msg["result"]

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=STEP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def init(s: Session) -> None:
    s.request(
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
    )
    line = jsonrpc_line({"jsonrpc": "2.0", "method": "notifications/initialized"}) + b"\n"
    s.sent += len(line)
    s.proc.stdin.write(line)
    s.proc.stdin.flush()


def text_of(result: dict) -> str:
    return "".join(c.get("text", "") for c in result.get("content", []))


def plain_task(m: Mcpx, path: Path) -> dict:
    s = Session(m)
    try:
        init(s)
        before = s.received
        s.request("tools/list", {})
        listed = s.received - before
        file = s.request("tools/call", {"name": "files__read_text_file", "arguments": {"path": str(path)}})
        lines = text_of(file).strip().split("\n")
        entities = [{"name": ln.split(" ")[0], "entityType": "person", "observations": [ln]} for ln in lines]
        s.request("tools/call", {"name": "memory__create_entities", "arguments": {"entities": entities}})
        graph = s.request("tools/call", {"name": "memory__read_graph", "arguments": {}})
        names = sorted(e["name"] for e in json.loads(text_of(graph))["entities"])
        if names != NAMES:
            raise BenchError(f"plain tool calls: the graph holds {names}, not {NAMES}")
        return {"received": s.received, "sent": s.sent, "listing": listed, "requests": 6}
    finally:
        s.close()


def code_task(m: Mcpx, task: str) -> dict:
    s = Session(m, "--code")
    try:
        init(s)
        before = s.received
        s.request("tools/list", {})
        listed = s.received - before
        s.request("tools/call", {"name": "mcpx_types", "arguments": {"servers": ["files", "memory"]}})
        ran = s.request("tools/call", {"name": "mcpx_exec", "arguments": {"code": task}})
        if ran.get("isError") or json.loads(text_of(ran).split("\n[logged]")[0]) != NAMES:
            raise BenchError(f"serve --code: mcpx_exec answered {text_of(ran)[:500]}")
        return {"received": s.received, "sent": s.sent, "listing": listed, "requests": 4}
    finally:
        s.close()


def summary(cr: CodeResults) -> list[str]:
    sides = {s.label: s for s in cr.row.sides}
    three, plain = sides["three commands"], sides["script, no type check"]
    checked = sides["script, type-checked"]
    unconfined = sides["script, no type check, unconfined"]
    return [
        "| what | result |",
        "| --- | --- |",
        f"| three echo calls: one `mcpx exec --no-check` script vs. three `mcpx call`s (medians) | "
        f"{ms(plain.median)} vs. {ms(three.median)}; type-checked: {ms(checked.median)} |",
        f"| the same script confined by the kernel vs. `--unconfined` (medians, no type check) | "
        f"{ms(plain.median)} vs. {ms(unconfined.median)} ({plain.median / max(unconfined.median, 1e-9):.2f}x) |",
        f"| bytes an MCP client receives for one task (read a file, store 3 entities, list them): plain tool calls vs. "
        f"`serve --code` | {cr.plain['received']:,} vs. {cr.code['received']:,} "
        f"({cr.plain['received'] / max(cr.code['received'], 1):.1f}x fewer with `--code`) |",
    ]


def section(n: int, cr: CodeResults) -> list[str]:
    p, c = cr.plain, cr.code
    return [
        f"## {n}. Code mode",
        "",
        f"A script making three calls to warm server-everything (`mcpx exec`, on {cr.deno}), against the same three "
        "calls as three `mcpx call`s, taking turns; the three commands' times are summed per round. The type check "
        "(`deno check` against the declarations) is most of the type-checked script's time. Each script runs "
        "confined by the kernel (Landlock and seccomp, applied to `deno info`, `deno check` and `deno run`) and "
        "with `--unconfined` (Deno's flags alone); both check the module graph first (`deno info`).",
        "",
        *sides_table(cr.row.sides),
        "",
        "One task done by an MCP client over `mcpx serve`: read a file of three lines with server-filesystem, "
        "store one entity per line in server-memory, and get the entities' names back. With plain tool calls the "
        "client lists every tool (server-everything's, server-filesystem's and server-memory's), then makes three "
        "calls and sees each result; with `serve --code` it lists two tools, asks `mcpx_types` for the two servers' "
        "declarations, and sends one script to `mcpx_exec`, which returns only the names. Bytes are the JSON-RPC "
        "lines the client received (and sent), `initialize` included.",
        "",
        "| | requests | bytes received | of which the tool list | bytes sent |",
        "| --- | ---: | ---: | ---: | ---: |",
        f"| plain tool calls (`mcpx serve`) | {p['requests']} | {p['received']:,} | {p['listing']:,} | {p['sent']:,} |",
        f"| `mcpx serve --code` | {c['requests']} | {c['received']:,} | {c['listing']:,} | {c['sent']:,} |",
        "",
    ]
