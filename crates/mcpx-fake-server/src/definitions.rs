//! `FAKE_DEFINITIONS=<path>`: tool definitions a test changes between two listings.
//! The file holds a JSON object whose keys name tools. An object value is merged over
//! that tool's definition (a name not listed adds a tool); `null` leaves the tool out,
//! and `"*": null` every tool the file does not name (so a file can list tools of its
//! own only). It is read at every listing; a missing file changes nothing, a malformed one is
//! reported on stderr and changes nothing.

use serde_json::{Map, Value};

/// `tools` as the file at `path` changes them; `added` builds a tool it adds.
pub fn apply(path: Option<&str>, mut tools: Vec<Value>, added: impl Fn(&str) -> Value) -> Vec<Value> {
    let changes = read(path);
    if changes.get("*").is_some_and(Value::is_null) {
        tools.retain(|t| t["name"].as_str().is_some_and(|name| changes.contains_key(name)));
    }
    for (name, change) in changes {
        if name == "*" {
            continue;
        }
        let at = tools.iter().position(|t| t["name"] == name.as_str());
        match (change, at) {
            (Value::Null, Some(i)) => {
                tools.remove(i);
            }
            (Value::Object(fields), at) => {
                let i = at.unwrap_or_else(|| {
                    tools.push(added(&name));
                    tools.len() - 1
                });
                for (key, value) in fields {
                    tools[i][key] = value;
                }
            }
            _ => {}
        }
    }
    tools
}

/// Whether the file at `path` defines a tool `name` (an object value): one it may add.
pub fn adds(path: Option<&str>, name: &str) -> bool {
    read(path).get(name).is_some_and(Value::is_object)
}

/// The file's object, empty when there is none.
fn read(path: Option<&str>) -> Map<String, Value> {
    let Some(path) = path else { return Map::new() };
    let Ok(text) = std::fs::read_to_string(path) else { return Map::new() };
    serde_json::from_str(&text).unwrap_or_else(|e| {
        eprintln!("mcpx-fake-server: ignoring FAKE_DEFINITIONS {path}: {e}");
        Map::new()
    })
}
