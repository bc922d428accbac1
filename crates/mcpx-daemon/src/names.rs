//! Names in the aggregate MCP endpoint: every tool of every server is exposed as
//! `<server>__<tool>`, always matching `^[a-zA-Z0-9_-]{1,64}$` (the tool name rule
//! clients enforce; MCP 2025-11-25, Server features, Tools, "Tool names").
//!
//! Characters outside the set become `_`; a name over 64 characters is cut and
//! ends in `_` and 8 hex digits of a hash of the full original; two originals that
//! still collide are told apart the same way, in a deterministic order, so a client
//! sees the same names on every listing and a call maps back to its original.
//!
//! Resource URIs become `mcpx://<server>/<original>` ([`resource_uri`]), which
//! [`split_resource_uri`] maps back.

use std::collections::{BTreeMap, HashMap};

use sha2::{Digest, Sha256};

/// The longest exposed name.
pub const MAX_NAME: usize = 64;

/// The separator between server and tool.
pub const SEPARATOR: &str = "__";

/// Maps exposed names to (server, original tool name) and back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameMap {
    to_original: HashMap<String, (String, String)>,
    to_exposed: HashMap<(String, String), String>,
}

impl NameMap {
    /// Builds the names for `tools`, a list of (server, tool) pairs. The result does
    /// not depend on the order of the list.
    pub fn build<'a>(tools: impl IntoIterator<Item = (&'a str, &'a str)>) -> NameMap {
        // Sorted originals, so collisions resolve the same way every time.
        let originals: BTreeMap<(String, String), String> =
            tools.into_iter().map(|(s, t)| ((s.to_owned(), t.to_owned()), candidate(s, t))).collect();
        let mut taken: HashMap<String, usize> = HashMap::new();
        for name in originals.values() {
            *taken.entry(name.clone()).or_default() += 1;
        }
        let mut map = NameMap::default();
        for ((server, tool), name) in originals {
            let name = if taken[&name] > 1 { with_hash(&name, &server, &tool) } else { name };
            map.to_original.insert(name.clone(), (server.clone(), tool.clone()));
            map.to_exposed.insert((server, tool), name);
        }
        map
    }

    /// The (server, tool) an exposed name stands for.
    pub fn original(&self, exposed: &str) -> Option<(&str, &str)> {
        self.to_original.get(exposed).map(|(s, t)| (s.as_str(), t.as_str()))
    }

    /// The (server, tool) whose original name is `name`, when exactly one server has
    /// it: a client may use a tool's own name while no other server shares it.
    pub fn bare(&self, name: &str) -> Option<(&str, &str)> {
        let mut owners = self.to_exposed.keys().filter(|(_, t)| t == name);
        let (server, tool) = owners.next()?;
        owners.next().is_none().then_some((server.as_str(), tool.as_str()))
    }

    /// The exposed name of (server, tool).
    pub fn exposed(&self, server: &str, tool: &str) -> Option<&str> {
        self.to_exposed.get(&(server.to_owned(), tool.to_owned())).map(String::as_str)
    }
}

/// The scheme of the aggregate's resource URIs.
pub const URI_SCHEME: &str = "mcpx://";

/// The aggregate's URI for the resource (or template) `uri` of `server`:
/// `mcpx://<server>/<uri>`.
pub fn resource_uri(server: &str, uri: &str) -> String {
    format!("{URI_SCHEME}{server}/{uri}")
}

/// The (server, original URI) of an aggregate URI made by [`resource_uri`]; `None`
/// for any other URI.
pub fn split_resource_uri(uri: &str) -> Option<(&str, &str)> {
    uri.strip_prefix(URI_SCHEME)?.split_once('/').filter(|(server, _)| !server.is_empty())
}

/// `<server>__<tool>` with invalid characters replaced, shortened with a hash when long.
fn candidate(server: &str, tool: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
    };
    let name = format!("{}{SEPARATOR}{}", clean(server), clean(tool));
    if name.len() <= MAX_NAME { name } else { with_hash(&name, server, tool) }
}

/// `name` cut to fit with `_` and 8 hex digits of a hash of the original pair.
fn with_hash(name: &str, server: &str, tool: &str) -> String {
    let mut h = Sha256::new();
    h.update(server.as_bytes());
    h.update([0]);
    h.update(tool.as_bytes());
    let hash: String = h.finalize().iter().take(4).map(|b| format!("{b:02x}")).collect();
    let keep = MAX_NAME - 1 - hash.len();
    let head: String = name.chars().take(keep).collect();
    format!("{head}_{hash}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_uris_round_trip() {
        let uri = resource_uri("fake", "test://template/{id}/data");
        assert_eq!(uri, "mcpx://fake/test://template/{id}/data");
        assert_eq!(split_resource_uri(&uri), Some(("fake", "test://template/{id}/data")));
        assert_eq!(split_resource_uri("test://static"), None);
        assert_eq!(split_resource_uri("mcpx:///x"), None);
    }

    fn valid(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= MAX_NAME
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn names_are_valid_unique_stable_and_map_back() {
        let long = "t".repeat(80);
        let tools = [
            ("everything", "echo"),
            ("my.server", "get/file name"),
            ("my_server", "get_file_name"),
            ("wiki", "résumé"),
            ("x", long.as_str()),
        ];
        let map = NameMap::build(tools);
        assert_eq!(map.exposed("everything", "echo"), Some("everything__echo"));
        let mut seen = std::collections::HashSet::new();
        for (s, t) in tools {
            let name = map.exposed(s, t).unwrap();
            assert!(valid(name), "{name}");
            assert!(seen.insert(name.to_owned()), "{name} given twice");
            assert_eq!(map.original(name), Some((s, t)));
        }
        // `my.server__get/file name` and `my_server__get_file_name` collide once cleaned.
        assert_ne!(map.exposed("my.server", "get/file name"), map.exposed("my_server", "get_file_name"));
        assert_eq!(map.bare("echo"), Some(("everything", "echo")));
        let shared = NameMap::build([("a", "echo"), ("b", "echo")]);
        assert_eq!(shared.bare("echo"), None, "two servers have it");
        let reversed = NameMap::build(tools.iter().rev().copied());
        assert_eq!(map, reversed, "the names do not depend on the listing order");
    }
}
