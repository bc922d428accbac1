"""Section 4: `kill -9` of the daemon, then the next call.

Every stdio server runs under its own `mcpx supervise` process, which outlives the daemon. With
the fake server (mcpx-fake-server, built next to mcpx), `kill -9` of the daemon, then
`mcpx call fakeN.echo '{"message":"hi"}'`, timed from just before the kill until the call has
exited: the call starts a new daemon, which adopts every running supervisor before serving. Four
private mcpx side by side, with 1, 10 and 100 supervised fake servers (`fake0`..`fake99`, each
with its own environment variable) and, for reference, 1 with `"supervised": false` (which the
kill takes down, so the call restarts it); their kills take turns. Starting the servers (one
`mcpx refresh`) is timed apart and not counted. After every kill the daemon pid must have changed
and every server and supervisor pid must be the same as before (adopted, not restarted; the
unsupervised one must have a new pid)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from .common import ECHO_ARGS, ECHO_MESSAGE, WARMUP, BenchError, log, median, ms, spread
from .mcpx import Mcpx, fake_entry, private_mcpx
from .procs import alive, cmdline, proc_stat

ADOPT_SIZES = (1, 10, 100)  # supervised fake servers running when the daemon is killed
TIMED = f"`kill -9 $(cat $MCPX_RUNTIME_DIR/daemon.pid); mcpx call fakeN.echo '{ECHO_ARGS}'`"


@dataclass
class AdoptCase:
    label: str
    size: int
    supervised: bool
    mcpx: Mcpx
    startup: float = 0.0  # seconds for the `mcpx refresh` that started the servers
    samples: list[float] = field(default_factory=list)
    pids: dict = field(default_factory=dict)  # server -> (pid, supervisor pid)

    @property
    def servers(self) -> list[str]:
        return [f"fake{n}" for n in range(self.size)]


def check_instances(case: AdoptCase, status: dict) -> dict:
    """Every server of `case` running, supervised or not as configured, each server the child of
    its supervisor (or of the daemon); returns server -> (pid, supervisor pid)."""
    daemon = status.get("daemon", {}).get("pid")
    insts = status.get("instances", [])
    names = sorted(i.get("server") for i in insts)
    if names != sorted(case.servers):
        raise BenchError(f"{case.label}: `mcpx status` shows the instances {names}, not {sorted(case.servers)}")
    got = {}
    for i in insts:
        name, pid, sup = i["server"], i.get("pid"), i.get("supervisor_pid")
        if i.get("state") != "running" or not isinstance(pid, int):
            raise BenchError(f"{case.label}: {name} is not running: {json.dumps(i)[:400]}")
        if bool(i.get("supervised")) != case.supervised:
            raise BenchError(f"{case.label}: {name} has supervised={i.get('supervised')}: {json.dumps(i)[:400]}")
        parent = proc_stat(pid)
        want = sup if case.supervised else daemon
        if parent is None or parent[1] != want:
            raise BenchError(f"{case.label}: {name}'s server (pid {pid}) is not the child of pid {want}: {parent}")
        if case.supervised and "supervise" not in cmdline(sup):
            raise BenchError(f"{case.label}: {name}'s supervisor_pid {sup} is not `mcpx supervise`: {cmdline(sup)}")
        got[name] = (pid, sup)
        case.mcpx.track(pid, sup)
    return got


def refuses(path: Path) -> bool:
    """Whether nothing listens on the unix socket `path` any more (refused, or gone)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            return True
        except OSError:
            return False
        return False


def kill_and_call(case: AdoptCase, n: int) -> float:
    """kill -9 of the daemon, then one call to a fake server; returns the seconds in between and
    checks that the servers were adopted (or, unsupervised, restarted)."""
    m = case.mcpx
    old = m.daemon_pid()
    target = case.servers[n % case.size]
    args = ("call", f"{target}.echo", ECHO_ARGS)
    start = time.perf_counter()
    os.kill(old, signal.SIGKILL)
    # kill(2) returns before the daemon has exited. Until its last thread has (its main
    # thread turns zombie first; the others close the descriptors, its socket's among
    # them, a few milliseconds later with many servers adopted), its socket still takes a
    # connection, which then breaks, and `mcpx call` does not send again a call that a
    # daemon may have read. The call is made once the socket refuses connections (inside
    # the timed span); waiting for the process to leave /proc would time its reaping.
    deadline = time.monotonic() + 5
    while not refuses(m.socket()) and time.monotonic() < deadline:
        time.sleep(0.0005)
    _, out = m.run(*args)
    elapsed = time.perf_counter() - start
    if out.strip() != ECHO_MESSAGE:
        raise BenchError(f"{case.label}: `mcpx {shlex.join(args)}` printed {out[-300:]!r}, not {ECHO_MESSAGE!r}")
    status = m.status()
    new = status.get("daemon", {}).get("pid")
    if new == old or alive(old):
        raise BenchError(f"{case.label}: the daemon killed (pid {old}) is still the daemon (pid {new})")
    now = check_instances(case, status)
    if case.supervised and now != case.pids:
        changed = {k: (case.pids.get(k), v) for k, v in now.items() if case.pids.get(k) != v}
        raise BenchError(
            f"{case.label}: after kill -9 of the daemon, servers were not adopted as they were "
            f"(server -> ((pid, supervisor) before, after)): {changed}"
        )
    if not case.supervised and now[target][0] == case.pids[target][0]:
        raise BenchError(
            f"{case.label}: the unsupervised {target} kept its pid {now[target][0]} through kill -9 of the daemon"
        )
    case.pids = now
    return elapsed


def run(args, tmp: Path, registry: list) -> list[AdoptCase]:
    fake = args.fake_server
    cases = [
        AdoptCase(f"{size} supervised", size, True, private_mcpx(args.mcpx, tmp / f"a{size}", {}, registry))
        for size in ADOPT_SIZES
    ]
    cases.append(AdoptCase("1 unsupervised", 1, False, private_mcpx(args.mcpx, tmp / "u1", {}, registry)))
    for case in cases:
        servers = {name: fake_entry(fake, n, case.supervised) for n, name in enumerate(case.servers)}
        Path(case.mcpx.env["MCPX_CONFIG"]).write_text(json.dumps({"mcpServers": servers}, indent=2) + "\n")
        case.startup = case.mcpx.refresh(case.servers)
        case.pids = check_instances(case, case.mcpx.status())
        log(f"adopt: started {case.label} fake server(s) in {ms(case.startup)} (one `mcpx refresh`, not counted)")

    log(f"adopt: {WARMUP} warm-up and {args.kills} measured kill -9s of each of {len(cases)} daemons, in turn")
    for n in range(WARMUP + args.kills):
        for case in cases:
            elapsed = kill_and_call(case, n)
            if n >= WARMUP:
                case.samples.append(elapsed)
    return cases


# --- the report -----------------------------------------------------------------------------


def summary(cases: list[AdoptCase]) -> list[str]:
    """Its rows of the supervisors' summary table."""
    supervised = [c for c in cases if c.supervised]
    lines = [
        "| `kill -9` of the daemon until the next `mcpx call` has answered (it starts a daemon, which adopts every "
        f"supervisor), with {' / '.join(str(c.size) for c in supervised)} supervised fake servers running "
        f"| {' / '.join(ms(median(c.samples)) for c in supervised)} (medians; every server pid unchanged) |",
    ]
    for c in cases:
        if not c.supervised:
            lines.append(
                f'| the same with {c.size} fake server with `"supervised": false` (the kill takes it down; '
                f"the call restarts it) | {ms(median(c.samples))} |"
            )
    return lines


def section(n: int, cases: list[AdoptCase]) -> list[str]:
    lines = [
        f"## {n}. kill -9 of the daemon, then the next call",
        "",
        "Every stdio server runs under its own supervisor (`mcpx supervise`), which outlives the daemon. "
        "Four private mcpx run side by side, each with its own directories, config and daemon: with 1, 10 and "
        "100 supervised fake servers (`fake0`..`fake99`, the same mcpx-fake-server binary with a different "
        "environment variable each, so each is its own instance), and with 1 fake server configured "
        '`"supervised": false`, which is the daemon\'s own child. One `mcpx refresh` starts the servers first; '
        "that start-up is timed apart and not counted. Then, in turn for the four, `kill -9` of the daemon "
        "(its pid from `$MCPX_RUNTIME_DIR/daemon.pid`) and, as soon as it has exited, `mcpx call fakeN.echo "
        f"'{ECHO_ARGS}'` (N going round the servers), timed from just before the kill until the call has "
        "exited with the echo: the call finds no daemon, starts one, which adopts every running supervisor "
        "before it serves, and the call goes through it. "
        f"{WARMUP} untimed kills of each come first. After every kill, `mcpx status --json` must show a new "
        "daemon pid and every server running, each the child of its supervisor, with the same server and "
        "supervisor pids as before the kill (adopted, not restarted); the unsupervised server dies with its "
        "daemon, so its pid must be new (restarted).",
        "",
        "| servers running | timed | median | p90 | min | max | runs | start-up (not counted) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in cases:
        lines.append(
            f"| {c.label} ({'adopted' if c.supervised else 'restarted'}) | {TIMED} | {spread(c.samples)} | {ms(c.startup)} |"
        )
    lines.append("")
    sv = [c for c in cases if c.supervised]
    if len(sv) >= 2:
        lo, hi = sv[0], sv[-1]
        m_lo, m_hi = median(lo.samples), median(hi.samples)
        per = (m_hi - m_lo) / (hi.size - lo.size)
        lines += [
            f"From {lo.size} to {hi.size} supervised servers the median grows by {ms(m_hi - m_lo)} "
            f"({m_hi / m_lo:.1f}x), about {per * 1e6:.0f} µs per adopted server.",
            "",
        ]
    un = [c for c in cases if not c.supervised]
    if sv and un:
        lines += [
            f'With 1 server, adopted: {ms(median(sv[0].samples))}; restarted (`"supervised": false`): '
            f"{ms(median(un[0].samples))}. The fake server starts in a few milliseconds, so restarting it "
            "is cheap; a real server's restart costs its own start-up (for server-everything, most of the time of a "
            "first call with no daemon running) and loses its state, which adoption keeps.",
            "",
        ]
    return lines
