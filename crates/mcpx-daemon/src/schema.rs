//! The on-disk schema cache (design: "Discovery without starting servers"): per
//! server, the tools, resources, resource templates, prompts and instructions it
//! last listed, so `mcpx ls`, `search` and `tools` answer without starting anything.
//!
//! One file per server, `<cache>/servers/<key>.json`, where the key is the
//! fingerprint of the entry as written (so the cache survives the server's binary
//! being upgraded or deleted). Files are written atomically (temp file, fsync,
//! rename, all through the cache directory's descriptor). Format version 1; unknown
//! fields are ignored when read.
//!
//! A modern server's lists carry caching hints (MCP 2026-07-28, Server, Utilities,
//! "Caching"). `ttlMs` makes an entry stale that long after it was listed (absent or
//! negative counts as 0, as the section says: stale at once); a stale entry is listed
//! again from a running instance when it is next read ([`CacheEntry::is_stale`]), and
//! shown as stale otherwise. A list with `cacheScope: "private"` "MUST NOT be shared
//! across authorization contexts": it is kept per authorization context (an HMAC of
//! what the entry expands to, and of the login that covers a remote one: docs/api.md,
//! "The schema cache"), in memory and in `<cache>/private/<key>/<context>.json`, and
//! never in the server's own file, which then holds everything else (the session, the
//! freshness, errors) and `private: true`. A context's file not read or written for
//! [`PRIVATE_KEEP`] is pruned. A legacy server's lists have no hints: fresh until its
//! `list_changed`, and shared.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use mcpx_platform::fs::Dir;

use crate::instance::{Instance, Known, ServerSession};
use crate::sync::lock;
use mcpx_proto::{Message, response_result};

/// The cache file format written by this build.
pub const FORMAT_VERSION: u32 = 1;

/// How long a context's private listing is kept on disk without being read or written.
pub const PRIVATE_KEEP: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// A private listing read from disk is written again (its file's time renewed) when
/// it is older than this, so a context in use is not pruned.
const PRIVATE_RENEW: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// At most this many pages are read from one paginated list (a server that
/// returns a cursor forever must not hang the listing).
const MAX_PAGES: usize = 1000;

/// What is known of one server's schema.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CacheEntry {
    /// File format version.
    pub version: u32,
    /// The server's name in the configuration that last listed it.
    pub server: String,
    /// The cache key (the entry's fingerprint as written).
    pub key: String,
    /// When the listing was taken, seconds since the Unix epoch.
    pub updated_at: u64,
    /// The MCP session the server negotiated (revision, capabilities, info, instructions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<ServerSession>,
    /// `tools/list`, every page, tool objects exactly as the server sent them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Box<RawValue>>>,
    /// `resources/list`, when the server has the capability.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<Box<RawValue>>>,
    /// `resources/templates/list`.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "resourceTemplates")]
    pub resource_templates: Option<Vec<Box<RawValue>>>,
    /// `prompts/list`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<Vec<Box<RawValue>>>,
    /// Why the last start or listing failed, if it did after the last success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When the listing goes stale, milliseconds since the Unix epoch: when it was
    /// taken plus the smallest `ttlMs` of its pages (a modern server's; 2026-07-28,
    /// Server, Utilities, "Caching", "Freshness Calculation"). `None`: no limit (a
    /// legacy server, whose lists stay until its `list_changed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fresh_until_ms: Option<u64>,
    /// A list was `cacheScope: "private"`: the lists are kept per authorization
    /// context, in memory ([`SchemaCache::get_for`]), and this entry, as written,
    /// holds none.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub private: bool,
    /// Which listing this is, in this daemon: a number given each entry read from disk
    /// or written, that no other listing has (never written; 0 for one not yet given
    /// one). Equal numbers hold equal lists, so pinning compares a listing once
    /// ([`crate::pins::Pins::observe`]).
    #[serde(skip)]
    pub listing: u64,
}

/// The name and description of a tool, read from its raw object.
#[derive(Debug, Clone, Deserialize)]
pub struct ToolSummary {
    /// Tool name.
    pub name: String,
    /// Tool description.
    #[serde(default)]
    pub description: Option<String>,
}

impl CacheEntry {
    /// Whether the listing is past its `ttlMs` at `now_ms` (milliseconds since the
    /// Unix epoch): to be listed again before it is used, when a running instance
    /// can list it.
    pub fn is_stale(&self, now_ms: u64) -> bool {
        self.fresh_until_ms.is_some_and(|until| now_ms >= until)
    }

    /// The entry without its lists (what a private entry is, outside its context).
    fn without_lists(mut self) -> CacheEntry {
        self.tools = None;
        self.resources = None;
        self.resource_templates = None;
        self.prompts = None;
        self
    }

    /// Name and description of every tool listed.
    pub fn tool_summaries(&self) -> Vec<ToolSummary> {
        self.tools.iter().flatten().filter_map(|t| serde_json::from_str::<ToolSummary>(t.get()).ok()).collect()
    }
}

/// The schema cache directory, with the entries read so far kept in memory.
#[derive(Debug)]
pub struct SchemaCache {
    /// The cache directory, whose `servers/` holds the entries.
    cache: Dir,
    /// `servers/`, once opened (made at the first write).
    servers: Mutex<Option<Dir>>,
    entries: Mutex<HashMap<String, Option<Arc<CacheEntry>>>>,
    /// The private listings ([`CacheEntry::private`]), by (key, authorization
    /// context): never written, never served to another context.
    private: Mutex<HashMap<(String, String), Arc<CacheEntry>>>,
}

impl SchemaCache {
    /// The cache in `cache`, the open cache directory (`servers/` is made on first
    /// write).
    pub fn new(cache: Dir) -> SchemaCache {
        SchemaCache {
            cache,
            servers: Mutex::new(None),
            entries: Mutex::new(HashMap::new()),
            private: Mutex::new(HashMap::new()),
        }
    }

    fn name(key: &str) -> String {
        format!("{key}.json")
    }

    /// `servers/`, opened once (and made, with `create`).
    fn servers(&self, create: bool) -> std::io::Result<Dir> {
        let mut servers = lock(&self.servers);
        if let Some(dir) = servers.as_ref() {
            return Ok(dir.clone());
        }
        let dir = self.cache.subdir("servers", create)?;
        *servers = Some(dir.clone());
        Ok(dir)
    }

    /// The entry for `key`, read from disk the first time. An unreadable file counts
    /// as absent (and is logged): the next listing rewrites it.
    pub fn get(&self, key: &str) -> Option<Arc<CacheEntry>> {
        if let Some(e) = lock(&self.entries).get(key) {
            return e.clone();
        }
        let entry = match self.servers(false).and_then(|dir| dir.read(&Self::name(key))) {
            Ok(bytes) => match serde_json::from_slice::<CacheEntry>(&bytes) {
                Ok(e) => Some(Arc::new(numbered(e))),
                Err(e) => {
                    tracing::warn!(key, error = %e, "ignoring an unreadable schema cache file");
                    None
                }
            },
            Err(_) => None,
        };
        lock(&self.entries).insert(key.to_owned(), entry.clone());
        entry
    }

    /// The entry for `key` as a caller in authorization `context` sees it
    /// ([`crate::target::Targets::context`]): with the lists listed in that context when
    /// the server's lists are private (from memory, else from its file), and none from
    /// another context, nor without one.
    pub fn get_for(&self, key: &str, context: Option<&str>) -> Option<Arc<CacheEntry>> {
        let entry = self.get(key)?;
        if !entry.private {
            return Some(entry);
        }
        let Some(context) = context else { return Some(entry) };
        let id = (key.to_owned(), context.to_owned());
        if let Some(own) = lock(&self.private).get(&id) {
            return Some(own.clone());
        }
        let Some(own) = self.load_private(key, context) else { return Some(entry) };
        lock(&self.private).insert(id, own.clone());
        Some(own)
    }

    /// `private/<key>/` of the cache directory (made, with `create`).
    fn private_dir(&self, key: &str, create: bool) -> Result<Dir, mcpx_platform::fs::OpenError> {
        self.cache.subdir("private", create)?.subdir(key, create)
    }

    /// The private listing of `key` in `context` from its file; its file written again
    /// when it is older than [`PRIVATE_RENEW`], so a context in use stays.
    fn load_private(&self, key: &str, context: &str) -> Option<Arc<CacheEntry>> {
        let dir = self.private_dir(key, false).ok()?;
        let name = Self::name(context);
        let bytes = dir.read(&name).ok()?;
        let entry: CacheEntry = match serde_json::from_slice(&bytes) {
            Ok(entry) => numbered(entry),
            Err(e) => {
                tracing::warn!(key, error = %e, "ignoring an unreadable private schema cache file");
                return None;
            }
        };
        let old = std::fs::symlink_metadata(dir.path().join(&name))
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > PRIVATE_RENEW));
        if old {
            let _ = mcpx_platform::fs::write_atomic(&dir, &name, &bytes, 0o600);
        }
        Some(Arc::new(entry))
    }

    /// Forgets the private lists of `key` in every context, in memory and on disk (the
    /// server's login changed: its lists were fetched as someone else).
    pub fn forget_private(&self, key: &str) {
        lock(&self.private).retain(|(k, _), _| k != key);
        if let Ok(dir) = self.private_dir(key, false) {
            for name in dir.names().unwrap_or_default() {
                if let Some(name) = name.to_str() {
                    let _ = dir.remove(name);
                }
            }
        }
    }

    /// Removes the private listings whose files were not read or written for
    /// [`PRIVATE_KEEP`]; returns how many. Run when the daemon starts.
    pub fn prune_private(&self) -> usize {
        let Ok(private) = self.cache.subdir("private", false) else { return 0 };
        let mut pruned = 0;
        for key in private.names().unwrap_or_default() {
            let Some(key) = key.to_str() else { continue };
            let Ok(dir) = private.subdir(key, false) else { continue };
            for name in dir.names().unwrap_or_default() {
                let Some(name) = name.to_str() else { continue };
                let stale = std::fs::symlink_metadata(dir.path().join(name))
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > PRIVATE_KEEP));
                if stale && dir.remove(name).is_ok() {
                    pruned += 1;
                }
            }
        }
        pruned
    }

    /// Writes `entry` atomically and keeps it in memory.
    pub fn put(&self, entry: CacheEntry) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(&entry).map_err(std::io::Error::other)?;
        mcpx_platform::fs::write_atomic(&self.servers(true)?, &Self::name(&entry.key), &bytes, 0o600)?;
        lock(&self.entries).insert(entry.key.clone(), Some(Arc::new(numbered(entry))));
        Ok(())
    }

    /// Records that the server's last start or listing failed, keeping what was
    /// listed before.
    pub fn record_error(&self, key: &str, server: &str, message: &str) {
        let mut entry = self.get(key).map_or_else(|| empty(key, server), |e| (*e).clone());
        entry.error = Some(message.to_owned());
        entry.updated_at = now();
        if let Err(e) = self.put(entry) {
            tracing::warn!(server, error = %e, "cannot write the schema cache");
        }
    }

    /// What the entry for `key` says of the server's era: its session's revision, unless
    /// its last start or listing failed (then the era is probed again: MCP 2026-07-28,
    /// Basic, "Versioning", allows persisting the verdict, "re-probing if the cached
    /// assumption later fails").
    pub fn known_era(&self, key: &str) -> Known {
        match self.get(key) {
            Some(entry) if entry.error.is_none() => Known::from_session(entry.session.as_ref()),
            _ => Known::Unknown,
        }
    }

    /// Lists everything the running instance offers (following `nextCursor`) and
    /// stores it under `key`. Lists the server lacks the capability for stay empty.
    pub async fn refresh(
        &self,
        key: &str,
        inst: &Instance,
        timeout: Option<std::time::Duration>,
    ) -> Result<CacheEntry, String> {
        let session = inst.session();
        let has = |cap: &str| session.as_ref().is_some_and(|s| s.has_capability(cap));
        let mut entry = empty(key, &inst.identity.server);
        entry.session = session.clone();
        let mut hints = Hints::default();
        let taken_at = now_ms();
        if has("tools") {
            entry.tools = Some(list_all(inst, "tools/list", "tools", timeout, &mut hints).await?);
        } else {
            entry.tools = Some(Vec::new());
        }
        if has("resources") {
            // Some servers declare resources but fail these; a failed optional list is logged, not fatal.
            entry.resources = list_all(inst, "resources/list", "resources", timeout, &mut hints).await.ok();
            entry.resource_templates =
                list_all(inst, "resources/templates/list", "resourceTemplates", timeout, &mut hints).await.ok();
        }
        if has("prompts") {
            entry.prompts = list_all(inst, "prompts/list", "prompts", timeout, &mut hints).await.ok();
        }
        if inst.era().is_some_and(|e| e.is_modern()) {
            entry.fresh_until_ms = Some(taken_at.saturating_add(hints.ttl_ms.unwrap_or(0)));
            entry.private = hints.private;
        }
        let entry = numbered(entry);
        let written = if entry.private { entry.clone().without_lists() } else { entry.clone() };
        self.put(written).map_err(|e| format!("cannot write the schema cache: {e}"))?;
        if !entry.private {
            // Public now: nothing private of this server is kept any more.
            self.forget_private(key);
        } else if let Some(context) = inst.context() {
            let bytes = serde_json::to_vec_pretty(&entry).map_err(|e| e.to_string())?;
            self.private_dir(key, true)
                .map_err(std::io::Error::other)
                .and_then(|dir| mcpx_platform::fs::write_atomic(&dir, &Self::name(context), &bytes, 0o600))
                .map_err(|e| format!("cannot write the schema cache: {e}"))?;
            lock(&self.private).insert((key.to_owned(), context.to_owned()), Arc::new(entry.clone()));
        } else {
            // An instance adopted from an earlier daemon: its context is not known, so
            // its lists are kept for no one (its file from its start still serves).
            tracing::debug!(key, "a private listing of an instance of unknown context is not kept");
        }
        Ok(entry)
    }
}

fn empty(key: &str, server: &str) -> CacheEntry {
    CacheEntry {
        version: FORMAT_VERSION,
        server: server.to_owned(),
        key: key.to_owned(),
        updated_at: now(),
        session: None,
        tools: None,
        resources: None,
        resource_templates: None,
        prompts: None,
        error: None,
        fresh_until_ms: None,
        private: false,
        listing: 0,
    }
}

/// `entry`, given a listing number no other entry of this daemon has
/// ([`CacheEntry::listing`]).
fn numbered(mut entry: CacheEntry) -> CacheEntry {
    static LISTINGS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    entry.listing = LISTINGS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    entry
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// The caching hints of a listing's pages (2026-07-28, Server, Utilities, "Caching").
#[derive(Debug, Default)]
struct Hints {
    /// The smallest `ttlMs` of any page (absent or negative: 0, "immediately stale").
    ttl_ms: Option<u64>,
    /// Some page was `cacheScope: "private"`.
    private: bool,
}

impl Hints {
    /// Takes the hints of one page's result (`ttlMs`, `cacheScope`, raw JSON values).
    fn take(&mut self, ttl: Option<&RawValue>, scope: Option<&RawValue>) {
        let ttl = ttl.and_then(|t| serde_json::from_str::<f64>(t.get()).ok()).map_or(0, |t| t.max(0.0) as u64);
        self.ttl_ms = Some(self.ttl_ms.map_or(ttl, |least| least.min(ttl)));
        self.private |= scope.is_some_and(|s| s.get() == "\"private\"");
    }
}

/// Calls a paginated list method until no `nextCursor` is returned (MCP 2025-11-25,
/// Utilities, "Pagination") and gathers the items of `field`, and each page's caching
/// hints into `hints` (a modern server's; "Interaction with Pagination": each page is
/// cached on its own, so the listing is as fresh as its least fresh page).
async fn list_all(
    inst: &Instance,
    method: &str,
    field: &str,
    timeout: Option<std::time::Duration>,
    hints: &mut Hints,
) -> Result<Vec<Box<RawValue>>, String> {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = match &cursor {
            Some(c) => serde_json::json!({ "cursor": c }).to_string(),
            None => "{}".to_owned(),
        };
        let response =
            inst.request(Message::request("0", method, Some(&params)), timeout).await.map_err(|e| e.to_string())?;
        let result = response_result(&response).map_err(|e| format!("{method}: {e}"))?;
        // Raw values cannot pass through serde's flatten, so the page is a plain map.
        let page: HashMap<String, Box<RawValue>> =
            serde_json::from_str(result.get()).map_err(|e| format!("{method}: malformed result: {e}"))?;
        hints.take(page.get("ttlMs").map(|t| &**t), page.get("cacheScope").map(|s| &**s));
        if let Some(list) = page.get(field) {
            let more: Vec<Box<RawValue>> =
                serde_json::from_str(list.get()).map_err(|e| format!("{method}: `{field}` is not an array: {e}"))?;
            items.extend(more);
        }
        let next: Option<String> = page.get("nextCursor").and_then(|c| serde_json::from_str(c.get()).ok());
        match next {
            Some(c) if !c.is_empty() && cursor.as_ref() != Some(&c) => cursor = Some(c),
            _ => return Ok(items),
        }
    }
    Err(format!("{method}: more than {MAX_PAGES} pages"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn the_least_fresh_page_and_any_private_page_decide() {
        let mut hints = Hints::default();
        hints.take(Some(&raw("5000")), Some(&raw("\"public\"")));
        hints.take(Some(&raw("200")), Some(&raw("\"private\"")));
        hints.take(Some(&raw("9000")), None);
        assert_eq!((hints.ttl_ms, hints.private), (Some(200), true));
        let mut absent = Hints::default();
        absent.take(None, None);
        assert_eq!((absent.ttl_ms, absent.private), (Some(0), false), "absent: stale at once");
        let mut negative = Hints::default();
        negative.take(Some(&raw("-5")), Some(&raw("\"public\"")));
        assert_eq!(negative.ttl_ms, Some(0), "negative counts as 0");
    }

    #[test]
    fn a_private_listing_is_seen_in_its_own_context_only_and_outlives_the_daemon() {
        let dir = tempfile::tempdir().unwrap();
        let open = || SchemaCache::new(Dir::open_unchecked(dir.path()).unwrap());
        let cache = open();
        let mut entry = empty("k", "s");
        entry.tools = Some(vec![raw(r#"{"name":"mine"}"#)]);
        entry.private = true;
        entry.fresh_until_ms = Some(10);
        cache.put(entry.clone().without_lists()).unwrap();
        let file = SchemaCache::name("ctx-a");
        let private = cache.private_dir("k", true).unwrap();
        mcpx_platform::fs::write_atomic(&private, &file, &serde_json::to_vec(&entry).unwrap(), 0o600).unwrap();
        // A new daemon's cache reads it back, in its own context only.
        let cache = open();
        assert_eq!(cache.get_for("k", Some("ctx-a")).and_then(|e| e.tools.as_ref().map(|t| t.len())), Some(1));
        assert!(cache.get_for("k", Some("ctx-b")).is_some_and(|e| e.tools.is_none()), "another context");
        assert!(cache.get_for("k", None).is_some_and(|e| e.tools.is_none() && e.private), "no context");
        assert!(cache.get("k").is_some_and(|e| e.is_stale(10) && !e.is_stale(9)));
        // Unused for longer than it is kept, it is pruned; a fresh one stays.
        assert_eq!(cache.prune_private(), 0);
        let month_ago = SystemTime::now() - PRIVATE_KEEP - std::time::Duration::from_secs(60);
        std::fs::File::options().write(true).open(private.path().join(&file)).unwrap().set_modified(month_ago).unwrap();
        assert_eq!(open().prune_private(), 1);
        assert!(open().get_for("k", Some("ctx-a")).is_some_and(|e| e.tools.is_none()), "pruned");
        // Forgotten: in memory and on disk.
        mcpx_platform::fs::write_atomic(&private, &file, &serde_json::to_vec(&entry).unwrap(), 0o600).unwrap();
        assert!(cache.get_for("k", Some("ctx-a")).is_some_and(|e| e.tools.is_some()));
        cache.forget_private("k");
        assert!(cache.get_for("k", Some("ctx-a")).is_some_and(|e| e.tools.is_none()), "forgotten");
        assert!(open().get_for("k", Some("ctx-a")).is_some_and(|e| e.tools.is_none()), "forgotten on disk");
    }
}
