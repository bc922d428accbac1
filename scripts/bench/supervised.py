"""Section 6: a warm `mcpx call` (whole process) to a supervised server and to the same server
configured with `"supervised": false`, for server-everything (`echo`) and the fake server
(`echo`), the four calls taking turns, in one private mcpx."""

from __future__ import annotations

from pathlib import Path

from .common import (
    ECHO_ARGS,
    ECHO_MESSAGE,
    ECHO_TEXT,
    WARMUP,
    BenchError,
    Row,
    Side,
    measure,
    ms,
    sides_table,
    vs_words,
)
from .mcpx import fake_entry, private_mcpx


def run(args, tmp: Path, registry: list) -> Row:
    # The unsupervised entries get an extra environment variable: mcpx keys instances by command,
    # arguments, environment and directory, not by `supervised`, so two entries differing only in
    # it would share one instance.
    fake = args.fake_server
    everything = {
        "command": str(args.e2e / "node_modules" / ".bin" / "mcp-server-everything"),
        "args": ["stdio"],
        "cwd": str(args.e2e),
    }
    unsup_env = {"BENCH_VARIANT": "unsupervised"}
    servers = {
        "everything": everything,
        "everything-unsupervised": {**everything, "env": unsup_env, "mcpx": {"supervised": False}},
        "fake": fake_entry(fake),
        "fake-unsupervised": {**fake_entry(fake, supervised=False), "env": unsup_env},
    }
    lat = private_mcpx(args.mcpx, tmp / "l", servers, registry)
    lat.refresh(list(servers))

    def lat_pids() -> dict:
        got = {
            i["server"]: (i.get("pid"), i.get("supervised"), i.get("supervisor_pid"))
            for i in lat.status().get("instances", [])
        }
        lat.track(*(pid for pid, _, sup_pid in got.values() for pid in (pid, sup_pid)))
        for name in servers:
            pid, sup, sup_pid = got.get(name, (None, None, None))
            if (
                not isinstance(pid, int)
                or bool(sup) != (not name.endswith("-unsupervised"))
                or bool(sup_pid) != bool(sup)
            ):
                raise BenchError(f"`mcpx status`: {name} is not running as configured: {got.get(name)}")
        return got

    def side(name: str, expect: str) -> Side:
        call = ("call", f"{name}.echo", ECHO_ARGS)
        return Side(
            "supervised" if not name.endswith("-unsupervised") else "unsupervised",
            f"mcpx call {name}.echo '{ECHO_ARGS}'",
            lambda: lat.checked(call, lambda out: out.strip() == expect, f"not {expect!r}"),
        )

    row = Row(
        "sup",
        "Call a tool, supervised or not",
        "",
        [
            side("everything", ECHO_TEXT),
            side("everything-unsupervised", ECHO_TEXT),
            side("fake", ECHO_MESSAGE),
            side("fake-unsupervised", ECHO_MESSAGE),
        ],
        "tools/call",
    )
    before = lat_pids()
    measure(row, args.latency_iterations)
    after = lat_pids()
    if before != after:
        raise BenchError(f"instances changed during the supervised/unsupervised calls: {before} -> {after}")
    return row


# --- the report -----------------------------------------------------------------------------


def pairs(row: Row) -> list[tuple[str, Side, Side]]:
    """(server, supervised side, unsupervised side) for each server of the row."""
    sides = row.sides
    return [(sides[i].command.split()[2].split(".")[0], sides[i], sides[i + 1]) for i in range(0, len(sides), 2)]


def summary(row: Row) -> list[str]:
    """Its rows of the supervisors' summary table."""
    return [
        f'| warm `mcpx call {server}.echo`, supervised vs. `"supervised": false` '
        f"| {ms(a.median)} vs. {ms(b.median)}: supervised takes {vs_words(a.median, b.median)} |"
        for server, a, b in pairs(row)
    ]


def section(n: int, row: Row) -> list[str]:
    lines = [
        f"## {n}. Call a tool, supervised or not",
        "",
        "One private mcpx with four servers: server-everything (as in section 2) and the fake server, each twice, "
        'once supervised (the default) and once configured `"mcpx": {"supervised": false}` (the daemon\'s '
        "own child, as before supervisors): a supervised call goes CLI -> daemon -> supervisor -> server and back, "
        "an unsupervised one skips the supervisor. The unsupervised entries also set one more environment variable "
        "(`BENCH_VARIANT`): mcpx keys an instance by the server's command, arguments, environment and directory, "
        "not by `supervised`, so two entries that differ only in `supervised` share whichever instance started "
        "first. All four are warm (started by one `mcpx refresh`, their pids "
        f"checked before and after); the four commands take turns, {WARMUP} untimed rounds first. Whole "
        "processes, as in section 2.",
        "",
        *sides_table(row.sides),
        "",
    ]
    for server, a, b in pairs(row):
        lines += [
            f"{server}: the supervised call takes **{vs_words(a.median, b.median)}** of the unsupervised one "
            f"(supervised median / unsupervised median = {ms(a.median)} / {ms(b.median)} = {a.median / b.median:.2f}).",
            "",
        ]
    return lines
