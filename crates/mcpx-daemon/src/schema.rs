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
//! shown as stale otherwise. A list with `cacheScope: "private"` is "not meant to be
//! shared between callers": it is kept in memory only, per authorization context
//! (the instance's pool key), and never written to the file, which then holds
//! everything else (the session, the freshness, errors) and `private: true`. A legacy
//! server's lists have no hints: fresh until its `list_changed`, and shared.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use mcpx_platform::fs::Dir;

use crate::instance::{Instance, Known, ServerSession};
use crate::sync::lock;
use mcpx_proto::{Message, response_result};

/// The cache file format written by this build.
pub const FORMAT_VERSION: u32 = 1;

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
    entries: Mutex<HashMap<String, Option<CacheEntry>>>,
    /// The private listings ([`CacheEntry::private`]), by (key, authorization
    /// context): never written, never served to another context.
    private: Mutex<HashMap<(String, String), CacheEntry>>,
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
    pub fn get(&self, key: &str) -> Option<CacheEntry> {
        if let Some(e) = lock(&self.entries).get(key) {
            return e.clone();
        }
        let entry = match self.servers(false).and_then(|dir| dir.read(&Self::name(key))) {
            Ok(bytes) => match serde_json::from_slice::<CacheEntry>(&bytes) {
                Ok(e) => Some(e),
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

    /// The entry for `key` as a caller in authorization `context` sees it (its pool
    /// key, as [`crate::scope::PoolKey`] writes it): with the lists listed in that
    /// context when the server's lists are private, and none from another context.
    pub fn get_for(&self, key: &str, context: &str) -> Option<CacheEntry> {
        let entry = self.get(key)?;
        if !entry.private {
            return Some(entry);
        }
        let own = lock(&self.private).get(&(key.to_owned(), context.to_owned())).cloned();
        Some(own.unwrap_or(entry))
    }

    /// Forgets the private lists of `key` in every context (the server's login
    /// changed: its lists were fetched as someone else).
    pub fn forget_private(&self, key: &str) {
        lock(&self.private).retain(|(k, _), _| k != key);
    }

    /// Writes `entry` atomically and keeps it in memory.
    pub fn put(&self, entry: CacheEntry) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(&entry).map_err(std::io::Error::other)?;
        mcpx_platform::fs::write_atomic(&self.servers(true)?, &Self::name(&entry.key), &bytes, 0o600)?;
        lock(&self.entries).insert(entry.key.clone(), Some(entry));
        Ok(())
    }

    /// Records that the server's last start or listing failed, keeping what was
    /// listed before.
    pub fn record_error(&self, key: &str, server: &str, message: &str) {
        let mut entry = self.get(key).unwrap_or_else(|| empty(key, server));
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
        let written = if entry.private { entry.clone().without_lists() } else { entry.clone() };
        self.put(written).map_err(|e| format!("cannot write the schema cache: {e}"))?;
        let context = (key.to_owned(), inst.identity.key.clone());
        if entry.private {
            lock(&self.private).insert(context, entry.clone());
        } else {
            // Public now: nothing private of this server is kept any more.
            self.forget_private(key);
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
    }
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
    fn a_private_listing_is_seen_in_its_own_context_only() {
        let dir = tempfile::tempdir().unwrap();
        let cache = SchemaCache::new(Dir::open_unchecked(dir.path()).unwrap());
        let mut entry = empty("k", "s");
        entry.tools = Some(vec![raw(r#"{"name":"mine"}"#)]);
        entry.private = true;
        entry.fresh_until_ms = Some(10);
        cache.put(entry.clone().without_lists()).unwrap();
        lock(&cache.private).insert(("k".to_owned(), "session:a".to_owned()), entry);
        assert_eq!(cache.get_for("k", "session:a").and_then(|e| e.tools).map(|t| t.len()), Some(1));
        assert!(cache.get_for("k", "session:b").is_some_and(|e| e.tools.is_none()), "another context");
        assert!(cache.get("k").is_some_and(|e| e.tools.is_none() && e.private), "no context");
        assert!(cache.get("k").is_some_and(|e| e.is_stale(10) && !e.is_stale(9)));
        cache.forget_private("k");
        assert!(cache.get_for("k", "session:a").is_some_and(|e| e.tools.is_none()), "forgotten");
    }
}
