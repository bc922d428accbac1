#!/usr/bin/env bash
# The chaos soak: mcpx under mixed load (8 callers: `mcpx call` processes, MCP clients over
# `mcpx serve` and over the daemon's /mcp) on several fake servers (shared, exclusive,
# unsupervised, remote, added and removed ones), while the daemon, supervisors and servers are
# killed with SIGKILL, the daemon upgraded and the configuration edited at seeded random times.
# Every call must return its own answer or fail with a documented error; none may hang; after
# `mcpx stop --all` nothing of the run may be left; the daemon's descriptors must stay flat
# within each of its lifetimes. Prints the counts; exits non-zero on any breach. See
# scripts/chaos/ (standard-library Python, reusing scripts/bench's processes and clients).
#   bash scripts/chaos.sh --minutes 1                # what CI runs; prints the seed
#   bash scripts/chaos.sh --minutes 1 --seed 42      # the same random choices again
#   bash scripts/chaos.sh --minutes 10 --benchmarks  # also writes BENCHMARKS.md's chaos section
#   bash scripts/chaos.sh --minutes 0.2 --self-check # one answer checked against a wrong token
#                                                    # on purpose: must report 1 wrong answer
# Builds mcpx and mcpx-fake-server (debug, as the tests do) first.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

for arg in "$@"; do
    case "$arg" in
        -h | --help) PYTHONPATH="$root/scripts" exec python3 -m chaos --help ;;
    esac
done

target="${CARGO_TARGET_DIR:-$root/target}"
echo "chaos: building mcpx (cargo build -p mcpx -p mcpx-fake-server)..."
cargo build --quiet -p mcpx -p mcpx-fake-server

PYTHONPATH="$root/scripts" exec python3 -m chaos --mcpx "$target/debug/mcpx" --fake-server "$target/debug/mcpx-fake-server" \
    --command "bash scripts/chaos.sh $*" "$@"
