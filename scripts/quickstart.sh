#!/usr/bin/env bash
# Builds mcpx and runs it on three real MCP servers (server-everything and server-memory from
# npm, mcp-server-time from PyPI; see examples/quickstart.json), showing each command first.
# Everything mcpx writes goes to a temporary directory that is removed on exit; the daemon and
# the servers are stopped on exit too. Run it from anywhere: bash scripts/quickstart.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

echo "quickstart: building mcpx (cargo build -p mcpx)..."
cargo build --quiet -p mcpx
bash scripts/setup-e2e.sh

mcpx_bin="${CARGO_TARGET_DIR:-$root/target}/debug/mcpx"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/mcpx-quickstart.XXXXXX")"
cleanup() {
    local status=$?
    "$mcpx_bin" stop --all >/dev/null 2>&1 || true
    rm -rf "$tmp"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A private mcpx: its own state, cache and runtime (socket) directories, and only this config.
export MCPX_STATE_DIR="$tmp/state"
export MCPX_CACHE_DIR="$tmp/cache"
export MCPX_RUNTIME_DIR="$tmp/run"
export MCPX_CONFIG="$root/examples/quickstart.json"
export MCPX_QUICKSTART_MEMORY="$tmp/memory.jsonl" # server-memory's knowledge graph file

# Shows the command (as you would type it), then runs it.
run() {
    local shown="$ mcpx" arg
    for arg in "$@"; do
        if [[ "$arg" =~ ^[A-Za-z0-9._/=-]+$ ]]; then shown+=" $arg"; else shown+=" '$arg'"; fi
    done
    printf '\n%s\n' "$shown"
    "$mcpx_bin" "$@"
}

echo
echo "quickstart: MCPX_CONFIG=examples/quickstart.json, state in $tmp"

run ls # nothing has been started yet: every server is `unread`
run call everything.echo '{"message":"hello from mcpx"}'
run call memory.create_entities '{"entities":[{"name":"mcpx","entityType":"project","observations":["runs every MCP server behind one daemon"]}]}'
run call memory.read_graph '{}'
run call time.get_current_time '{"timezone":"UTC"}'
run ls # the tool lists are cached now
run search echo
run status
run stop --all
run ls # answered from the schema cache, without starting any server

echo
echo "quickstart: done"
