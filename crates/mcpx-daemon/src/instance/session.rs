//! The MCP session an instance negotiated with its server.

use std::collections::HashMap;

use serde_json::value::RawValue;

/// The MCP session negotiated at `initialize` (MCP 2025-11-25, Lifecycle,
/// "Initialization"): kept raw so it can be stored and handed on unchanged.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ServerSession {
    /// The protocol revision the server answered.
    #[serde(rename = "protocolVersion")]
    pub protocol_version: String,
    /// The server's capabilities object.
    pub capabilities: Box<RawValue>,
    /// The server's `serverInfo`.
    #[serde(rename = "serverInfo", default, skip_serializing_if = "Option::is_none")]
    pub server_info: Option<Box<RawValue>>,
    /// The server's instructions, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

impl ServerSession {
    /// Whether the server declared capability `name` (`tools`, `resources`, `prompts`).
    pub fn has_capability(&self, name: &str) -> bool {
        serde_json::from_str::<HashMap<String, serde::de::IgnoredAny>>(self.capabilities.get())
            .map(|m| m.contains_key(name))
            .unwrap_or(false)
    }
}
