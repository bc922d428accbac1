//! YAML files (Goose's `extensions` mapping, Continue's `mcpServers` list), edited for
//! `mcpx connect` and `mcpx disconnect` through yaml-edit's lossless syntax tree: comments,
//! order and layout stay as they were. Each edit is checked by reading the new text again
//! (serde_norway): its value must be the old one with exactly the change made, or nothing
//! is written.

use std::str::FromStr;

use mcpx_daemon::config::{Layout, yaml_value};
use serde_json::{Map, Value};
use yaml_edit::Document;

/// `text` (blank: no file yet) with the server `name` added to the servers of `layout`
/// (a [`Layout::YamlMap`] or [`Layout::YamlList`]; a list item gets `name` as its first
/// key), creating the key when missing.
///
/// Errors: why it cannot be edited safely (it does not parse, its top level is not a
/// mapping, the key holds the wrong kind of value, `name` is taken, or the edit would not
/// read back as intended).
pub fn add(text: &str, layout: Layout, name: &str, entry: &Map<String, Value>) -> Result<String, String> {
    let (before, doc) = parse(text)?;
    let root = doc.as_mapping().ok_or("its top level is not a mapping")?;
    let key = layout.key();
    let mut expected = before.clone();
    let servers = expected.entry(key).or_insert(Value::Null);
    match layout {
        Layout::YamlList(_) => {
            let mut item = Map::from_iter([("name".to_owned(), Value::from(name))]);
            item.extend(entry.clone().into_iter().filter(|(k, _)| k != "name"));
            let items = match servers {
                Value::Null => {
                    *servers = Value::Array(Vec::new());
                    servers.as_array_mut().ok_or("unreachable")?
                }
                Value::Array(items) => items,
                _ => return Err(format!("its `{key}` is not a list")),
            };
            if items.iter().any(|i| i.get("name").and_then(Value::as_str) == Some(name)) {
                return Err(format!("it has a server named `{name}` already"));
            }
            items.push(Value::Object(item.clone()));
            match root.get_sequence(key) {
                Some(list) => list.push(node(&Value::Object(item))?),
                None => root.set(key, node(&Value::Array(vec![Value::Object(item)]))?),
            }
        }
        _ => {
            let map = match servers {
                Value::Null => {
                    *servers = Value::Object(Map::new());
                    servers.as_object_mut().ok_or("unreachable")?
                }
                Value::Object(map) => map,
                _ => return Err(format!("its `{key}` is not a mapping")),
            };
            if map.contains_key(name) {
                return Err(format!("it has a server named `{name}` already"));
            }
            map.insert(name.to_owned(), Value::Object(entry.clone()));
            match root.get_mapping(key) {
                Some(servers) => servers.set(name, node(&Value::Object(entry.clone()))?),
                None => root.set(key, node(&Value::Object(Map::from_iter([(name.into(), entry.clone().into())])))?),
            }
        }
    }
    finish(&doc, &expected)
}

/// `text` without the servers of `layout` that `which` picks, and their names; `None`
/// when it has none.
///
/// Errors: as for [`add`].
pub fn remove(
    text: &str,
    layout: Layout,
    which: impl Fn(&str, &Map<String, Value>) -> bool,
) -> Result<Option<(String, Vec<String>)>, String> {
    let (before, doc) = parse(text)?;
    let root = doc.as_mapping().ok_or("its top level is not a mapping")?;
    let key = layout.key();
    let mut expected = before.clone();
    let mut names = Vec::new();
    match expected.get_mut(key) {
        Some(Value::Array(items)) if matches!(layout, Layout::YamlList(_)) => {
            let list = root.get_sequence(key).ok_or_else(|| format!("its `{key}` is not a list"))?;
            let name_of = |i: usize, item: &Value| {
                item.get("name").and_then(Value::as_str).map_or(format!("#{}", i + 1), str::to_owned)
            };
            let picked: Vec<usize> = (0..items.len())
                .filter(|&i| items[i].as_object().is_some_and(|m| which(&name_of(i, &items[i]), m)))
                .collect();
            for &i in picked.iter().rev() {
                let item = items.remove(i);
                names.push(name_of(i, &item));
                list.remove(i).ok_or("its list changed while being edited")?;
            }
            names.reverse();
        }
        Some(Value::Object(map)) if matches!(layout, Layout::YamlMap(_)) => {
            let servers = root.get_mapping(key).ok_or_else(|| format!("its `{key}` is not a mapping"))?;
            names = map
                .iter()
                .filter(|(k, v)| v.as_object().is_some_and(|m| which(k, m)))
                .map(|(k, _)| k.clone())
                .collect();
            for name in &names {
                map.remove(name);
                servers.remove(name.as_str()).ok_or_else(|| format!("cannot find `{name}` in its syntax"))?;
            }
        }
        _ => return Ok(None),
    }
    if names.is_empty() {
        return Ok(None);
    }
    Ok(Some((finish(&doc, &expected)?, names)))
}

/// `text` read as a value (a top-level mapping) and as a syntax tree to edit. Errors: it
/// does not parse, or its top level is not a mapping.
fn parse(text: &str) -> Result<(Map<String, Value>, Document), String> {
    if text.trim().is_empty() {
        return Ok((Map::new(), Document::new_mapping()));
    }
    let before = match yaml_value(text).map_err(|e| format!("it does not parse: {e}"))? {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        _ => return Err("its top level is not a mapping".into()),
    };
    let doc = Document::from_str(text).map_err(|e| format!("it does not parse: {e}"))?;
    Ok((before, doc))
}

/// The lines that add `entry` as `name` under the servers of `layout` by hand.
pub fn snippet(layout: Layout, name: &str, entry: &Map<String, Value>) -> String {
    let mut out = format!("{}:\n", layout.key());
    let (item, first, rest) = match layout {
        Layout::YamlList(_) => {
            let mut item = Map::from_iter([("name".to_owned(), Value::from(name))]);
            item.extend(entry.clone());
            (Value::Object(item), "  - ", "    ")
        }
        _ => {
            out.push_str(&format!("  {}:\n", yaml_text(&Value::from(name)).unwrap_or_default().trim_end()));
            (Value::Object(entry.clone()), "    ", "    ")
        }
    };
    for (i, line) in yaml_text(&item).unwrap_or_default().lines().enumerate() {
        out.push_str(if i == 0 { first } else { rest });
        out.push_str(line);
        out.push('\n');
    }
    out.trim_end().to_owned()
}

/// A value as a syntax node to insert: its YAML text, parsed.
fn node(value: &Value) -> Result<yaml_edit::YamlNode, String> {
    let text = match value {
        Value::Array(items) => {
            let mut text = String::new();
            for item in items {
                for (i, line) in yaml_text(item)?.lines().enumerate() {
                    text.push_str(if i == 0 { "- " } else { "  " });
                    text.push_str(line);
                    text.push('\n');
                }
            }
            text
        }
        other => yaml_text(other)?,
    };
    let doc = Document::from_str(&text).map_err(|e| format!("cannot write the entry as YAML: {e}"))?;
    match (doc.as_mapping(), doc.as_sequence()) {
        (Some(map), _) => Ok(yaml_edit::YamlNode::Mapping(map)),
        (_, Some(list)) => Ok(yaml_edit::YamlNode::Sequence(list)),
        _ => Err("cannot write the entry as YAML".into()),
    }
}

/// A value as YAML text; a mapping's keys in the order people write them
/// ([`ordered_keys`](crate::import::edit::ordered_keys)), each value in block style.
fn yaml_text(value: &Value) -> Result<String, String> {
    let one = |v: &Value| serde_norway::to_string(v).map_err(|e| format!("cannot write the entry as YAML: {e}"));
    let Value::Object(map) = value else { return one(value) };
    let mut text = String::new();
    for key in crate::import::edit::ordered_keys(map) {
        text.push_str(&one(&Value::Object(Map::from_iter([(key.clone(), map[key].clone())])))?);
    }
    Ok(text)
}

/// The edited text, if it reads back as `expected`. Errors: it would not.
fn finish(doc: &Document, expected: &Map<String, Value>) -> Result<String, String> {
    let mut new = doc.to_string();
    if !new.is_empty() && !new.ends_with('\n') {
        new.push('\n');
    }
    match yaml_value(&new) {
        Ok(Value::Object(got)) if &got == expected => Ok(new),
        _ => Err("the edited text would not read back as intended".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const GOOSE: &str = "# my goose\nGOOSE_PROVIDER: openai # the provider\nextensions:\n  developer:\n    bundled: true\n    enabled: true\n    name: developer\n    type: builtin\n  # a server of mine\n  mine:\n    cmd: x\n    args: []\n    enabled: true\n    type: stdio\n";

    const CONTINUE: &str = "name: Local Agent # mine\nversion: 1.0.0\nschema: v1\nmcpServers:\n  # the first\n  - name: mine\n    command: x\n    args:\n      - --flag\n";

    fn runs_mcpx(_: &str, m: &Map<String, Value>) -> bool {
        m.get("cmd").or_else(|| m.get("command")) == Some(&json!("/bin/mcpx"))
    }

    #[test]
    fn a_mapping_entry_goes_in_and_out_and_the_rest_stays_as_written() {
        let entry = json!({"type": "stdio", "cmd": "/bin/mcpx", "args": ["serve"], "enabled": true});
        let entry = entry.as_object().unwrap();
        let layout = Layout::YamlMap("extensions");
        let added = add(GOOSE, layout, "mcpx", entry).unwrap();
        assert!(added.contains("# my goose") && added.contains("# a server of mine"), "{added}");
        assert!(add(&added, layout, "mcpx", entry).unwrap_err().contains("already"));
        let (removed, names) = remove(&added, layout, runs_mcpx).unwrap().unwrap();
        assert_eq!((removed.as_str(), names), (GOOSE, vec!["mcpx".to_owned()]), "back byte for byte");
        assert_eq!(remove(GOOSE, layout, runs_mcpx).unwrap(), None);
        let fresh = add("", layout, "mcpx", entry).unwrap();
        let read: Value = serde_norway::from_str(&fresh).unwrap();
        assert_eq!(read, json!({"extensions": {"mcpx": entry}}), "{fresh}");
    }

    #[test]
    fn a_list_item_goes_in_and_out_and_the_rest_stays_as_written() {
        let entry = json!({"command": "/bin/mcpx", "args": ["serve"]});
        let entry = entry.as_object().unwrap();
        let layout = Layout::YamlList("mcpServers");
        let added = add(CONTINUE, layout, "mcpx", entry).unwrap();
        assert!(added.starts_with("name: Local Agent # mine\n") && added.contains("# the first"), "{added}");
        let read: Value = serde_norway::from_str(&added).unwrap();
        assert_eq!(read["mcpServers"][1], json!({"name": "mcpx", "command": "/bin/mcpx", "args": ["serve"]}));
        assert!(added.ends_with("  - name: mcpx\n    command: /bin/mcpx\n    args:\n    - serve\n"), "{added}");
        assert!(add(&added, layout, "mcpx", entry).unwrap_err().contains("already"));
        let (removed, names) = remove(&added, layout, runs_mcpx).unwrap().unwrap();
        assert_eq!((removed.as_str(), names), (CONTINUE, vec!["mcpx".to_owned()]), "back byte for byte");
        let fresh = add("", layout, "mcpx", entry).unwrap();
        let read: Value = serde_norway::from_str(&fresh).unwrap();
        assert_eq!(read["mcpServers"][0]["name"], "mcpx", "{fresh}");
    }

    #[test]
    fn the_lines_to_paste_read_as_the_entry() {
        let entry = json!({"args": ["serve"], "cmd": "/bin/mcpx"});
        let entry = entry.as_object().unwrap();
        let map = snippet(Layout::YamlMap("extensions"), "mcpx", entry);
        assert_eq!(serde_norway::from_str::<Value>(&map).unwrap(), json!({"extensions": {"mcpx": entry}}), "{map}");
        let list = snippet(Layout::YamlList("mcpServers"), "mcpx", entry);
        let read: Value = serde_norway::from_str(&list).unwrap();
        assert_eq!(read, json!({"mcpServers": [{"name": "mcpx", "cmd": "/bin/mcpx", "args": ["serve"]}]}), "{list}");
        assert!(list.starts_with("mcpServers:\n  - name: mcpx\n    cmd: /bin/mcpx\n"), "{list}");
    }

    #[test]
    fn a_file_that_cannot_be_edited_safely_is_refused() {
        let entry = json!({"cmd": "mcpx"});
        let entry = entry.as_object().unwrap();
        let map = Layout::YamlMap("extensions");
        assert!(add("extensions: [\n", map, "mcpx", entry).unwrap_err().starts_with("it does not parse"));
        assert!(add("- a\n- b\n", map, "mcpx", entry).unwrap_err().contains("not a mapping"));
        assert!(add("extensions: 3\n", map, "mcpx", entry).unwrap_err().contains("not a mapping"));
        let list = Layout::YamlList("mcpServers");
        assert!(add("mcpServers: {a: 1}\n", list, "mcpx", entry).unwrap_err().contains("not a list"));
    }
}
