//! `mcpx tools`, `resources`, `read`, `prompts` and `prompt`: what a server offers,
//! from the daemon's schema cache, and its resources and prompts fetched through the
//! daemon (`POST /v1/tools`, `/v1/resources`, `/v1/read`, `/v1/prompts`,
//! `/v1/prompt`). A server named but never listed is started and listed, with a line
//! on stderr while it starts.

use std::path::PathBuf;

use clap::Args;
use mcpx_api::client::{Client, Method};
use mcpx_api::{ApiError, Caller, ErrorKind, ListRequest, PromptRequest, ReadRequest};
use serde_json::{Map, Value, json};

use crate::output;

/// `mcpx prompt`'s command line.
#[derive(Debug, Args)]
pub struct PromptArgs {
    /// `<server>.<prompt>`; the prompt is what follows the longest configured server name and a dot.
    target: String,
    /// The arguments: `key=value` words (`key=@FILE` for a file's text), one JSON object, or `-` to read one from stdin.
    arguments: Vec<String>,
    /// Save image, audio and blob content into this directory (made when missing) and print the paths.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// `mcpx tools <server> [<tool>]`: the server's tools, or one tool's definition.
///
/// Errors: those of `POST /v1/tools` ([`listing`]).
pub async fn tools(
    client: &Client,
    caller: Caller,
    server: String,
    tool: Option<String>,
    json: bool,
) -> Result<i32, ApiError> {
    let one = tool.is_some();
    let req = ListRequest { caller, server: Some(server.clone()), tool, ..ListRequest::default() };
    let body = listing(client, "/v1/tools", req).await?;
    output::tools(json, &server, one, &body)?;
    Ok(0)
}

/// `mcpx resources [<server>]`.
///
/// Errors: those of `POST /v1/resources` ([`listing`]).
pub async fn resources(client: &Client, caller: Caller, server: Option<String>, json: bool) -> Result<i32, ApiError> {
    let all = server.is_none();
    let body = listing(client, "/v1/resources", ListRequest { caller, server, ..ListRequest::default() }).await?;
    output::resources(json, all, &body)?;
    Ok(0)
}

/// `mcpx prompts [<server>]`.
///
/// Errors: those of `POST /v1/prompts` ([`listing`]).
pub async fn prompts(client: &Client, caller: Caller, server: Option<String>, json: bool) -> Result<i32, ApiError> {
    let body = listing(client, "/v1/prompts", ListRequest { caller, server, ..ListRequest::default() }).await?;
    output::prompts(json, &body)?;
    Ok(0)
}

/// `mcpx read <server> <uri> [--out PATH]`: the resource's text on stdout, its blobs
/// saved to `PATH` or described.
///
/// Errors: those of `POST /v1/read`; a blob that cannot be saved (`usage`).
pub async fn read(
    client: &Client,
    caller: Caller,
    server: String,
    uri: String,
    out: Option<PathBuf>,
    json: bool,
) -> Result<i32, ApiError> {
    let req = ReadRequest { caller, server: Some(server), uri: Some(uri), timeout_ms: None };
    let body = client.call(Method::POST, "/v1/read", Some(&req)).await?;
    output::read(json, &body, &mut output::Render::new(output::Out::dir_or_file(out), "resource"))
}

/// `mcpx prompt <server>.<prompt> [key=value... | JSON | -]`: the arguments are checked
/// against the prompt's listed arguments first (required ones present, no unknown
/// one, each a string), then its messages are printed.
///
/// Errors: a failed check (`usage`, with the prompt's usage); those of `POST
/// /v1/prompts` and `/v1/prompt`.
pub async fn prompt(client: &Client, caller: Caller, args: PromptArgs, json: bool) -> Result<i32, ApiError> {
    let input = crate::args::Input::parse(&args.arguments, None)?;
    let named = ListRequest { caller: caller.clone(), target: Some(args.target.clone()), ..ListRequest::default() };
    let listed = listing(client, "/v1/prompts", named).await?;
    let listed: Value = serde_json::from_slice(&listed)
        .map_err(|e| ApiError::new(ErrorKind::Daemon, format!("unexpected answer from the daemon: {e}")))?;
    let arguments =
        mcpx_api::arguments::build(input.given(), Some(&as_tool(&listed)), &format!("prompt {}", args.target))?;
    let stem = listed["name"].as_str().unwrap_or("prompt").to_owned();
    let req = PromptRequest { caller, target: Some(args.target), arguments, ..PromptRequest::default() };
    let body = client.call(Method::POST, "/v1/prompt", Some(&req)).await?;
    output::prompt(json, &body, &mut output::Render::new(output::Out::dir(args.out), &stem))
}

/// A prompt's `prompts/list` entry as a tool's, for [`mcpx_api::arguments::build`]: each
/// argument a string property (MCP prompt arguments are strings), the required ones
/// required, and no others allowed.
fn as_tool(prompt: &Value) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for a in prompt["arguments"].as_array().into_iter().flatten() {
        let Some(name) = a["name"].as_str() else { continue };
        let mut property = json!({ "type": "string" });
        if let Some(d) = a["description"].as_str() {
            property["description"] = json!(d);
        }
        properties.insert(name.to_owned(), property);
        if a["required"].as_bool() == Some(true) {
            required.push(name.to_owned());
        }
    }
    json!({
        "name": prompt["name"],
        "description": prompt["description"],
        "inputSchema": { "type": "object", "properties": properties, "required": required, "additionalProperties": false },
    })
}

/// `POST path` with `req`; when the server it names was never listed (a `server`
/// error), asks again, with a status line on stderr (on a terminal), with `start`, which starts
/// the server and lists it (design: `tools <server>` of a server never listed starts it).
///
/// Errors: the route's; with `start`, a failed start or listing (`server`, `timeout`).
pub async fn listing(client: &Client, path: &str, req: ListRequest) -> Result<Vec<u8>, ApiError> {
    let call = |req: ListRequest| async move { client.call(Method::POST, path, Some(&req)).await.map(|b| b.to_vec()) };
    let named =
        req.server.clone().or_else(|| req.target.as_deref().map(|t| t.split('.').next().unwrap_or(t).to_owned()));
    match call(req.clone()).await {
        Err(e) if e.kind == ErrorKind::Server && named.is_some() => {
            let what = format!("starting {} to list it", named.unwrap_or_default());
            crate::status_line::StatusLine::during(true, &what, call(ListRequest { start: true, ..req })).await
        }
        answer => answer,
    }
}
