//! Edits to the text of an mcpx config file that keep its comments and formatting (for
//! `mcpx import`): adding names to `imports` and entries to `mcpServers`.
//!
//! The text is parsed into jsonc-parser's concrete syntax tree, which keeps every comment,
//! blank line and trailing comma, edited there and printed back. Each edit is then checked:
//! the new text is parsed again and its value must be exactly the old value with the change
//! made, so an edit that would lose or alter anything is refused rather than written. A
//! refusal carries the lines the user can paste by hand.

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstObject, CstRootNode};
use serde_json::{Map, Value};

/// The outcome of an edit that can be made.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Edited {
    /// The whole new text; `None` when nothing needs to change (so nothing is written).
    pub text: Option<String>,
    /// The names added: clients to `imports`, or servers to `mcpServers`.
    pub added: Vec<String>,
    /// The names that were there already: clients already in `imports` (left as they are),
    /// or servers replaced because the caller forced it.
    pub present: Vec<String>,
}

/// Why the text cannot be edited safely (it does not parse, a key holds the wrong kind of
/// value, or the edited text would not read back as intended); it is left as it was.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Refused {
    /// What is wrong, lowercase, no trailing period.
    pub reason: String,
    /// The lines to paste into the file's top-level object by hand, JSON.
    pub paste: String,
}

/// Why copied entries are not added; the text is then left as it was.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CopyError {
    /// See [`Refused`].
    Refused(Refused),
    /// Server names the file already defines (under `mcpServers` or `servers`), which
    /// copying would replace; the caller decides whether to force it.
    Clash(Vec<String>),
}

impl From<Refused> for CopyError {
    fn from(refused: Refused) -> Self {
        CopyError::Refused(refused)
    }
}

/// The client names in the top-level `imports` of `text` (`None`: no file, no names).
/// Errors: the text does not parse, or `imports` is not an array.
pub(crate) fn imports_of(text: Option<&str>) -> Result<Vec<String>, String> {
    match Document::parse(text)?.before.get("imports") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect()),
        Some(_) => Err("its `imports` is not an array of client names".into()),
    }
}

/// Adds `clients` (names as `mcpx import` takes them) to the top-level `imports` array of
/// `text` (`None`: no file yet), creating the array, or the whole file, when missing. Names
/// already there are not added again.
///
/// Errors: [`Refused`] when the text does not parse as JSONC (comments and
/// trailing commas allowed, nothing else beyond JSON), its top level is not an object,
/// `imports` is not an array, or the edit would not read back as intended.
pub(crate) fn add_imports(text: Option<&str>, clients: &[&str]) -> Result<Edited, Refused> {
    let paste_with = |existing: &[String]| {
        let mut all: Vec<String> = existing.to_vec();
        all.extend(clients.iter().map(|c| (*c).to_owned()).filter(|c| !existing.contains(c)));
        let quoted: Vec<String> = all.iter().map(|c| Value::String(c.clone()).to_string()).collect();
        format!("\"imports\": [{}]", quoted.join(", "))
    };
    let doc = Document::parse(text).map_err(|reason| Refused { reason, paste: paste_with(&[]) })?;
    let existing: Vec<String> = match doc.before.get("imports") {
        // `null` means absent, as everywhere in the config.
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
        Some(_) => {
            return Err(Refused {
                reason: "its `imports` is not an array of client names".into(),
                paste: paste_with(&[]),
            });
        }
    };
    let (present, added): (Vec<String>, Vec<String>) = dedup(clients).into_iter().partition(|c| existing.contains(c));
    if added.is_empty() {
        return Ok(Edited { text: None, added, present });
    }
    let refuse = |reason: String| Refused { reason, paste: paste_with(&existing) };
    let array = match doc.before.get("imports") {
        Some(Value::Null) => doc.object.array_value_or_set("imports"),
        _ => {
            doc.object.array_value_or_create("imports").ok_or_else(|| refuse("its `imports` is not an array".into()))?
        }
    };
    for name in &added {
        array.append(CstInputValue::String(name.clone()));
    }
    let mut expected = doc.before.clone();
    let mut list: Vec<Value> = match expected.remove("imports") {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    };
    list.extend(added.iter().cloned().map(Value::String));
    expected.insert("imports".into(), Value::Array(list));
    let text = doc.finish(&expected).map_err(refuse)?;
    Ok(Edited { text: Some(text), added, present })
}

/// Adds `entries` (server name and entry, in mcpx's shape) to the top-level `mcpServers`
/// object of `text` (`None`: no file yet), creating it, or the whole file, when missing.
///
/// A name the file already defines, under `mcpServers` or VS Code's `servers`, is a clash:
/// [`CopyError::Clash`] lists every such name, unless `force`, which replaces the entry
/// under `mcpServers` (where one there wins over `servers`). Other errors:
/// [`CopyError::Refused`] as for [`add_imports`], or when `mcpServers` or `servers` is not
/// an object.
pub(crate) fn add_servers(
    text: Option<&str>,
    entries: &[(String, Map<String, Value>)],
    force: bool,
) -> Result<Edited, CopyError> {
    let paste = {
        let all: Map<String, Value> = entries.iter().map(|(n, e)| (n.clone(), Value::Object(e.clone()))).collect();
        let pretty = serde_json::to_string_pretty(&all).unwrap_or_default();
        format!("\"mcpServers\": {pretty}")
    };
    let refuse = |reason: String| CopyError::Refused(Refused { reason, paste: paste.clone() });
    let doc = Document::parse(text).map_err(refuse)?;
    let defined = |key: &str| match doc.before.get(key) {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(map)) => Ok(map.clone()),
        Some(_) => Err(refuse(format!("its `{key}` is not an object"))),
    };
    let (own, vscode) = (defined("mcpServers")?, defined("servers")?);
    let clashes: Vec<String> =
        entries.iter().map(|(n, _)| n.clone()).filter(|n| own.contains_key(n) || vscode.contains_key(n)).collect();
    if !clashes.is_empty() && !force {
        return Err(CopyError::Clash(clashes));
    }
    let servers = match doc.before.get("mcpServers") {
        Some(Value::Null) => doc.object.object_value_or_set("mcpServers"),
        _ => doc
            .object
            .object_value_or_create("mcpServers")
            .ok_or_else(|| refuse("its `mcpServers` is not an object".into()))?,
    };
    let mut expected_servers = own;
    for (name, entry) in entries {
        let value = entry_input(entry);
        match servers.get(name) {
            Some(prop) => prop.set_value(value),
            None => {
                servers.append(name, value);
            }
        }
        expected_servers.insert(name.clone(), Value::Object(entry.clone()));
    }
    let mut expected = doc.before.clone();
    expected.insert("mcpServers".into(), Value::Object(expected_servers));
    let text = doc.finish(&expected).map_err(refuse)?;
    let (present, added) = entries.iter().map(|(n, _)| n.clone()).partition(|n| clashes.contains(n));
    Ok(Edited { text: Some(text), added, present })
}

/// Adds `entry` as `name` to the top-level object `key` of a client's file (`mcpServers`,
/// or VS Code's `servers`), creating it, or the whole file, when missing: how `mcpx
/// connect` puts mcpx into a client, keeping the file's comments and layout.
///
/// Errors: [`CopyError::Clash`] when `key` already holds `name`; [`CopyError::Refused`]
/// as for [`add_imports`], or when `key` is not an object.
pub(crate) fn add_entry(
    text: Option<&str>,
    key: &str,
    name: &str,
    entry: &Map<String, Value>,
) -> Result<Edited, CopyError> {
    let paste =
        format!("\"{key}\": {}", serde_json::to_string_pretty(&serde_json::json!({ name: entry })).unwrap_or_default());
    let refuse = |reason: String| CopyError::Refused(Refused { reason, paste: paste.clone() });
    let doc = Document::parse(text).map_err(refuse)?;
    let mut servers_before = match doc.before.get(key) {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(_) => return Err(refuse(format!("its `{key}` is not an object"))),
    };
    if servers_before.contains_key(name) {
        return Err(CopyError::Clash(vec![name.to_owned()]));
    }
    let servers = match doc.before.get(key) {
        Some(Value::Null) => doc.object.object_value_or_set(key),
        _ => doc.object.object_value_or_create(key).ok_or_else(|| refuse(format!("its `{key}` is not an object")))?,
    };
    servers.append(name, entry_input(entry));
    servers_before.insert(name.to_owned(), Value::Object(entry.clone()));
    let mut expected = doc.before.clone();
    expected.insert(key.to_owned(), Value::Object(servers_before));
    let text = doc.finish(&expected).map_err(refuse)?;
    Ok(Edited { text: Some(text), added: vec![name.to_owned()], present: Vec::new() })
}

/// Removes the entries of the top-level object `key` of `text` that `which` picks (by
/// name and entry),
/// keeping the rest of the file as it was: how `mcpx disconnect` takes mcpx out of a
/// client. The names removed are [`Edited::present`].
///
/// Errors: [`Refused`] when the text does not parse, or the edit would not read back as
/// intended.
pub(crate) fn remove_entries(
    text: &str,
    key: &str,
    which: impl Fn(&str, &Map<String, Value>) -> bool,
) -> Result<Edited, Refused> {
    let refuse = |reason: String| Refused { reason, paste: format!("remove those entries from `{key}` by hand") };
    let doc = Document::parse(Some(text)).map_err(refuse)?;
    let Some(Value::Object(mut servers_before)) = doc.before.get(key).cloned() else {
        return Ok(Edited { text: None, added: Vec::new(), present: Vec::new() });
    };
    let names: Vec<String> = servers_before
        .iter()
        .filter(|(k, v)| v.as_object().is_some_and(|m| which(k, m)))
        .map(|(k, _)| k.clone())
        .collect();
    let Some(servers) = doc.object.object_value(key) else {
        return Ok(Edited { text: None, added: Vec::new(), present: Vec::new() });
    };
    let mut removed = Vec::new();
    for name in names {
        if let Some(prop) = servers.get(&name) {
            prop.remove();
            servers_before.remove(&name);
            removed.push(name);
        }
    }
    if removed.is_empty() {
        return Ok(Edited { text: None, added: Vec::new(), present: Vec::new() });
    }
    let mut expected = doc.before.clone();
    expected.insert(key.to_owned(), Value::Object(servers_before));
    let text = doc.finish(&expected).map_err(refuse)?;
    Ok(Edited { text: Some(text), added: Vec::new(), present: removed })
}

/// A parsed file being edited.
struct Document {
    root: CstRootNode,
    /// The top-level object, in the tree (edits go here).
    object: CstObject,
    /// The top-level object's value before any edit.
    before: Map<String, Value>,
    /// A byte-order mark the text started with, put back on output.
    bom: &'static str,
}

impl Document {
    /// Parses `text` (`None` or blank: a new, empty object). Errors: why it cannot be
    /// edited, naming line and column for a syntax error.
    fn parse(text: Option<&str>) -> Result<Document, String> {
        let text = text.unwrap_or_default();
        let (bom, body) = match text.strip_prefix('\u{feff}') {
            Some(rest) => ("\u{feff}", rest),
            None => ("", text),
        };
        let root = CstRootNode::parse(body, &options()).map_err(|e| {
            format!("it does not parse (line {}, column {}: {})", e.line_display(), e.column_display(), e.kind())
        })?;
        let object = match root.value() {
            None if body.trim().is_empty() => {
                root.clear_children();
                root.object_value_or_set()
            }
            None => return Err("it holds comments but no object".into()),
            Some(value) => value.as_object().ok_or("its top level is not an object")?,
        };
        let before = match object.to_serde_value() {
            Some(Value::Object(map)) => map,
            _ => return Err("its values cannot all be read".into()),
        };
        Ok(Document { root, object, before, bom })
    }

    /// The edited text, once it is checked to read back as `expected`. Errors: it does not.
    fn finish(self, expected: &Map<String, Value>) -> Result<String, String> {
        let mut text = self.root.to_string();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        let reread = CstRootNode::parse(&text, &options()).ok().and_then(|r| r.to_serde_value());
        if reread.as_ref().and_then(Value::as_object) != Some(expected) {
            return Err("the edited text would not read back as intended".into());
        }
        Ok(format!("{}{text}", self.bom))
    }
}

/// JSON with the two extensions mcpx accepts (comments and trailing commas), and no
/// others: a file that needs more would not load in mcpx, and is not edited.
fn options() -> ParseOptions {
    ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    }
}

/// A JSON value as the syntax tree takes it.
fn input(value: &Value) -> CstInputValue {
    match value {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(items) => CstInputValue::Array(items.iter().map(input).collect()),
        Value::Object(map) => CstInputValue::Object(map.iter().map(|(k, v)| (k.clone(), input(v))).collect()),
    }
}

/// A server entry as the syntax tree takes it, its keys in the order people write them
/// (what runs, then how, then mcpx's block), the others after them.
fn entry_input(entry: &Map<String, Value>) -> CstInputValue {
    CstInputValue::Object(ordered_keys(entry).into_iter().map(|k| (k.clone(), input(&entry[k]))).collect())
}

/// The keys of an entry in the order people write them: the name (of a list item), what
/// runs or where it is, then its settings, then the rest in name order, `mcpx` last.
pub(crate) fn ordered_keys(entry: &Map<String, Value>) -> Vec<&String> {
    const ORDER: [&str; 11] =
        ["name", "command", "cmd", "args", "env", "envs", "cwd", "url", "transport", "headers", "type"];
    let rank = |key: &str| match ORDER.iter().position(|k| *k == key) {
        Some(n) => n,
        None if key == "mcpx" => ORDER.len() + 1,
        None => ORDER.len(),
    };
    let mut keys: Vec<&String> = entry.keys().collect();
    // Stable: keys of one rank keep their (sorted) order.
    keys.sort_by_key(|k| rank(k));
    keys
}

/// `names` without repeats, in their first order.
fn dedup(names: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in names {
        if !out.iter().any(|n| n == name) {
            out.push((*name).to_owned());
        }
    }
    out
}

#[cfg(test)]
#[path = "edit_tests.rs"]
mod tests;
