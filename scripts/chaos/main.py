"""The run: the remote fake server and a private mcpx, the callers, the faults and the watch for
`--minutes`; then everything stopped (`mcpx stop --all`, and whatever of the run is still running
is found, killed and counted), the counts printed, and the verdict as the exit status."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.common import ROOT, BenchError
from bench.mcpx import Mcpx, private_mcpx, strays
from bench.procs import Spawned, kill_survivors, stop_spawned
from bench.remote import read_url

from .callers import Caller, HttpCaller, ServeCaller, Shared, ShellCaller
from .faults import MEAN_GAP_S, Faults
from .report import summary_lines, write_benchmarks
from .watch import FD_SLACK, Watch
from .world import ACTIVITY_CAP, CALL_TIMEOUT_S, Config, Ledger, Timeline

CALLERS = (("shell", ShellCaller, 4), ("serve", ServeCaller, 2), ("http", HttpCaller, 2))


def log(msg: str) -> None:
    print(f"chaos: {msg}", file=sys.stderr, flush=True)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="scripts/chaos.sh", description="mcpx under mixed load and faults, every call accounted for"
    )
    p.add_argument("--minutes", type=float, required=True, help="how long the load and the faults run")
    p.add_argument(
        "--seed", type=int, default=None, help="the seed of every random choice (default: a new one, printed)"
    )
    p.add_argument("--mcpx", type=Path, required=True, help="the mcpx binary")
    p.add_argument("--fake-server", type=Path, required=True, help="the mcpx-fake-server binary")
    p.add_argument(
        "--fault-gap", type=float, default=MEAN_GAP_S, help="the mean seconds between faults (default %(default)s)"
    )
    p.add_argument("--summary", type=Path, default=None, help="also write the counts here, as JSON")
    p.add_argument("--benchmarks", action="store_true", help="write the counts into BENCHMARKS.md's chaos section")
    p.add_argument("--command", default=None, help=argparse.SUPPRESS)  # the command as typed, for the report
    p.add_argument(
        "--self-check",
        action="store_true",
        help="alter one call's expected answer on purpose: the run must count 1 wrong answer and fail",
    )
    return p.parse_args()


def stop_all(m: Mcpx) -> list[str]:
    """`mcpx status` (a daemon adopts what a killed one left), `mcpx stop --all`, then every
    process of the run still running 5 s later, killed: their descriptions."""
    for args in (("status",), ("stop", "--all")):
        try:
            subprocess.run([str(m.binary), *args], env=m.env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        except subprocess.TimeoutExpired:
            log(f"`mcpx {' '.join(args)}` did not finish within 60s")
    found = strays(m)
    known = {**m.seen, **found}
    left = kill_survivors(m.seen) + kill_survivors(found)
    return [f"{pid} {' '.join(known.get(pid, []))[:160]}" for pid in dict.fromkeys(left)]


def main() -> int:
    if sys.version_info < (3, 10):  # noqa: UP036 - a friendly refusal on an older Python
        print("chaos: error: Python 3.10 or newer is needed", file=sys.stderr)
        return 1
    args = parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    print(f"chaos: seed {seed} (replay the same choices with --seed {seed})", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="mcpx-chaos.", dir="/tmp"))
    registry: list[Mcpx] = []
    fakes: list[Spawned] = []
    shared = watch = faults = None
    threads: list = []
    started, load_before = time.monotonic(), os.getloadavg()[0]

    def on_term(signum, frame):  # so that the cleanup below runs (once: a second signal is fatal)
        signal.signal(signum, signal.SIG_DFL)
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    interrupted = None
    leftovers: list[str] = []
    try:
        clean_env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_", "MCPX_"))}
        fakes.append(
            Spawned(
                "the remote fake server",
                [str(args.fake_server), "--http", "127.0.0.1:0"],
                tmp / "remote.log",
                env=clean_env,
                stdout=True,
            )
        )
        url = read_url(fakes[0])
        m = private_mcpx(args.mcpx, tmp / "m", {}, registry)
        config = Config(Path(m.env["MCPX_CONFIG"]), args.fake_server, url)
        bindir = tmp / "bin"
        bindir.mkdir()
        shutil.copy2(args.mcpx, bindir / "mcpx")
        mismatch = "shell-0" if args.self_check else None
        shared = Shared(m, config, Timeline(), Ledger(), tmp, mismatch)
        watch = Watch(m, shared.stop)
        faults = Faults(shared, seed, [args.mcpx.resolve(), bindir / "mcpx"], args.fault_gap)
        callers: list[Caller] = [cls(f"{name}-{i}", shared, seed) for name, cls, n in CALLERS for i in range(n)]
        threads = [watch, *callers, faults]
        log(f"{len(callers)} callers and the faults for {args.minutes:g} min; private state in {tmp}")
        for t in threads:
            t.start()
        shared.stop.wait(args.minutes * 60)
    except KeyboardInterrupt as e:
        interrupted = str(e) or "SIGINT"
        log(f"interrupted ({interrupted}); stopping everything it started")
    except BenchError as e:
        interrupted = str(e)
        log(f"error: {e}")
    finally:
        if shared is not None:
            shared.stop.set()
            log("stopping the callers (each ends its call in flight)")
        for t in threads:
            t.join()
        for m in registry:
            leftovers += stop_all(m)
        stop_spawned(fakes, "chaos")
    elapsed = time.monotonic() - started
    if shared is None or watch is None or faults is None:
        return 1
    driver_errors = [f"{t.name}: {type(t.error).__name__}: {t.error}" for t in threads if getattr(t, "error", None)]
    driver_errors += [f"interrupted: {interrupted}"] if interrupted else []
    s = summarize(shared, faults, watch, leftovers, driver_errors, seed, args, elapsed, load_before)
    print("\n".join(summary_lines(s)))
    if args.summary:
        args.summary.write_text(json.dumps(s, indent=2) + "\n")
    if args.benchmarks:
        write_benchmarks(ROOT / "BENCHMARKS.md", s)
        log("wrote the chaos section of BENCHMARKS.md")
    if s["problems"]:
        log(f"kept {tmp} (the daemon's log is m/s/daemon.log, each `mcpx serve`'s stderr beside it)")
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


def summarize(
    shared: Shared, faults: Faults, watch: Watch, leftovers, driver_errors, seed, args, elapsed, load_before
) -> dict:
    calls = shared.ledger.snapshot()
    outcomes = Counter(c.outcome for c in calls)
    failed = Counter(c.kind for c in calls if c.outcome == "failed")
    undocumented = Counter(c.kind for c in calls if c.outcome == "undocumented")
    t0 = shared.started
    events = shared.timeline.closed()

    def near(c) -> str:
        """The faults within 20 s of a call, for the reader of an example."""
        return "; ".join(
            f"{k} {srv or ''} {d} at +{s - t0:.1f}s..{e - t0:.1f}s"
            for s, e, k, srv, d in events
            if e >= c.start - 20 and s <= c.end + 5
        )

    examples = [
        f"{c.outcome}: {c.caller} {c.path} {c.server} {c.op} {c.token} at +{c.start - t0:.1f}s..{c.end - t0:.1f}s: {c.kind}: {c.detail}"
        f" (faults near: {near(c) or 'none'})"
        for c in calls
        if c.outcome in ("wrong", "hang", "undocumented")
    ][:10]
    failed_examples: dict[str, str] = {}
    for c in calls:
        if c.outcome == "failed" and c.detail:
            failed_examples.setdefault(c.kind, c.detail[:200])
    lifetimes = watch.lifetimes(shared.timeline)
    judged = [lt for lt in lifetimes if lt.judged]
    grown = [lt for lt in judged if lt.growth > FD_SLACK]
    problems = []
    for what, n in (
        ("wrong answers", outcomes["wrong"]),
        ("hangs", outcomes["hang"]),
        ("misrouted progress notifications", len(shared.misrouted)),
        ("undocumented failures", outcomes["undocumented"]),
        ("leftover processes", len(leftovers)),
        ("daemon lifetimes whose descriptors grew", len(grown)),
        ("failed upgrades", len(faults.failures)),
        ("activity records over their cap", int(watch.record_max > ACTIVITY_CAP)),
        ("driver errors", len(driver_errors)),
    ):
        if n:
            problems.append(f"{n} {what}")
    return {
        "seed": seed,
        "minutes": args.minutes,
        "seconds": round(elapsed),
        "command": args.command or f"python3 scripts/chaos --minutes {args.minutes:g} --seed {seed}",
        "fault_gap": args.fault_gap,
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "nproc": os.cpu_count(),
        "calls": len(calls),
        "by_path": dict(Counter(c.path for c in calls)),
        "by_op": dict(Counter(c.op for c in calls)),
        "answered": outcomes["answered"],
        "failed": outcomes["failed"],
        "failed_by_kind": dict(failed.most_common()),
        "wrong": outcomes["wrong"],
        "hangs": outcomes["hang"],
        "misrouted": shared.misrouted[:10],
        "misrouted_count": len(shared.misrouted),
        "progress_seen": shared.progress_seen,
        "slowest_s": round(max((c.end - c.start for c in calls), default=0), 1),
        "over_timeout": sum(1 for c in calls if c.end - c.start > CALL_TIMEOUT_S),
        "slowest": [
            f"{c.end - c.start:.1f}s {c.caller} {c.server} {c.op}: {c.outcome} {c.kind} {c.detail[:150]} (faults near: {near(c) or 'none'})"
            for c in sorted(calls, key=lambda c: c.start - c.end)[:3]
        ],
        "undocumented": outcomes["undocumented"],
        "undocumented_by_kind": dict(undocumented.most_common()),
        "examples": examples,
        "failed_examples": [f"{k}: {v}" for k, v in failed_examples.items()],
        "faults": shared.timeline.counts(),
        "upgrade_s_max": round(max((e - s for s, e, k, _, _ in events if k == "upgrade"), default=0), 1),
        "faults_skipped": faults.skipped,
        "fault_failures": faults.failures,
        "daemon_waits": shared.daemon_waits,
        "lifetimes": len(lifetimes),
        "lifetimes_judged": len(judged),
        "fd_slack": FD_SLACK,
        "fd_growth_max": max((lt.growth for lt in judged), default=0),
        "fd_grown": [f"pid {lt.pid}: +{lt.growth} in {lt.seconds:.0f}s" for lt in grown],
        "fd_range": [
            min((s[1] for lt in lifetimes for s in lt.samples), default=0),
            max((s[1] for lt in lifetimes for s in lt.samples), default=0),
        ],
        "rss_kib_max": max((s[2] for lt in lifetimes for s in lt.samples), default=0),
        "record_max": watch.record_max,
        "record_cap": ACTIVITY_CAP,
        "rss_kib_last": lifetimes[-1].samples[-1][2] if lifetimes else 0,
        "longest_lifetime_s": round(max((lt.seconds for lt in lifetimes), default=0)),
        "leftovers": leftovers,
        "driver_errors": driver_errors,
        "problems": problems,
    }
