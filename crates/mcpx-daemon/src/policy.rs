//! The one policy point for what a configuration offers: a server of a project file the
//! user has not trusted (`docs/configuration.md`, "Trust") and a `disabled` server are
//! not offered at all, and of the others only the tools that
//! `includeTools`/`excludeTools` allow (`docs/configuration.md`, "The `mcpx` block"),
//! and neither a tool nor a prompt that pinning holds for the user's review
//! ([`crate::pins`], as [`crate::daemon::Daemon::holds`] gives them). A caller on a
//! profile (`docs/configuration.md`, "Profiles") is offered only the profile's servers,
//! and of those only the tools it names, as `includeTools` would narrow them.
//!
//! Every path that lists or reaches a server asks here, never its entry's options:
//! the control API's handlers (the CLI), and the MCP endpoint's aggregate `/mcp`,
//! passthrough `/mcp/<server>` (`mcpx serve --server`) and discovery mode
//! (`mcpx serve --discover`). A new path (code mode, say) must too. Listings keep what
//! [`offered`], [`tool_offered`] and [`prompt_offered`] keep; a call is refused with
//! [`check_tool`]'s (or [`check_prompt`]'s) error, kind `config` for an untrusted or
//! disabled server, `unknown_tool` for a tool left out and `held` for one held,
//! which an MCP client gets as JSON-RPC error -32602 with the same message
//! ([`rpc_refusal`]).

use mcpx_proto::Message;
use mcpx_proto::mcp::error_code;
use serde_json::Value;

use crate::config::{Client, ResolvedConfig, ServerEntry};
use crate::pins::{Holds, Kind};

/// The servers of `config` that are offered: every one trusted and not `disabled`, in
/// name order.
pub fn offered(config: &ResolvedConfig) -> impl Iterator<Item = &ServerEntry> {
    config.servers.values().filter(|e| server_offered(e))
}

/// The servers of `config` left out because their project file's entry is not trusted,
/// in name order (for the one log line per file of an MCP listing).
pub fn untrusted(config: &ResolvedConfig) -> impl Iterator<Item = &ServerEntry> {
    config.servers.values().filter(|e| !server_trusted(e))
}

/// Whether `entry` is offered: it is trusted, not `disabled`, and in the caller's
/// profile if it has one. [`check_server`] says why not.
pub fn server_offered(entry: &ServerEntry) -> bool {
    server_trusted(entry) && !entry.options.disabled && in_profile(entry)
}

/// Whether the caller's profile, if any, holds `entry`: what `mcpx ls` lists of a
/// caller on a profile.
pub fn in_profile(entry: &ServerEntry) -> bool {
    entry.profile.as_ref().is_none_or(|p| p.tools.is_some())
}

/// Whether the caller's profile, if any, holds the tool `name` of `entry`.
fn tool_in_profile(entry: &ServerEntry, name: &str) -> bool {
    entry.profile.as_ref().is_none_or(|p| p.tools.as_ref().is_some_and(|t| t.allows(name)))
}

/// The refusal of what the caller's profile leaves out: `tool` of `entry`, or the whole
/// server (`None`), naming the profile and its file.
fn outside_profile(entry: &ServerEntry, tool: Option<&str>) -> Refusal {
    let (name, file) =
        entry.profile.as_ref().map(|p| (p.name.as_str(), p.source.display().to_string())).unwrap_or_default();
    let what = match tool {
        Some(tool) => format!("tool `{tool}` of server `{}`", entry.name),
        None => format!("server `{}`", entry.name),
    };
    Refusal {
        why: Why::ToolLeftOut,
        message: format!("{what} is excluded by profile `{name}` in {file} (it offers only what the profile names)"),
    }
}

/// Why the policy refused a server or a tool: its own type, which the control API
/// turns into an `ApiError` (`config`, or `unknown_tool` for a tool left out) and the
/// MCP endpoint into a JSON-RPC error ([`rpc_refusal`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// What was refused.
    pub why: Why,
    /// One line that names the file that says so and what to do.
    pub message: String,
}

/// What a [`Refusal`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// A project file's entry the user has not trusted.
    Untrusted,
    /// A `disabled` server.
    Disabled,
    /// A tool `includeTools`/`excludeTools` leave out.
    ToolLeftOut,
    /// A tool or prompt held by pinning until the user reviews it.
    Held,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Whether `entry` may run: it is not the entry of a project file that the user has not
/// trusted as written. Nothing of an untrusted entry is expanded or started.
pub fn server_trusted(entry: &ServerEntry) -> bool {
    entry.trusted
}

/// Whether `entry` may run ([`server_trusted`]): what every expansion and start asks
/// first (`Targets::target`).
///
/// Errors: [`Why::Untrusted`], naming the file and telling an agent to leave the
/// decision to the user.
pub fn check_trusted(entry: &ServerEntry) -> Result<(), Refusal> {
    if server_trusted(entry) {
        return Ok(());
    }
    let dir = crate::config::project_dir(&entry.source);
    Err(Refusal {
        why: Why::Untrusted,
        message: format!(
            "server `{}` is defined in {}, a project file whose entry is not trusted, so it does not run; \
             ask the user to review the file and run `mcpx trust` in {} (this is for the user to decide: \
             do not run `mcpx trust` yourself)",
            entry.name,
            entry.source.display(),
            dir.display()
        ),
    })
}

/// Whether `entry` is offered.
///
/// Errors: [`check_trusted`]'s, or [`Why::Disabled`], naming the file that says so.
pub fn check_server(entry: &ServerEntry) -> Result<(), Refusal> {
    check_trusted(entry)?;
    if server_offered(entry) {
        return Ok(());
    }
    // Another client's own setting is read as `mcpx.disabled` (config/dialect.rs): name
    // the key the file has.
    let key = match entry.client {
        Some(Client::Codex) => "set `enabled = true` in its table (or remove `disabled` from its `mcpx` block)",
        Some(_) => "remove `disabled` from the entry (or from its `mcpx` block)",
        None => "remove `disabled` from its `mcpx` block",
    };
    if entry.options.disabled {
        return Err(Refusal {
            why: Why::Disabled,
            message: format!("server `{}` is disabled in {}; {key} to use it", entry.name, entry.source.display()),
        });
    }
    Err(outside_profile(entry, None))
}

/// Whether the tool `tool` of `entry`, whose holds are `holds`, may be called or
/// described.
///
/// Errors: those of [`check_server`]; [`Why::ToolLeftOut`] when
/// `includeTools`/`excludeTools` leave the tool out, naming the file that says so;
/// [`Why::Held`] when pinning holds it ([`held`]).
pub fn check_tool(entry: &ServerEntry, holds: &Holds, tool: &str) -> Result<(), Refusal> {
    if !in_profile(entry) {
        return Err(outside_profile(entry, Some(tool)));
    }
    check_server(entry)?;
    if !tool_in_profile(entry, tool) {
        return Err(outside_profile(entry, Some(tool)));
    }
    if !entry.options.tool_allowed(tool) {
        return Err(Refusal {
            why: Why::ToolLeftOut,
            message: format!(
                "tool `{tool}` of server `{}` is excluded by includeTools/excludeTools in {}",
                entry.name,
                entry.source.display()
            ),
        });
    }
    match holds.holds(Kind::Tool, tool) {
        true => Err(held(entry, Kind::Tool, tool)),
        false => Ok(()),
    }
}

/// Whether the prompt `prompt` of `entry`, whose holds are `holds`, may be got.
///
/// Errors: those of [`check_server`]; [`Why::Held`] when pinning holds it.
pub fn check_prompt(entry: &ServerEntry, holds: &Holds, prompt: &str) -> Result<(), Refusal> {
    check_server(entry)?;
    match holds.holds(Kind::Prompt, prompt) {
        true => Err(held(entry, Kind::Prompt, prompt)),
        false => Ok(()),
    }
}

/// The refusal of `name`, a `kind` of `entry` that pinning holds: it names the server
/// and the item, and leaves the review to the user.
pub fn held(entry: &ServerEntry, kind: Kind, name: &str) -> Refusal {
    let server = &entry.name;
    Refusal {
        why: Why::Held,
        message: format!(
            "{} `{name}` of server `{server}` is held: its definition is new or changed since the user approved \
             the server's, so no model sees it until the user reviews it with `mcpx pins review {server}` \
             (this is for the user to decide: do not run `mcpx pins review` yourself)",
            kind.as_str()
        ),
    }
}

/// Whether a listing of `entry`'s tools shows the tool `name`: it is in `includeTools`
/// when that is set, not in `excludeTools` (names match exactly), and not held
/// (`holds`). Whether the server itself is offered is [`offered`]'s and
/// [`check_server`]'s question.
pub fn tool_offered(entry: &ServerEntry, holds: &Holds, name: &str) -> bool {
    entry.options.tool_allowed(name) && tool_in_profile(entry, name) && !holds.holds(Kind::Tool, name)
}

/// What decides which of `entry`'s tools [`tool_offered`] keeps, but for the holds: its
/// `includeTools`, `excludeTools` and the caller's profile, as text. Equal for two entries
/// whose tools are filtered alike (the search index's key).
pub fn tool_filters(entry: &ServerEntry) -> String {
    format!("{:?} {:?} {:?}", entry.options.include_tools, entry.options.exclude_tools, entry.profile)
}

/// Whether a listing of a server's prompts shows the prompt `name`: it is not held.
pub fn prompt_offered(holds: &Holds, name: &str) -> bool {
    !holds.holds(Kind::Prompt, name)
}

/// A server's own `tools/list` or `prompts/list` response (`kind`), passed through to
/// an MCP client, without the items [`tool_offered`] or [`prompt_offered`] leaves out.
/// When nothing is left out, the response is returned as it came, byte for byte; so
/// is an error response.
pub fn filter_list_response(entry: &ServerEntry, holds: &Holds, kind: Kind, response: Message) -> Message {
    let narrowed = entry.options.include_tools.is_some()
        || !entry.options.exclude_tools.is_empty()
        || entry.profile.as_ref().is_some_and(|p| !matches!(p.tools, Some(crate::config::Tools::All)));
    let (field, any) = match kind {
        Kind::Tool => ("tools", narrowed || !holds.tools.is_empty()),
        Kind::Prompt => ("prompts", !holds.prompts.is_empty()),
    };
    if !any {
        return response;
    }
    let Ok(mut value) = serde_json::from_str::<Value>(response.as_str()) else { return response };
    let Some(items) = value["result"][field].as_array_mut() else { return response };
    let before = items.len();
    items.retain(|t| {
        let name = t["name"].as_str().unwrap_or_default();
        match kind {
            Kind::Tool => tool_offered(entry, holds, name),
            Kind::Prompt => prompt_offered(holds, name),
        }
    });
    if items.len() == before {
        return response;
    }
    let id = response.id().unwrap_or("null").to_owned();
    Message::response(&id, &value["result"].to_string())
}

/// The JSON-RPC error answering request `id` that the policy refused with `refusal`:
/// -32602 (invalid params), with the message the CLI prints.
pub fn rpc_refusal(id: &str, refusal: &Refusal) -> Message {
    Message::error_response(id, error_code::INVALID_PARAMS, &refusal.message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ServerOptions, TransportSpec};

    fn entry(options: ServerOptions) -> ServerEntry {
        let transport =
            TransportSpec::Stdio { command: "fake".into(), args: Vec::new(), env: Default::default(), cwd: None };
        ServerEntry { options, ..crate::testing::entry("fake", transport) }
    }

    #[test]
    fn a_disabled_server_names_the_key_its_file_has() {
        let off = ServerOptions { disabled: true, ..ServerOptions::default() };
        let message = |client| check_server(&ServerEntry { client, ..entry(off.clone()) }).unwrap_err().message;
        assert!(message(None).contains("remove `disabled` from its `mcpx` block"));
        assert!(message(Some(Client::Codex)).contains("set `enabled = true` in its table"));
        assert!(message(Some(Client::Windsurf)).contains("remove `disabled` from the entry"));
    }

    const LISTING: &str =
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"a","x":1},{"name":"b"}],"nextCursor":"n"}}"#;

    #[test]
    fn a_listing_loses_only_what_the_policy_leaves_out() {
        let open = entry(ServerOptions::default());
        let none = Holds::default();
        let same = filter_list_response(&open, &none, Kind::Tool, Message::parse(LISTING).unwrap());
        assert_eq!(same.as_str(), LISTING, "nothing left out: byte for byte");
        let narrowed = entry(ServerOptions { exclude_tools: vec!["b".into()], ..ServerOptions::default() });
        let filtered = filter_list_response(&narrowed, &none, Kind::Tool, Message::parse(LISTING).unwrap());
        let v: Value = serde_json::from_str(filtered.as_str()).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["result"], serde_json::json!({ "tools": [{ "name": "a", "x": 1 }], "nextCursor": "n" }));
        let holds = Holds { tools: std::sync::Arc::new(["a".to_owned()].into()), ..Holds::default() };
        let filtered = filter_list_response(&open, &holds, Kind::Tool, Message::parse(LISTING).unwrap());
        let v: Value = serde_json::from_str(filtered.as_str()).unwrap();
        assert_eq!(v["result"]["tools"], serde_json::json!([{ "name": "b" }]), "a held tool is left out");
        let refusal = check_tool(&open, &holds, "a").unwrap_err();
        assert_eq!(refusal.why, Why::Held);
        assert_eq!(crate::api::ApiError::from(refusal.clone()).kind, crate::api::ErrorKind::Held);
        for words in ["tool `a` of server `fake` is held", "the user reviews it with `mcpx pins review fake`"] {
            assert!(refusal.message.contains(words), "{}", refusal.message);
        }
    }

    #[test]
    fn refusals_have_the_clis_kinds_and_the_rpc_code() {
        let off = entry(ServerOptions { disabled: true, ..ServerOptions::default() });
        let kind = |r: Refusal| crate::api::ApiError::from(r).kind;
        assert_eq!(check_tool(&off, &Holds::default(), "a").unwrap_err().why, Why::Disabled);
        assert_eq!(kind(check_tool(&off, &Holds::default(), "a").unwrap_err()), crate::api::ErrorKind::Config);
        let untrusted = ServerEntry { trusted: false, ..entry(ServerOptions::default()) };
        let refusal = check_tool(&untrusted, &Holds::default(), "a").unwrap_err();
        assert_eq!((refusal.why, kind(refusal.clone())), (Why::Untrusted, crate::api::ErrorKind::Config));
        assert!(refusal.message.contains("do not run `mcpx trust` yourself"), "{}", refusal.message);
        let only_a = entry(ServerOptions { include_tools: Some(vec!["a".into()]), ..ServerOptions::default() });
        assert!(check_tool(&only_a, &Holds::default(), "a").is_ok());
        let refusal = check_tool(&only_a, &Holds::default(), "b").unwrap_err();
        assert_eq!((refusal.why, kind(refusal.clone())), (Why::ToolLeftOut, crate::api::ErrorKind::UnknownTool));
        let answer: Value = serde_json::from_str(rpc_refusal("3", &refusal).as_str()).unwrap();
        assert_eq!(answer["error"]["code"], -32602);
        assert_eq!(answer["error"]["message"], refusal.message.as_str());
    }
}
