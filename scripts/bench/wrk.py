"""The second load generator of the hot path section: `wrk` (Debian's package), 2 threads and 16
connections, posting `tools/call` on one MCP session made beforehand, each request with an id
of its own. Every answer is checked for a JSON-RPC error in its body (a Lua `response` hook),
and any non-2xx answer or error fails the benchmark. The CPU time the named processes spent
during the run, from /proc/PID/stat, is divided by the requests made."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

from .common import STEP_TIMEOUT, BenchError
from .http_client import HttpMcp, TcpHTTPConnection
from .procs import cpu_seconds

THREADS, CONNECTIONS = 2, 16

LUA = """-- Written by scripts/bench/wrk.py: tools/call with a fresh id per request, answers checked.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
%(headers)s
local threads = {}
function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end
function init(args)
  n = 0
  errors = 0
end
function request()
  n = n + 1
  local id = tid * 1000000000 + n
  return wrk.format(nil, nil, nil,
    '{"jsonrpc":"2.0","id":' .. id .. ',"method":"tools/call","params":{"name":"%(tool)s","arguments":{"message":"hi"}}}')
end
function response(status, headers, body)
  if string.find(body, '"error"', 1, true) or not string.find(body, "hi", 1, true) then
    errors = errors + 1
  end
end
function done(summary, latency, requests)
  local total = 0
  for _, thread in ipairs(threads) do
    total = total + thread:get("errors")
  end
  io.write(string.format("answers with an error: %%d\\n", total))
end
"""


def available() -> str | None:
    """The path of `wrk`, or None."""
    return shutil.which("wrk")


def version(binary: str) -> str:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True)
    first = (out.stdout + out.stderr).splitlines()
    return first[0].split(" Copyright")[0].strip() if first else "unknown"


def session_headers(url: str, label: str) -> str:
    """An MCP session on `url` (initialize, then notifications/initialized): the Lua lines that
    send its Mcp-Session-Id and MCP-Protocol-Version."""
    parts = urlsplit(url)
    assert parts.port is not None
    client = HttpMcp(label, lambda: TcpHTTPConnection(parts.port), path=parts.path or "/")
    client.connect()
    client.open()
    lines = []
    if client.session is not None:
        lines.append(f'wrk.headers["Mcp-Session-Id"] = "{client.session}"')
    if client.version is not None:
        lines.append(f'wrk.headers["MCP-Protocol-Version"] = "{client.version}"')
    client.close()
    return "\n".join(lines)


def to_us(text: str) -> float:
    """wrk's latency (`289.00us`, `1.20ms`, `2.00s`) in µs."""
    m = re.fullmatch(r"([0-9.]+)(us|ms|s)", text)
    if m is None:
        raise BenchError(f"wrk printed a latency it cannot read: {text!r}")
    return float(m.group(1)) * {"us": 1.0, "ms": 1e3, "s": 1e6}[m.group(2)]


def run(binary: str, url: str, tool: str, seconds: float, base: Path, label: str, pids: dict[str, int]) -> dict:
    """One wrk run on a fresh session: calls/s, p50 and p99 (µs), requests, and each named
    process's CPU µs per call."""
    script = base / f"wrk-{label}.lua"
    script.write_text(LUA % {"headers": session_headers(url, label), "tool": tool})
    # wrk takes whole seconds only.
    secs = max(1, round(seconds))
    cmd = [binary, f"-t{THREADS}", f"-c{CONNECTIONS}", f"-d{secs}s", "--latency", "-s", str(script), url]
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=secs + STEP_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise BenchError(f"`{' '.join(cmd)}` did not finish") from None
    after = {name: cpu_seconds(pid) for name, pid in pids.items()}
    out = proc.stdout
    if proc.returncode != 0:
        raise BenchError(f"`{' '.join(cmd)}` failed: {(proc.stderr + proc.stdout).strip()[-1000:]}")
    if "Non-2xx" in out or "Socket errors" in out:
        raise BenchError(f"wrk on {label}: failed requests:\n{out}")
    errors = re.search(r"answers with an error: (\d+)", out)
    if errors is None or int(errors.group(1)) != 0:
        raise BenchError(f"wrk on {label}: answers with a JSON-RPC error or without the echo:\n{out}")
    rate = re.search(r"Requests/sec:\s+([0-9.]+)", out)
    total = re.search(r"(\d+) requests in", out)
    p50 = re.search(r"^\s+50%\s+(\S+)", out, re.M)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.M)
    if not (rate and total and p50 and p99):
        raise BenchError(f"wrk on {label}: output it cannot read:\n{out}")
    requests = int(total.group(1))
    return {
        "calls_per_s": float(rate.group(1)),
        "p50_us": to_us(p50.group(1)),
        "p99_us": to_us(p99.group(1)),
        "requests": requests,
        "cpu_us_per_call": {name: (after[name] - before[name]) * 1e6 / max(requests, 1) for name in pids},
    }
