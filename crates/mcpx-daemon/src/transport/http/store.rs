//! Kept remote sessions: `<state>/remote/<fingerprint>-<key hash>.json` (0600), one
//! file per instance, so a later daemon re-uses the session without a new
//! `initialize`, as it adopts supervisors.

use mcpx_platform::fs::Dir;
use mcpx_proto::attach::Identity;
use sha2::{Digest, Sha256};

/// A remote MCP session a previous daemon kept, found by [`kept_remotes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptRemote {
    /// The instance's fingerprint.
    pub fingerprint: String,
    /// Its pool key.
    pub key: String,
    /// The file's name in the directory.
    pub name: String,
}

/// The sessions kept in `dir`; unreadable files (a link is not followed), and files
/// of a daemon that did not record the instance, are skipped.
pub fn kept_remotes(dir: &Dir) -> Vec<KeptRemote> {
    let Ok(names) = dir.names() else { return Vec::new() };
    names
        .into_iter()
        .filter_map(|name| name.into_string().ok())
        .filter(|name| name.ends_with(".json") && !name.starts_with('.'))
        .filter_map(|name| {
            let file: SessionFile = serde_json::from_slice(&dir.read(&name).ok()?).ok()?;
            (!file.fingerprint.is_empty()).then_some(KeptRemote { fingerprint: file.fingerprint, key: file.key, name })
        })
        .collect()
}

/// The name of the file a session of this instance is kept in:
/// `<fingerprint>-<16 hex digits of SHA-256 of the key>.json`.
pub(super) fn file_name(identity: &Identity) -> String {
    let key = Sha256::digest(identity.key.as_bytes());
    let hex: String = key.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("{}-{hex}.json", identity.fingerprint)
}

/// A session kept for the next daemon: the file's contents.
#[derive(Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct SessionFile {
    /// The URL as written, so a file never applies to another server.
    pub(super) url: String,
    /// The instance's fingerprint, so a later daemon can take it up.
    #[serde(default)]
    pub(super) fingerprint: String,
    /// The instance's pool key.
    #[serde(default)]
    pub(super) key: String,
    /// `Mcp-Session-Id`.
    pub(super) session_id: String,
    /// The negotiated revision (`MCP-Protocol-Version`).
    pub(super) protocol_version: String,
    /// The `initialize` request, repeated when the server forgets the session.
    pub(super) initialize: String,
    /// The instance's MCP session (the `initialize` result), JSON.
    pub(super) session: String,
    /// The epoch of the upstream ids this session used.
    pub(super) epoch: u32,
}

impl SessionFile {
    /// The session kept in file `name` of `dir` for the server at `url` (as
    /// written); `None` when there is none, it cannot be read, or it belongs to
    /// another URL.
    pub(super) fn load(dir: &Dir, name: &str, url: &str) -> Option<SessionFile> {
        let file: SessionFile = serde_json::from_slice(&dir.read(name).ok()?).ok()?;
        (file.url == url).then_some(file)
    }

    /// Writes file `name` of `dir` atomically, readable by the user only (the
    /// session id is a credential).
    pub(super) fn save(&self, dir: &Dir, name: &str) -> std::io::Result<()> {
        mcpx_platform::fs::write_atomic(dir, name, &serde_json::to_vec(self).map_err(std::io::Error::other)?, 0o600)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(key: &str) -> Identity {
        Identity {
            server: "r".into(),
            fingerprint: "abc123".into(),
            cache_key: "abc123".into(),
            key: key.into(),
            sharing: "shared".into(),
        }
    }

    fn file(url: &str) -> SessionFile {
        SessionFile {
            url: url.into(),
            fingerprint: "abc123".into(),
            key: "session:s1".into(),
            session_id: "sid-1".into(),
            protocol_version: "2025-11-25".into(),
            initialize: r#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#.into(),
            session: r#"{"protocolVersion":"2025-11-25","capabilities":{}}"#.into(),
            epoch: 3,
        }
    }

    #[test]
    fn each_key_has_its_own_file_named_after_the_fingerprint() {
        let global = file_name(&identity("global"));
        assert!(global.starts_with("abc123-") && global.ends_with(".json"), "{global}");
        assert_eq!(global.len(), "abc123-".len() + 16 + ".json".len());
        assert_ne!(global, file_name(&identity("session:s1")));
        assert_eq!(global, file_name(&identity("global")));
    }

    #[test]
    fn a_kept_session_is_found_for_its_url_only() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_private(&tmp.path().join("remote"), true).unwrap();
        let name = file_name(&identity("session:s1"));
        file("https://example.com/${PATH_PART}").save(&dir, &name).unwrap();
        assert_eq!(
            SessionFile::load(&dir, &name, "https://example.com/${PATH_PART}"),
            Some(file("https://example.com/${PATH_PART}"))
        );
        assert_eq!(SessionFile::load(&dir, &name, "https://other.example/"), None);
        std::fs::write(dir.join("junk.json"), b"{").unwrap();
        let kept = kept_remotes(&dir);
        assert_eq!(kept, [KeptRemote { fingerprint: "abc123".into(), key: "session:s1".into(), name }]);
    }
}
