//! Configuration read from `FAKE_*` environment variables at start-up.
//!
//! See the crate documentation for the full list and meaning of each variable.

use std::env;

use crate::modern::Era;

/// Settings that shape the server's behaviour for a whole run.
#[derive(Debug, Default, Clone)]
pub struct Config {
    /// `FAKE_PROTOCOL_VERSION`: answer `initialize` with this version,
    /// whatever the client asked for.
    pub protocol_version: Option<String>,
    /// `FAKE_PAGE_SIZE`: paginate `tools/list` in pages of this many tools.
    /// `None` (or 0) means one page with every tool.
    pub page_size: Option<usize>,
    /// `FAKE_RECORD`: path of the file recording every line read from stdin
    /// (every message POSTed in HTTP mode; HTTP requests go to `<path>.http`).
    pub record: Option<String>,
    /// `FAKE_TOOLS`: how many generated ~2 KiB tools `gen_0000`... to list.
    pub generated_tools: usize,
    /// `FAKE_HTTP_STATUS`: answer every HTTP POST with this status.
    pub http_status: Option<u16>,
    /// `FAKE_HTTP_RESPONSE=json`: answer HTTP requests with an `application/json`
    /// body instead of an SSE stream.
    pub http_json: bool,
    /// `FAKE_HTTP_PRIMING=1`: begin every SSE response to a POST with a priming
    /// event, then close it (the client must resume with `Last-Event-ID`).
    pub http_priming: bool,
    /// `FAKE_HTTP_REDIRECT=<url>`: answer every HTTP request with `307 Temporary
    /// Redirect` to `url` (307 keeps the method and the body).
    pub http_redirect: Option<String>,
    /// `FAKE_HOSTILE=1`: the hostile fixture (see `hostile.rs`): terminal control
    /// sequences in the instructions, in two more tools and in all they send.
    pub hostile: bool,
    /// `FAKE_ERA` (or `--era`): the protocol eras served (see `modern.rs`).
    pub era: Era,
    /// `FAKE_DISCOVER_DELAY_MS`: answer `server/discover` only after this long.
    pub discover_delay_ms: Option<u64>,
    /// `FAKE_INPUT_REPEAT=1`: a modern request that asks for input never takes the
    /// answers of its retry (it asks again, forever).
    pub input_repeat: bool,
    /// `FAKE_SCHEMAS=1`: the schema fixture (see `schemas.rs`): three more tools whose
    /// schemas use every construct `mcpx types` translates.
    pub schemas: bool,
    /// `FAKE_HEADER_FAULT=1`: HTTP, every modern request is refused as a header
    /// mismatch (400, `-32020`).
    pub header_fault: bool,
    /// `FAKE_TTL_MS`: the `ttlMs` of modern list results (default 60000).
    pub ttl_ms: u64,
    /// `FAKE_CACHE_SCOPE`: the `cacheScope` of modern list results (default `public`).
    pub cache_scope: String,
    /// `FAKE_ESCAPE=1`: the escape fixture (see `escape.rs`): one more tool, `escape`.
    pub escape: bool,
    /// `FAKE_DEFINITIONS`: path of a JSON object read at every `tools/list` (see
    /// `tools::redefined`), so a test changes the tool definitions between listings.
    pub definitions: Option<String>,
    /// `FAKE_META_LOG`: path of a file each `tools/call`'s `params._meta` is appended to,
    /// one JSON line each (`null` without one), so a test sees what a proxy put there.
    pub meta_log: Option<String>,
}

impl Config {
    /// Reads the configuration from the environment.
    ///
    /// Unparsable numbers are reported on stderr and ignored.
    pub fn from_env() -> Self {
        let page_size = non_empty("FAKE_PAGE_SIZE").and_then(|raw| match raw.trim().parse() {
            Ok(0) => None,
            Ok(n) => Some(n),
            Err(_) => {
                eprintln!("mcpx-fake-server: ignoring invalid FAKE_PAGE_SIZE={raw:?}");
                None
            }
        });
        let generated_tools = number("FAKE_TOOLS").unwrap_or(0);
        let http_status = number::<u16>("FAKE_HTTP_STATUS").filter(|code| {
            let valid = (100..=999).contains(code);
            if !valid {
                eprintln!("mcpx-fake-server: ignoring invalid FAKE_HTTP_STATUS={code}");
            }
            valid
        });
        let http_json = match non_empty("FAKE_HTTP_RESPONSE").as_deref() {
            None | Some("sse") => false,
            Some("json") => true,
            Some(other) => {
                eprintln!("mcpx-fake-server: ignoring invalid FAKE_HTTP_RESPONSE={other:?} (json or sse)");
                false
            }
        };
        let http_priming = non_empty("FAKE_HTTP_PRIMING").is_some_and(|v| v != "0");
        let era = non_empty("FAKE_ERA").map_or(Ok(Era::Legacy), |raw| Era::parse(&raw)).unwrap_or_else(|message| {
            eprintln!("mcpx-fake-server: ignoring FAKE_ERA: {message}");
            Era::Legacy
        });
        Self {
            protocol_version: non_empty("FAKE_PROTOCOL_VERSION"),
            page_size,
            record: non_empty("FAKE_RECORD"),
            generated_tools,
            http_status,
            http_json,
            http_priming,
            http_redirect: non_empty("FAKE_HTTP_REDIRECT"),
            hostile: non_empty("FAKE_HOSTILE").is_some_and(|v| v != "0"),
            era,
            discover_delay_ms: number("FAKE_DISCOVER_DELAY_MS"),
            input_repeat: non_empty("FAKE_INPUT_REPEAT").is_some_and(|v| v != "0"),
            schemas: non_empty("FAKE_SCHEMAS").is_some_and(|v| v != "0"),
            header_fault: non_empty("FAKE_HEADER_FAULT").is_some_and(|v| v != "0"),
            ttl_ms: number("FAKE_TTL_MS").unwrap_or(60_000),
            cache_scope: non_empty("FAKE_CACHE_SCOPE").unwrap_or_else(|| "public".to_owned()),
            definitions: non_empty("FAKE_DEFINITIONS"),
            meta_log: non_empty("FAKE_META_LOG"),
            escape: non_empty("FAKE_ESCAPE").is_some_and(|v| v != "0"),
        }
    }
}

/// Start-up faults that act before the server reads anything:
/// `FAKE_STDERR_ON_START` (write a line to stderr) and
/// `FAKE_EXIT_BEFORE_INIT` (exit at once with the given code).
pub fn run_startup_faults() {
    if let Some(text) = non_empty("FAKE_STDERR_ON_START") {
        eprintln!("{text}");
    }
    if let Some(raw) = non_empty("FAKE_EXIT_BEFORE_INIT") {
        // A non-numeric value still means "fail", with a generic code.
        let code = raw.trim().parse().unwrap_or(1);
        eprintln!("fake server failing before initialize");
        std::process::exit(code);
    }
}

/// Environment variable `name` as a number, if set; unparsable values are reported
/// on stderr and ignored.
fn number<T: std::str::FromStr>(name: &str) -> Option<T> {
    let raw = non_empty(name)?;
    raw.trim().parse().map_err(|_| eprintln!("mcpx-fake-server: ignoring invalid {name}={raw:?}")).ok()
}

/// The value of environment variable `name`, if set and not empty.
fn non_empty(name: &str) -> Option<String> {
    env::var(name).ok().filter(|value| !value.is_empty())
}
