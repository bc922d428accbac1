//! The bodies of `POST /v1/pins` and `POST /v1/pins/review` (`docs/api.md`,
//! "Pinning"): each server's pinned and held tools and prompts, and the user's
//! decisions on what is held.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Caller;

/// `POST /v1/pins`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PinsRequest {
    /// The caller, whose configuration names the servers.
    #[serde(default)]
    pub caller: Caller,
    /// One server (every offered one when `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

/// One server of the answer of `POST /v1/pins`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PinnedServer {
    /// The server's name.
    pub server: String,
    /// Its pinning mode: `off`, `warn`, `hold` or `strict`.
    pub pinning: String,
    /// Its tools, by name.
    pub tools: Vec<PinRow>,
    /// Its prompts, by name.
    pub prompts: Vec<PinRow>,
}

/// One tool or prompt of a [`PinnedServer`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PinRow {
    /// Its name.
    pub name: String,
    /// `pinned`, `held` (waiting for review) or `rejected` (held, the user said no).
    pub state: String,
    /// The approved definition's hash (`sha256:` and 64 hex digits); `null` for one never
    /// approved.
    pub hash: Option<String>,
    /// What the poisoning scan found in the approved definition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<FindingRow>,
    /// The definition held, when one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<PinChange>,
}

/// A held definition and what it would replace.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PinChange {
    /// The approved definition (`name`, `title`, `description`, schemas and annotations
    /// of a tool; `name`, `title`, `description` and `arguments` of a prompt); `null`
    /// for one new on a pinned server, or flagged at its first listing.
    pub before: Option<Value>,
    /// The definition held.
    pub after: Value,
    /// Its hash: what a decision names.
    pub hash: String,
    /// What the poisoning scan found in it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<FindingRow>,
    /// When it was first listed, seconds since the Unix epoch.
    pub since: u64,
}

/// One thing the poisoning scan found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindingRow {
    /// `hidden-text`, `tag-block`, `model-instruction`, `credential-path` or
    /// `other-servers-tool`.
    pub pattern: String,
    /// Where, as a JSON pointer into the definition (`/description`).
    pub at: String,
    /// What, in a few words.
    pub detail: String,
}

/// `POST /v1/pins/review`: the user's decisions on held definitions of one server.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReviewRequest {
    /// The caller, whose configuration names the server.
    #[serde(default)]
    pub caller: Caller,
    /// The server.
    pub server: String,
    /// One decision per held definition.
    pub decisions: Vec<PinDecision>,
}

/// The user's decision on one held definition.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PinDecision {
    /// `tool` or `prompt`.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// The hash of the definition the user saw ([`PinChange::hash`]): a definition that
    /// changed since is not decided.
    pub hash: String,
    /// `true`: it becomes the pin; `false`: it stays held until it changes again.
    pub approve: bool,
}

/// The answer of `POST /v1/pins/review`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReviewAnswer {
    /// How many were approved.
    pub approved: usize,
    /// How many were rejected.
    pub rejected: usize,
}
