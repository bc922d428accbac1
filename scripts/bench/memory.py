"""Section 5: the supervisors' memory. Private memory (USS: Private_Clean + Private_Dirty of
/proc/PID/smaps_rollup), PSS and RSS of the supervisors and of their fake servers in the
10-instance mcpx of section 4 (medians), and of each daemon, after the kills."""

from __future__ import annotations

from dataclasses import dataclass

from .adopt import AdoptCase
from .common import kib, median, plural
from .procs import memory_kib

MEMORY_SIZE = 10  # the adoption row whose supervisors' memory is reported


@dataclass
class Usage:
    what: str
    count: int  # processes the medians are over
    rss: float  # KiB, medians
    pss: float
    uss: float
    uss_range: tuple[int, int]


def usage(what: str, pids: list[int]) -> Usage:
    mem = [memory_kib(pid) for pid in pids]
    uss = [x["uss"] for x in mem]
    return Usage(
        what, len(pids), median(x["rss"] for x in mem), median(x["pss"] for x in mem), median(uss), (min(uss), max(uss))
    )


def run(cases: list[AdoptCase]) -> list[Usage]:
    """What the supervisors, their servers and the adopting daemons hold, after the kills: the
    supervisors, their servers, then each daemon."""
    mem_case = next(c for c in cases if c.supervised and c.size == MEMORY_SIZE)
    memory = [
        usage("supervisor (`mcpx supervise`)", [sup for _, sup in mem_case.pids.values()]),
        usage("its server (mcpx-fake-server)", [pid for pid, _ in mem_case.pids.values()]),
    ]
    for case in cases:
        memory.append(usage(f"daemon, with {case.label} fake server{plural(case.size)}", [case.mcpx.daemon_pid()]))
    return memory


# --- the report -----------------------------------------------------------------------------


def summary(memory: list[Usage]) -> list[str]:
    """Its row of the supervisors' summary table."""
    s, srv = memory[0], memory[1]
    return [
        f"| memory of one supervisor (median of {s.count}) | USS {kib(s.uss)}, RSS {kib(s.rss)} "
        f"(the fake server it runs: USS {kib(srv.uss)}, RSS {kib(srv.rss)}) |"
    ]


def section(n: int, cases: list[AdoptCase], memory: list[Usage]) -> list[str]:
    s = memory[0]
    lines = [
        f"## {n}. The supervisors' memory",
        "",
        f"Read from `/proc/PID/smaps_rollup` after the kills of section {n - 1}, for the {MEMORY_SIZE} supervisors of the "
        f"{MEMORY_SIZE}-server mcpx and their fake servers (medians over the {MEMORY_SIZE}), and for each daemon "
        "(the one that adopted the servers at the last kill). USS is the memory only that process holds "
        "(`Private_Clean` + `Private_Dirty`): what stopping it would give back. PSS adds its share of the pages "
        "it shares (the mcpx binary's code with the daemon and the other supervisors); RSS counts every page it "
        "maps.",
        "",
        "| process | processes | USS | PSS | RSS |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for u in memory:
        lines.append(f"| {u.what} | {u.count} | {kib(u.uss)} | {kib(u.pss)} | {kib(u.rss)} |")
    lines += [
        "",
        f"The supervisors' USS ranges from {kib(s.uss_range[0])} to {kib(s.uss_range[1])}: each supervised server "
        f"costs about that much memory of its own on top of the server ({kib(s.pss)} counting its share of the "
        "shared pages).",
        "",
    ]
    daemons = [(c.size, u) for c, u in zip(cases, memory[2:], strict=False) if c.supervised]
    if len(daemons) >= 2:
        (n_lo, lo), (n_hi, hi) = daemons[0], daemons[-1]
        lines += [
            f"The daemon's own memory grows from {kib(lo.uss)} with {n_lo} supervised server to {kib(hi.uss)} with "
            f"{n_hi}, about {kib((hi.uss - lo.uss) / (n_hi - n_lo))} per server (its instance state, the "
            "connection to the supervisor and the schema).",
            "",
        ]
    return lines
