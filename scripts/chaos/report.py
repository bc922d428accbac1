"""The counts, printed, and as the chaos section of BENCHMARKS.md (between two marker lines,
which scripts/bench keeps when it rewrites the file)."""

from __future__ import annotations

from pathlib import Path

from bench.report import CHAOS_BEGIN as BEGIN
from bench.report import CHAOS_END as END


def kinds(d: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items()) or "none"


def summary_lines(s: dict) -> list[str]:
    lines = [
        f"chaos: seed {s['seed']}, {s['minutes']:g} min ({s['seconds']} s), load average {s['load_before']} before, {s['load_after']} after, {s['nproc']} CPUs",
        f"  calls           {s['calls']} ({kinds(s['by_path'])}; {kinds(s['by_op'])})",
        f"  answered        {s['answered']}",
        f"  failed          {s['failed']} ({kinds(s['failed_by_kind'])})",
        f"  wrong answers   {s['wrong']}",
        f"  hangs           {s['hangs']} (the slowest call took {s['slowest_s']} s; {s['over_timeout']} took longer than the 20 s call timeout)",
        f"  misrouted       {s['misrouted_count']} of {s['progress_seen']} progress notifications checked by the `mcpx serve` clients were another client's",
        f"  undocumented    {s['undocumented']} ({kinds(s['undocumented_by_kind'])})",
        f"  faults          {kinds(s['faults'])} (skipped, nothing to hit: {kinds(s['faults_skipped'])}; failed: {len(s['fault_failures'])}); the longest `mcpx upgrade` {s['upgrade_s_max']} s",
        f"  daemon          {s['lifetimes']} lifetimes ({s['lifetimes_judged']} of 5 s or more judged, the longest {s['longest_lifetime_s']} s):"
        f" descriptors {s['fd_range'][0]} to {s['fd_range'][1]}, growth within a lifetime at most {s['fd_growth_max']} (allowed {s['fd_slack']});"
        f" RSS at most {s['rss_kib_max'] / 1024:.1f} MiB, {s['rss_kib_last'] / 1024:.1f} MiB at the end",
        f"  leftover        {len(s['leftovers'])} processes after `mcpx stop --all`",
        f"  activity        the record took at most {s['record_max'] / 1024:.0f} KiB on disk (its cap {s['record_cap'] / 1024:.0f} KiB)",
    ]
    for what in (
        "slowest",
        "failed_examples",
        "examples",
        "misrouted",
        "fault_failures",
        "fd_grown",
        "leftovers",
        "driver_errors",
    ):
        lines += [f"  {what}: {x}" for x in s[what]]
    lines.append(f"chaos: FAILED: {', '.join(s['problems'])}" if s["problems"] else "chaos: passed")
    return lines


def replay_command(s: dict) -> str:
    """The run's command with its seed, without where it saved its summary."""
    words = s["command"].split()
    kept = [w for i, w in enumerate(words) if w != "--summary" and (i == 0 or words[i - 1] != "--summary")]
    if "--seed" not in kept:
        kept += ["--seed", str(s["seed"])]
    return " ".join(kept)


def section(s: dict) -> list[str]:
    return [
        BEGIN,
        "## Chaos soak: mixed load under faults",
        "",
        f"`{replay_command(s)}` (a debug build, as CI runs it; {s['seconds']} s; load average {s['load_before']} before and {s['load_after']} after, on {s['nproc']} CPUs"
        " shared with other work). 8 callers back to back (4 `mcpx call` processes, 2 MCP clients over `mcpx serve`, 2 over the"
        " daemon's `/mcp`) on 5 fake servers (shared, exclusive, unsupervised, remote over streamable HTTP, one whose fingerprint"
        " changes) and up to 3 added and removed ones: echoes, progress, 1 MiB answers, cancellations and timeouts, each with a"
        " token of its own that the answer must echo. Meanwhile, every 4 s on average: kill -9 of the daemon, a supervisor or a"
        " server, `mcpx upgrade`, or an edit of the configuration. See `scripts/chaos/` for the rules of the accounting.",
        "",
        "| | |",
        "| --- | ---: |",
        f"| calls | {s['calls']} |",
        f"| answered, correctly | {s['answered']} |",
        f"| failed with a documented error | {s['failed']} |",
        f"| wrong answers | {s['wrong']} |",
        f"| hangs | {s['hangs']} |",
        f"| slowest call (calls over the 20 s call timeout) | {s['slowest_s']} s ({s['over_timeout']}) |",
        f"| progress notifications at another client (of those checked) | {s['misrouted_count']} ({s['progress_seen']}) |",
        f"| undocumented failures | {s['undocumented']} |",
        f"| leftover processes after `mcpx stop --all` | {len(s['leftovers'])} |",
        f"| daemon lifetimes (judged) | {s['lifetimes']} ({s['lifetimes_judged']}) |",
        f"| descriptor growth within a lifetime, at most (allowed) | {s['fd_growth_max']} ({s['fd_slack']}) |",
        f"| daemon RSS, at most | {s['rss_kib_max'] / 1024:.1f} MiB |",
        f"| activity record on disk, at most (its cap) | {s['record_max'] / 1024:.0f} KiB ({s['record_cap'] / 1024:.0f} KiB) |",
        f"| the longest `mcpx upgrade` | {s['upgrade_s_max']} s |",
        "",
        f"Failed, by kind: {kinds(s['failed_by_kind'])}. Faults: {kinds(s['faults'])}.",
        END,
    ]


def write_benchmarks(path: Path, s: dict) -> None:
    """Replaces the chaos section of BENCHMARKS.md, or adds it at the end."""
    text = path.read_text() if path.exists() else ""
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + text[text.index(END) + len(END) :].lstrip("\n")
    path.write_text(text.rstrip() + "\n\n" + "\n".join(section(s)) + "\n")
