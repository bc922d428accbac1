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
    #[arg(long, conflicts_with_all = ["server", "tool", "client", "errors", "slow", "since", "stats"])]
    clear: bool,
    /// Per server and tool over the calls kept: calls, the share that did not end `ok`,
    /// and the 50th, 95th and 99th percentile of their durations (every call kept,
    /// whatever `--limit` says).
    #[arg(long)]
    stats: bool,
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
        limit: if args.stats { 0 } else { args.limit },
        clear: args.clear,
    };
    let entries: Vec<Entry> = client.post("/v1/activity", &req).await?;
    if args.clear {
        say("the activity record is empty");
        return Ok(0);
    }
    if args.stats {
        return Ok(print_stats(&stats(&entries), json));
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

/// One server's tool (or prompt, or URI) over the calls kept.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
struct Stat {
    server: String,
    name: String,
    calls: usize,
    /// The share of calls that did not end `ok`, from 0 to 1.
    error_rate: f64,
    p50_ms: f64,
    p95_ms: f64,
    p99_ms: f64,
}

/// The statistics of `entries`, by server and name, in that order.
fn stats(entries: &[Entry]) -> Vec<Stat> {
    let mut by: std::collections::BTreeMap<(&str, &str), Vec<&Entry>> = std::collections::BTreeMap::new();
    for e in entries {
        by.entry((e.server.as_str(), e.name.as_str())).or_default().push(e);
    }
    by.into_iter()
        .map(|((server, name), calls)| {
            let mut micros: Vec<u64> = calls.iter().map(|e| e.duration_us).collect();
            micros.sort_unstable();
            // The nearest-rank percentile: the smallest duration at least `p` of the calls take.
            let at =
                |p: f64| micros[((p * micros.len() as f64).ceil() as usize).clamp(1, micros.len()) - 1] as f64 / 1000.0;
            let failed = calls.iter().filter(|e| e.outcome != "ok").count();
            Stat {
                server: server.to_owned(),
                name: name.to_owned(),
                calls: calls.len(),
                error_rate: failed as f64 / calls.len() as f64,
                p50_ms: at(0.50),
                p95_ms: at(0.95),
                p99_ms: at(0.99),
            }
        })
        .collect()
}

/// Prints `stats` (with `json`, one object a line); the exit status.
fn print_stats(stats: &[Stat], json: bool) -> i32 {
    if json {
        stats.iter().for_each(|s| say_json(&serde_json::to_string(s).unwrap_or_default()));
        return 0;
    }
    if stats.is_empty() {
        say("no calls recorded (yet)");
        return 0;
    }
    let cells: Vec<Vec<String>> = stats
        .iter()
        .map(|s| {
            vec![
                sanitize::line(&format!("{}.{}", s.server, s.name)).into_owned(),
                s.calls.to_string(),
                format!("{:.1}%", s.error_rate * 100.0),
                format!("{:.1}", s.p50_ms),
                format!("{:.1}", s.p95_ms),
                format!("{:.1}", s.p99_ms),
            ]
        })
        .collect();
    table(&["CALL", "CALLS", "ERRORS", "P50 MS", "P95 MS", "P99 MS"], &cells);
    0
}

/// `HH:MM:SS` of `ms` (milliseconds since the Unix epoch), UTC.
fn time_of_day(ms: u64) -> String {
    let secs = ms / 1000;
    format!("{:02}:{:02}:{:02}", secs / 3600 % 24, secs / 60 % 60, secs % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, outcome: &str, duration_us: u64) -> Entry {
        Entry {
            id: 0,
            started_ms: 0,
            duration_us,
            path: "shell".into(),
            client: "shell".into(),
            server: "s".into(),
            pid: None,
            key: None,
            method: "tools/call".into(),
            name: name.into(),
            outcome: outcome.into(),
            code: None,
            error: None,
            bytes_in: 0,
            bytes_out: 0,
        }
    }

    #[test]
    fn stats_count_errors_and_take_nearest_rank_percentiles() {
        let mut entries: Vec<Entry> = (1..=100).map(|ms| call("a", "ok", ms * 1000)).collect();
        entries.push(call("b", "failed", 5000));
        entries.push(call("b", "ok", 1000));
        let stats = stats(&entries);
        assert_eq!(stats.len(), 2);
        let a = &stats[0];
        assert_eq!((a.calls, a.error_rate, a.p50_ms, a.p95_ms, a.p99_ms), (100, 0.0, 50.0, 95.0, 99.0));
        let b = &stats[1];
        assert_eq!((b.name.as_str(), b.calls, b.error_rate, b.p50_ms, b.p99_ms), ("b", 2, 0.5, 1.0, 5.0));
    }
}
