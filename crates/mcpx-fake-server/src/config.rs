//! Configuration read from `FAKE_*` environment variables at start-up.
//!
//! See the crate documentation for the full list and meaning of each variable.

use std::env;

/// Settings that shape the server's behaviour for a whole run.
#[derive(Debug, Default)]
pub struct Config {
    /// `FAKE_PROTOCOL_VERSION`: answer `initialize` with this version,
    /// whatever the client asked for.
    pub protocol_version: Option<String>,
    /// `FAKE_PAGE_SIZE`: paginate `tools/list` in pages of this many tools.
    /// `None` (or 0) means one page with every tool.
    pub page_size: Option<usize>,
    /// `FAKE_RECORD`: path of the file recording every line read from stdin.
    pub record: Option<String>,
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
        Self { protocol_version: non_empty("FAKE_PROTOCOL_VERSION"), page_size, record: non_empty("FAKE_RECORD") }
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

/// The value of environment variable `name`, if set and not empty.
fn non_empty(name: &str) -> Option<String> {
    env::var(name).ok().filter(|value| !value.is_empty())
}
