//! What `mcpx resources`, `read`, `prompts` and `prompt` print: tables of what the
//! servers listed, a resource's contents and a prompt's messages, or the daemon's JSON
//! with `--json`.

use mcpx_api::{ApiError, ErrorKind};
use serde::Deserialize;
use serde_json::Value;

use super::content::Render;
use super::print::{one_line, say, say_json, table, warn};

/// One server's row of `POST /v1/resources` or `/v1/prompts`.
#[derive(Deserialize)]
struct Offers {
    server: String,
    #[serde(default)]
    listed: bool,
    #[serde(default)]
    resources: Vec<Value>,
    #[serde(rename = "resourceTemplates", default)]
    resource_templates: Vec<Value>,
    #[serde(default)]
    prompts: Vec<Value>,
}

/// `mcpx resources [<server>]`: a table of resources (URI, name, MIME type,
/// description) and one of templates, with the server in the first column when every
/// server is shown (`all`); the servers never listed are named on stderr.
///
/// Errors (`daemon`): the answer is malformed.
pub fn resources(json: bool, all: bool, body: &[u8]) -> Result<(), ApiError> {
    if json {
        say_json(&String::from_utf8_lossy(body));
        return Ok(());
    }
    let rows = parse(body)?;
    let mut cells = Vec::new();
    let mut templates = Vec::new();
    for row in &rows {
        let lead = |v: Vec<String>| if all { [vec![row.server.clone()], v].concat() } else { v };
        for r in &row.resources {
            cells.push(lead(vec![text(&r["uri"]), name(r), text(&r["mimeType"]), about(r)]));
        }
        for t in &row.resource_templates {
            templates.push(lead(vec![text(&t["uriTemplate"]), name(t), text(&t["mimeType"]), about(t)]));
        }
    }
    let header = |first: &'static str| {
        let cols = vec![first, "NAME", "MIME", "DESCRIPTION"];
        if all { [vec!["SERVER"], cols].concat() } else { cols }
    };
    if cells.is_empty() && templates.is_empty() {
        say("no resources listed");
    }
    if !cells.is_empty() {
        table(&header("URI"), &cells);
    }
    if !templates.is_empty() {
        if !cells.is_empty() {
            println!();
        }
        table(&header("TEMPLATE"), &templates);
    }
    let server = if all { "<server>".to_owned() } else { rows.first().map(|r| r.server.clone()).unwrap_or_default() };
    say(&format!("\nnext: `mcpx read {server} <uri>` reads one (a template's {{...}} filled in)"));
    unread(&rows, "resources");
    Ok(())
}

/// `mcpx prompts [<server>]`: a table of prompts (as `<server>.<name>`), their
/// arguments (required ones marked `*`) and descriptions; the servers never listed are
/// named on stderr.
///
/// Errors (`daemon`): the answer is malformed.
pub fn prompts(json: bool, body: &[u8]) -> Result<(), ApiError> {
    if json {
        say_json(&String::from_utf8_lossy(body));
        return Ok(());
    }
    let rows = parse(body)?;
    let mut cells = Vec::new();
    for row in &rows {
        for p in &row.prompts {
            let arguments: Vec<String> = p["arguments"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|a| {
                    let mark = if a["required"].as_bool() == Some(true) { "*" } else { "" };
                    format!("{}{mark}", text(&a["name"]))
                })
                .collect();
            cells.push(vec![format!("{}.{}", row.server, text(&p["name"])), arguments.join(" "), about(p)]);
        }
    }
    if cells.is_empty() {
        say("no prompts listed");
    } else {
        table(&["PROMPT", "ARGUMENTS (* required)", "DESCRIPTION"], &cells);
    }
    say("\nnext: `mcpx prompt <server>.<prompt> key=value ...` gets one's messages");
    unread(&rows, "prompts");
    Ok(())
}

/// `mcpx read`: each item of the `ReadResourceResult`'s `contents`, text as is, blobs
/// saved or described ([`Render::contents`]); the `[resource <uri>]` header of a
/// text only when there are several items.
///
/// Errors: a malformed result (`protocol`), or a blob that cannot be saved (`usage`).
pub fn read(json: bool, body: &[u8], render: &mut Render) -> Result<i32, ApiError> {
    if json {
        say_json(&String::from_utf8_lossy(body));
        return Ok(0);
    }
    let result: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::new(ErrorKind::Protocol, format!("the server's resources/read result is malformed: {e}"))
    })?;
    let contents = result["contents"].as_array().map(Vec::as_slice).unwrap_or_default();
    for item in contents {
        let mut lines = render.contents(item)?;
        if contents.len() == 1 && item["text"].is_string() {
            lines.remove(0);
        }
        lines.iter().for_each(|l| say(l));
    }
    Ok(0)
}

/// `mcpx prompt`: the prompt's description, then each message as `[role]` followed by
/// its content ([`Render::block`]), a blank line between messages.
///
/// Errors: a malformed result (`protocol`), or content that cannot be saved (`usage`).
pub fn prompt(json: bool, body: &[u8], render: &mut Render) -> Result<i32, ApiError> {
    if json {
        say_json(&String::from_utf8_lossy(body));
        return Ok(0);
    }
    let result: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::new(ErrorKind::Protocol, format!("the server's prompts/get result is malformed: {e}"))
    })?;
    if let Some(description) = result["description"].as_str().filter(|d| !d.trim().is_empty()) {
        say(&format!("# {}\n", one_line(Some(description), 200)));
    }
    for (n, message) in result["messages"].as_array().into_iter().flatten().enumerate() {
        if n > 0 {
            println!();
        }
        say(&format!("[{}]", message["role"].as_str().unwrap_or("?")));
        render.block(&message["content"])?.iter().for_each(|l| say(l));
    }
    Ok(0)
}

/// The rows of a `/v1/resources` or `/v1/prompts` answer.
fn parse(body: &[u8]) -> Result<Vec<Offers>, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::new(ErrorKind::Daemon, format!("unexpected answer: {e}")))
}

/// On stderr: the servers never listed, whose `what` are not known yet.
fn unread(rows: &[Offers], what: &str) {
    let names: Vec<&str> = rows.iter().filter(|r| !r.listed).map(|r| r.server.as_str()).collect();
    if !names.is_empty() {
        warn(&format!("never listed: {} (`mcpx {what} <server>` starts one and lists its {what})", names.join(", ")));
    }
}

/// A string field, empty when absent.
fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

/// An item's title, else its name.
fn name(v: &Value) -> String {
    v["title"].as_str().map_or_else(|| text(&v["name"]), str::to_owned)
}

/// An item's description, on one line.
fn about(v: &Value) -> String {
    one_line(v["description"].as_str(), 80)
}
