//! Profiles (`docs/configuration.md`, "Profiles"): named subsets of the servers and of
//! their tools, defined under the top-level `profiles` of the mcpx user config (or an
//! explicit `--config` file), so that each client sees only what it needs:
//!
//! ```json
//! "profiles": { "review": { "servers": { "github": ["search_*", "get_*"], "memory": "*" } } }
//! ```
//!
//! A server's value is `"*"` (every tool) or a list of patterns, where `*` stands for any
//! run of characters and `?` for one. A caller on a profile
//! ([`crate::ResolvedConfig::with_profile`]) gets every entry marked with its
//! [`ProfileFilter`], which only the daemon's policy point reads, as it reads
//! `includeTools` and `excludeTools`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use wildmatch::WildMatch;

use super::units::json_kind;

/// One profile, as its file defines it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    /// The file that defines it.
    pub source: PathBuf,
    /// The servers it holds, by name, with the tools of each.
    pub servers: BTreeMap<String, Tools>,
}

/// The tools of a server a profile holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tools {
    /// `"*"`: every tool the server offers.
    All,
    /// The tools whose names match one of these patterns (`*` any run, `?` one character).
    Matching(Vec<String>),
}

impl Tools {
    /// Whether the tool `name` is among these.
    pub fn allows(&self, name: &str) -> bool {
        match self {
            Tools::All => true,
            Tools::Matching(patterns) => patterns.iter().any(|p| WildMatch::new(p).matches(name)),
        }
    }
}

/// What a profile says of one server, set on each entry of a caller on that profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileFilter {
    /// The profile's name.
    pub name: String,
    /// The file that defines it.
    pub source: PathBuf,
    /// The server's tools in the profile; `None` when the profile does not hold the
    /// server at all.
    pub tools: Option<Tools>,
}

/// The top-level `profiles` value of `file`: the profiles that are well formed, and a
/// note (naming the file and the key) for each one that is not, which is left out.
pub(super) fn parse_profiles(file: &Path, value: &Value) -> (BTreeMap<String, Profile>, Vec<String>) {
    let mut profiles = BTreeMap::new();
    let mut notes = Vec::new();
    let Value::Object(map) = value else {
        if !value.is_null() {
            notes.push(format!(
                "{}: `profiles` must be an object of named profiles, found {}; it is ignored",
                file.display(),
                json_kind(value)
            ));
        }
        return (profiles, notes);
    };
    for (name, body) in map {
        match profile(body) {
            Ok(servers) => {
                profiles.insert(name.clone(), Profile { source: file.to_owned(), servers });
            }
            Err(why) => notes.push(format!(
                "{}: `profiles.{name}`: {why}; the profile is left out (write it as {{\"servers\": {{\"SERVER\": \"*\"}}}} or with a list of tool patterns)",
                file.display()
            )),
        }
    }
    (profiles, notes)
}

/// One profile's body. Errors: what is wrong, naming the key.
fn profile(body: &Value) -> Result<BTreeMap<String, Tools>, String> {
    let Some(servers) = body.get("servers") else { return Err("it has no `servers`".into()) };
    let Value::Object(servers) = servers else {
        return Err(format!("`servers` must be an object, found {}", json_kind(servers)));
    };
    if let Some(other) = body.as_object().and_then(|o| o.keys().find(|k| *k != "servers")) {
        return Err(format!("unknown key `{other}` (a profile has only `servers`)"));
    }
    servers
        .iter()
        .map(|(server, tools)| {
            let tools = match tools {
                Value::String(s) if s == "*" => Tools::All,
                Value::Array(items) => {
                    let patterns: Option<Vec<String>> = items.iter().map(|i| i.as_str().map(str::to_owned)).collect();
                    Tools::Matching(
                        patterns.ok_or_else(|| format!("`servers.{server}` must list tool names as strings"))?,
                    )
                }
                other => {
                    return Err(format!(
                        "`servers.{server}` must be \"*\" or a list of tool patterns, found {}",
                        json_kind(other)
                    ));
                }
            };
            Ok((server.clone(), tools))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn profiles_parse_and_match_with_wildcards() {
        let file = Path::new("/u/config.json");
        let value = json!({
            "review": { "servers": { "github": ["search_*", "get_?"], "memory": "*" } },
            "bad": { "servers": { "x": 3 } },
            "worse": { "tools": [] },
        });
        let (profiles, notes) = parse_profiles(file, &value);
        assert_eq!(profiles.keys().collect::<Vec<_>>(), ["review"]);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes.iter().any(|n| n.contains("/u/config.json: `profiles.bad`: `servers.x` must be")), "{notes:?}");
        let github = &profiles["review"].servers["github"];
        assert!(github.allows("search_code") && github.allows("get_x") && !github.allows("get_xy"));
        assert!(!github.allows("create_issue"));
        assert!(profiles["review"].servers["memory"].allows("anything"));
        let (none, notes) = parse_profiles(file, &json!([1]));
        assert!(none.is_empty() && notes[0].contains("must be an object"), "{notes:?}");
    }
}
