//! Where config files live: the mcpx user config ([`ConfigEnv`]), the other MCP clients
//! whose files mcpx reads and where each keeps its user-level file ([`Client`]), and what
//! kind of file a path is ([`FileKind`]).

use std::path::{Path, PathBuf};

use std::collections::HashMap;

/// The parts of the daemon's captured environment that locate the user config file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigEnv {
    /// `$HOME`.
    pub home: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME`; ignored unless absolute (as the XDG spec says).
    pub xdg_config_home: Option<PathBuf>,
    /// `$CODEX_HOME`, where Codex keeps `config.toml`; ignored unless absolute.
    pub codex_home: Option<PathBuf>,
    /// `$CLAUDE_CONFIG_DIR`, where Claude Code keeps `.claude.json`; ignored unless absolute.
    pub claude_config_dir: Option<PathBuf>,
    /// `$GEMINI_CLI_HOME`, which Gemini CLI uses in place of the home directory; ignored
    /// unless absolute.
    pub gemini_cli_home: Option<PathBuf>,
    /// `$COPILOT_HOME`, where GitHub Copilot CLI keeps `mcp-config.json`; ignored unless
    /// absolute.
    pub copilot_home: Option<PathBuf>,
    /// `$HOME` with symbolic links resolved, when that differs from `home`: the walk up
    /// from a caller's real directory meets this one.
    pub home_real: Option<PathBuf>,
}

impl ConfigEnv {
    /// Reads `HOME`, `XDG_CONFIG_HOME`, `CODEX_HOME`, `CLAUDE_CONFIG_DIR`,
    /// `GEMINI_CLI_HOME` and `COPILOT_HOME` from a captured environment; empty values
    /// count as unset.
    pub fn from_vars(vars: &HashMap<String, String>) -> Self {
        let get = |name: &str| vars.get(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        Self {
            home: get("HOME"),
            xdg_config_home: get("XDG_CONFIG_HOME"),
            codex_home: get("CODEX_HOME"),
            claude_config_dir: get("CLAUDE_CONFIG_DIR"),
            gemini_cli_home: get("GEMINI_CLI_HOME"),
            copilot_home: get("COPILOT_HOME"),
            home_real: get("HOME").and_then(|h| std::fs::canonicalize(&h).ok().filter(|r| *r != h)),
        }
    }

    /// Whether `path` is a user-level file: the mcpx user config or a client's
    /// [`Client::user_file`]. Such a file is never read as a project file.
    pub fn is_user_level(&self, path: &Path) -> bool {
        self.user_level_files().iter().any(|f| f == path)
    }

    /// Every user-level file: the mcpx user config and each client's
    /// [`Client::user_file`], also under [`home_real`](Self::home_real) when `HOME` is a
    /// link. The walk up from a caller computes this once, not per candidate.
    pub fn user_level_files(&self) -> Vec<PathBuf> {
        let of = |env: &ConfigEnv| {
            let clients = Client::ALL.iter().filter_map(|c| c.user_file(env));
            env.user_file().into_iter().chain(clients).collect::<Vec<_>>()
        };
        let mut files = of(self);
        if let Some(real) = &self.home_real {
            files.extend(of(&ConfigEnv { home: Some(real.clone()), ..self.clone() }));
        }
        files
    }

    /// The user config file: `$XDG_CONFIG_HOME/mcpx/config.json`, else
    /// `$HOME/.config/mcpx/config.json`; `None` when neither variable is usable.
    pub fn user_file(&self) -> Option<PathBuf> {
        let base = match &self.xdg_config_home {
            Some(xdg) if xdg.is_absolute() => xdg.clone(),
            _ => self.home.as_ref()?.join(".config"),
        };
        Some(base.join("mcpx").join("config.json"))
    }
}

/// An MCP client whose config files mcpx can read. Its user-level file comes in through
/// `"imports"` in the mcpx user config; `.cursor/mcp.json` and `.vscode/mcp.json` are also
/// found upward as project files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Client {
    /// Claude Desktop: `claude_desktop_config.json`.
    ClaudeDesktop,
    /// Claude Code: `~/.claude.json` (user and per-project "local" servers).
    ClaudeCode,
    /// Cursor: `~/.cursor/mcp.json`.
    Cursor,
    /// VS Code: the user profile's `mcp.json`.
    Vscode,
    /// OpenAI Codex CLI: `~/.codex/config.toml` (TOML).
    Codex,
    /// Gemini CLI: `~/.gemini/settings.json`.
    Gemini,
    /// Windsurf: `~/.codeium/windsurf/mcp_config.json`.
    Windsurf,
    /// OpenCode: `~/.config/opencode/opencode.json`, servers under `mcp`.
    Opencode,
    /// Zed: `~/.config/zed/settings.json`, servers under `context_servers`.
    Zed,
    /// Goose: `~/.config/goose/config.yaml` (YAML), servers under `extensions`.
    Goose,
    /// Cline: `~/.cline/data/settings/cline_mcp_settings.json`.
    Cline,
    /// Roo Code (the VS Code extension): `mcp_settings.json` in its global storage.
    RooCode,
    /// Continue: `~/.continue/config.yaml` (YAML), a list under `mcpServers`.
    Continue,
    /// LM Studio: `~/.lmstudio/mcp.json`.
    LmStudio,
    /// Kiro: `~/.kiro/settings/mcp.json`.
    Kiro,
    /// Crush: `~/.config/crush/crush.json`, servers under `mcp`.
    Crush,
    /// Amazon Q Developer CLI: `~/.aws/amazonq/mcp.json`.
    AmazonQ,
    /// GitHub Copilot CLI: `~/.copilot/mcp-config.json`.
    CopilotCli,
}

/// How a client's file holds its servers: its format and the top-level key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// JSON with comments; servers are an object under the key, by name.
    Json(&'static str),
    /// TOML; servers are tables under the key, by name (Codex's `[mcp_servers.NAME]`).
    Toml(&'static str),
    /// YAML; servers are a mapping under the key, by name (Goose's `extensions`).
    YamlMap(&'static str),
    /// YAML; servers are a sequence under the key, each named by its `name` (Continue's
    /// `mcpServers`).
    YamlList(&'static str),
}

impl Layout {
    /// The top-level key that holds the servers.
    pub fn key(self) -> &'static str {
        match self {
            Layout::Json(k) | Layout::Toml(k) | Layout::YamlMap(k) | Layout::YamlList(k) => k,
        }
    }
}

impl Client {
    /// Every client, in the order `mcpx import` lists them.
    pub const ALL: [Client; 18] = [
        Client::ClaudeDesktop,
        Client::ClaudeCode,
        Client::Cursor,
        Client::Vscode,
        Client::Codex,
        Client::Gemini,
        Client::Windsurf,
        Client::Opencode,
        Client::Zed,
        Client::Goose,
        Client::Cline,
        Client::RooCode,
        Client::Continue,
        Client::LmStudio,
        Client::Kiro,
        Client::Crush,
        Client::AmazonQ,
        Client::CopilotCli,
    ];

    /// The name used in `"imports"`, `mcpx import` and `mcpx connect`: `claude-desktop`,
    /// `claude-code`, `cursor`, `vscode`, `codex`, `gemini`, `windsurf`, `opencode`, `zed`,
    /// `goose`, `cline`, `roo-code`, `continue`, `lm-studio`, `kiro`, `crush`, `amazon-q`
    /// or `copilot-cli`.
    pub fn name(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "claude-desktop",
            Client::ClaudeCode => "claude-code",
            Client::Cursor => "cursor",
            Client::Vscode => "vscode",
            Client::Codex => "codex",
            Client::Gemini => "gemini",
            Client::Windsurf => "windsurf",
            Client::Opencode => "opencode",
            Client::Zed => "zed",
            Client::Goose => "goose",
            Client::Cline => "cline",
            Client::RooCode => "roo-code",
            Client::Continue => "continue",
            Client::LmStudio => "lm-studio",
            Client::Kiro => "kiro",
            Client::Crush => "crush",
            Client::AmazonQ => "amazon-q",
            Client::CopilotCli => "copilot-cli",
        }
    }

    /// The product's own name, for messages: "Claude Desktop", "VS Code", ...
    pub fn label(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "Claude Desktop",
            Client::ClaudeCode => "Claude Code",
            Client::Cursor => "Cursor",
            Client::Vscode => "VS Code",
            Client::Codex => "Codex",
            Client::Gemini => "Gemini CLI",
            Client::Windsurf => "Windsurf",
            Client::Opencode => "OpenCode",
            Client::Zed => "Zed",
            Client::Goose => "Goose",
            Client::Cline => "Cline",
            Client::RooCode => "Roo Code",
            Client::Continue => "Continue",
            Client::LmStudio => "LM Studio",
            Client::Kiro => "Kiro",
            Client::Crush => "Crush",
            Client::AmazonQ => "Amazon Q Developer CLI",
            Client::CopilotCli => "GitHub Copilot CLI",
        }
    }

    /// How this client's files hold their servers (see each client's section of
    /// `tests/fixtures/clients/README.md`).
    pub fn layout(self) -> Layout {
        match self {
            Client::Vscode => Layout::Json("servers"),
            Client::Codex => Layout::Toml("mcp_servers"),
            Client::Opencode | Client::Crush => Layout::Json("mcp"),
            Client::Zed => Layout::Json("context_servers"),
            Client::Goose => Layout::YamlMap("extensions"),
            Client::Continue => Layout::YamlList("mcpServers"),
            _ => Layout::Json("mcpServers"),
        }
    }

    /// Whether this client is a desktop application (or an editor's extension), started
    /// from a launcher whose `PATH` may not hold the directory `mcpx` is in; terminal
    /// clients inherit the shell's.
    pub fn is_desktop(self) -> bool {
        !matches!(
            self,
            Client::ClaudeCode
                | Client::Codex
                | Client::Gemini
                | Client::Opencode
                | Client::Goose
                | Client::Crush
                | Client::AmazonQ
                | Client::CopilotCli
        )
    }

    /// This client's user-level config file on this OS, from the daemon's environment;
    /// `None` when `HOME` is unknown. The file need not exist. "Config dir" below is
    /// `$XDG_CONFIG_HOME` (when absolute), else `~/.config`; "app dir" is
    /// `~/Library/Application Support` on macOS and the config dir elsewhere.
    ///
    /// - Claude Desktop: `<app dir>/Claude/claude_desktop_config.json`.
    /// - Claude Code: `$CLAUDE_CONFIG_DIR/.claude.json`, else `~/.claude.json`.
    /// - Cursor: `~/.cursor/mcp.json`.
    /// - VS Code: `<app dir>/Code/User/mcp.json`.
    /// - Codex: `$CODEX_HOME/config.toml`, else `~/.codex/config.toml`.
    /// - Gemini CLI: `$GEMINI_CLI_HOME/.gemini/settings.json`, else `~/.gemini/settings.json`.
    /// - Windsurf: `~/.codeium/windsurf/mcp_config.json`.
    /// - OpenCode: `<config dir>/opencode/opencode.json` (`opencode.jsonc` when only that
    ///   exists).
    /// - Zed: `<config dir>/zed/settings.json`.
    /// - Goose: `<config dir>/goose/config.yaml`.
    /// - Cline: `~/.cline/data/settings/cline_mcp_settings.json` (shared by its VS Code
    ///   extension and CLI; older builds kept it in VS Code's global storage and move it
    ///   here).
    /// - Roo Code: `<app dir>/Code/User/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json`.
    /// - Continue: `~/.continue/config.yaml`.
    /// - LM Studio: `~/.lmstudio/mcp.json`.
    /// - Kiro: `~/.kiro/settings/mcp.json`.
    /// - Crush: `<config dir>/crush/crush.json`.
    /// - Amazon Q Developer CLI: `~/.aws/amazonq/mcp.json`.
    /// - GitHub Copilot CLI: `$COPILOT_HOME/mcp-config.json`, else `~/.copilot/mcp-config.json`.
    pub fn user_file(self, env: &ConfigEnv) -> Option<PathBuf> {
        let home = env.home.as_deref()?;
        let config = || absolute(&env.xdg_config_home).unwrap_or(&home.join(".config")).to_path_buf();
        Some(match self {
            Client::ClaudeDesktop => app_config_dir(env, home)?.join("Claude").join("claude_desktop_config.json"),
            Client::ClaudeCode => absolute(&env.claude_config_dir).unwrap_or(home).join(".claude.json"),
            Client::Cursor => home.join(".cursor").join("mcp.json"),
            Client::Vscode => app_config_dir(env, home)?.join("Code").join("User").join("mcp.json"),
            Client::Codex => match absolute(&env.codex_home) {
                Some(dir) => dir.join("config.toml"),
                None => home.join(".codex").join("config.toml"),
            },
            Client::Gemini => absolute(&env.gemini_cli_home).unwrap_or(home).join(".gemini").join("settings.json"),
            Client::Windsurf => home.join(".codeium").join("windsurf").join("mcp_config.json"),
            Client::Opencode => either(&config().join("opencode"), "opencode.json", "opencode.jsonc"),
            Client::Zed => config().join("zed").join("settings.json"),
            Client::Goose => config().join("goose").join("config.yaml"),
            Client::Cline => home.join(".cline/data/settings/cline_mcp_settings.json"),
            Client::RooCode => app_config_dir(env, home)?
                .join("Code/User/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json"),
            Client::Continue => home.join(".continue").join("config.yaml"),
            Client::LmStudio => home.join(".lmstudio").join("mcp.json"),
            Client::Kiro => home.join(".kiro").join("settings").join("mcp.json"),
            Client::Crush => config().join("crush").join("crush.json"),
            Client::AmazonQ => home.join(".aws").join("amazonq").join("mcp.json"),
            Client::CopilotCli => match absolute(&env.copilot_home) {
                Some(dir) => dir.join("mcp-config.json"),
                None => home.join(".copilot").join("mcp-config.json"),
            },
        })
    }

    /// What this client's file cannot say that mcpx would need, or what mcpx cannot read
    /// from it, in a sentence for `mcpx import` and `mcpx connect --move`; `None` when
    /// nothing is lost (see each client's section of `tests/fixtures/clients/README.md`).
    pub fn caveat(self) -> Option<&'static str> {
        Some(match self {
            Client::ClaudeDesktop | Client::LmStudio => {
                "its file cannot name an environment variable: a token in it is written out literally"
            }
            Client::Zed => {
                "its file cannot name an environment variable (a token in it is written out literally) or choose SSE"
            }
            Client::Goose => {
                "an `env_keys` variable Goose keeps in its keyring is read from the daemon's environment instead, so set it there"
            }
            Client::Continue => {
                "`${{ secrets.NAME }}` is read as the environment variable NAME (Continue's .env files and hub are not read); its file cannot turn a server off"
            }
            Client::Opencode => "`{file:PATH}` values are kept as written, not read from the file",
            Client::CopilotCli => {
                "servers switched off with /mcp disable are kept in its settings.json, which mcpx does not read"
            }
            Client::Crush => "`$(command)` in a value is kept as written, not run",
            _ => return None,
        })
    }

    /// This client's file for the project in `dir`, for `mcpx connect --project`; `None`
    /// for a client with no project file:
    ///
    /// - Claude Code: `.mcp.json`; Cursor: `.cursor/mcp.json`; VS Code: `.vscode/mcp.json`;
    /// - Codex: `.codex/config.toml`; Gemini CLI: `.gemini/settings.json`;
    /// - OpenCode: `opencode.json` (`opencode.jsonc` when only that exists); Zed:
    ///   `.zed/settings.json`; Roo Code: `.roo/mcp.json`;
    /// - Kiro: `.kiro/settings/mcp.json`; Crush: `crush.json` (`.crush.json` when only
    ///   that exists); Amazon Q: `.amazonq/mcp.json`;
    /// - GitHub Copilot CLI: `.github/mcp.json`.
    pub fn project_file(self, dir: &Path) -> Option<PathBuf> {
        let rel = match self {
            Client::ClaudeCode => ".mcp.json",
            Client::Cursor => ".cursor/mcp.json",
            Client::Vscode => ".vscode/mcp.json",
            Client::Codex => ".codex/config.toml",
            Client::Gemini => ".gemini/settings.json",
            Client::Opencode => return Some(either(dir, "opencode.json", "opencode.jsonc")),
            Client::Zed => ".zed/settings.json",
            Client::RooCode => ".roo/mcp.json",
            Client::Kiro => ".kiro/settings/mcp.json",
            Client::Crush => return Some(either(dir, "crush.json", ".crush.json")),
            Client::AmazonQ => ".amazonq/mcp.json",
            Client::CopilotCli => ".github/mcp.json",
            _ => return None,
        };
        Some(dir.join(rel))
    }
}

/// `dir/name`, unless only `dir/other` exists (a client that reads either).
fn either(dir: &Path, name: &str, other: &str) -> PathBuf {
    let (first, second) = (dir.join(name), dir.join(other));
    if !first.exists() && second.exists() { second } else { first }
}

/// The directory a variable names, when it is absolute (a relative one is ignored).
fn absolute(dir: &Option<PathBuf>) -> Option<&Path> {
    dir.as_deref().filter(|d| d.is_absolute())
}

/// Where desktop applications keep their settings: `~/Library/Application Support` on
/// macOS, else `$XDG_CONFIG_HOME` (when absolute) or `~/.config`.
fn app_config_dir(env: &ConfigEnv, home: &Path) -> Option<PathBuf> {
    if cfg!(target_os = "macos") {
        return Some(home.join("Library").join("Application Support"));
    }
    Some(absolute(&env.xdg_config_home).unwrap_or(&home.join(".config")).to_path_buf())
}

impl std::fmt::Display for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Client {
    type Err = String;

    /// Parses a name from `"imports"`; the error lists the names that exist.
    fn from_str(s: &str) -> Result<Self, String> {
        Client::ALL.into_iter().find(|c| c.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Client::ALL.iter().map(|c| c.name()).collect();
            format!("unknown client `{s}` (use one of: {})", names.join(", "))
        })
    }
}

impl Client {
    /// The client whose format the file at `path` is in, decided from its path alone as
    /// for parsing: `None` for mcpx's own files. For the `source` of a row that has no
    /// parsed entry (an entry or a file that does not parse, a file warning).
    pub fn of_file(path: &Path, env: &ConfigEnv) -> Option<Client> {
        FileKind::of(path, env).client
    }
}

/// What a config file is, decided from its path alone (so a cached parse never depends on
/// how a request reached the file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct FileKind {
    /// Whose format the file is in; `None` for mcpx's own (`.mcpx.json`, `.mcp.json`, the
    /// user config, any other file).
    pub(super) client: Option<Client>,
    /// The folder `${workspaceFolder}` stands for: the project directory of a project file
    /// (the parent of `.vscode`/`.cursor`, else the file's directory); `None` in a
    /// user-level file, where it has no meaning.
    pub(super) workspace: Option<PathBuf>,
}

impl FileKind {
    /// Classifies `path`: a client's user-level file (by [`Client::user_file`]) is in that
    /// client's format; `.vscode/mcp.json` and `.cursor/mcp.json` are VS Code's and
    /// Cursor's project files; a `.toml` file is Codex's; anything else is mcpx's own. The
    /// mcpx user config and clients' user-level files have no workspace.
    pub(super) fn of(path: &Path, env: &ConfigEnv) -> FileKind {
        if let Some(client) = Client::ALL.into_iter().find(|c| c.user_file(env).as_deref() == Some(path)) {
            return FileKind { client: Some(client), workspace: None };
        }
        if env.user_file().as_deref() == Some(path) {
            return FileKind { client: None, workspace: None };
        }
        let dir = path.parent();
        let dir_name = dir.and_then(Path::file_name).and_then(|n| n.to_str());
        let client = match (dir_name, path.file_name().and_then(|n| n.to_str())) {
            (Some(".vscode"), Some("mcp.json")) => Some(Client::Vscode),
            (Some(".cursor"), Some("mcp.json")) => Some(Client::Cursor),
            _ if path.extension().is_some_and(|e| e == "toml") => Some(Client::Codex),
            _ => None,
        };
        let workspace = match client {
            Some(Client::Vscode | Client::Cursor) => dir.and_then(Path::parent),
            _ => dir,
        };
        FileKind { client, workspace: workspace.map(Path::to_path_buf) }
    }
}
