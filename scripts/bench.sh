#!/usr/bin/env bash
# Counts what N MCP clients (the TypeScript SDK's) cost with their own 5 real servers against
# sharing them through mcpx (the sharing table, first), times mcpx against a client that runs
# the MCP server itself, its supervisors (kill -9 of the
# daemon and adoption, memory, supervised vs. unsupervised calls) and the throughput of one shared
# instance with 1, 8 and 64 concurrent callers (through the daemon's MCP endpoint vs. straight to
# the server), and ping and tools/call latency and throughput along eight paths to one fake server
# (direct stdio, `mcpx serve`, the daemon's streamable HTTP on TCP, supergateway, mcp-proxy),
# and tools/call latency to a remote (streamable HTTP) fake server directly and through mcpx,
# and the targets at scale (100 servers: supervisor memory, search, idle wake-ups; CPU per call
# beside the Rust mcp-proxy under mcpx-load and wrk), with scripts/bench, and writes
# BENCHMARKS.md: builds mcpx and mcpx-fake-server
# (release), installs the servers into e2e/ (scripts/setup-e2e.sh), then runs scripts/bench
# with the arguments given here:
#   bash scripts/bench.sh                   # 30 runs per command, 10 kills per size, 5 throughput
#                                           # rounds of 3 s per side; rewrites BENCHMARKS.md
#   bash scripts/bench.sh --iterations 100  # more runs (see --help for --kills, --latency-iterations,
#                                           # --throughput-seconds, --throughput-repeats)
#   bash scripts/bench.sh --quick           # debug build, 3 runs, 1 kill per size, 1 throughput
#                                           # round of 1 s, 1 proxy round of 10 requests and 0.2 s,
#                                           # writes a temporary file and prints the tables (what CI runs)
#   bash scripts/bench.sh --only-proxies    # only the proxy comparison, printed
#   bash scripts/bench.sh --only-remote     # only the remote servers' section, printed
#   bash scripts/bench.sh --only-code       # only the code mode section (needs deno and server-filesystem), printed
#   bash scripts/bench.sh --only-hotpath    # only the hot path section (the targets, mcpx-load), printed
#   bash scripts/bench.sh --only-ui         # only the dashboard's section (100 servers' overview), printed
#   bash scripts/bench.sh --only-sharing    # only the sharing table (N SDK clients, 5 real servers), printed
#   bash scripts/bench.sh --only-scale      # only the hot path and at-scale sections' targets, printed
# The hot path section drives every path with the workspace's load generator (crates/mcpx-load) and
# compares with the Rust `mcp-proxy` crate 0.6.0, which the full mode builds once (cargo install
# --locked --no-default-features, a few minutes) into e2e/rust-mcp-proxy; --quick never builds it.
# Exits non-zero when a build, the setup or any benchmarked command fails.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

quick=0
for arg in "$@"; do
    case "$arg" in
        --quick) quick=1 ;;
        -h | --help) PYTHONPATH="$root/scripts" exec python3 -m bench --help ;;
    esac
done

target="${CARGO_TARGET_DIR:-$root/target}"
if [[ "$quick" -eq 1 ]]; then
    echo "bench: building mcpx (cargo build -p mcpx -p mcpx-fake-server -p mcpx-load)..."
    cargo build --quiet -p mcpx -p mcpx-fake-server -p mcpx-load
    profile=debug
else
    echo "bench: building mcpx (cargo build --release -p mcpx -p mcpx-fake-server -p mcpx-load)..."
    cargo build --quiet --release -p mcpx -p mcpx-fake-server -p mcpx-load
    profile=release
fi
bash scripts/setup-e2e.sh

# wrk, the hot path section's second load generator, from Debian (pinned) when missing and this is
# a root shell on Debian (as CI runs); else its rows are left out, saying so.
wrk_version="4.1.0-3+b2"
if ! command -v wrk >/dev/null && [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "bench: installing wrk $wrk_version (Debian)..."
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "wrk=$wrk_version" >/dev/null ||
        apt-get install -y -qq --no-install-recommends wrk >/dev/null ||
        echo "bench: warning: wrk could not be installed; the hot path section leaves its wrk rows out" >&2
fi

# The Rust peer of the hot path section, pinned; built once (its own temporary target directory,
# removed by cargo install afterwards), never in the quick mode.
peer=()
if [[ "$quick" -eq 0 ]]; then
    peer_root="$root/e2e/rust-mcp-proxy"
    if [[ ! -x "$peer_root/bin/mcp-proxy" ]] || ! grep -qx "0.6.0" "$peer_root/.version" 2>/dev/null; then
        echo "bench: building the Rust mcp-proxy 0.6.0 (cargo install --locked --no-default-features; once)..."
        if env -u CARGO_TARGET_DIR cargo install --quiet --locked --version 0.6.0 --no-default-features \
            --root "$peer_root" mcp-proxy; then
            echo "0.6.0" >"$peer_root/.version"
        else
            echo "bench: warning: the Rust mcp-proxy 0.6.0 did not build; the hot path section leaves it out" >&2
        fi
    fi
    peer=(--rust-peer "$peer_root/bin/mcp-proxy")
fi

shown="bash scripts/bench.sh"
[[ $# -gt 0 ]] && shown+=" $*"
PYTHONPATH="$root/scripts" exec python3 -m bench --mcpx "$target/$profile/mcpx" --fake-server "$target/$profile/mcpx-fake-server" \
    --load "$target/$profile/mcpx-load" --profile "$profile" --command "$shown" "${peer[@]}" "$@"
