//! `mcpx activity`: what callers asked servers through the daemon, newest first, from
//! the activity record (`POST /v1/activity`; `docs/api.md`, "Activity").

use mcpx_api::activity::{ActivityRequest, Entry};
use mcpx_api::client::Client;
use mcpx_api::{ApiError, ErrorKind};

use crate::output::{say, say_json, table};
use crate::sanitize;

/// What `mcpx activity` was asked: the filters, and how to print.
#[derive(Debug, clap::Args)]
pub struct ActivityArgs {
    /// Only this server's calls.
    #[arg(long)]
    server: Option<String>,
    /// Only calls of this tool or prompt (or reads of this URI).
    #[arg(long)]
    tool: Option<String>,
    /// Only calls whose client's name contains this (`shell`, an MCP client's name).
    #[arg(long)]
    client: Option<String>,
    /// Only calls that did not end `ok`.
    #[arg(long)]
    errors: bool,
    /// Only calls that took at least this many milliseconds.
    #[arg(long, value_name = "MS")]
    slow: Option<u64>,
    /// Only calls of the last DURATION (`10m`, `2h`, `7d`).
    #[arg(long, value_name = "DURATION")]
    since: Option<String>,
    /// At most this many, newest first.
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// Empty the record.
    #[arg(long, conflicts_with_all = ["server", "tool", "client", "errors", "slow", "since"])]
    clear: bool,
}

/// Runs `mcpx activity`: prints the entries (with `json`, one object a line).
///
/// Errors: a malformed `--since` (`usage`); those of `POST /v1/activity`.
pub async fn run(client: &Client, args: ActivityArgs, json: bool) -> Result<i32, ApiError> {
    let since_ms = match &args.since {
        Some(text) => {
            let span = mcpx_daemon::config::units::parse_duration(text)
                .map_err(|e| ApiError::new(ErrorKind::Usage, format!("--since {text}: {e}")))?;
            Some(mcpx_daemon::schema::now_ms().saturating_sub(span.as_millis() as u64))
        }
        None => None,
    };
    let req = ActivityRequest {
        server: args.server,
        name: args.tool,
        client: args.client,
        errors: args.errors,
        slow_ms: args.slow,
        since_ms,
        limit: args.limit,
        clear: args.clear,
    };
    let entries: Vec<Entry> = client.post("/v1/activity", &req).await?;
    if args.clear {
        say("the activity record is empty");
        return Ok(0);
    }
    if json {
        for entry in &entries {
            say_json(&serde_json::to_string(entry).unwrap_or_default());
        }
        return Ok(0);
    }
    if entries.is_empty() {
        say("no calls recorded (yet)");
        return Ok(0);
    }
    let cells: Vec<Vec<String>> = entries
        .iter()
        .map(|e| {
            let outcome = match (&e.code, &e.error) {
                (Some(code), _) => format!("{} {code}", e.outcome),
                _ => e.outcome.clone(),
            };
            vec![
                e.id.to_string(),
                time_of_day(e.started_ms),
                sanitize::line(&e.client).into_owned(),
                sanitize::line(&format!("{}.{}", e.server, e.name)).into_owned(),
                outcome,
                format!("{:.1}", e.duration_us as f64 / 1000.0),
            ]
        })
        .collect();
    table(&["ID", "TIME (UTC)", "CLIENT", "CALL", "OUTCOME", "MS"], &cells);
    Ok(0)
}

/// `HH:MM:SS` of `ms` (milliseconds since the Unix epoch), UTC.
fn time_of_day(ms: u64) -> String {
    let secs = ms / 1000;
    format!("{:02}:{:02}:{:02}", secs / 3600 % 24, secs / 60 % 60, secs % 60)
}
