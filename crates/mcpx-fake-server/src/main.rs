//! `mcpx-fake-server`: a scriptable fake MCP server for mcpx's tests.
//!
//! It speaks newline-delimited JSON-RPC 2.0 on stdin/stdout, like any stdio
//! MCP server, but every tool is a fault or a probe that integration tests
//! trigger on cue. It is driven by the tools below and by `FAKE_*`
//! environment variables; its one option picks the transport (any other
//! argument is ignored).
//!
//! # Command line
//!
//! - `mcpx-fake-server`: stdio (everything below).
//! - `mcpx-fake-server --http 127.0.0.1:PORT` (PORT may be 0): streamable HTTP
//!   (MCP 2025-11-25) on `/mcp`. Once bound it prints exactly one line,
//!   `http://127.0.0.1:<port>/mcp`, on stdout, and serves until killed.
//!   stdin is not read.
//! - `--era ERA` (with either of the above): the protocol eras served, as
//!   `FAKE_ERA` (which it overrides): `legacy` (the default), `2026-07-28`, `dual`.
//! - `mcpx-fake-server --fake-daemon SOCKET`: not an MCP server but an impostor
//!   of the mcpx daemon on a unix socket, for the security tests (see
//!   `fake_daemon.rs`). It prints `listening` once bound.
//!
//! # Streamable HTTP (`--http`)
//!
//! - An `initialize` POST creates a session (`Mcp-Session-Id`, 32 random hex
//!   digits), with its own instance of the engine: the same tools, fixtures and
//!   `FAKE_*` behaviour as on stdio (the counter, `add_tool`... are per session).
//!   DELETE ends it (200).
//! - A POST without a session id (but `initialize`) is 400; an unknown or ended
//!   session 404; `Accept` must list both `application/json` and
//!   `text/event-stream` (else 406), `Content-Type` be `application/json` (else
//!   415), an `MCP-Protocol-Version`, if sent, be supported (else 400). An
//!   `Origin`, if sent, must be http(s) on `localhost`, `127.0.0.1` or `[::1]`,
//!   any port (else 403), for every method. Other methods: 405.
//! - A POSTed notification or response: 202, no body. A request: an SSE stream
//!   (`text/event-stream`) with every message the engine sends while handling it
//!   (progress, logging, `sampling/createMessage`, `elicitation/create`,
//!   `roots/list`, `notifications/tools/list_changed` of `add_tool`...), ending
//!   with the response. Anything sent after that, or not tied to a request, goes
//!   to the standalone stream: `GET` with `Accept: text/event-stream` (a second
//!   one at once: 409); with none open, it waits for the next `GET`.
//! - Every event has an id `<stream>-<n>`, unique in the session, and every
//!   stream keeps its events: a `GET` with `Last-Event-ID` replays what followed
//!   that event on its stream, then carries the rest of it (such a `GET` is no
//!   second standalone stream: no 409, unless it resumes the standalone one while
//!   that is open).
//! - The tools keep their meaning per message: `junk` lines become events of
//!   their own, `split` writes its event in `pieces` chunks, `big` is one event,
//!   `exit` ends the whole process (every session).
//! - The conformance tool `test_reconnection` (SEP-1699) sends a priming event
//!   (an id, `retry: 50`, empty data) and closes its stream, then replies 100 ms
//!   later: the client must resume to get the answer (on stdio it just replies).
//!
//! # The modern era (`FAKE_ERA=2026-07-28` or `dual`; see `modern.rs`)
//!
//! After MCP 2026-07-28. `2026-07-28` serves that revision only; `dual` serves a
//! request carrying the `_meta` envelope as 2026-07-28 and any other as before.
//!
//! - `server/discover` answers `supportedVersions` (`dual`: 2026-07-28, then the
//!   legacy ones, newest first), the capabilities, the instructions, `ttlMs` and
//!   `cacheScope`. It needs no envelope.
//! - Every other request needs `_meta` `io.modelcontextprotocol/protocolVersion` and
//!   `clientCapabilities` (else `-32602`); a version other than 2026-07-28 is
//!   `-32022` with `data.supported`. `initialize` is `-32022` too (`dual`: answered
//!   as before); `ping`, `logging/setLevel`, `resources/subscribe` and
//!   `resources/unsubscribe` are `-32601`.
//! - Every result carries `resultType` and `_meta` `io.modelcontextprotocol/serverInfo`;
//!   list results carry `ttlMs` and `cacheScope`.
//! - A `notifications/message` sent while a modern request is handled (the `notify`
//!   tool's, `test_tool_with_logging`'s) goes out only when the request carried `_meta`
//!   `io.modelcontextprotocol/logLevel`, and only at or above that level; an unknown
//!   level is `-32602`.
//! - A tool that asks the client (`roots`, `sample`, `elicit`, `test_sampling`,
//!   `test_elicitation*`) answers an `InputRequiredResult` instead: `inputRequests`
//!   keyed `<kind>-<n>` (`elicitation-1`, `sampling-1`, `roots-1`) and a
//!   `requestState` `fake-state:<n>`. The retry carrying `inputResponses` under those
//!   keys gets the tool's answer; an altered `requestState` is `-32602`. A client
//!   without the capability (`elicitation`, `sampling`, `roots`) gets `-32021` with
//!   `data.requiredCapabilities`.
//! - `subscriptions/listen` sends `notifications/subscriptions/acknowledged` (the
//!   kinds asked for: `toolsListChanged`, `resourcesListChanged`,
//!   `promptsListChanged`, `resourceSubscriptions`) and then, stamped with `_meta`
//!   `io.modelcontextprotocol/subscriptionId` (the listen request's id), the changes
//!   of `add_tool` and `notify` it asked for; no response until stdin's EOF, when it
//!   gets its `SubscriptionsListenResult`. `notifications/cancelled` of its id ends
//!   it. In `dual`, once a client initialized, changes also go out as before.
//! - HTTP: a modern POST needs no session (one engine serves them all, and no
//!   `Mcp-Session-Id` is sent back); `Mcp-Method` must be the body's method,
//!   `MCP-Protocol-Version` the envelope's version and `Mcp-Name` the tool or prompt
//!   name or resource URI (a `=?base64?` name is not checked), else 400 with
//!   `-32020`. A listen stream is the SSE response of its POST.
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
//! | `bad_reply {kind}` | `utf8`: a response line whose text holds an invalid UTF-8 byte; `control`: a raw ESC there; `bom`: `bom ok` on a line starting with a UTF-8 byte-order mark (written across two writes) and ending in CRLF; `bom_all`: first a log notification and a `ping` request to the client marked the same way, then `bom all ok` once the ping is answered |
//! | `stderr {bytes}` | writes `bytes` bytes to stderr (64 KiB chunks of `e`, each ending in `\n`), then `wrote <n> bytes to stderr` |
//! | `exit {code}` | prints `exiting with <code>` to stderr and exits with `code`, no reply |
//! | `progress {count=3, interval_ms=150}` | with `_meta.progressToken`: `count` `notifications/progress` (first at once), then `progress done <count>` (or `message`, if given); with `flood_ms`, ~1 KiB progress notifications back to back for that long, then `progress flood <n>` |
//! | `barrier {n, timeout_ms=10000}` | `barrier <n> reached` once ≥ `n` tools/call are in flight (itself included); else `isError` `barrier timed out with <k> in flight` |
//! | `inflight {}` | the most tools/call ever in flight at once |
//! | `add_tool {name}` | adds an echo-like tool `name`, sends `notifications/tools/list_changed`, replies |
//! | `duplicate {message}` | sends the echo response twice, same id |
//! | `roots {}` | asks the client `roots/list` (id `srv-N`), returns the result's JSON, or `isError` with the error message (10 s timeout) |
//! | `sample {}` | same with `sampling/createMessage` |
//! | `elicit {schema?, url?}` | same with `elicitation/create`: a form of `schema`, by default name (string, 2 to 20 characters, required), email (`format: email`), age (integer 0 to 150, required), ratio (number 0 to 1, default 0.5), subscribe (boolean, default true), size (`oneOf` s/m/l titled Small/Medium/Large, default m); with `url`, a URL-mode request |
//! | `notify {method, params={}}` | sends the notification `method` with `params` (a resource update, a log message at some level), then `sent <method>` |
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
//! | `FAKE_RECORD=<path>` | append every stdin line (HTTP: every POSTed message) to `path`; non-JSON lines also to `path.invalid`; rewrite `path.inflight` with the max tools/call in flight after each tools/call; HTTP: append `<METHOD> <session-id or -> <JSON-RPC method or ->` to `path.http` for every HTTP request (`POST - initialize`, `POST 3fa1… tools/call`, `DELETE 3fa1… -`), and its header names, lowercase, sorted and comma-separated, to `path.headers` |
//! | `FAKE_TOOLS=<n>` | `tools/list` also lists `n` generated tools `gen_0000`, `gen_0001`… (after the conformance tools), each entry padded to ~2 KiB (n=1000: a ~2 MiB list, one SSE event); calling one returns its name |
//! | `FAKE_HTTP_STATUS=<code>` | HTTP: every POST answers `code` with a short text body; 401 adds `WWW-Authenticate: Bearer realm="fake", error="invalid_token"` |
//! | `FAKE_HTTP_RESPONSE=json` | HTTP: answer requests with an `application/json` body instead of an SSE stream; everything else the engine sends goes to the `GET` stream, and a JSON answer whose request sent anything there waits 100 ms, so that progress arrives first (`sse`: the default) |
//! | `FAKE_SCHEMAS=1` | the schema fixture (`schemas.rs`): three more tools, `get-item.v2` (draft-07 `definitions`, a recursive `$ref`, `oneOf`, `const`, a nullable type, a draft-07 tuple; an `outputSchema` with `$defs` and `prefixItems`, answered with matching `structuredContent`), `delete` (`allOf`, `anyOf`, `nullable`, typed `additionalProperties`; returns its arguments as text) and `odd schema` (`not`, a remote `$ref`, `if`/`then`, `patternProperties`; returns `odd`) |
//! | `FAKE_ESCAPE=1` | the escape fixture (`escape.rs`): one more tool, `escape`, that tries to read, write, connect (TCP and unix) and signal outside a sandbox and says what each attempt got |
//! | `FAKE_META_LOG=<path>` | append each `tools/call`'s `params._meta` to the file, one JSON line each (`null` without one) |
//! | `FAKE_DEFINITIONS=<path>` | a JSON object read at every `tools/list`: each key names a tool, an object value is merged over its definition (a new name adds a tool that echoes `message`), `null` leaves it out (`"*": null`: every tool it does not name); so a test changes a tool's description between two listings |
//! | `FAKE_HOSTILE=1` | the hostile fixture: the instructions, and two more tools `trap` and ``evil<ESC>[31m<CR><U+009B>é<BEL>`` (descriptions too), carry ESC, OSC 0 and OSC 8, CR, BEL, U+009B and `é`; `trap {}` writes that text to stderr, sends it as progress (with a token) and as a `warning` log message, and returns it as text and in an image's MIME type; `trap {fail: true}` answers a `-32603` error with it; the other echoes it |
//! | `FAKE_HTTP_PRIMING=1` | HTTP: every SSE response to a POST is a priming event (an id, `retry: 50`, empty data), then the server closes it; the client must resume with `GET` + `Last-Event-ID` to get the rest (progress, the response) |
//! | `FAKE_HTTP_REDIRECT=<url>` | HTTP: every request answers `307 Temporary Redirect` to `url` (recorded first) |
//! | `FAKE_ERA=<era>` | the protocol eras served: `legacy` (default), `2026-07-28`, `dual` (see the modern era above) |
//! | `FAKE_DISCOVER_DELAY_MS=<ms>` | modern: answer `server/discover` only after `ms` milliseconds (a discover that times out) |
//! | `FAKE_INPUT_REPEAT=1` | modern: a tool that asks for input never takes the retry's answers, and asks again forever |
//! | `FAKE_HEADER_FAULT=1` | modern, HTTP: every modern POST is refused as a header mismatch (400, `-32020`) |
//! | `FAKE_TTL_MS=<ms>`, `FAKE_CACHE_SCOPE=<scope>` | modern: the `ttlMs` (default 60000) and `cacheScope` (default `public`) of list results |
//! | `FAKE_AUTH_SERVER=<issuer>` | HTTP: an OAuth protected resource of that authorization server (see `protect.rs`): protected resource metadata (RFC 9728) at `/.well-known/oauth-protected-resource/mcp`, and every `/mcp` request without a bearer token that the server's introspection endpoint (`FAKE_AUTH_INTROSPECTION=<url>`, as the client `FAKE_AUTH_CLIENT=<id>:<secret>`) finds active for `http://<addr>/mcp` answers 401 with `WWW-Authenticate: Bearer resource_metadata="...", scope="mcp"` |

mod config;
mod conformance;
mod definitions;
mod escape;
mod fake_daemon;
mod hostile;
mod http;
mod large;
mod modern;
mod protect;
mod protocol;
mod record;
mod schemas;
mod server;
mod state;
mod tools;

use std::sync::Arc;

fn main() {
    let (mode, era) = match parse_args(std::env::args().skip(1)) {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!(
                "mcpx-fake-server: {message}\nusage: mcpx-fake-server [--http ADDR | --fake-daemon SOCKET] [--era ERA]"
            );
            std::process::exit(2);
        }
    };
    if let Mode::FakeDaemon(socket) = &mode {
        if let Err(message) = fake_daemon::serve(socket) {
            eprintln!("mcpx-fake-server: {message}");
            std::process::exit(1);
        }
        return;
    }
    config::run_startup_faults();
    let mut config = config::Config::from_env();
    if let Some(era) = era {
        config.era = era;
    }
    match mode {
        Mode::Http(addr) => {
            if let Err(message) = http::serve(&addr, config) {
                eprintln!("mcpx-fake-server: {message}");
                std::process::exit(1);
            }
        }
        Mode::Stdio | Mode::FakeDaemon(_) => server::run(Arc::new(server::Server::new(config))),
    }
}

/// What the command line asks for.
enum Mode {
    /// No option: an MCP server on stdio.
    Stdio,
    /// `--http ADDR`: streamable HTTP on `ADDR`.
    Http(String),
    /// `--fake-daemon SOCKET`: an impostor of the mcpx daemon.
    FakeDaemon(String),
}

/// The command line: `--http ADDR` (or `--http=ADDR`), `--fake-daemon SOCKET`, or
/// nothing (stdio), and `--era ERA` (which overrides `FAKE_ERA`). Other arguments
/// are ignored, as they always were (tests run the fake in place of commands such
/// as `npx -y some-server`).
fn parse_args(mut args: impl Iterator<Item = String>) -> Result<(Mode, Option<modern::Era>), String> {
    let mut mode = Mode::Stdio;
    let mut era = None;
    while let Some(arg) = args.next() {
        if arg == "--era" {
            era = Some(modern::Era::parse(&args.next().ok_or("--era needs an era, e.g. 2026-07-28")?)?);
            continue;
        }
        if arg == "--http" {
            mode = Mode::Http(args.next().ok_or("--http needs an address, e.g. 127.0.0.1:0")?);
        } else if let Some(addr) = arg.strip_prefix("--http=") {
            mode = Mode::Http(addr.to_owned());
        } else if arg == "--fake-daemon" {
            mode = Mode::FakeDaemon(args.next().ok_or("--fake-daemon needs a socket path")?);
        }
    }
    Ok((mode, era))
}
