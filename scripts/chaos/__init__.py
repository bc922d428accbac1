"""The chaos soak: mcpx under mixed load while its processes are killed, the daemon upgraded and
the configuration edited, with every call accounted for.

Usually run through scripts/chaos.sh, which builds mcpx first; by hand,
`bash scripts/chaos.sh --help` (which runs `python3 -m chaos` from scripts/). Standard library only (Python 3.10 or newer), like scripts/bench,
whose process handling, private mcpx and MCP clients it reuses.

  world     the run's private mcpx, its servers and configuration (and the edits of it), the
            timeline of faults, and the ledger of calls
  callers   the eight callers: `mcpx call` processes, `mcpx serve` sessions, `/mcp` sessions
  faults    the faults, at seeded random times
  watch     the daemon's descriptors and memory, sampled over each of its lifetimes
  main      the run, its cleanup, its counts and its verdict

Why Python and not a Rust binary: the accounting is one ledger in one process, written to by
eight caller threads and read once at the end, so no call can be counted twice or lost, and the
rules that explain a failure read as a short list beside the faults that cause them.
"""
