//! Features with no counterpart across the two eras, refused with an error that
//! names the feature and says what to do, where relaying them would fail in a way
//! the client could not read.
//!
//! Tasks: MCP 2025-11-25 has them in the core (Basic, Utilities, "Tasks": `tasks/get`,
//! `tasks/result`, `tasks/list`, `tasks/cancel`, and a `task` in a request's params);
//! MCP 2026-07-28 moved them to the `io.modelcontextprotocol/tasks` extension, in
//! another shape (its changelog: polling with `tasks/get`, `tasks/update`, no
//! `tasks/result` or `tasks/list`). Neither maps onto the other, so a task request
//! from a client of one era to a server of the other is refused, and mcpx's own
//! aggregate offers neither (it declares no `tasks` capability). A task-augmented
//! `tools/call` gets -32601, as "Tasks" says a server answers one it does not support
//! ("Tool-Level Negotiation").

use mcpx_proto::Message;
use mcpx_proto::mcp::error_code;
use serde_json::Value;

/// What the answering side of a request is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Answerer<'a> {
    /// mcpx's aggregate (`/mcp`, `mcpx serve` without `--server`).
    Aggregate,
    /// The server named, of the modern era or not.
    Server {
        /// The server's configured name.
        name: &'a str,
        /// Whether it speaks MCP 2026-07-28.
        modern: bool,
    },
}

/// The error answering request `id` (`method` with `params`) of a client of the
/// modern era or not (`client_modern`) when it uses a feature `to` has no
/// counterpart for; `None` when it may go on.
pub(crate) fn refusal(
    id: &str,
    method: &str,
    params: &Value,
    client_modern: bool,
    to: Answerer<'_>,
) -> Option<Message> {
    let tasks = method.starts_with("tasks/");
    let augmented = method == "tools/call" && !client_modern && params.get("task").is_some_and(Value::is_object);
    if !tasks && !augmented {
        return None;
    }
    let client_era = if client_modern { "2026-07-28" } else { "2025-11-25" };
    let what = match client_modern {
        true => "tasks of the `io.modelcontextprotocol/tasks` extension (MCP 2026-07-28)",
        false => "tasks (MCP 2025-11-25, Basic, Utilities, \"Tasks\")",
    };
    let (whom, same_era) = match to {
        Answerer::Aggregate => ("mcpx's aggregate, which offers no tasks".to_owned(), false),
        Answerer::Server { name, modern } => {
            let era = if modern { "2026-07-28" } else { "an initialize-era revision" };
            (format!("`{name}`, which speaks MCP {era}"), modern == client_modern)
        }
    };
    if same_era {
        return None;
    }
    let to_do = match (augmented, to) {
        (true, _) => "call the tool without `task` and wait for its result",
        (false, Answerer::Aggregate) => {
            "call the tool without a task, or reach a server of your era through `/mcp/<server>`"
        }
        (false, Answerer::Server { .. }) => "call the tool without a task and wait for its result",
    };
    let method_of = if augmented { "a task-augmented tools/call".to_owned() } else { format!("`{method}`") };
    let message = format!(
        "{method_of} is one of the {what}, which a client of MCP {client_era} cannot use through {whom}: the two eras' tasks do not map onto each other; {to_do}"
    );
    Some(Message::error_response(id, error_code::METHOD_NOT_FOUND, &message))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn refused(method: &str, params: Value, client_modern: bool, to: Answerer<'_>) -> Option<String> {
        refusal("1", method, &params, client_modern, to).map(|m| m.as_str().to_owned())
    }

    #[test]
    fn tasks_across_eras_are_refused_by_name_and_same_era_passes() {
        let modern = Answerer::Server { name: "m", modern: true };
        let legacy = Answerer::Server { name: "l", modern: false };
        let get = refused("tasks/get", json!({ "taskId": "t" }), false, modern).unwrap();
        assert!(get.contains("-32601") && get.contains("`tasks/get` is one of the tasks (MCP 2025-11-25"), "{get}");
        assert!(get.contains("`m`, which speaks MCP 2026-07-28"), "{get}");
        let call = json!({ "name": "echo", "task": { "ttl": 1000 } });
        let augmented = refused("tools/call", call.clone(), false, modern).unwrap();
        assert!(
            augmented.contains("a task-augmented tools/call") && augmented.contains("without `task`"),
            "{augmented}"
        );
        let update = refused("tasks/update", json!({}), true, legacy).unwrap();
        assert!(update.contains("io.modelcontextprotocol/tasks"), "{update}");
        assert!(refused("tasks/list", json!({}), false, Answerer::Aggregate).unwrap().contains("/mcp/<server>"));
        assert_eq!(refused("tasks/get", json!({}), false, legacy), None, "same era: relayed");
        assert_eq!(refused("tasks/get", json!({}), true, modern), None);
        assert_eq!(refused("tools/call", call, false, legacy), None);
        assert_eq!(refused("tools/call", json!({ "name": "echo" }), false, modern), None);
    }
}
