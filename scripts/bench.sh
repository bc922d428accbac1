#!/usr/bin/env bash
# Times mcpx against a client that runs the MCP server itself, its supervisors (kill -9 of the
# daemon and adoption, memory, supervised vs. unsupervised calls) and the throughput of one shared
# instance with 1, 8 and 64 concurrent callers (through the daemon's MCP endpoint vs. straight to
# the server), and ping and tools/call latency and throughput along eight paths to one fake server
# (direct stdio, `mcpx serve`, the daemon's streamable HTTP on TCP, supergateway, mcp-proxy),
# and tools/call latency to a remote (streamable HTTP) fake server directly and through mcpx,
# with scripts/bench, and writes BENCHMARKS.md: builds mcpx and mcpx-fake-server
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
# Exits non-zero when a build, the setup or any benchmarked command fails.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

quick=0
for arg in "$@"; do
    case "$arg" in
        --quick) quick=1 ;;
        -h | --help) exec python3 scripts/bench --help ;;
    esac
done

target="${CARGO_TARGET_DIR:-$root/target}"
if [[ "$quick" -eq 1 ]]; then
    echo "bench: building mcpx (cargo build -p mcpx -p mcpx-fake-server)..."
    cargo build --quiet -p mcpx -p mcpx-fake-server
    profile=debug
else
    echo "bench: building mcpx (cargo build --release -p mcpx -p mcpx-fake-server)..."
    cargo build --quiet --release -p mcpx -p mcpx-fake-server
    profile=release
fi
bash scripts/setup-e2e.sh

shown="bash scripts/bench.sh"
[[ $# -gt 0 ]] && shown+=" $*"
exec python3 scripts/bench --mcpx "$target/$profile/mcpx" --fake-server "$target/$profile/mcpx-fake-server" \
    --profile "$profile" --command "$shown" "$@"
