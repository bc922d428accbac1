//! Codex's `config.toml` (`[mcp_servers.NAME]` tables), edited for `mcpx connect` and
//! `mcpx disconnect` with the toml-rs project's format-preserving editor: comments,
//! order and layout stay as they were. Each edit is checked by reading the new text
//! again: its value must be the old one with exactly the change made.

use serde_json::{Map, Value as Json};
use toml_edit::{Array, DocumentMut, InlineTable, Item, Table, Value};

/// `text` (empty: no file yet) with `[mcp_servers.<name>]` holding `entry` (a JSON object
/// whose values TOML can hold: no `null`).
///
/// Errors: why it cannot be edited safely (it does not parse, `mcp_servers` is not a
/// table, `name` is taken, a value is `null`, or the edit would not read back as intended).
pub fn add(text: &str, name: &str, entry: &Map<String, Json>) -> Result<String, String> {
    let mut doc: DocumentMut = text.parse().map_err(|e| format!("it does not parse: {e}"))?;
    let servers = doc.entry("mcp_servers").or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    let inline = servers.is_inline_table();
    let servers = servers.as_table_like_mut().ok_or("its `mcp_servers` is not a table")?;
    if servers.contains_key(name) {
        return Err(format!("it has a server named `{name}` already"));
    }
    let keys = crate::import::edit::ordered_keys(entry);
    if !inline {
        let mut table = Table::new();
        for key in keys {
            table.insert(key, Item::Value(value(&entry[key])?));
        }
        servers.insert(name, Item::Table(table));
    } else {
        // `mcp_servers = { ... }`: an inline table takes inline tables.
        let mut table = InlineTable::new();
        for key in keys {
            table.insert(key, value(&entry[key])?);
        }
        servers.insert(name, Item::Value(Value::InlineTable(table)));
    }
    let new = doc.to_string();
    let mut expected = parsed(text)?;
    let servers = expected.entry("mcp_servers").or_insert_with(|| toml::Value::Table(Default::default()));
    if let toml::Value::Table(servers) = servers {
        let entry = toml::Value::try_from(entry).map_err(|e| format!("the entry cannot be TOML: {e}"))?;
        servers.insert(name.to_owned(), entry);
    }
    check(&new, &expected)?;
    Ok(new)
}

/// A JSON value as a TOML one (objects inline). Errors: `null`, which TOML has not.
fn value(v: &Json) -> Result<Value, String> {
    Ok(match v {
        Json::Null => return Err("TOML has no null".into()),
        Json::Bool(b) => Value::from(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::from(i),
            None => Value::from(n.as_f64().unwrap_or_default()),
        },
        Json::String(s) => Value::from(s.as_str()),
        Json::Array(items) => Value::Array(items.iter().map(value).collect::<Result<Array, _>>()?),
        Json::Object(map) => {
            let mut table = InlineTable::new();
            for (k, v) in map {
                table.insert(k, value(v)?);
            }
            Value::InlineTable(table)
        }
    })
}

/// `text` without the `[mcp_servers.*]` tables that `which` picks (given the table as a
/// JSON object), and their names; `None` when it has none.
///
/// Errors: it does not parse, or the edit would not read back as intended.
pub fn remove(
    text: &str,
    which: impl Fn(&str, &Map<String, Json>) -> bool,
) -> Result<Option<(String, Vec<String>)>, String> {
    let mut doc: DocumentMut = text.parse().map_err(|e| format!("it does not parse: {e}"))?;
    let mut expected = parsed(text)?;
    let Some(toml::Value::Table(servers_before)) = expected.get("mcp_servers").cloned() else { return Ok(None) };
    let names: Vec<String> = servers_before
        .iter()
        .filter(|(k, v)| {
            serde_json::to_value(v).ok().and_then(|v| v.as_object().cloned()).is_some_and(|m| which(k, &m))
        })
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
    // An `[mcp_servers]` that was only implied by its servers' headers goes with them.
    let implied = servers.is_empty() && doc.get("mcp_servers").and_then(Item::as_table).is_some_and(Table::is_implicit);
    if implied {
        doc.remove("mcp_servers");
        expected.remove("mcp_servers");
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

    fn entry(command: &str) -> Map<String, Json> {
        serde_json::json!({"command": command, "args": ["serve"]}).as_object().cloned().unwrap()
    }

    #[test]
    fn mcpx_goes_in_and_out_and_the_rest_stays_as_written() {
        let added = add(CODEX, "mcpx", &entry("/bin/mcpx")).unwrap();
        assert!(added.starts_with(CODEX), "{added}");
        assert!(added.contains("[mcp_servers.mcpx]\ncommand = \"/bin/mcpx\"\nargs = [\"serve\"]"), "{added}");
        assert_eq!(add(&added, "mcpx", &entry("/bin/mcpx")).unwrap_err(), "it has a server named `mcpx` already");
        let runs_mcpx = |_: &str, m: &Map<String, Json>| m["command"] == "/bin/mcpx";
        let (removed, names) = remove(&added, runs_mcpx).unwrap().unwrap();
        assert_eq!((removed.as_str(), names), (CODEX, vec!["mcpx".to_owned()]), "back byte for byte");
        assert_eq!(remove(CODEX, runs_mcpx).unwrap(), None);
        let fresh = add("", "mcpx", &entry("mcpx")).unwrap();
        assert_eq!(fresh, "[mcp_servers.mcpx]\ncommand = \"mcpx\"\nargs = [\"serve\"]\n");
        assert_eq!(remove(&fresh, runs_mcpx).unwrap(), None, "not /bin/mcpx");
        let any = |_: &str, _: &Map<String, Json>| true;
        assert_eq!(remove(&fresh, any).unwrap().unwrap().0, "", "an implied [mcp_servers] goes with its last server");
        assert!(add("model = [", "mcpx", &entry("mcpx")).unwrap_err().starts_with("it does not parse"));
        assert!(add("mcp_servers = 3", "mcpx", &entry("mcpx")).unwrap_err().contains("not a table"));
        let inline = "mcp_servers = { a = { command = \"echo\" } }\n";
        let added = add(inline, "mcpx", &entry("/bin/mcpx")).unwrap();
        assert!(added.contains("mcpx = { command = \"/bin/mcpx\", args = [\"serve\"] } }"), "inline: {added}");
        let (removed, _) = remove(&added, runs_mcpx).unwrap().unwrap();
        assert_eq!(parsed(&removed).unwrap(), parsed(inline).unwrap(), "{removed}");
    }
}
