"""Times mcpx against a client that runs the MCP server itself, and writes BENCHMARKS.md.

Usually run through scripts/bench.sh, which builds mcpx and installs the servers first; by hand,
`bash scripts/bench.sh --help` (which runs `python3 -m bench` from scripts/). Standard library only (Python 3.10 or newer).

One module per section of the report, each measuring it and writing it:

  calls        1-3  `mcpx ls`, `mcpx tools`, `mcpx call` (warm and cold) vs. a direct client
  adopt        4    kill -9 of the daemon, then the next call (supervisors adopted)
  memory       5    the supervisors' and daemons' memory
  supervised   6    a warm call, supervised or not
  throughput   7    concurrent calls on one shared instance, daemon vs. direct
  proxies      8    the fake server through mcpx, supergateway and mcp-proxy
  remote       9    a streamable HTTP server, directly and through mcpx

and what they share: common (constants, MCP messages and checks, statistics and numbers, commands
that take turns), procs (processes and /proc), mcpx (the private mcpx of each configuration),
client, stdio_client and http_client (the MCP clients), paths (endpoints loaded by one caller or
many, and the rounds of sections 8 and 9), options (the command line), report and reproduce (the
report's header, summary and last section), main (the run and its cleanup).

Every response is checked, so a broken setup fails the benchmark instead of timing errors. mcpx
runs with private state, cache and runtime directories and its own config in a temporary
directory, which is removed at the end, after `mcpx stop --all`; every other process the
benchmark starts is stopped too, with everything it started, whether the run succeeds or fails.
"""
