"""Processes: what /proc says about them (command line, parent, memory, CPU time, descendants),
the processes a section starts itself (`Spawned`, each in a process group of its own, stopped
with everything it started, on failure too), and waiting for survivors to go."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from .common import ROOT, STEP_TIMEOUT, BenchError, log


def sh(*cmd: str, cwd: Path | None = None) -> str:
    """The output of a command, or "unknown" if it fails."""
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None if there is no
    such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, or None if there is no such process."""
    fields = stat_fields(pid)
    return None if fields is None else (fields[0], int(fields[1]))


def alive(pid: int) -> bool:
    st = proc_stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def memory_kib(pid: int) -> dict[str, int]:
    """RSS, PSS and USS (Private_Clean + Private_Dirty) of a process, in KiB, from smaps_rollup."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError as e:
        raise BenchError(f"cannot read the memory of pid {pid}: {e}") from e
    got = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == "kB":
            got[parts[0].rstrip(":")] = int(parts[1])
    try:
        return {"rss": got["Rss"], "pss": got["Pss"], "uss": got["Private_Clean"] + got["Private_Dirty"]}
    except KeyError as e:
        raise BenchError(f"/proc/{pid}/smaps_rollup has no {e} line") from e


def switches(pid: int) -> dict[int, int]:
    """Context switches so far of each thread of `pid`, by thread id (empty once it is gone)."""
    counts = {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return {}
    for task in tasks:
        try:
            text = (task / "status").read_text()
        except OSError:
            continue
        counts[int(task.name)] = sum(
            int(line.split()[1])
            for line in text.splitlines()
            if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"))
        )
    return counts


def woke(before: dict[int, int], after: dict[int, int]) -> int:
    """Wake-ups between two readings: each thread's growth, a thread started since counted
    from 0 (a thread that exited in between is not counted)."""
    return sum(n - before.get(tid, 0) for tid, n in after.items())


def supervisors(root: Path) -> list[int]:
    """The pids of the `mcpx supervise` processes whose environment names `root`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
            env = (proc / "environ").read_bytes()
        except OSError:
            continue
        if len(cmd) > 1 and cmd[1] == b"supervise" and str(root).encode() in env:
            found.append(int(proc.name))
    return found


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads), from /proc/PID/stat."""
    fields = stat_fields(pid)
    if fields is None:
        raise BenchError(f"cannot read the CPU time of pid {pid}")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def client_cpu() -> float:
    """User + system CPU time of this process, the benchmark's own client."""
    t = os.times()
    return t.user + t.system


def children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = proc_stat(int(d))
            if st is not None:
                kids.setdefault(st[1], []).append(int(d))
    return kids


def process_tree(roots: list[int]) -> list[int]:
    """The given processes and all their descendants now running."""
    kids = children_map()
    out: list[int] = []
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out.append(pid)
        todo += kids.get(pid, [])
    return out


def tree_cpu(roots: list[int]) -> float:
    """CPU seconds (user + system, with reaped children's) of a process tree."""
    total = 0.0
    for pid in process_tree(roots):
        f = stat_fields(pid)
        if f is not None:  # else gone meanwhile: its time is in its parent's cutime once reaped
            total += sum(int(x) for x in f[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def cpu_of(pids: dict[str, int]):
    """A sampler of the CPU time of this process ("client") and of each named process."""
    return lambda: {"client": client_cpu(), **{name: cpu_seconds(pid) for name, pid in pids.items()}}


def tree_cpu_of(path: list[int], **more: list[int]):
    """A sampler of the CPU time of a path's process trees ("path"), of this process ("client")
    and of each further named tree."""
    return lambda: {"path": tree_cpu(path), "client": client_cpu(), **{k: tree_cpu(v) for k, v in more.items()}}


def cpu_spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in before}


def kill_survivors(seen: dict[int, list[str]], seconds: float = 5.0, tick=None) -> list[int]:
    """Waits up to `seconds` for every process in `seen` (pid -> command line) to be gone, then
    kills with SIGKILL those still running the same command. Returns the pids it killed."""
    deadline = time.monotonic() + seconds
    while True:
        if tick is not None:
            tick()
        left = [pid for pid, cmd in seen.items() if alive(pid) and cmdline(pid) == cmd]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return left


def close_pipes(proc: subprocess.Popen) -> None:
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            try:
                pipe.close()
            except OSError:
                pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Spawned:
    """A process the benchmark starts for a section, in a process group of its own; `stop`
    ends it and everything it started (every descendant ever seen), and checks none is left."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        log_path: Path,
        env: dict | None = None,
        stdio: bool = False,
        stdout: bool = False,
    ) -> None:
        """`stdio`: pipes to its stdin and stdout; `stdout`: a pipe from its stdout only (stdin is /dev/null)."""
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.err = open(log_path, "wb")  # noqa: SIM115 - the child's stderr, closed by close()
        pipe = subprocess.PIPE if stdio else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            argv,
            env=env,
            cwd=ROOT,
            stdin=pipe,
            stdout=subprocess.PIPE if stdio or stdout else subprocess.DEVNULL,
            stderr=self.err,
            start_new_session=True,
        )
        self.seen: dict[int, list[str]] = {}
        self.track()

    def track(self) -> None:
        for pid in process_tree([self.proc.pid]):
            if pid not in self.seen:
                self.seen[pid] = cmdline(pid)

    def stderr_tail(self) -> str:
        return stderr_tail(self.log_path, self.name)

    def check_alive(self, what: str) -> None:
        if self.proc.poll() is not None:
            raise BenchError(f"{what}: {self.name} exited with status {self.proc.returncode}{self.stderr_tail()}")

    def stop(self) -> list[int]:
        """Closes its stdin (a stdio server ends there), else SIGTERM to its group; what is still
        running 5 s later gets SIGKILL. Returns the pids that had to be killed so."""
        if self.proc.poll() is None:
            self.track()
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except OSError:
                pass
        left = kill_survivors(self.seen, tick=self.proc.poll)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()
        close_pipes(self.proc)
        self.err.close()
        return left


def stop_spawned(spawned: list[Spawned], what: str) -> None:
    """Stops every process of `spawned`, the last started first, and logs any that had to be killed."""
    t_stop = time.monotonic()
    killed = []
    for s in reversed(spawned):
        killed += [f"{s.name}: {pid} {' '.join(s.seen.get(pid, []))[:100]}" for pid in s.stop()]
    if killed:
        log(f"{what}: killed after SIGTERM and 5 s: " + "; ".join(killed))
    if spawned:
        log(f"{what}: stopped {', '.join(s.name for s in spawned)} in {time.monotonic() - t_stop:.1f}s")


def stderr_tail(path: Path, name: str) -> str:
    """The end of a process's stderr log, for an error message."""
    try:
        tail = path.read_text(errors="replace")[-2000:].strip()
    except OSError:
        return ""
    return f"\n--- {name} stderr ---\n{tail}" if tail else ""


def wait_port(port: int, spawned: Spawned, timeout: float = STEP_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while True:
        spawned.check_alive(f"waiting for port {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise BenchError(
                f"{spawned.name} did not listen on 127.0.0.1:{port} within {timeout:.0f}s{spawned.stderr_tail()}"
            )
        time.sleep(0.05)
