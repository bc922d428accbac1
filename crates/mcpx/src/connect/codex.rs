//! Codex's `config.toml` (`[mcp_servers.NAME]` tables), edited for `mcpx connect` and
//! `mcpx disconnect` with the toml-rs project's format-preserving editor: comments,
//! order and layout stay as they were. Each edit is checked by reading the new text
//! again: its value must be the old one with exactly the change made.

use toml_edit::{Array, DocumentMut, Item, Table, value};

/// `text` (empty: no file yet) with `[mcp_servers.<name>]` running `command` with `args`.
///
/// Errors: why it cannot be edited safely (it does not parse, `mcp_servers` is not a
/// table, `name` is taken, or the edit would not read back as intended).
pub fn add(text: &str, name: &str, command: &str, args: &[&str]) -> Result<String, String> {
    let mut doc: DocumentMut = text.parse().map_err(|e| format!("it does not parse: {e}"))?;
    let servers = doc.entry("mcp_servers").or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    let servers = servers.as_table_mut().ok_or("its `mcp_servers` is not a table")?;
    if servers.contains_key(name) {
        return Err(format!("it has a server named `{name}` already"));
    }
    let mut entry = Table::new();
    entry.insert("command", value(command));
    entry.insert("args", value(args.iter().copied().collect::<Array>()));
    servers.insert(name, Item::Table(entry));
    let new = doc.to_string();
    let mut expected = parsed(text)?;
    let servers = expected.entry("mcp_servers").or_insert_with(|| toml::Value::Table(Default::default()));
    if let toml::Value::Table(servers) = servers {
        let args = args.iter().map(|a| toml::Value::String((*a).to_owned())).collect();
        let entry = [
            ("command".to_owned(), toml::Value::String(command.to_owned())),
            ("args".to_owned(), toml::Value::Array(args)),
        ];
        servers.insert(name.to_owned(), toml::Value::Table(entry.into_iter().collect()));
    }
    check(&new, &expected)?;
    Ok(new)
}

/// `text` without the `[mcp_servers.*]` tables that `which` picks (given the table as a
/// JSON object), and their names; `None` when it has none.
///
/// Errors: it does not parse, or the edit would not read back as intended.
pub fn remove(
    text: &str,
    which: impl Fn(&serde_json::Map<String, serde_json::Value>) -> bool,
) -> Result<Option<(String, Vec<String>)>, String> {
    let mut doc: DocumentMut = text.parse().map_err(|e| format!("it does not parse: {e}"))?;
    let mut expected = parsed(text)?;
    let Some(toml::Value::Table(servers_before)) = expected.get("mcp_servers").cloned() else { return Ok(None) };
    let names: Vec<String> = servers_before
        .iter()
        .filter(|(_, v)| serde_json::to_value(v).ok().and_then(|v| v.as_object().cloned()).is_some_and(|m| which(&m)))
        .map(|(k, _)| k.clone())
        .collect();
    if names.is_empty() {
        return Ok(None);
    }
    let servers =
        doc.get_mut("mcp_servers").and_then(Item::as_table_like_mut).ok_or("its `mcp_servers` is not a table")?;
    for name in &names {
        servers.remove(name);
    }
    if let Some(toml::Value::Table(servers)) = expected.get_mut("mcp_servers") {
        for name in &names {
            servers.remove(name);
        }
    }
    let new = doc.to_string();
    check(&new, &expected)?;
    Ok(Some((new, names)))
}

/// `text` read as a table. Errors: it does not parse.
fn parsed(text: &str) -> Result<toml::Table, String> {
    toml::from_str(text).map_err(|e| format!("it does not parse: {e}"))
}

/// Errors unless `new` reads back as `expected`.
fn check(new: &str, expected: &toml::Table) -> Result<(), String> {
    match parsed(new) {
        Ok(got) if &got == expected => Ok(()),
        _ => Err("the edited text would not read back as intended".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CODEX: &str = "# my codex\nmodel = \"o4\" # the model\n\n[mcp_servers.a] # mine\ncommand = \"x\"\n";

    #[test]
    fn mcpx_goes_in_and_out_and_the_rest_stays_as_written() {
        let added = add(CODEX, "mcpx", "/bin/mcpx", &["serve"]).unwrap();
        assert!(added.starts_with(CODEX), "{added}");
        assert!(added.contains("[mcp_servers.mcpx]\ncommand = \"/bin/mcpx\"\nargs = [\"serve\"]"), "{added}");
        assert_eq!(add(&added, "mcpx", "/bin/mcpx", &["serve"]).unwrap_err(), "it has a server named `mcpx` already");
        let runs_mcpx = |m: &serde_json::Map<String, serde_json::Value>| m["command"] == "/bin/mcpx";
        let (removed, names) = remove(&added, runs_mcpx).unwrap().unwrap();
        assert_eq!((removed.as_str(), names), (CODEX, vec!["mcpx".to_owned()]), "back byte for byte");
        assert_eq!(remove(CODEX, runs_mcpx).unwrap(), None);
        let fresh = add("", "mcpx", "mcpx", &["serve"]).unwrap();
        assert_eq!(fresh, "[mcp_servers.mcpx]\ncommand = \"mcpx\"\nargs = [\"serve\"]\n");
        assert!(add("model = [", "mcpx", "mcpx", &["serve"]).unwrap_err().starts_with("it does not parse"));
        assert!(add("mcp_servers = 3", "mcpx", "mcpx", &["serve"]).unwrap_err().contains("not a table"));
    }
}
