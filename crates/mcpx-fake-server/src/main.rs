//! `mcpx-fake-server`: a scriptable fake MCP server for mcpx's tests.
//!
//! It speaks newline-delimited JSON-RPC 2.0 on stdin/stdout, like any stdio
//! MCP server, but every tool is a fault or a probe that integration tests
//! trigger on cue. It has no command-line options; it is driven entirely
//! by the tools below and by `FAKE_*` environment variables.
//!
//! # Protocol
//!
//! - One JSON-RPC message per stdin line; blank lines are ignored. A line
//!   that is not JSON gets a `-32700` error with id `null`.
//! - Each request is handled on its own thread, so many calls can be in
//!   flight at once. Every stdout write is a whole line written and flushed
//!   under one mutex (except `split`, which splits one line on purpose).
//! - `initialize` answers the client's `protocolVersion` if it is one of
//!   2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, else 2025-11-25.
//!   Capabilities: tools, resources (`listChanged`, `subscribe`) and prompts
//!   (all `listChanged`), logging and completions. Requests before
//!   `initialize` are answered anyway.
//! - Also: `ping`, `logging/setLevel`, `tools/list` (each tool carries an
//!   unknown field `"x-fake": true`), `tools/call`, `resources/list`
//!   (`fake://static` first), `resources/read` (`fake://static` → "static
//!   resource", `fake://item/{id}` → "item {id}"), `resources/templates/list`
//!   (`fake://item/{id}`), `resources/subscribe` / `resources/unsubscribe`
//!   (remembered, `{}`; no update notifications), `prompts/list` and
//!   `prompts/get` (`greet`, argument `name`), `completion/complete`
//!   (prefix-filtered candidates). Other methods: `-32601`. Notifications
//!   are accepted silently.
//! - The fixtures of the official MCP conformance suite's server scenarios
//!   are served alongside (see `conformance.rs`): tools `test_*` and
//!   `json_schema_2020_12_tool` (listed after the tools below), resources
//!   `test://static-text`, `test://static-binary`, `test://watched-resource`,
//!   template `test://template/{id}/data`, and prompts `test_simple_prompt`,
//!   `test_prompt_with_arguments`, `test_prompt_with_embedded_resource`,
//!   `test_prompt_with_image`. `test_sampling` / `test_elicitation*` ask the
//!   client (`sampling/createMessage`, `elicitation/create`) like `sample`.
//! - On stdin EOF the server waits up to 1 s for in-flight requests to
//!   answer, then exits 0.
//!
//! # Tools (`tools/call`, arguments in braces)
//!
//! | tool | behaviour |
//! |------|-----------|
//! | `echo {message}` | returns `message` as text |
//! | `counter {}` | increments an in-memory counter, returns the new value |
//! | `pid {}` | returns the server's process id |
//! | `env {name}` | returns env var `name`, or `isError` "unset" |
//! | `slow {ms}` | sleeps `ms`, returns `slept <ms>` |
//! | `late {ms}` | same as `slow` (meant to answer after the caller gave up) |
//! | `split {message, pieces=5, delay_ms=5}` | echo, with the response line written in `pieces` flushed writes `delay_ms` apart |
//! | `big {line_bytes}` | response line of exactly `line_bytes` bytes (plus `\n`), text padded with `x`; `isError` if too small |
//! | `junk {message}` | prints `Processing request 1…`, `{` and `not json at all` on stdout, then echoes |
//! | `stderr {bytes}` | writes `bytes` bytes to stderr (64 KiB chunks of `e`, each ending in `\n`), then `wrote <n> bytes to stderr` |
//! | `exit {code}` | prints `exiting with <code>` to stderr and exits with `code`, no reply |
//! | `progress {count=3, interval_ms=150}` | with `_meta.progressToken`: `count` `notifications/progress` (first at once), then `progress done <count>` |
//! | `barrier {n, timeout_ms=10000}` | `barrier <n> reached` once ≥ `n` tools/call are in flight (itself included); else `isError` `barrier timed out with <k> in flight` |
//! | `inflight {}` | the most tools/call ever in flight at once |
//! | `add_tool {name}` | adds an echo-like tool `name`, sends `notifications/tools/list_changed`, replies |
//! | `duplicate {message}` | sends the echo response twice, same id |
//! | `roots {}` | asks the client `roots/list` (id `srv-N`), returns the result's JSON, or `isError` with the error message (10 s timeout) |
//! | `sample {}` | same with `sampling/createMessage` |
//! | `stdout_flood {bytes}` | writes `bytes` bytes of ~1 KiB `notifications/message` lines, then `wrote <n> bytes` (exact, newlines included) |
//!
//! Unknown tool names get a `-32602` error; bad arguments an `isError` result.
//!
//! # Environment variables (all optional)
//!
//! | variable | effect |
//! |----------|--------|
//! | `FAKE_EXIT_BEFORE_INIT=<code>` | print "fake server failing before initialize" to stderr, exit with `code` at once |
//! | `FAKE_STDERR_ON_START=<text>` | write `text` as a line to stderr at start |
//! | `FAKE_PROTOCOL_VERSION=<v>` | answer `initialize` with `v`, whatever was asked |
//! | `FAKE_PAGE_SIZE=<n>` | paginate `tools/list` in pages of `n` (opaque `nextCursor`, `cursor` honoured) |
//! | `FAKE_INIT_DELAY_MS=<ms>` | answer `initialize` only after `ms` milliseconds |
//! | `FAKE_RECORD=<path>` | append every stdin line to `path`; non-JSON lines also to `path.invalid`; rewrite `path.inflight` with the max tools/call in flight after each tools/call |

mod config;
mod conformance;
mod protocol;
mod record;
mod server;
mod state;
mod tools;

use std::sync::Arc;

fn main() {
    config::run_startup_faults();
    let server = Arc::new(server::Server::new(config::Config::from_env()));
    server::run(server)
}
