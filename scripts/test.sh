#!/usr/bin/env bash
# Runs every test: installs the real MCP servers the end-to-end tests use (scripts/setup-e2e.sh),
# builds the whole workspace with all targets, then runs the tests with cargo-nextest (plus the doctests)
# when it is installed, else with cargo test. Extra arguments go to nextest / cargo test.
# The tests find the servers through MCPX_E2E_DIR (the absolute path of e2e/).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

bash scripts/setup-e2e.sh
export MCPX_E2E_DIR="$root/e2e"

echo "test: cargo build --workspace --all-targets"
cargo build --workspace --all-targets

if cargo nextest --version >/dev/null 2>&1; then
    # nextest does not run doctests; they run first so the suite's summary closes the output.
    echo "test: cargo test --workspace --doc"
    cargo test --workspace --doc
    echo "test: cargo nextest run --workspace --no-fail-fast $*"
    cargo nextest run --workspace --no-fail-fast "$@"
else
    echo "test: cargo-nextest is not installed; using cargo test --workspace --no-fail-fast $*"
    cargo test --workspace --no-fail-fast "$@"
fi
