//! TEMPORARY stand-in for the core's client interface until it lands in main; removed then.

#![allow(missing_docs, clippy::unwrap_used, clippy::type_complexity, dead_code)]

use std::path::{Path, PathBuf};

use mcpx_daemon::config::{ConfigEnv, ConfigError};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    ClaudeDesktop,
    ClaudeCode,
    Cursor,
    Vscode,
    Codex,
    Gemini,
    Windsurf,
}

impl Client {
    pub const ALL: [Client; 7] = [
        Client::ClaudeDesktop,
        Client::ClaudeCode,
        Client::Cursor,
        Client::Vscode,
        Client::Codex,
        Client::Gemini,
        Client::Windsurf,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "claude-desktop",
            Client::ClaudeCode => "claude-code",
            Client::Cursor => "cursor",
            Client::Vscode => "vscode",
            Client::Codex => "codex",
            Client::Gemini => "gemini",
            Client::Windsurf => "windsurf",
        }
    }

    pub fn user_file(self, env: &ConfigEnv) -> Option<PathBuf> {
        let home = env.home.clone()?;
        let config = env.xdg_config_home.clone().unwrap_or_else(|| home.join(".config"));
        Some(match self {
            Client::ClaudeDesktop => config.join("Claude/claude_desktop_config.json"),
            Client::ClaudeCode => home.join(".claude.json"),
            Client::Cursor => home.join(".cursor/mcp.json"),
            Client::Vscode => config.join("Code/User/mcp.json"),
            Client::Codex => home.join(".codex/config.toml"),
            Client::Gemini => home.join(".gemini/settings.json"),
            Client::Windsurf => home.join(".codeium/windsurf/mcp_config.json"),
        })
    }
}

impl std::str::FromStr for Client {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Client::ALL.into_iter().find(|c| c.name() == s).ok_or_else(|| {
            format!(
                "unknown client `{s}`; the clients are {}",
                Client::ALL.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
            )
        })
    }
}

pub fn read_client_file(
    client: Client,
    path: &Path,
    _cwd: Option<&Path>,
) -> Result<Vec<(String, serde_json::Map<String, serde_json::Value>)>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Io { file: path.to_owned(), error })?;
    let v = jsonc_parser::cst::CstRootNode::parse(&text, &Default::default()).map_err(|e| ConfigError::Syntax {
        file: path.to_owned(),
        line: e.line_display(),
        column: e.column_display(),
        message: e.kind().to_string(),
    })?;
    let v = v.to_serde_value().unwrap_or_default();
    let key = if client == Client::Vscode { "servers" } else { "mcpServers" };
    Ok(v.get(key)
        .and_then(|s| s.as_object())
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_object().cloned().unwrap_or_default())).collect())
        .unwrap_or_default())
}
