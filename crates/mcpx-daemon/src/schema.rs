//! The on-disk schema cache (design: "Discovery without starting servers"): per
//! server, the tools, resources, resource templates, prompts and instructions it
//! last listed, so `mcpx ls`, `search` and `tools` answer without starting anything.
//!
//! One file per server, `<cache>/servers/<key>.json`, where the key is the
//! fingerprint of the entry as written (so the cache survives the server's binary
//! being upgraded or deleted). Files are written atomically (temp file, fsync,
//! rename, all through the cache directory's descriptor). Format version 1; unknown
//! fields are ignored when read.

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
}

impl SchemaCache {
    /// The cache in `cache`, the open cache directory (`servers/` is made on first
    /// write).
    pub fn new(cache: Dir) -> SchemaCache {
        SchemaCache { cache, servers: Mutex::new(None), entries: Mutex::new(HashMap::new()) }
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
        if has("tools") {
            entry.tools = Some(list_all(inst, "tools/list", "tools", timeout).await?);
        } else {
            entry.tools = Some(Vec::new());
        }
        if has("resources") {
            // Some servers declare resources but fail these; a failed optional list is logged, not fatal.
            entry.resources = list_all(inst, "resources/list", "resources", timeout).await.ok();
            entry.resource_templates =
                list_all(inst, "resources/templates/list", "resourceTemplates", timeout).await.ok();
        }
        if has("prompts") {
            entry.prompts = list_all(inst, "prompts/list", "prompts", timeout).await.ok();
        }
        self.put(entry.clone()).map_err(|e| format!("cannot write the schema cache: {e}"))?;
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
    }
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Calls a paginated list method until no `nextCursor` is returned (MCP 2025-11-25,
/// Utilities, "Pagination") and gathers the items of `field`.
async fn list_all(
    inst: &Instance,
    method: &str,
    field: &str,
    timeout: Option<std::time::Duration>,
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
