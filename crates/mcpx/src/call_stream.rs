//! `mcpx call`: its request, one `POST /v1/call` ([`call`]), and the conversation
//! with the daemon once it is built: the streamed answer (`docs/api.md`,
//! "Streaming"), its status line on a terminal, the server's questions answered at
//! the terminal (`elicitation/create`), and Ctrl-C.

use std::io::IsTerminal;
use std::path::PathBuf;

use mcpx_api::client::{Client, Method};
use mcpx_api::{Answer, ApiError, CallRequest, Caller, ErrorKind};
use serde_json::value::RawValue;

use crate::output;
use crate::status_line::StatusLine;

/// `mcpx call`'s arguments.
#[derive(Debug, clap::Args)]
pub struct CallArgs {
    /// `<server>.<tool>`; the tool is what follows the longest configured server name and a dot.
    target: Option<String>,
    /// The arguments: `key=value` words (typed by the tool's schema; `key:=JSON`, `key=@FILE`), one JSON object, or `-` to read one from stdin.
    arguments: Vec<String>,
    /// The server (with --tool, instead of SERVER.TOOL).
    #[arg(long)]
    server: Option<String>,
    /// The tool (with --server).
    #[arg(long)]
    tool: Option<String>,
    /// Session id for session-scoped servers (else MCPX_SESSION_ID).
    #[arg(long, env = "MCPX_SESSION_ID")]
    session: Option<String>,
    /// Give up after this long (500ms, 30s, 5m; 0 for never); default: the server's callTimeout.
    #[arg(long, value_name = "DUR")]
    timeout: Option<String>,
    /// Never ask at the terminal: the server's questions (elicitation) are declined.
    #[arg(long)]
    no_input: bool,
    /// Save image, audio and blob content into this directory (made when missing) and print the paths.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// `mcpx call`: one `POST /v1/call`, streamed ([`run`]); the daemon types `key=value`
/// arguments by the tool's schema. Returns the exit status.
///
/// Errors: a malformed command line (`usage`), and those of [`run`].
pub async fn call(client: &Client, args: CallArgs, caller: Caller, json: bool) -> Result<i32, ApiError> {
    let (target, server, tool) = match (&args.target, &args.server, &args.tool) {
        (_, Some(s), Some(t)) => (None, Some(s.clone()), Some(t.clone())),
        (Some(target), None, None) => (Some(target.clone()), None, None),
        _ => {
            return Err(ApiError::new(
                ErrorKind::Usage,
                "name the tool: `mcpx call <server>.<tool> [JSON]` or `--server S --tool T`",
            ));
        }
    };
    // With --server/--tool, every positional is an argument.
    let mut words = args.arguments.clone();
    if let (Some(_), Some(first)) = (&args.server, &args.target) {
        words.insert(0, first.clone());
    }
    let input = crate::args::Input::parse(&words, target.as_deref())?;
    let shown = target.clone().unwrap_or_else(|| {
        format!("--server {} --tool {}", server.as_deref().unwrap_or_default(), tool.as_deref().unwrap_or_default())
    });
    let render = || output::Render::for_call(args.out.clone(), tool.as_deref(), target.as_deref());
    let timeout_ms = args
        .timeout
        .as_deref()
        .map(|t| {
            mcpx_daemon::config::units::parse_duration(t).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        })
        .transpose()
        .map_err(|e| ApiError::new(ErrorKind::Usage, format!("--timeout: {e} (write it like 500ms, 30s or 5m)")))?;
    // One request: the daemon types `key=value` pairs by the tool's schema and
    // checks the arguments, with the usage under the name the user gave.
    let usage = format!("call {shown}");
    let arguments = input.for_call()?;
    let mut req = CallRequest {
        caller,
        target: target.clone(),
        server: server.clone(),
        tool: tool.clone(),
        arguments,
        shown: Some(usage.clone()),
        timeout_ms,
        ..CallRequest::default()
    };
    if let Some(session) = args.session.filter(|s| !s.is_empty()) {
        req.caller.session = Some(session);
    }
    let pairs = matches!(input, crate::args::Input::Pairs(_));
    match crate::call_stream::run(client, req.clone(), &shown, json, args.no_input, render()).await {
        // A daemon from before the typing refused the pairs, having run nothing: they
        // are typed here, by the tool's definition, and sent again as an object.
        Err(e) if pairs && e.kind == ErrorKind::Usage && e.message == OLD_DAEMON_REFUSAL => {
            let named = mcpx_api::ListRequest {
                caller: req.caller.clone(),
                target: req.target.clone(),
                server: req.server.clone(),
                tool: req.tool.clone(),
                ..Default::default()
            };
            let schema = crate::args::tool_schema(client, &named).await?;
            req.arguments = mcpx_api::arguments::build(input.given(), schema.as_ref(), &usage)?;
            crate::call_stream::run(client, req, &shown, json, args.no_input, render()).await
        }
        other => other,
    }
}

/// What a daemon from before `POST /v1/call` typed `key=value` pairs answers them
/// with (a `usage` error, nothing run).
const OLD_DAEMON_REFUSAL: &str = "the tool's arguments must be a JSON object, like '{\"message\":\"hi\"}'";

/// The server requests `mcpx call` answers at a terminal.
const ANSWERS: &[&str] = &["elicitation/create"];

/// Sends `req` (a `POST /v1/call`) as a stream and prints its outcome; returns the exit
/// status, the result printed as `render` says (`--out`). `what` names the call for
/// the status line (`fake.echo`). With `no_input`,
/// or without a terminal on stdin and stderr, nothing is asked at the terminal: the
/// daemon declines the server's questions itself.
///
/// Errors: those of the call (its `error` line), or a broken daemon connection.
pub async fn run(
    client: &Client,
    mut req: CallRequest,
    what: &str,
    json: bool,
    no_input: bool,
    mut render: output::Render,
) -> Result<i32, ApiError> {
    let interactive = !no_input && std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let status = StatusLine::new(!json, &format!("calling {what}"));
    req.stream = true;
    req.status = status.is_on();
    req.answers = if interactive { ANSWERS.iter().map(|m| (*m).to_owned()).collect() } else { Vec::new() };
    let (questions, mut asked) = tokio::sync::mpsc::unbounded_channel::<(String, String)>();
    // A form puts the terminal in raw mode and hides the cursor while it waits for a
    // key: should the call end meanwhile, both are put back before mcpx exits.
    let terminal = if interactive { mcpx_platform::terminal::Saved::stdin() } else { None };
    let prompting = std::cell::Cell::new(false);
    // Lines: status and notifications while the tool runs, questions, then the result
    // or the error. A line of a kind this CLI does not know is skipped (the daemon may
    // be newer); only a missing last line is an error.
    let mut outcome: Option<Result<Vec<u8>, ApiError>> = None;
    let on_line = |line: &[u8]| {
        #[derive(serde::Deserialize)]
        struct Line<'a> {
            #[serde(borrow, default)]
            notification: Option<&'a RawValue>,
            #[serde(default)]
            status: Option<serde_json::Value>,
            #[serde(borrow, default)]
            request: Option<&'a RawValue>,
            #[serde(default)]
            call: Option<String>,
            #[serde(borrow, default)]
            result: Option<&'a RawValue>,
            #[serde(default)]
            error: Option<ApiError>,
        }
        match serde_json::from_slice::<Line<'_>>(line) {
            Ok(Line { notification: Some(n), .. }) => notification(&status, json, n.get()),
            Ok(Line { status: Some(s), .. }) => status.status(&s),
            Ok(Line { request: Some(r), call: Some(call), .. }) => {
                let _ = questions.send((call, r.get().to_owned()));
            }
            Ok(Line { result: Some(r), .. }) => outcome = Some(Ok(r.get().as_bytes().to_vec())),
            Ok(Line { error: Some(e), .. }) => outcome = Some(Err(e)),
            Ok(_) => {}
            Err(_) => {
                outcome = Some(Err(ApiError::new(ErrorKind::Daemon, "the daemon sent a line mcpx does not understand")))
            }
        }
    };
    let answering = async {
        while let Some((call, request)) = asked.recv().await {
            status.pause();
            prompting.set(true);
            // A thread of its own, not the runtime's blocking pool: should the call end
            // while the form waits for a key, mcpx exits without waiting for it.
            let (tx, rx) = tokio::sync::oneshot::channel();
            let tool = what.to_owned();
            std::thread::spawn(move || tx.send(crate::elicit::answer(&request, &tool)));
            let response = rx.await;
            prompting.set(false);
            status.resume();
            let Some(response) = response.ok().and_then(|r| RawValue::from_string(r).ok()) else { continue };
            if let Err(e) = client.call(Method::POST, "/v1/call/answer", Some(&Answer { call, response })).await {
                status
                    .print_above(|| output::warn(&format!("mcpx: the answer did not reach the server: {}", e.message)));
            }
        }
        std::future::pending::<()>().await;
    };
    let sent = tokio::select! {
        sent = client.call_lines("/v1/call", &req, on_line) => sent,
        () = answering => Ok(()),
        _ = tokio::signal::ctrl_c() => {
            // Leaving closes the connection; the daemon then cancels the request upstream.
            status.clear();
            eprintln!("mcpx: cancelled");
            return Ok(130);
        }
    };
    status.clear();
    if prompting.get() {
        if let Some(terminal) = &terminal {
            terminal.restore();
        }
        eprintln!("\x1b[?25h");
        output::warn("mcpx: the call ended before the server's question was answered");
    }
    sent?;
    match outcome {
        Some(Ok(body)) => output::call_result(json, &body, &mut render),
        Some(Err(e)) => Err(e),
        None => Err(ApiError::new(ErrorKind::Daemon, "the daemon ended the call without a result; see `mcpx logs`")),
    }
}

/// A notification of the call: progress on the status line when there is one, else
/// (and log messages always) as [`output::notification`] prints it.
fn notification(status: &StatusLine, json: bool, message: &str) {
    if !json && status.is_on() {
        let v: serde_json::Value = serde_json::from_str(message).unwrap_or_default();
        if v["method"] == "notifications/progress" && status.progress(&v["params"]) {
            return;
        }
    }
    status.print_above(|| output::notification(json, message));
}
