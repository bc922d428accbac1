"""One sequential `tools/call` through `mcpx serve` against the fake server spoken to directly over
stdio, side by side in one run: the latency each path adds, and the CPU time per call of serve, the
daemon and the supervisor. Several mcpx binaries (a build before and after a change) can run in the
same rounds, each with a private daemon of its own; the paths take turns in blocks, so the machine's
noise hits each alike.

    python3 -m scripts.bench.serve_latency --fake target/release/mcpx-fake-server \\
        --mcpx before=/path/to/old/mcpx --mcpx after=target/release/mcpx [--calls 400] [--rounds 7]

An mcpx built with `--features mcpx-daemon/test-hooks` stands for both: `--mcpx
http=target/release/mcpx,MCPX_TEST_NO_STREAM=1` makes its daemon refuse serve's link, so serve
relays over HTTP as before the link.

Prints a Markdown table: per path the median and p90 of the calls' latencies (from just before a
request is written until its answer is read and parsed), the median over direct, and each mcpx
process's CPU time per call (user + system from /proc/PID/stat, over the timed calls)."""

from __future__ import annotations

import argparse
import shlex
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from .common import STEP_TIMEOUT, BenchError, check_echo, echo_request, initialize_params, jsonrpc_line
from .mcpx import fake_entry, private_mcpx, stop_private
from .procs import cpu_seconds
from .stdio_client import LineReader


class Path_:
    """One stdio path: a process spoken to over its stdin and stdout, and the pids whose CPU counts."""

    def __init__(self, label: str, argv: list[str], env: dict | None, tool: str) -> None:
        self.label, self.tool = label, tool
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.reader = LineReader(self.proc.stdout.fileno())
        self.next_id = 1
        self.latencies: list[float] = []
        self.cpu: dict[str, float] = {}
        self.pids: dict[str, int] = {}
        self.calls = 0

    def ask(self, msg: dict) -> dict:
        self.proc.stdin.write(jsonrpc_line(msg))
        self.proc.stdin.flush()
        deadline = time.monotonic() + STEP_TIMEOUT
        while True:
            answer = self.reader.message(deadline, self.label)
            if answer is None:
                raise BenchError(f"{self.label}: stdout closed")
            if answer.get("id") == msg.get("id"):
                return answer

    def initialize(self) -> None:
        self.ask({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": initialize_params()})
        self.proc.stdin.write(jsonrpc_line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        self.proc.stdin.flush()

    def call(self) -> float:
        id_ = self.next_id
        self.next_id += 1
        message = f"{self.label}-{id_}"
        start = time.perf_counter()
        answer = self.ask(echo_request(id_, self.tool, message))
        elapsed = time.perf_counter() - start
        check_echo(self.label, answer, id_, message)
        return elapsed

    def block(self, n: int) -> None:
        before = {k: cpu_seconds(p) for k, p in self.pids.items()}
        for _ in range(n):
            self.latencies.append(self.call())
        for k, p in self.pids.items():
            self.cpu[k] = self.cpu.get(k, 0.0) + cpu_seconds(p) - before[k]
        self.calls += n

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def attached(p: Path_, command: str, calls: int) -> None:
    """One block of `calls` calls on `p` with `command` running on each of its mcpx processes."""
    label = p.label.split("(")[-1].rstrip(")")
    tools = []
    for name, pid in p.pids.items():
        argv = shlex.split(command.format(pid=pid, name=f"{name}-{label}"))
        tools.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL))
    time.sleep(1.0)  # the profilers attach
    for _ in range(calls):
        p.call()
    for t in tools:
        t.send_signal(signal.SIGINT)
    for t in tools:
        t.wait(timeout=60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fake", type=Path, required=True)
    ap.add_argument(
        "--mcpx",
        action="append",
        default=[],
        help="LABEL=PATH[,VAR=VALUE...]: an mcpx binary, with variables for its serve and daemon (repeatable)",
    )
    ap.add_argument("--calls", type=int, default=400, help="calls per block")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument(
        "--attach",
        help="after the rounds, run this command (with {pid} and {name}: serve-LABEL, daemon-LABEL, ...) on each "
        "mcpx process during one more block of each mcpx path, and stop it with SIGINT after: a profiler, "
        "say `perf record -e cpu-clock -g -o perf.{name} -p {pid}` or `strace -c -f -o strace.{name} -p {pid}`",
    )
    args = ap.parse_args()
    registry: list = []
    paths: list[Path_] = []
    with tempfile.TemporaryDirectory(prefix="serve-latency-") as tmp:
        try:
            paths.append(Path_("direct", [str(args.fake)], None, "echo"))
            for spec in args.mcpx:
                label, rest = spec.split("=", 1)
                binary, *variables = rest.split(",")
                m = private_mcpx(Path(binary).resolve(), Path(tmp) / label, {"fake": fake_entry(args.fake)}, registry)
                m.env.update(v.split("=", 1) for v in variables)
                p = Path_(f"serve ({label})", [str(m.binary), "serve"], m.env, "fake__echo")
                p.initialize()
                p.call()  # starts the instance
                daemon, sup, _ = m.instance("fake")
                p.pids = {"serve": p.proc.pid, "daemon": daemon, "supervisor": sup}
                paths.append(p)
            paths[0].initialize()
            for p in paths:  # warm-up
                for _ in range(100):
                    p.call()
            for _ in range(args.rounds):
                for p in paths:
                    p.block(args.calls)
            if args.attach:
                for p in paths[1:]:
                    attached(p, args.attach, args.calls)
        finally:
            for p in paths:
                p.close()
            for m in registry:
                stop_private(m)
    direct = statistics.median(paths[0].latencies)
    print(f"{args.rounds} rounds of {args.calls} sequential calls per path, taking turns\n")
    print("| path | median | p90 | added over direct | serve CPU/call | daemon CPU/call | supervisor CPU/call |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for p in paths:
        lat = sorted(p.latencies)
        med, p90 = statistics.median(lat), lat[int(len(lat) * 0.9)]
        cpu = [f"{p.cpu[k] / p.calls * 1e6:.0f} µs" if k in p.cpu else "" for k in ("serve", "daemon", "supervisor")]
        print(
            f"| {p.label} | {med * 1e3:.3f} ms | {p90 * 1e3:.3f} ms | +{(med - direct) * 1e3:.3f} ms | {' | '.join(cpu)} |"
        )


if __name__ == "__main__":
    main()
