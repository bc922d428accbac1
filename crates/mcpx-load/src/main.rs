//! `mcpx-load`: the load generator of mcpx's benchmarks. N callers drive one MCP path back
//! to back — each its own `mcpx serve` (or server) process over stdio, or its own keep-alive
//! connection and session on a streamable HTTP endpoint — check every answer, and report
//! calls/s, latency percentiles and the CPU time per call of the processes named with
//! `--pid`, as JSON on stdout and one line on stderr.
//!
//! ```text
//! mcpx-load --callers 16 --seconds 5 --pid daemon=1234 http http://127.0.0.1:8080/mcp/fake
//! mcpx-load --callers 1 --calls 2000 --tool fake__echo stdio -- mcpx serve
//! mcpx-load --unix "$MCPX_RUNTIME_DIR/daemon.sock" http /mcp/fake
//! ```

mod answer;
mod http;
mod report;
mod run;
mod stdio;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use hyper::header::{HeaderName, HeaderValue};

/// The command line.
#[derive(Parser, Debug)]
#[command(
    name = "mcpx-load",
    version,
    about = "Drive an MCP path with N callers, check every answer, report calls/s, latency and CPU per call as JSON"
)]
struct Cli {
    /// Concurrent callers.
    #[arg(long, short = 'c', default_value_t = 1, global = true)]
    callers: usize,
    /// Length of the measured phase in seconds (ignored with --calls).
    #[arg(long, default_value_t = 5.0, global = true)]
    seconds: f64,
    /// Measured calls per caller, instead of --seconds.
    #[arg(long, global = true)]
    calls: Option<u64>,
    /// Untimed calls before the measured phase, for this many seconds.
    #[arg(long, default_value_t = 1.0, global = true)]
    warmup: f64,
    /// The tool to call with {"message": ...}; it must answer with that message as its only text.
    #[arg(long, default_value = "echo", global = true)]
    tool: String,
    /// A process whose CPU time per call to report, as NAME=PID (repeatable).
    #[arg(long = "pid", value_name = "NAME=PID", value_parser = parse_pid, global = true)]
    pids: Vec<(String, u32)>,
    /// Worker threads of the callers' runtime (default: 2, or 1 for one caller).
    #[arg(long, global = true)]
    threads: Option<usize>,
    #[command(subcommand)]
    target: TargetArg,
}

/// The path to drive.
#[derive(Subcommand, Debug)]
enum TargetArg {
    /// Streamable HTTP: each caller its own keep-alive connection and MCP session.
    Http {
        /// `http://HOST:PORT/PATH`, or `/PATH` with --unix.
        url: String,
        /// Connect to this unix socket (e.g. the daemon's `daemon.sock`) instead of TCP.
        #[arg(long)]
        unix: Option<PathBuf>,
        /// An extra header for every request, as "Name: value" (repeatable).
        #[arg(long = "header", value_name = "NAME: VALUE", value_parser = parse_header)]
        headers: Vec<(HeaderName, HeaderValue)>,
    },
    /// stdio: each caller starts its own process (e.g. `mcpx serve`) and speaks
    /// newline-delimited JSON-RPC on its stdin and stdout.
    Stdio {
        /// The command and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<OsString>,
    },
}

fn main() -> ExitCode {
    match run_cli(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("mcpx-load: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run_cli(cli: Cli) -> Result<()> {
    if cli.callers == 0 {
        bail!("--callers must be at least 1");
    }
    let seconds_ok = cli.seconds > 0.0 && cli.seconds.is_finite();
    let warmup_ok = cli.warmup >= 0.0 && cli.warmup.is_finite();
    if !seconds_ok || !warmup_ok {
        bail!("--seconds must be more than 0 and --warmup at least 0");
    }
    let target = match cli.target {
        TargetArg::Http { url, unix, headers } => run::Target::Http(http::Endpoint::parse(&url, unix, headers)?),
        TargetArg::Stdio { command } => run::Target::Stdio(command),
    };
    let plan = run::Plan {
        target,
        callers: cli.callers,
        tool: cli.tool,
        warmup: Duration::from_secs_f64(cli.warmup),
        length: match cli.calls {
            Some(n) => run::Length::Calls(n),
            None => run::Length::Time(Duration::from_secs_f64(cli.seconds)),
        },
        pids: cli.pids,
    };
    let threads = cli.threads.unwrap_or(if cli.callers == 1 { 1 } else { 2 }).max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let report = runtime.block_on(run::run(plan))?;
    println!("{}", serde_json::to_string(&report)?);
    eprintln!("{}", report.human());
    Ok(())
}

/// `NAME=PID`.
fn parse_pid(arg: &str) -> Result<(String, u32), String> {
    let (name, pid) = arg.split_once('=').ok_or_else(|| format!("{arg:?} is not NAME=PID (e.g. daemon=1234)"))?;
    let pid = pid.parse().map_err(|_| format!("{pid:?} is not a pid (in {arg:?})"))?;
    if name.is_empty() || name == "self" || name == "callers" {
        return Err(format!("{name:?} cannot name a process: `self` and `callers` are reported anyway"));
    }
    Ok((name.to_owned(), pid))
}

/// `Name: value`.
fn parse_header(arg: &str) -> Result<(HeaderName, HeaderValue), String> {
    let (name, value) = arg.split_once(':').ok_or_else(|| format!("{arg:?} is not \"Name: value\""))?;
    let name = HeaderName::try_from(name.trim()).map_err(|e| format!("header name {name:?}: {e}"))?;
    let value = HeaderValue::try_from(value.trim()).map_err(|e| format!("header value of {name}: {e}"))?;
    Ok((name, value))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Reason: a failed unwrap is a failed test.

    use super::*;

    #[test]
    fn parses_the_command_line() {
        let cli = Cli::try_parse_from([
            "mcpx-load",
            "-c",
            "4",
            "--calls",
            "10",
            "--pid",
            "daemon=12",
            "stdio",
            "--",
            "mcpx",
            "serve",
            "--server",
            "x",
        ])
        .unwrap();
        assert_eq!((cli.callers, cli.calls, cli.pids.clone()), (4, Some(10), vec![("daemon".into(), 12)]));
        let TargetArg::Stdio { command } = cli.target else { panic!("not stdio") };
        assert_eq!(command, ["mcpx", "serve", "--server", "x"]);
        let cli =
            Cli::try_parse_from(["mcpx-load", "http", "/mcp", "--unix", "/s", "--header", "Authorization: Bearer t"])
                .unwrap();
        let TargetArg::Http { headers, .. } = cli.target else { panic!("not http") };
        assert_eq!(headers[0].1, "Bearer t");
        assert!(parse_pid("daemon").is_err());
        assert!(parse_pid("self=1").is_err());
        assert!(parse_pid("d=x").is_err());
    }
}
