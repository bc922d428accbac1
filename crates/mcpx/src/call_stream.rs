//! `mcpx call`'s conversation with the daemon once the request is built: the streamed
//! answer (`docs/api.md`, "Streaming"), its status line on a terminal, the server's
//! questions answered at the terminal (`elicitation/create`), and Ctrl-C.

use std::io::IsTerminal;

use mcpx_api::client::{Client, Method};
use mcpx_api::{Answer, ApiError, CallRequest, ErrorKind};
use serde_json::value::RawValue;

use crate::output;
use crate::status_line::StatusLine;

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
