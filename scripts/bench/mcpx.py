"""mcpx as the benchmark runs it: a private mcpx per configuration (its own state, cache and
runtime directories, config and daemon), its commands run and their output checked, its daemon
and instances looked up, and its stop at the end, which checks that nothing it ran is left."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from pathlib import Path

from .common import STEP_TIMEOUT, BenchError
from .procs import alive, cmdline, kill_survivors, process_tree

ORPHAN_TIMEOUT = "2m"  # for the fake servers: a supervisor left behind by a crash stops soon


class Mcpx:
    def __init__(self, binary: Path, env: dict[str, str]) -> None:
        self.binary = binary
        self.env = env
        self.seen: dict[int, list[str]] = {}  # pid -> command line of every server and supervisor seen

    def track(self, *pids: int | None) -> None:
        for pid in pids:
            if isinstance(pid, int) and pid not in self.seen:
                self.seen[pid] = cmdline(pid)

    def run(self, *args: str) -> tuple[float, str]:
        """Runs `mcpx ARGS` to the end; returns (seconds, stdout). Fails on a non-zero exit."""
        start = time.perf_counter()
        proc = subprocess.Popen(
            [str(self.binary), *args],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            out, err = proc.communicate(timeout=STEP_TIMEOUT * 2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise BenchError(f"`mcpx {shlex.join(args)}` did not finish within {STEP_TIMEOUT * 2:.0f}s") from None
        except BaseException:  # interrupted: the command does not outlive the benchmark
            proc.kill()
            proc.communicate()
            raise
        elapsed = time.perf_counter() - start
        text = out.decode(errors="replace")
        if proc.returncode != 0:
            raise BenchError(
                f"`mcpx {shlex.join(args)}` exited with status {proc.returncode}\n"
                f"--- stdout ---\n{text[-2000:]}--- stderr ---\n{err.decode(errors='replace')[-2000:]}"
            )
        return elapsed, text

    def checked(self, args: tuple[str, ...], check, what: str) -> tuple[float, None]:
        """Runs `mcpx ARGS`; `check(stdout)` must hold, else it fails saying `what`."""
        elapsed, out = self.run(*args)
        if not check(out):
            raise BenchError(f"`mcpx {shlex.join(args)}`: {what}; it printed:\n{out[-2000:]}")
        return elapsed, None

    def refresh(self, names: list[str], *args: str) -> float:
        """`mcpx refresh ARGS`, which must print `NAME: refreshed` for each of `names`; its seconds."""
        elapsed, out = self.run("refresh", *args)
        missing = [n for n in names if not re.search(rf"^{re.escape(n)}: refreshed$", out, re.M)]
        if missing:
            raise BenchError(f"`mcpx refresh {shlex.join(args)}` did not refresh {', '.join(missing)}:\n{out[-2000:]}")
        return elapsed

    def status(self) -> dict:
        _, out = self.run("status", "--json")
        try:
            return json.loads(out)
        except ValueError as e:
            raise BenchError(f"`mcpx status --json` printed something that is not JSON ({e}): {out[:300]}") from e

    def socket(self) -> Path:
        """The daemon's control socket, $MCPX_RUNTIME_DIR/daemon.sock."""
        return Path(self.env["MCPX_RUNTIME_DIR"]) / "daemon.sock"

    def daemon_pid(self) -> int:
        """The running daemon's pid, from $MCPX_RUNTIME_DIR/daemon.pid, checked against /proc."""
        path = Path(self.env["MCPX_RUNTIME_DIR"]) / "daemon.pid"
        try:
            pid = int(path.read_text().split()[0])
        except (OSError, ValueError, IndexError) as e:
            raise BenchError(f"no daemon pid in {path}: {e}") from e
        if not alive(pid) or "daemon" not in cmdline(pid) or Path(cmdline(pid)[0]).name != self.binary.name:
            raise BenchError(f"{path} names pid {pid}, which is not a running mcpx daemon ({cmdline(pid)})")
        return pid

    def http_port(self, status: dict) -> int:
        """The TCP port of the daemon's streamable HTTP endpoint (MCPX_HTTP_ADDR=127.0.0.1:0)."""
        url = status.get("daemon", {}).get("http_url")
        if not isinstance(url, str) or not re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", url):
            raise BenchError(f"the daemon does not serve /mcp on TCP (MCPX_HTTP_ADDR=127.0.0.1:0): http_url {url!r}")
        return int(url.rsplit(":", 1)[1].split("/")[0])

    def instance(self, server: str) -> tuple[int, int, int]:
        """(daemon, supervisor, server) pids of the one instance, running, of a supervised server
        that is the only one configured."""
        insts = self.status().get("instances", [])
        if len(insts) != 1 or insts[0].get("server") != server or insts[0].get("state") != "running":
            raise BenchError(f"not one running {server} instance: {json.dumps(insts)[:500]}")
        pid, sup = insts[0].get("pid"), insts[0].get("supervisor_pid")
        if not isinstance(pid, int) or not isinstance(sup, int):
            raise BenchError(f"the {server} instance has no pid or supervisor pid: {json.dumps(insts[0])[:300]}")
        self.track(pid, sup)
        return self.daemon_pid(), sup, pid


def private_mcpx(
    binary: Path, base: Path, servers: dict, registry: list, http: bool = False, settings: dict | None = None
) -> Mcpx:
    """A private mcpx in `base`: its own state, cache and runtime directories and config file
    (with `servers`, and the top-level `settings`: `{"activity": {...}}`); with `http`, its daemon
    also serves /mcp on TCP loopback, without auth. It is added to `registry`, whose every mcpx is
    stopped at the end."""
    base.mkdir()
    config = base / "config.json"
    config.write_text(json.dumps({**(settings or {}), "mcpServers": servers}, indent=2) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPX_")}
    env.update(
        MCPX_STATE_DIR=str(base / "s"),
        MCPX_CACHE_DIR=str(base / "c"),
        MCPX_RUNTIME_DIR=str(base / "r"),
        MCPX_CONFIG=str(config),
    )
    if http:
        env.update(MCPX_HTTP_ADDR="127.0.0.1:0", MCPX_HTTP_NO_AUTH="1")
    m = Mcpx(binary, env)
    registry.append(m)
    return m


def scratch_env(root: Path, servers: dict) -> dict[str, str]:
    """A bare mcpx in `root` for the one-off measuring scripts (scripts/measure_*.py): its
    state, cache and runtime directories and a config of `servers`; the environment that
    points mcpx at them, with nothing else of this one's but PATH."""
    for sub in ("state", "cache", "run"):
        (root / sub).mkdir(mode=0o700)
    (root / "config.json").write_text(json.dumps({"mcpServers": servers}))
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root),
        "MCPX_STATE_DIR": str(root / "state"),
        "MCPX_CACHE_DIR": str(root / "cache"),
        "MCPX_RUNTIME_DIR": str(root / "run"),
        "MCPX_CONFIG": str(root / "config.json"),
    }


def fake_entry(fake: Path, n: int | None = None, supervised: bool = True) -> dict:
    """The config entry of the fake server (the `n`th, with an environment of its own)."""
    entry: dict = {"command": str(fake), "mcpx": {"orphanTimeout": ORPHAN_TIMEOUT}}
    if n is not None:
        entry["env"] = {"BENCH_INSTANCE": str(n)}  # distinct servers, distinct instances
    if not supervised:
        entry["mcpx"]["supervised"] = False
    return entry


def stop_private(m: Mcpx) -> None:
    """Stops a private mcpx and every server it ran, and checks that none is left. `mcpx status`
    runs first: it starts a daemon if the last one was killed, which adopts the supervisors
    (`mcpx stop --all` with no daemon running stops none). A process seen in `mcpx status`, or any
    other of this mcpx (see `strays`), that is still running a few seconds after `mcpx stop --all`
    is killed (by its pid, and only if it is still the same command) and is an error."""
    try:
        m.run("status")
        m.run("stop", "--all")
    finally:
        left = kill_survivors(m.seen)
        left += kill_survivors(strays(m))
        if left:
            raise BenchError(f"processes still running after `mcpx stop --all` (now killed): {left}")


def strays(m: Mcpx) -> dict[int, list[str]]:
    """Processes running with this mcpx's runtime directory in their environment (its daemon and
    supervisors, also one that no `mcpx status` showed, as when a run is interrupted while a
    server starts), and their descendants: pid -> command line."""
    marker = f"MCPX_RUNTIME_DIR={m.env['MCPX_RUNTIME_DIR']}".encode()
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if marker in Path(f"/proc/{d}/environ").read_bytes().split(b"\0"):
                    found.append(int(d))
            except OSError:
                pass
    return {pid: cmdline(pid) for pid in process_tree(found) if alive(pid)}
