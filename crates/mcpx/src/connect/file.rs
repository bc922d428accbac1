//! One client's file, edited in its own format: JSON with comments (the syntax tree
//! `import` edits), Codex's TOML ([`super::codex`]) or YAML ([`super::yaml`]). Every edit
//! keeps the file's comments and layout and is checked by reading it back; one that cannot
//! be made safely is refused with the text to paste by hand.

use mcpx_daemon::config::{Client, Layout};
use serde_json::{Map, Value, json};

use super::{codex, yaml};
use crate::import::edit::{CopyError, Edited, add_entry, remove_entries};

/// Why an edit was not made; the file is left as it was.
#[derive(Debug)]
pub(super) enum Refusal {
    /// The file already has a server of that name (that is not mcpx).
    Clash,
    /// It cannot be edited safely: why, and the text to add by hand.
    Unsafe { why: String, paste: String },
}

/// The entry that runs `mcpx` (the binary at `mcpx`) with `args` (`serve`, and
/// `--profile NAME`) in `client`'s own shape, as its documentation writes a stdio server
/// (see `tests/fixtures/clients/README.md`).
pub(super) fn mcpx_entry(client: Client, mcpx: &str, args: &[String]) -> Map<String, Value> {
    let entry = match client {
        Client::Vscode | Client::Crush => json!({ "type": "stdio", "command": mcpx, "args": args }),
        Client::Opencode => {
            let command: Vec<&str> = std::iter::once(mcpx).chain(args.iter().map(String::as_str)).collect();
            json!({ "type": "local", "command": command, "enabled": true })
        }
        Client::CopilotCli => json!({ "type": "local", "command": mcpx, "args": args, "tools": ["*"] }),
        Client::Goose => json!({
            "name": "mcpx", "type": "stdio", "cmd": mcpx, "args": args, "enabled": true,
            "envs": {}, "timeout": 300, "description": "every MCP server mcpx holds",
        }),
        _ => json!({ "command": mcpx, "args": args }),
    };
    entry.as_object().cloned().unwrap_or_default()
}

/// `text` (`None`: no file yet) with `entry` added as `name` to the servers of `layout`.
///
/// Errors: [`Refusal::Clash`] when `name` is taken; [`Refusal::Unsafe`] when the file does
/// not parse, holds the wrong kind of value, or the edit would not read back as intended.
pub(super) fn add(
    text: Option<&str>,
    layout: Layout,
    name: &str,
    entry: &Map<String, Value>,
) -> Result<String, Refusal> {
    let unsafe_ = |why: String| Refusal::Unsafe { why, paste: paste(layout, name, entry) };
    let taken = |why: &str| why.contains("already");
    match layout {
        Layout::Json(key) => match add_entry(text, key, name, entry) {
            Ok(Edited { text: Some(new), .. }) => Ok(new),
            Ok(Edited { text: None, .. }) => Err(unsafe_("nothing would change".into())),
            Err(CopyError::Clash(_)) => Err(Refusal::Clash),
            Err(CopyError::Refused(r)) => Err(Refusal::Unsafe { why: r.reason, paste: r.paste }),
        },
        Layout::Toml(_) => codex::add(text.unwrap_or_default(), name, entry)
            .map_err(|why| if taken(&why) { Refusal::Clash } else { unsafe_(why) }),
        Layout::YamlMap(_) | Layout::YamlList(_) => yaml::add(text.unwrap_or_default(), layout, name, entry)
            .map_err(|why| if taken(&why) { Refusal::Clash } else { unsafe_(why) }),
    }
}

/// `text` without the servers of `layout` that `which` picks (by name and entry), and
/// their names; `None` when it has none.
///
/// Errors: why it cannot be edited safely.
pub(super) fn remove(
    text: &str,
    layout: Layout,
    which: impl Fn(&str, &Map<String, Value>) -> bool,
) -> Result<Option<(String, Vec<String>)>, String> {
    match layout {
        Layout::Json(key) => match remove_entries(text, key, which) {
            Ok(Edited { text: Some(new), present, .. }) => Ok(Some((new, present))),
            Ok(Edited { text: None, .. }) => Ok(None),
            Err(r) => Err(r.reason),
        },
        Layout::Toml(_) => codex::remove(text, which),
        Layout::YamlMap(_) | Layout::YamlList(_) => yaml::remove(text, layout, which),
    }
}

/// What to add by hand when the file cannot be edited: the entry under its key, in the
/// file's own format.
pub(super) fn paste(layout: Layout, name: &str, entry: &Map<String, Value>) -> String {
    let key = layout.key();
    match layout {
        Layout::Json(_) => {
            format!("\"{key}\": {}", serde_json::to_string_pretty(&json!({ name: entry })).unwrap_or_default())
        }
        Layout::Toml(_) => {
            let body = codex::add("", name, entry).unwrap_or_default();
            body.trim_end().to_owned()
        }
        Layout::YamlMap(_) | Layout::YamlList(_) => yaml::snippet(layout, name, entry),
    }
}
