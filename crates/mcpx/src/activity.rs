//! `mcpx activity`: what callers asked servers through the daemon, newest first, from
//! the activity record (`POST /v1/activity`; `docs/api.md`, "Activity").

use mcpx_api::activity::{ActivityRequest, Entry};
use mcpx_api::client::Client;
use mcpx_api::{ApiError, ErrorKind};

use crate::output::{say, say_json, table};
use mcpx_platform::sanitize;

/// What `mcpx activity` was asked: the filters, and how to print.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ActivityArgs {
    #[command(subcommand)]
    show: Option<Show>,
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
    /// Only calls of the last DURATION (`10m`, `2h`, `168h`).
    #[arg(long, value_name = "DURATION")]
    since: Option<String>,
    /// Only calls older than DURATION (`1h`: those before the last hour).
    #[arg(long, value_name = "DURATION")]
    until: Option<String>,
    /// At most this many, newest first.
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// Keep watching: print each call as it is recorded, until interrupted.
    #[arg(long, conflicts_with_all = ["stats", "clear", "until"])]
    follow: bool,
    /// Empty the record.
    #[arg(long, conflicts_with_all = ["server", "tool", "client", "errors", "slow", "since", "until", "stats"])]
    clear: bool,
    /// Per server and tool over the calls kept: calls, the share that did not end `ok`,
    /// and the 50th, 95th and 99th percentile of their durations (every call kept,
    /// whatever `--limit` says).
    #[arg(long)]
    stats: bool,
}

/// `mcpx activity show ID`.
#[derive(Debug, clap::Subcommand)]
enum Show {
    /// One entry whole: every field, and its arguments and result when kept.
    Show {
        /// The entry's id (the first column of `mcpx activity`).
        id: u64,
    },
}

/// How often `--follow` asks for what is new.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// Runs `mcpx activity`: prints the entries (with `json`, one object a line).
///
/// Errors: a malformed `--since` or `--until` (`usage`); an unknown id (`usage`);
/// those of `POST /v1/activity`.
pub async fn run(client: &Client, args: ActivityArgs, json: bool) -> Result<i32, ApiError> {
    if let Some(Show::Show { id }) = args.show {
        return show(client, id, json).await;
    }
    let ago = |flag: &str, text: &Option<String>| -> Result<Option<u64>, ApiError> {
        let Some(text) = text else { return Ok(None) };
        let span = mcpx_daemon::config::units::parse_duration(text)
            .map_err(|e| ApiError::new(ErrorKind::Usage, format!("{flag} {text}: {e}")))?;
        Ok(Some(mcpx_daemon::schema::now_ms().saturating_sub(span.as_millis() as u64)))
    };
    let mut req = ActivityRequest {
        server: args.server,
        name: args.tool,
        client: args.client,
        errors: args.errors,
        slow_ms: args.slow,
        since_ms: ago("--since", &args.since)?,
        until_ms: ago("--until", &args.until)?,
        limit: if args.stats { 0 } else { args.limit },
        clear: args.clear,
        ..ActivityRequest::default()
    };
    let entries: Vec<Entry> = client.post("/v1/activity", &req).await?;
    if args.clear {
        say("the activity record is empty");
        return Ok(0);
    }
    if args.stats {
        return Ok(print_stats(&stats(&entries), json));
    }
    if !args.follow {
        if entries.is_empty() && !json {
            say("no calls recorded (yet)");
        }
        print(&entries, json, true);
        return Ok(0);
    }
    // Oldest first from here on: what was there, then each new entry as it comes.
    let mut entries = entries;
    entries.reverse();
    print(&entries, json, true);
    req.after_id = entries.last().map_or(Some(0), |e| Some(e.id));
    req.since_ms = None;
    req.limit = 0;
    loop {
        tokio::time::sleep(FOLLOW_EVERY).await;
        let new: Vec<Entry> = client.post("/v1/activity", &req).await?;
        if let Some(last) = new.last() {
            req.after_id = Some(last.id);
        }
        print(&new, json, false);
    }
}

/// `mcpx activity show ID`: the entry whole, each field on a line of its own (with
/// `json`, the entry as one object).
async fn show(client: &Client, id: u64, json: bool) -> Result<i32, ApiError> {
    let req = ActivityRequest { id: Some(id), ..ActivityRequest::default() };
    let entries: Vec<Entry> = client.post("/v1/activity", &req).await?;
    let Some(entry) = entries.into_iter().next() else {
        return Err(ApiError::new(
            ErrorKind::Usage,
            format!("no entry {id} in the activity record: `mcpx activity` lists the ids"),
        ));
    };
    if json {
        say_json(&serde_json::to_string(&entry).unwrap_or_default());
        return Ok(0);
    }
    let serde_json::Value::Object(fields) = serde_json::to_value(&entry).unwrap_or_default() else { return Ok(0) };
    for (key, value) in fields {
        let value = match (key.as_str(), value) {
            ("started_ms", serde_json::Value::Number(ms)) => {
                let ms = ms.as_u64().unwrap_or_default();
                format!("{ms} ({} UTC)", mcpx_platform::clock::time_of_day(ms))
            }
            ("arguments" | "result", serde_json::Value::String(text)) => sanitize::json(&text).into_owned(),
            (_, serde_json::Value::String(text)) => sanitize::line(&text).into_owned(),
            (_, other) => other.to_string(),
        };
        say(&format!("{key}: {value}"));
    }
    Ok(0)
}

/// Prints `entries` as a table (with `header`, under one), or with `json` one object
/// a line.
fn print(entries: &[Entry], json: bool, header: bool) {
    if json {
        for entry in entries {
            say_json(&serde_json::to_string(entry).unwrap_or_default());
        }
        return;
    }
    if entries.is_empty() {
        return;
    }
    let cells: Vec<Vec<String>> = entries
        .iter()
        .map(|e| {
            let outcome = match (&e.code, &e.answered) {
                (Some(code), _) => format!("{} {code}", e.outcome),
                (None, Some(said)) => format!("{} ({said})", e.outcome),
                _ => e.outcome.clone(),
            };
            let call = match e.method.as_str() {
                "tools/call" | "prompts/get" | "resources/read" => format!("{}.{}", e.server, e.name),
                method => format!("{}.{} {method}", e.server, e.name),
            };
            vec![
                e.id.to_string(),
                mcpx_platform::clock::time_of_day(e.started_ms),
                sanitize::line(&e.path).into_owned(),
                sanitize::line(&e.client).into_owned(),
                sanitize::line(&call).into_owned(),
                sanitize::line(&outcome).into_owned(),
                format!("{:.1}", e.duration_us as f64 / 1000.0),
            ]
        })
        .collect();
    let headers = ["ID", "TIME (UTC)", "PATH", "CLIENT", "CALL", "OUTCOME", "MS"];
    if header {
        table(&headers, &cells);
    } else {
        let text = crate::output::table_text(&headers, &cells);
        text.lines().skip(1).for_each(say);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, outcome: &str, duration_us: u64) -> Entry {
        Entry {
            duration_us,
            path: "shell".into(),
            client: "shell".into(),
            server: "s".into(),
            method: "tools/call".into(),
            name: name.into(),
            outcome: outcome.into(),
            ..Entry::default()
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
