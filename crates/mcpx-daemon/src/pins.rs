//! Pinned tool and prompt definitions (`docs/configuration.md`, "Pinning"): what the
//! model reads is what the user approved.
//!
//! A server's first listing pins each tool and prompt: the SHA-256 of its definition
//! (a tool's `name`, `title`, `description`, `inputSchema`, `outputSchema` and
//! `annotations`; a prompt's `name`, `title`, `description` and `arguments`) as
//! canonical JSON, keys sorted at every level. A later listing that differs is, by the
//! server's mode ([`Pinning`]):
//! - `hold`: a changed or new definition is held, left out of every listing and
//!   refused to every call ([`crate::policy`] asks [`Holds`]), until the user approves
//!   it (`mcpx pins review`); a rejected one stays held until it changes again;
//! - `warn`: it passes, is pinned, and is logged;
//! - `strict`: as `hold`, and a definition the scan ([`crate::poisoning`]) flags is
//!   held from its first listing;
//! - `off`: nothing is pinned or held.
//!
//! A tool or prompt the server no longer lists loses its pin. The scan runs on every
//! definition first pinned and every one held; what it finds is kept with it, logged,
//! and counted in `status`.
//!
//! Pins are kept per cache key (the entry's fingerprint as written: the server as
//! configured, whatever its name), one file each, `<state>/pins/<key>.json`, 0600,
//! written atomically. A daemon that finds a listing in the schema cache and no pins
//! (an upgrade from a build without pinning) pins that listing: nobody is asked to
//! review what they already use.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use mcpx_platform::fs::Dir;

use crate::config::Pinning;
use crate::poisoning::{self, Finding};
use crate::sync::lock;

/// The directory of the state directory that holds the pins.
pub const PINS_DIR: &str = "pins";

/// The pin file format written by this build.
pub const FORMAT_VERSION: u32 = 1;

/// A tool or a prompt: what a pin is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// An item of `tools/list`.
    Tool,
    /// An item of `prompts/list`.
    Prompt,
}

impl Kind {
    /// `"tool"` or `"prompt"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
        }
    }

    /// The fields of an item that its pin covers (MCP 2025-11-25, Server, "Tools",
    /// `Tool`; "Prompts", `Prompt`).
    fn fields(self) -> &'static [&'static str] {
        match self {
            Kind::Tool => &["name", "title", "description", "inputSchema", "outputSchema", "annotations"],
            Kind::Prompt => &["name", "title", "description", "arguments"],
        }
    }
}

/// What is pinned of one server: its pin file.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PinSet {
    /// File format version.
    pub version: u32,
    /// The server's name in the configuration that last listed it.
    pub server: String,
    /// The cache key (the entry's fingerprint as written).
    pub key: String,
    /// The tools by name; `None` until the server's tools are first listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<BTreeMap<String, Pin>>,
    /// The prompts by name; `None` until the server's prompts are first listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<BTreeMap<String, Pin>>,
    /// The number of the listing that made this set, in this daemon (0: read from its
    /// file, or made from a list of no numbered listing): its other list is first
    /// listed by that same listing, and a list first seen later is new.
    #[serde(skip)]
    made_by: u64,
}

impl PinSet {
    /// The pins of `kind`, if that list was ever seen.
    pub fn of(&self, kind: Kind) -> Option<&BTreeMap<String, Pin>> {
        match kind {
            Kind::Tool => self.tools.as_ref(),
            Kind::Prompt => self.prompts.as_ref(),
        }
    }

    fn of_mut(&mut self, kind: Kind) -> &mut Option<BTreeMap<String, Pin>> {
        match kind {
            Kind::Tool => &mut self.tools,
            Kind::Prompt => &mut self.prompts,
        }
    }

    /// The names of `kind` held.
    fn held(&self, kind: Kind) -> BTreeSet<String> {
        let pins = self.of(kind).into_iter().flatten();
        pins.filter(|(_, p)| p.held.is_some()).map(|(name, _)| name.clone()).collect()
    }
}

/// One tool's or prompt's pin.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pin {
    /// The approved definition's hash, `sha256:` and 64 hex digits; `None` for one never
    /// approved (new on a pinned server, or flagged at its first listing in `strict`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// The approved definition, as hashed (for the review's diff).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition: Option<Value>,
    /// What the scan found in the approved definition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// A definition listed since that differs, held for the user's review.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<Held>,
}

/// A definition held for review.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Held {
    /// Its hash, `sha256:` and 64 hex digits: what an approval names.
    pub hash: String,
    /// The definition, as hashed.
    pub definition: Value,
    /// What the scan found in it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// When it was first listed, seconds since the Unix epoch.
    pub since: u64,
    /// The user rejected it: it stays held until the definition changes again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rejected: bool,
}

/// The tools and prompts of one server held back from its listings and calls.
#[derive(Clone, Debug, Default)]
pub struct Holds {
    /// The tools held, by name.
    pub tools: Arc<BTreeSet<String>>,
    /// The prompts held, by name.
    pub prompts: Arc<BTreeSet<String>>,
}

impl Holds {
    /// Whether `name` of `kind` is held.
    pub fn holds(&self, kind: Kind, name: &str) -> bool {
        match kind {
            Kind::Tool => self.tools.contains(name),
            Kind::Prompt => self.prompts.contains(name),
        }
    }

    /// How many tools and prompts are held.
    pub fn len(&self) -> usize {
        self.tools.len() + self.prompts.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A list a server gave, as [`Pins::observe`] takes it: its items, and the number of
/// the schema cache entry they come from (0 for a list from elsewhere).
#[derive(Clone, Copy, Debug)]
pub struct Listed<'a> {
    /// The `tools/list` or `prompts/list` items, as the server sent them.
    pub items: &'a [Box<RawValue>],
    /// [`crate::schema::CacheEntry::listing`], or 0.
    pub listing: u64,
}

/// What [`Pins::observe`] made of a listing.
#[derive(Debug)]
pub struct Observed {
    /// The names held now.
    pub held: Arc<BTreeSet<String>>,
    /// Whether that set differs from before the listing (MCP sessions are to hear
    /// `list_changed`).
    pub changed: bool,
    /// The names held now that were not before (the activity record's `pin/held`).
    pub newly: Vec<String>,
}

/// A user's decision on one held definition ([`Pins::decide`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// It becomes the pin.
    Approve,
    /// It stays held until the definition changes again.
    Reject,
}

/// By (pin key, kind), in [`Pins`]'s memo: the fingerprint of the last listing
/// compared, and the names it held.
type Compared = (u64, Arc<BTreeSet<String>>);

/// Every server's pins: their files in the state directory, all read at start, and a
/// memo of each listing already compared (an unchanged listing costs one pass of a
/// fast hash over its text).
#[derive(Debug)]
pub struct Pins {
    /// `<state>/pins/`, once made.
    dir: Option<Dir>,
    sets: Mutex<HashMap<String, PinSet>>,
    memo: Mutex<HashMap<(String, Kind), Compared>>,
}

impl Pins {
    /// The pins kept in `state` (the open state directory), every file read now. An
    /// unreadable file is logged and counts as absent: its server is pinned again, as it
    /// lists now. Without a `pins/` directory that can be made, pins live in memory only
    /// (logged).
    pub fn open(state: &Dir) -> Pins {
        let dir = match state.subdir(PINS_DIR, true) {
            Ok(dir) => Some(dir),
            Err(e) => {
                tracing::warn!(error = %e, "cannot open the pins directory: pins are kept in memory only");
                None
            }
        };
        let mut sets = HashMap::new();
        for name in dir.iter().flat_map(|d| d.names().unwrap_or_default()) {
            let Some(key) = name.to_str().and_then(|n| n.strip_suffix(".json")) else { continue };
            let read = dir.as_ref().map(|d| d.read(&format!("{key}.json")));
            match read.map(|r| r.map(|bytes| serde_json::from_slice::<PinSet>(&bytes))) {
                Some(Ok(Ok(set))) if set.key == key => {
                    sets.insert(key.to_owned(), set);
                }
                other => {
                    tracing::warn!(key, error = ?other.map(|r| r.map(|p| p.err())), "ignoring an unreadable pin file")
                }
            }
        }
        Pins { dir, sets: Mutex::new(sets), memo: Mutex::new(HashMap::new()) }
    }

    /// Compares `items`, the `kind` list the server `server` gave now, with its pins
    /// kept under `key` in `mode` (see the module's documentation), records what
    /// changed, and returns the names held. `listing` is the number of the schema cache
    /// entry `items` come from ([`crate::schema::CacheEntry::listing`]): a listing
    /// compared before is not compared again; 0 (a list from elsewhere) is told by its
    /// text.
    pub fn observe(&self, key: &str, server: &str, mode: Pinning, kind: Kind, listed: Listed<'_>) -> Observed {
        if mode == Pinning::Off {
            return Observed { held: Arc::default(), changed: false, newly: Vec::new() };
        }
        let Listed { items, listing } = listed;
        let mut h = std::hash::DefaultHasher::new();
        // Not the server's name: entries alike under two names share a key (their
        // fingerprint), and their listings are one thing to compare.
        (mode, listing).hash(&mut h);
        if listing == 0 {
            items.iter().for_each(|i| i.get().hash(&mut h));
        }
        let print = h.finish();
        let id = (key.to_owned(), kind);
        if let Some((seen, held)) = lock(&self.memo).get(&id) {
            if *seen == print {
                return Observed { held: held.clone(), changed: false, newly: Vec::new() };
            }
        }
        let listed: BTreeMap<String, (String, Value)> = items
            .iter()
            .filter_map(|raw| {
                let item: Value = serde_json::from_str(raw.get()).ok()?;
                let name = item.get("name")?.as_str()?.to_owned();
                let definition = definition(kind, &item);
                Some((name, (hash(&definition), definition)))
            })
            .collect();
        let mut sets = lock(&self.sets);
        let others = other_tools(&sets, key, server);
        let made = !sets.contains_key(key);
        let set = sets.entry(key.to_owned()).or_insert_with(|| PinSet {
            version: FORMAT_VERSION,
            server: server.to_owned(),
            key: key.to_owned(),
            made_by: listing,
            ..PinSet::default()
        });
        let before = set.held(kind);
        // The name that last listed it, kept in memory; written with the next change.
        set.server = server.to_owned();
        let mut wrote = false;
        // The server's first listing: this set's, or the listing that made it (its other
        // list). A list first seen in a later listing is new, and held.
        let first = set.of(kind).is_none() && (made || (listing != 0 && set.made_by == listing));
        let pins = set.of_mut(kind).get_or_insert_with(BTreeMap::new);
        let log = Log { server, kind };
        for (name, (hash, definition)) in listed.iter() {
            wrote |= compare(pins, name, hash, definition, mode, first, &others, &log);
        }
        let gone: Vec<String> = pins.keys().filter(|n| !listed.contains_key(*n)).cloned().collect();
        for name in gone {
            tracing::info!(server, kind = kind.as_str(), name, "no longer listed: its pin is removed");
            pins.remove(&name);
            wrote = true;
        }
        if first {
            wrote = true;
        }
        let held = Arc::new(set.held(kind));
        if wrote {
            self.write(set);
        }
        drop(sets);
        lock(&self.memo).insert(id, (print, held.clone()));
        let newly = held.difference(&before).cloned().collect();
        Observed { changed: *held != before, held, newly }
    }

    /// The names of `kind` held for the server of cache key `key`, as last compared.
    pub fn held(&self, key: &str, kind: Kind) -> Arc<BTreeSet<String>> {
        Arc::new(lock(&self.sets).get(key).map(|s| s.held(kind)).unwrap_or_default())
    }

    /// The pins of the server of cache key `key`.
    pub fn get(&self, key: &str) -> Option<PinSet> {
        lock(&self.sets).get(key).cloned()
    }

    /// The servers with something held, by the name that last listed them, with how
    /// many tools and prompts.
    pub fn held_counts(&self) -> BTreeMap<String, usize> {
        let sets = lock(&self.sets);
        let counts = sets.values().map(|s| (s.server.clone(), s.held(Kind::Tool).len() + s.held(Kind::Prompt).len()));
        counts.filter(|(_, n)| *n > 0).collect()
    }

    /// How many pinned or held definitions the scan found something in.
    pub fn flagged(&self) -> usize {
        let sets = lock(&self.sets);
        let pins = sets.values().flat_map(|s| s.tools.iter().chain(s.prompts.iter()).flat_map(|m| m.values()));
        pins.filter(|p| !p.findings.is_empty() || p.held.as_ref().is_some_and(|h| !h.findings.is_empty())).count()
    }

    /// Records the user's `decision` on the held definition of `name` (a `kind`) of the
    /// server of cache key `key`, whose hash is `hash` (as the review showed it).
    ///
    /// Errors: nothing of that name is held, or what is held has another hash (it
    /// changed since the review showed it: review it again).
    pub fn decide(&self, key: &str, kind: Kind, name: &str, hash: &str, decision: Decision) -> Result<(), String> {
        let mut sets = lock(&self.sets);
        let set = sets
            .get_mut(key)
            .ok_or_else(|| format!("nothing of this server is pinned (no {} `{name}`)", kind.as_str()))?;
        let server = set.server.clone();
        let pin = set
            .of_mut(kind)
            .as_mut()
            .and_then(|pins| pins.get_mut(name))
            .filter(|pin| pin.held.is_some())
            .ok_or_else(|| format!("{} `{name}` of server `{server}` is not held", kind.as_str()))?;
        let held = pin.held.as_mut().filter(|h| h.hash == hash).ok_or_else(|| {
            format!("{} `{name}` of server `{server}` changed again since it was shown: review it again", kind.as_str())
        })?;
        match decision {
            Decision::Approve => {
                let held = pin.held.take().unwrap_or_else(|| unreachable!("checked above"));
                *pin = Pin {
                    hash: Some(held.hash),
                    definition: Some(held.definition),
                    findings: held.findings,
                    held: None,
                };
                tracing::info!(server, kind = kind.as_str(), name, "approved by the user: pinned");
            }
            Decision::Reject => {
                held.rejected = true;
                tracing::info!(server, kind = kind.as_str(), name, "rejected by the user: it stays held");
            }
        }
        let set = set.clone();
        drop(sets);
        self.write(&set);
        lock(&self.memo).retain(|(k, _), _| k != key);
        Ok(())
    }

    /// Writes `set` atomically (0600), logging a failure: the pins then hold in memory.
    fn write(&self, set: &PinSet) {
        let Some(dir) = &self.dir else { return };
        let written = serde_json::to_vec_pretty(set)
            .map_err(std::io::Error::other)
            .and_then(|bytes| mcpx_platform::fs::write_atomic(dir, &format!("{}.json", set.key), &bytes, 0o600));
        if let Err(e) = written {
            tracing::warn!(server = %set.server, error = %e, "cannot write the pins: they hold in memory only");
        }
    }
}

/// What a log line of [`compare`] names.
struct Log<'a> {
    server: &'a str,
    kind: Kind,
}

/// Compares the listed definition of `name` (`hash`, `definition`) with its pin in
/// `pins` under `mode`; `first` when this is the first listing of the kind. Returns
/// whether the pins changed.
#[allow(clippy::too_many_arguments)]
fn compare(
    pins: &mut BTreeMap<String, Pin>,
    name: &str,
    hash: &str,
    definition: &Value,
    mode: Pinning,
    first: bool,
    others: &HashSet<String>,
    log: &Log<'_>,
) -> bool {
    let (server, kind) = (log.server, log.kind.as_str());
    let approved =
        |findings| Pin { hash: Some(hash.to_owned()), definition: Some(definition.clone()), findings, held: None };
    let held = |findings| Held {
        hash: hash.to_owned(),
        definition: definition.clone(),
        findings,
        since: crate::schema::now(),
        rejected: false,
    };
    let scan = || {
        let findings = poisoning::scan(definition, others);
        for f in &findings {
            tracing::warn!(server, kind, name, pattern = f.pattern.as_str(), at = %f.at, detail = %f.detail, "the poisoning scan found something");
        }
        findings
    };
    match pins.get_mut(name) {
        Some(pin) if pin.hash.as_deref() == Some(hash) => pin.held.take().is_some(),
        Some(pin) if pin.held.as_ref().is_some_and(|h| h.hash == hash) && mode != Pinning::Warn => false,
        Some(pin) if mode == Pinning::Warn => {
            tracing::warn!(server, kind, name, "its definition changed; pinning is `warn`, so the change passes");
            *pin = approved(scan());
            true
        }
        Some(pin) => {
            tracing::warn!(server, kind, name, "its definition changed: held until the user runs `mcpx pins review`");
            pin.held = Some(held(scan()));
            true
        }
        None if first => {
            let findings = scan();
            let pin = match mode {
                Pinning::Strict if !findings.is_empty() => {
                    tracing::warn!(server, kind, name, "flagged at its first listing, and pinning is `strict`: held");
                    Pin { hash: None, definition: None, findings: Vec::new(), held: Some(held(findings)) }
                }
                _ => approved(findings),
            };
            pins.insert(name.to_owned(), pin);
            true
        }
        None if mode == Pinning::Warn => {
            tracing::warn!(server, kind, name, "new on a pinned server; pinning is `warn`, so it passes");
            pins.insert(name.to_owned(), approved(scan()));
            true
        }
        None => {
            tracing::warn!(server, kind, name, "new on a pinned server: held until the user runs `mcpx pins review`");
            pins.insert(
                name.to_owned(),
                Pin { hash: None, definition: None, findings: Vec::new(), held: Some(held(scan())) },
            );
            true
        }
    }
}

/// The other servers' tools, as `server.tool` and `server__tool`, which a definition
/// must not name (the scan's last pattern): those of every other pinned server (not
/// `key`, nor another context of `server`).
fn other_tools(sets: &HashMap<String, PinSet>, key: &str, server: &str) -> HashSet<String> {
    let others = sets.values().filter(|s| s.key != key && s.server != server);
    others
        .flat_map(|s| {
            let tools = s.tools.iter().flat_map(|t| t.keys());
            tools.flat_map(move |t| [format!("{}.{t}", s.server), format!("{}__{t}", s.server)])
        })
        .collect()
}

/// The part of `item` a pin covers: of a tool, its `name`, `title`, `description`,
/// `inputSchema`, `outputSchema` and `annotations`; of a prompt, its `name`, `title`,
/// `description` and `arguments` (those it has).
pub fn definition(kind: Kind, item: &Value) -> Value {
    let fields = kind.fields().iter().filter_map(|f| Some(((*f).to_owned(), item.get(*f)?.clone())));
    Value::Object(fields.collect())
}

/// The hash of `definition`: `sha256:` and the hex SHA-256 of its canonical JSON
/// (object keys sorted at every level, no spaces; [`crate::config::canonical_sha256`]).
pub fn hash(definition: &Value) -> String {
    format!("sha256:{}", crate::config::canonical_sha256(definition))
}

#[cfg(test)]
mod tests;
