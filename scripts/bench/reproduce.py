"""The report's last section, how to reproduce it: what scripts/bench.sh does, and the same
measurements by hand with hyperfine, GNU time and curl."""

from __future__ import annotations

import json

from .common import ECHO_ARGS, ECHO_MESSAGE, echo_request, initialize_params
from .options import DEFAULTS

REPRODUCE = r"""
## How to reproduce

```sh
bash scripts/bench.sh                   # release build, @ITER@ runs per command, @KILLS@ kills per size,
                                        # @LAT@ calls per command in section @S3@, @TREP@ rounds of @TSEC@ s
                                        # per side in section @S4@; rewrites BENCHMARKS.md
bash scripts/bench.sh --iterations 100  # more runs (and --kills N, --latency-iterations N,
                                        # --throughput-seconds S, --throughput-repeats N)
bash scripts/bench.sh --quick           # debug build, 3 runs, 1 kill per size, 1 throughput round
                                        # of 1 s, 1 proxy round of 10 requests and 0.2 s, writes a
                                        # temporary file (what CI runs)
bash scripts/bench.sh --only-proxies    # only section @S5@, printed (--proxy-calls N, --proxy-rounds N,
                                        # --proxy-seconds S, which section @S6@ uses too)
bash scripts/bench.sh --only-remote     # only section @S6@, printed
bash scripts/bench.sh --only-code       # only section @S7@, printed (needs deno and server-filesystem)
bash scripts/bench.sh --only-hotpath    # only section @S8@, printed (--hotpath-seconds S, --hotpath-calls N,
                                        # --hotpath-rounds N); the full mode builds the Rust mcp-proxy
                                        # 0.6.0 once into e2e/rust-mcp-proxy (a few minutes)
```

`scripts/bench.sh` builds mcpx and the fake server (`cargo build --release -p mcpx -p mcpx-fake-server`),
installs the servers into `e2e/` (`bash scripts/setup-e2e.sh`) and runs `scripts/bench` (Python
standard library only). That gives mcpx private state, cache and runtime directories and a config
holding only server-everything, all in a temporary directory, and one more such private mcpx for
each configuration of sections @S1@ to @S6@; at the end it stops every daemon and every server
(`mcpx status`, which starts a daemon that adopts any supervisor left by a kill, then
`mcpx stop --all`), checks that no server or supervisor is left, and removes the directory.
Section @S5@ also starts supergateway, mcp-proxy, `mcpx serve` and a fake server of its own, and
section @S6@ two fake servers in HTTP mode and `mcpx serve`, each in its own process group; they are
stopped (stdin closed, else SIGTERM, then SIGKILL after 5 s) with every process they started, whether
the run succeeds or fails (or gets SIGTERM or Ctrl-C).

By hand, with [hyperfine](https://github.com/sharkdp/hyperfine) (`apt-get install hyperfine`)
and GNU time (`apt-get install time`), from the repository root after
`cargo build --release -p mcpx && bash scripts/setup-e2e.sh`. Here the direct client is the
server reading its messages from a file: it gets all of them at once instead of one after
each answer, answers them and exits at the end of its input. hyperfine runs all the runs of
one command, then those of the next, rather than interleaving them; `-N` runs the commands
without a shell, and the direct client goes through `sh -c` for the input redirection (which
adds about a millisecond to its time).

```sh
mkdir -p /tmp/mcpx-b && cd "$(git rev-parse --show-toplevel)"
export MCPX_STATE_DIR=/tmp/mcpx-b/state MCPX_CACHE_DIR=/tmp/mcpx-b/cache MCPX_RUNTIME_DIR=/tmp/mcpx-b/run
server=$PWD/e2e/node_modules/.bin/mcp-server-everything
mcpx=$PWD/target/release/mcpx
printf '{"mcpServers": {"everything": {"command": "%s", "args": ["stdio"]}}}\n' "$server" > /tmp/mcpx-b/config.json
export MCPX_CONFIG=/tmp/mcpx-b/config.json
init='@INIT@'
initialized='@INITIALIZED@'
printf '%s\n' "$init" "$initialized" '@LIST@' > /tmp/mcpx-b/list.jsonl
printf '%s\n' "$init" "$initialized" '@CALL@' > /tmp/mcpx-b/call.jsonl

$mcpx refresh everything   # starts the daemon and the server, and caches the tool list

# 1. the tool list: from mcpx's cache vs. from a freshly started server
hyperfine -N --warmup 3 --runs 30 "$mcpx ls" "$mcpx tools everything" "sh -c '$server stdio < /tmp/mcpx-b/list.jsonl'"

# 2. a tool call through the warm daemon vs. a freshly started server
hyperfine -N --warmup 3 --runs 30 "$mcpx call everything.echo '@ARGS_DQ@'" "sh -c '$server stdio < /tmp/mcpx-b/call.jsonl'"

# 3. the first call with no daemon running (it starts the daemon, which starts the server)
hyperfine -N --runs 30 --prepare "$mcpx stop --all" "$mcpx call everything.echo '@ARGS_DQ@'" "sh -c '$server stdio < /tmp/mcpx-b/call.jsonl'"

# memory: the peak RSS ("Maximum resident set size") of one direct session and of one mcpx
# call (the short-lived CLI only), then what the long-running daemon and server hold
/usr/bin/time -v sh -c "$server stdio < /tmp/mcpx-b/call.jsonl" 2>&1 >/dev/null | grep Maximum
/usr/bin/time -v $mcpx call everything.echo '@ARGS@' 2>&1 >/dev/null | grep Maximum
for pid in $($mcpx status --json | grep -o '"pid":[0-9]*' | cut -d: -f2); do grep -H VmRSS /proc/$pid/status; done

# @S1@. kill -9 of the daemon, then the next call (a new daemon adopts the supervisor; the server
# pid in `mcpx status` stays the same)
$mcpx status --json | grep -o '"pid":[0-9]*'
kill -9 $(cat $MCPX_RUNTIME_DIR/daemon.pid); time $mcpx call everything.echo '@ARGS@'
$mcpx status --json | grep -o '"pid":[0-9]*'

# @S2@. the supervisor's memory: USS (Private_Clean + Private_Dirty) and RSS
for pid in $($mcpx status --json | grep -o '"supervisor_pid":[0-9]*' | cut -d: -f2); do
    grep -E '^(Rss|Private_Clean|Private_Dirty):' /proc/$pid/smaps_rollup
done

# @S3@. the same call with the server as the daemon's child: add "mcpx": {"supervised": false} to
# the config's entry, then
$mcpx stop --all
hyperfine -N --warmup 3 --runs 100 "$mcpx call everything.echo '@ARGS_DQ@'"

# @S4@. the daemon's MCP endpoint that section @S4@ loads with many callers at once (the load itself
# needs a client that keeps its connections open: scripts/bench), here one session and one call
# with curl; the tool is named <server>__<tool>
sock=$MCPX_RUNTIME_DIR/daemon.sock
session=$(curl -s -o /dev/null -D - --unix-socket $sock -H 'content-type: application/json' \
    -H 'accept: application/json' --data-binary "$init" http://localhost/mcp | tr -d '\r' | sed -n 's/^mcp-session-id: //Ip')
curl -s --unix-socket $sock -H 'content-type: application/json' -H 'accept: application/json' \
    -H "mcp-session-id: $session" --data-binary '@HTTPCALL@' http://localhost/mcp

# @S5@. the proxy comparison. scripts/bench measures it with its own client (many requests per
# connection); by hand, the same endpoints with curl, and hyperfine over one whole curl process
# per request (which adds curl's start-up, a few ms, to every path alike). The direct path as
# in rows 1 to 3: the server reading its messages from a file.
fake=$PWD/target/release/mcpx-fake-server
printf '{"mcpServers": {"fake": {"command": "%s"}}}\n' "$fake" > /tmp/mcpx-b/fake.json
$mcpx stop --all; export MCPX_CONFIG=/tmp/mcpx-b/fake.json
MCPX_HTTP_ADDR=127.0.0.1:8765 MCPX_HTTP_NO_AUTH=1 $mcpx refresh   # a daemon serving /mcp on TCP too
e2e/node_modules/.bin/node e2e/node_modules/supergateway/dist/index.js --stdio "$fake" \
    --outputTransport streamableHttp --stateful --port 8766 --logLevel none &
e2e/mcp-proxy/.venv/bin/mcp-proxy --port 8767 --log-level WARNING -- "$fake" &
sleep 3
h=(-H 'content-type: application/json' -H 'accept: application/json, text/event-stream')
session() {  # URL: initialize and notifications/initialized; prints the Mcp-Session-Id
    s=$(curl -s -o /dev/null -D - "${h[@]}" --data-binary "$init" "$1" | tr -d '\r' | sed -n 's/^mcp-session-id: //Ip')
    curl -s "${h[@]}" -H "mcp-session-id: $s" --data-binary "$initialized" "$1" >/dev/null; echo "$s"
}
call='@PCALL@'
printf '%s\n' "$init" "$initialized" "$call" > /tmp/mcpx-b/fakecall.jsonl
fcall=${call/\"echo\"/\"fake__echo\"}
s1=$(session http://127.0.0.1:8765/mcp) s2=$(session http://127.0.0.1:8765/mcp/fake)
s3=$(session http://127.0.0.1:8766/mcp) s4=$(session http://127.0.0.1:8767/mcp)
c="curl -s -H 'content-type: application/json' -H 'accept: application/json, text/event-stream'"
hyperfine -N --warmup 3 --runs 100 "sh -c '$fake < /tmp/mcpx-b/fakecall.jsonl'" \
    "$c -H 'mcp-session-id: $s1' --data-binary '$fcall' http://127.0.0.1:8765/mcp" \
    "$c -H 'mcp-session-id: $s2' --data-binary '$call' http://127.0.0.1:8765/mcp/fake" \
    "$c -H 'mcp-session-id: $s3' --data-binary '$call' http://127.0.0.1:8766/mcp" \
    "$c -H 'mcp-session-id: $s4' --data-binary '$call' http://127.0.0.1:8767/mcp"
kill %1 %2

# @S6@. a remote server: the fake server speaking streamable HTTP (SSE answers; with
# FAKE_HTTP_RESPONSE=json in its environment, JSON ones), held by mcpx as `remote`; `mcpx call`
# against the same curl request straight to the server and through the daemon's /mcp/remote
$fake --http 127.0.0.1:8768 & remote=$!   # prints http://127.0.0.1:8768/mcp once listening
printf '{"mcpServers": {"remote": {"url": "http://127.0.0.1:8768/mcp"}}}\n' > "$(dirname "$MCPX_CONFIG")/remote.json"
$mcpx stop --all; export MCPX_CONFIG="$(dirname "$MCPX_CONFIG")/remote.json"
MCPX_HTTP_ADDR=127.0.0.1:8765 MCPX_HTTP_NO_AUTH=1 $mcpx refresh
s5=$(session http://127.0.0.1:8768/mcp) s6=$(session http://127.0.0.1:8765/mcp/remote)
hyperfine -N --warmup 3 --runs 100 "$mcpx call remote.echo '@ARGS_DQ@'" \
    "$c -H 'mcp-session-id: $s5' --data-binary '$call' http://127.0.0.1:8768/mcp" \
    "$c -H 'mcp-session-id: $s6' --data-binary '$call' http://127.0.0.1:8765/mcp/remote"
$mcpx stop --all; kill $remote

# @S8@. the hot path with the load generator (16 connections for 5 s, then one connection's
# latency; the JSON report on stdout, one line on stderr), against the daemon with the fake server
# of section @S5@ and the fake server's own HTTP answering JSON (direct)
cargo build --release -p mcpx-load; load=$PWD/target/release/mcpx-load
export MCPX_CONFIG=/tmp/mcpx-b/fake.json
MCPX_HTTP_ADDR=127.0.0.1:8765 MCPX_HTTP_NO_AUTH=1 $mcpx refresh
FAKE_HTTP_RESPONSE=json $fake --http 127.0.0.1:8769 & direct=$!
daemon=$(cat $MCPX_RUNTIME_DIR/daemon.pid)
$load -c 16 --seconds 5 http http://127.0.0.1:8769/mcp
$load -c 16 --seconds 5 --pid daemon=$daemon http http://127.0.0.1:8765/mcp/fake
$load -c 1 --calls 2000 http http://127.0.0.1:8765/mcp/fake
$load -c 1 --calls 2000 stdio -- $fake
$load -c 1 --calls 2000 --tool fake__echo stdio -- $mcpx serve
# the Rust peer, as scripts/bench.sh builds it; its config names the backend `fake`
cargo install --locked --version 0.6.0 --no-default-features --root e2e/rust-mcp-proxy mcp-proxy
e2e/rust-mcp-proxy/bin/mcp-proxy --help
# a cross-check with wrk (`apt-get install wrk`; it cannot check the answers, and every request
# sends the same message in one session): POST the call with the session's headers
s7=$(session http://127.0.0.1:8765/mcp/fake)
cat > /tmp/mcpx-b/post.lua <<LUA
wrk.method = "POST"
wrk.body = '$call'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["Mcp-Session-Id"] = "$s7"
LUA
wrk -t2 -c16 -d5s -s /tmp/mcpx-b/post.lua http://127.0.0.1:8765/mcp/fake
kill $direct

$mcpx stop --all; rm -rf /tmp/mcpx-b
```
"""


def reproduce_section(first_sup: int) -> list[str]:
    init = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize_params()}, separators=(",", ":")
    )
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": ECHO_MESSAGE}},
    }
    text = (
        REPRODUCE.replace("@ITER@", str(DEFAULTS["iterations"]))
        .replace("@KILLS@", str(DEFAULTS["kills"]))
        .replace("@LAT@", str(DEFAULTS["latency_iterations"]))
        .replace("@S1@", str(first_sup))
        .replace("@S2@", str(first_sup + 1))
        .replace("@S3@", str(first_sup + 2))
        .replace("@S4@", str(first_sup + 3))
        .replace("@S5@", str(first_sup + 4))
        .replace("@S6@", str(first_sup + 5))
        .replace("@S7@", str(first_sup + 6))
        .replace("@S8@", str(first_sup + 7))
        .replace("@PCALL@", json.dumps(echo_request(3, "echo", ECHO_MESSAGE), separators=(",", ":")))
        .replace("@TREP@", str(DEFAULTS["throughput_repeats"]))
        .replace("@TSEC@", f"{DEFAULTS['throughput_seconds']:g}")
        .replace("@INIT@", init)
        .replace("@INITIALIZED@", '{"jsonrpc":"2.0","method":"notifications/initialized"}')
        .replace("@LIST@", '{"jsonrpc":"2.0","id":2,"method":"tools/list"}')
        .replace("@CALL@", json.dumps(call, separators=(",", ":")))
        .replace("@HTTPCALL@", json.dumps(echo_request(2, "everything__echo", ECHO_MESSAGE), separators=(",", ":")))
        .replace("@ARGS@", ECHO_ARGS)
        .replace("@ARGS_DQ@", ECHO_ARGS.replace('"', '\\"'))
    )
    return text.splitlines()
