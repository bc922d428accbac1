"""The run: every section in turn, each mcpx and process stopped at the end whatever happened
(an error, SIGINT, SIGTERM or SIGHUP), then the report written and its tables printed."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from . import adopt, calls, code, hotpath, memory, proxies, remote, scale, sharing, supervised, throughput, ui
from .common import ROOT, BenchError, log
from .mcpx import Mcpx, stop_private
from .options import parse_args
from .procs import sh
from .report import Results, machine_info, print_tables, report


def main() -> int:
    if sys.version_info < (3, 10):  # noqa: UP036 - a friendly refusal on an older Python
        print("bench: error: Python 3.10 or newer is needed", file=sys.stderr)
        return 1
    args = parse_args()
    server = args.e2e / "node_modules" / ".bin" / "mcp-server-everything"
    if not os.access(server, os.X_OK):
        print(f"bench: error: {server} is missing; run bash scripts/setup-e2e.sh", file=sys.stderr)
        return 1

    tmp = Path(tempfile.mkdtemp(prefix="mcpx-bench.", dir="/tmp"))
    registry: list[Mcpx] = []  # every private mcpx, each stopped at the end
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    failed = False

    def on_term(signum, frame):  # so that the cleanup below runs (once: a second signal is fatal)
        signal.signal(signum, signal.SIG_DFL)
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    try:
        if args.only_proxies:
            prox = proxies.run(args, tmp, registry)
        elif args.only_remote:
            rem = remote.run(args, tmp, registry)
        elif args.only_code:
            cod = code.run(args, tmp, registry)
        elif args.only_hotpath:
            hot = hotpath.run(args, tmp, registry)
        elif args.only_ui:
            dash = ui.run(args, tmp, registry)
        elif args.only_sharing:
            share = sharing.run(args, tmp, registry)
        elif args.only_scale:
            hot = hotpath.run(args, tmp, registry)
            big = scale.run(args, tmp, registry)
        else:
            share = sharing.run(args, tmp, registry)
            rows, server_info = calls.run(args, tmp, registry)
            cases = adopt.run(args, tmp, registry)
            mem = memory.run(cases)
            latency = supervised.run(args, tmp, registry)
            tput = throughput.run(args, tmp, registry)
            prox = proxies.run(args, tmp, registry)
            rem = remote.run(args, tmp, registry)
            cod = code.run(args, tmp, registry)
            hot = hotpath.run(args, tmp, registry)
            dash = ui.run(args, tmp, registry)
            big = scale.run(args, tmp, registry)
    except KeyboardInterrupt as e:
        failed = True
        print(f"bench: interrupted ({e or 'SIGINT'}); stopping everything it started", file=sys.stderr)
    except BenchError as e:
        failed = True
        print(f"bench: error: {e}", file=sys.stderr)
        # The log written last is the one of the mcpx that failed.
        logs = [f for m in registry if (f := Path(m.env["MCPX_STATE_DIR"]) / "daemon.log").exists()]
        if logs:
            log_file = max(logs, key=lambda f: f.stat().st_mtime)
            print(f"--- end of {log_file} ---\n" + log_file.read_text(errors="replace")[-3000:], file=sys.stderr)
    finally:
        for m in registry:
            try:
                stop_private(m)
            except BenchError as e:
                failed = True  # a daemon or server left running is a failure too
                print(f"bench: error: stopping mcpx ({m.env['MCPX_CONFIG']}): {e}", file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
    if failed:
        return 1
    load_after = os.getloadavg()[0]
    if args.only_proxies:
        print("\n".join(proxies.summary(prox)))
        print()
        print("\n".join(proxies.section(8, prox, {"nproc": sh("nproc")})))
        return 0
    if args.only_remote:
        print("\n".join(remote.summary(rem)))
        print()
        print("\n".join(remote.section(9, rem, {"nproc": sh("nproc")})))
        return 0
    if args.only_code:
        print("\n".join(code.summary(cod)))
        print()
        print("\n".join(code.section(10, cod)))
        return 0
    if args.only_hotpath:
        print("\n".join(hotpath.summary(hot)))
        print()
        print("\n".join(hotpath.section(11, hot, {"nproc": sh("nproc")})))
        return 0
    if args.only_ui:
        print("\n".join(ui.section(12, dash)))
        return 0
    if args.only_sharing:
        print("\n".join(sharing.section(share)))
        return 0
    if args.only_scale:
        print("\n".join(scale.section(13, hot, big)))
        return 0
    log(
        f"measured in {time.monotonic() - started:.0f}s (load average {load_before:.2f} before, {load_after:.2f} after)"
    )

    results = Results(share, rows, server_info, cases, mem, latency, tput, prox, rem, cod, hot, dash, big)
    info = machine_info(args, results, load_before, load_after, started)
    text = report(args, results, info)
    if args.quick and args.output is None:
        fd, name = tempfile.mkstemp(prefix="mcpx-bench-", suffix=".md")
        os.close(fd)
        out = Path(name)
    else:
        out = args.output or ROOT / "BENCHMARKS.md"
    out.write_text(text)
    print_tables(args, results, info)
    print(f"bench: wrote {out}")
    return 0
