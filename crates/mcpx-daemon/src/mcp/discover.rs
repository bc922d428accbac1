//! Discovery mode (`mcpx serve --discover`): four tools instead of every schema (list
//! the servers, search the tools, describe one server's tools, call a tool), answered
//! by the control API's handlers, and empty lists of prompts and resources. What
//! [`crate::policy`] leaves out is not listed, and describing or calling it is
//! answered -32602 with the CLI's message.

use mcpx_proto::Message;
use mcpx_proto::mcp::error_code;
use serde_json::{Value, json};

use crate::api::{CallRequest, CallerRequest, ListRequest, SearchRequest};
use crate::control;
use crate::daemon::Daemon;
use crate::mcp::catalog::{config, listed, servers};
use crate::mcp::sessions::ClientSession;
use crate::policy;

/// Answers what discovery mode changes: the lists, and calls of its own tools;
/// `None` for everything else.
pub(crate) async fn answer(
    d: &Daemon,
    session: &ClientSession,
    id: &str,
    method: &str,
    params: &Value,
) -> Option<Message> {
    let caller = || session.caller.clone();
    let result = match method {
        "tools/list" => tools(),
        "prompts/list" => json!({ "prompts": [] }),
        "resources/list" => json!({ "resources": [] }),
        "resources/templates/list" => json!({ "resourceTemplates": [] }),
        "tools/call" => {
            let args = &params["arguments"];
            let s = |k: &str| args[k].as_str().map(str::to_owned);
            let name = params["name"].as_str().unwrap_or_default();
            if matches!(name, "mcpx_describe" | "mcpx_call") {
                if let Some(refusal) = refusal(d, session, &s("server").unwrap_or_default(), s("tool").as_deref()) {
                    return Some(policy::rpc_refusal(id, &refusal));
                }
            }
            match name {
                "mcpx_list_servers" => {
                    let offered: Vec<String> =
                        servers(d, session).unwrap_or_default().into_iter().map(|e| e.name).collect();
                    control::ls(d, &CallerRequest { caller: caller() }).await.map_or_else(
                        |e| tool_error(&e.message),
                        |mut rows| {
                            rows.retain(|r| offered.contains(&r.name));
                            text(&rows)
                        },
                    )
                }
                "mcpx_search" => {
                    let words = s("query").unwrap_or_default().split_whitespace().map(str::to_owned).collect();
                    let r = SearchRequest { caller: caller(), words };
                    control::search(d, &r).await.map_or_else(|e| tool_error(&e.message), |hits| text(&hits))
                }
                "mcpx_describe" => {
                    let server = s("server").unwrap_or_default();
                    let entries = servers(d, session).unwrap_or_default();
                    if let Some(entry) = entries.iter().find(|e| e.name == server) {
                        // A server never listed is started and listed first.
                        let _ = listed(d, session, entry).await;
                    }
                    let named = ListRequest {
                        caller: caller(),
                        server: Some(server),
                        tool: s("tool"),
                        ..ListRequest::default()
                    };
                    let described = control::tools(d, &named).await;
                    described.map_or_else(
                        |e| tool_error(&e.message),
                        |raw| json!({ "content": [{ "type": "text", "text": raw.get() }] }),
                    )
                }
                "mcpx_call" => {
                    let r = CallRequest {
                        caller: caller(),
                        server: s("server"),
                        tool: s("tool"),
                        arguments: serde_json::value::to_raw_value(&if args["arguments"].is_object() {
                            args["arguments"].clone()
                        } else {
                            json!({})
                        })
                        .ok(),
                        ..CallRequest::default()
                    };
                    match control::call(d, &r, None, None, None).await {
                        Ok(raw) => fitted(d, session, s("server"), s("tool"), raw.get())
                            .unwrap_or_else(|| serde_json::from_str(raw.get()).unwrap_or_default()),
                        Err(e) => tool_error(&e.message),
                    }
                }
                other => {
                    return Some(Message::error_response(
                        id,
                        error_code::INVALID_PARAMS,
                        &format!("unknown tool: `{other}`"),
                    ));
                }
            }
        }
        _ => return None,
    };
    Some(Message::response(id, &result.to_string()))
}

/// The result of `mcpx_call` of `tool` of `server`, cut to that server's
/// `maxResultBytes` when it is larger ([`crate::results::fit`]); `None` when it fits.
fn fitted(
    d: &Daemon,
    session: &ClientSession,
    server: Option<String>,
    tool: Option<String>,
    raw: &str,
) -> Option<Value> {
    let (server, tool) = (server?, tool?);
    let config = config(d, session).ok()?;
    let options = &config.get(&server)?.options;
    let limit = usize::try_from(options.result_limit(&tool)?).ok()?;
    let what = format!("`{}` allows for tool `{tool}` of server `{server}`", options.result_limit_key(&tool));
    crate::results::fit(&d.results, session.caller.session.as_deref(), raw, limit, &what)
}

/// The policy's refusal of `server`, or of its `tool` when one is named, with the
/// CLI's message; `None` when the policy allows it, or when no such server is
/// configured (the handler answering says so).
fn refusal(d: &Daemon, session: &ClientSession, server: &str, tool: Option<&str>) -> Option<policy::Refusal> {
    let config = config(d, session).ok()?;
    let entry = config.get(server)?;
    match tool {
        Some(tool) => {
            policy::check_tool(entry, &d.holds(entry, d.cached_for(entry, &session.caller).as_deref()), tool).err()
        }
        None => policy::check_server(entry).err(),
    }
}

/// The tools of discovery mode.
fn tools() -> Value {
    let object =
        |props: Value, required: &[&str]| json!({ "type": "object", "properties": props, "required": required });
    json!({ "tools": [
        { "name": "mcpx_list_servers", "description": "List the configured MCP servers: name, tool count, state, description.",
          "inputSchema": object(json!({}), &[]) },
        { "name": "mcpx_search", "description": "Find the tools of every server that best match the query (names, titles, descriptions, parameters): the best 20, best first.",
          "inputSchema": object(json!({ "query": { "type": "string", "description": "words to look for" } }), &["query"]) },
        { "name": "mcpx_describe", "description": "The full definitions (with input schemas) of one server's tools, or of one tool.",
          "inputSchema": object(json!({ "server": { "type": "string" }, "tool": { "type": "string" } }), &["server"]) },
        { "name": "mcpx_call", "description": "Call a tool of a server with its arguments; returns the tool's own result.",
          "inputSchema": object(json!({ "server": { "type": "string" }, "tool": { "type": "string" }, "arguments": { "type": "object" } }), &["server", "tool"]) },
    ] })
}

/// A tool result whose one text block is `value` as pretty JSON.
fn text(value: &impl serde::Serialize) -> Value {
    json!({ "content": [{ "type": "text", "text": serde_json::to_string_pretty(value).unwrap_or_default() }] })
}

/// A tool result that failed with `message`.
fn tool_error(message: &str) -> Value {
    json!({ "content": [{ "type": "text", "text": message }], "isError": true })
}
