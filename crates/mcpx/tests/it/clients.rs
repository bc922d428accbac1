//! Other clients' configuration files (`tests/fixtures/clients/`, one per format,
//! shaped as each client writes it): found upward (`.cursor/mcp.json`,
//! `.vscode/mcp.json`) or through `imports` in the user config (the user-level files),
//! each server shown by `ls` with its source and reached by a call, stdio and remote.
//! Also the rules between files: Claude Code's `projects.<dir>`, the first import
//! wins, a project file beats an import, an edited import is re-read, and `imports`
//! in a project file is only a warning.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::harness::{Run, Spawned, World, fake_http, fake_server};
use crate::remote::everything;

/// The token the fixtures' `${env:MCPX_T_TOKEN}` and friends expand to.
const TOKEN: &str = "fixture-token";

/// A world whose daemon reads no explicit file: a private `HOME` (its `.config` is
/// `XDG_CONFIG_HOME`), where the user-level files go, and `work/`, outside `HOME`,
/// for the projects. Remote servers the fixtures point at are stopped on drop.
struct Clients {
    w: World,
    home: PathBuf,
    work: PathBuf,
    /// Placeholder and value, replaced in every fixture placed.
    vars: Vec<(&'static str, String)>,
    _servers: Vec<Spawned>,
}

impl Clients {
    /// The world, with `@FAKE_SERVER@`, and the projects `work/proj` (`@PROJECT@`) and
    /// `work/proj-other` (`@OTHER_PROJECT@`), both created.
    fn new() -> Clients {
        let mut w = World::new(json!({}));
        let home = w.path("home");
        let work = w.path("work");
        for dir in [home.join(".config/mcpx"), work.join("proj"), work.join("proj-other")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        // Variables of the test's own environment that would move a client's file.
        for var in ["MCPX_CONFIG", "CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "COPILOT_HOME", "MCPX_T_UNSET"]
        {
            w.unset.push(var.to_owned());
        }
        w.env.push(("HOME".to_owned(), home.display().to_string()));
        w.env.push(("XDG_CONFIG_HOME".to_owned(), home.join(".config").display().to_string()));
        w.env.push(("MCPX_T_TOKEN".to_owned(), TOKEN.to_owned()));
        let vars = vec![
            ("@FAKE_SERVER@", fake_server()),
            ("@PROJECT@", work.join("proj").display().to_string()),
            ("@OTHER_PROJECT@", work.join("proj-other").display().to_string()),
        ];
        Clients { w, home, work, vars, _servers: Vec::new() }
    }

    /// Also a streamable HTTP server for `@URL@`: the fake server's `--http` mode,
    /// recording what it is sent (see [`Clients::http_headers`]).
    fn with_http(mut self) -> Clients {
        let record = self.w.path("http.rec").display().to_string();
        let (server, url) = fake_http("127.0.0.1:0", &[("FAKE_RECORD", &record)]);
        self._servers.push(server);
        self.vars.push(("@URL@", url));
        self
    }

    /// Also an HTTP+SSE server for `@SSE_URL@`: server-everything in its `sse` mode.
    fn with_sse(mut self) -> Clients {
        let (server, port) = everything("sse");
        self._servers.push(server);
        self.vars.push(("@SSE_URL@", format!("http://127.0.0.1:{port}/sse")));
        self
    }

    /// The names of the headers the `@URL@` server was sent, one request a line.
    fn http_headers(&self) -> String {
        std::fs::read_to_string(self.w.path("http.rec.headers")).unwrap_or_default()
    }

    /// Writes `fixture` (a path under `tests/fixtures/clients/`), placeholders
    /// replaced, to `dest`, creating its directory; returns `dest`.
    fn place(&self, fixture: &str, dest: &Path) -> PathBuf {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/clients").join(fixture);
        let mut text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for (placeholder, value) in &self.vars {
            text = text.replace(placeholder, value);
        }
        assert!(!text.contains("@FAKE_SERVER@") && !text.contains("_URL@") && !text.contains("@URL@"), "{text}");
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::write(dest, text).unwrap();
        dest.to_path_buf()
    }

    /// Places the user-level fixture of `client` where that client keeps it.
    fn place_user_file(&self, client: &str) -> PathBuf {
        let (fixture, dest) = user_file(client);
        self.place(fixture, &self.home.join(dest))
    }

    /// Writes the mcpx user config: `imports`, and these servers.
    fn user_config(&self, imports: &[&str], servers: Value) {
        let config = json!({ "imports": imports, "mcpServers": servers });
        std::fs::write(self.home.join(".config/mcpx/config.json"), config.to_string()).unwrap();
    }

    /// Runs `mcpx <args>` in `dir`.
    fn run_in(&self, dir: &Path, args: &[&str]) -> Run {
        self.w.run_with(args, |cmd| {
            cmd.current_dir(dir);
        })
    }

    /// The rows of `ls --json` run in `dir`.
    fn rows(&self, dir: &Path) -> Vec<Value> {
        let run = self.run_in(dir, &["ls", "--json"]);
        assert_eq!(run.code, 0, "ls: {run:?}");
        run.json().as_array().unwrap().clone()
    }

    /// The row of `name` in `ls --json` run in `dir`.
    #[track_caller]
    fn row(&self, dir: &Path, name: &str) -> Value {
        let rows = self.rows(dir);
        rows.iter().find(|r| r["name"] == name).cloned().unwrap_or_else(|| panic!("no `{name}` in {rows:?}"))
    }

    /// The names `ls --json` lists in `dir`.
    fn names(&self, dir: &Path) -> Vec<String> {
        self.rows(dir).iter().filter_map(|r| r["name"].as_str().map(str::to_owned)).collect()
    }

    /// What `mcpx call <target> <args>` run in `dir` printed; it must succeed.
    #[track_caller]
    fn call(&self, dir: &Path, target: &str, args: Value) -> String {
        self.run_in(dir, &["call", target, &args.to_string()]).ok()
    }

    /// The value of `name` in the environment of `server`'s process (the fake
    /// server's `env` tool), called from `dir`.
    #[track_caller]
    fn env_of(&self, dir: &Path, server: &str, name: &str) -> String {
        let out = self.call(dir, &format!("{server}.env"), json!({ "name": name }));
        out.strip_suffix('\n').unwrap_or(&out).to_owned()
    }

    /// Asserts that `server`, seen from `dir`, comes from `file` of `client`, and that
    /// `server.echo` answers.
    #[track_caller]
    fn assert_served(&self, dir: &Path, server: &str, file: &Path, client: &str) {
        let row = self.row(dir, server);
        assert_source(&row, file, Some(client));
        assert_ne!(row["state"], "error", "{row}");
        let out = self.call(dir, &format!("{server}.echo"), json!({ "message": format!("hi {server}") }));
        assert!(out.contains(&format!("hi {server}")), "{server}: {out}");
    }
}

/// Every client mcpx reads, as `imports` and `mcpx connect` name them: the first seven,
/// then the eleven added with `mcpx connect`.
pub(crate) const ALL: [&str; 18] = [
    "claude-desktop",
    "claude-code",
    "cursor",
    "vscode",
    "codex",
    "gemini",
    "windsurf",
    "opencode",
    "zed",
    "goose",
    "cline",
    "roo-code",
    "continue",
    "lm-studio",
    "kiro",
    "crush",
    "amazon-q",
    "copilot-cli",
];

/// The fixture of `client`'s user-level file and where, under `HOME`, the client
/// keeps it on Linux.
pub(crate) fn user_file(client: &str) -> (&'static str, &'static str) {
    match client {
        "claude-desktop" => ("claude-desktop/claude_desktop_config.json", ".config/Claude/claude_desktop_config.json"),
        "claude-code" => ("claude-code/.claude.json", ".claude.json"),
        "cursor" => ("cursor/mcp.json", ".cursor/mcp.json"),
        "vscode" => ("vscode/mcp.json", ".config/Code/User/mcp.json"),
        "codex" => ("codex/config.toml", ".codex/config.toml"),
        "gemini" => ("gemini/settings.json", ".gemini/settings.json"),
        "windsurf" => ("windsurf/mcp_config.json", ".codeium/windsurf/mcp_config.json"),
        "opencode" => ("opencode/opencode.json", ".config/opencode/opencode.json"),
        "zed" => ("zed/settings.json", ".config/zed/settings.json"),
        "goose" => ("goose/config.yaml", ".config/goose/config.yaml"),
        "cline" => ("cline/cline_mcp_settings.json", ".cline/data/settings/cline_mcp_settings.json"),
        "roo-code" => (
            "roo-code/mcp_settings.json",
            ".config/Code/User/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json",
        ),
        "continue" => ("continue/config.yaml", ".continue/config.yaml"),
        "lm-studio" => ("lm-studio/mcp.json", ".lmstudio/mcp.json"),
        "kiro" => ("kiro/mcp.json", ".kiro/settings/mcp.json"),
        "crush" => ("crush/crush.json", ".config/crush/crush.json"),
        "amazon-q" => ("amazon-q/mcp.json", ".aws/amazonq/mcp.json"),
        "copilot-cli" => ("copilot-cli/mcp-config.json", ".copilot/mcp-config.json"),
        other => panic!("no fixture for {other}"),
    }
}

/// Asserts that `row`'s `source` is `{"file": file, "client": client}` (no `client`
/// for mcpx's own files).
#[track_caller]
fn assert_source(row: &Value, file: &Path, client: Option<&str>) {
    let source = &row["source"];
    assert_eq!(source["file"], file.display().to_string(), "{row}");
    match client {
        Some(client) => assert_eq!(source["client"], client, "{row}"),
        None => assert!(source.get("client").is_none(), "{row}"),
    }
}

/// Claude Desktop's file, imported: its stdio server, with its `env`.
#[test]
fn claude_desktop_through_imports() {
    let c = Clients::new();
    let file = c.place_user_file("claude-desktop");
    c.user_config(&["claude-desktop"], json!({}));
    let dir = &c.work;
    c.assert_served(dir, "desktop", &file, "claude-desktop");
    assert_eq!(c.env_of(dir, "desktop", "GREETING"), "from claude desktop");
}

/// Claude Code's `~/.claude.json`: the user scope (top-level `mcpServers`) for every
/// caller, and a project's local scope (`projects.<dir>.mcpServers`: streamable HTTP,
/// SSE, and a stdio entry of a user-scope name, which it beats) only for callers at
/// or below that directory, by path components (not `work/projects`).
#[test]
fn claude_code_user_scope_everywhere_and_local_scope_at_or_below_its_project() {
    let c = Clients::new().with_http().with_sse();
    let file = c.place_user_file("claude-code");
    c.user_config(&["claude-code"], json!({}));
    let below = c.work.join("proj/src/deep");
    let projects = c.work.join("projects");
    for dir in [&below, &projects] {
        std::fs::create_dir_all(dir).unwrap();
    }

    for server in ["cc-user", "cc-local", "cc-sse", "cc-shared"] {
        c.assert_served(&below, server, &file, "claude-code");
    }
    assert_eq!(c.env_of(&below, "cc-shared", "GREETING"), "local scope");
    assert_eq!(c.env_of(&below, "cc-user", "GREETING"), "from the user scope");
    assert!(!c.names(&below).contains(&"cc-other".to_owned()), "another project's local scope leaked");

    for dir in [&c.work, &projects] {
        let names = c.names(dir);
        for hidden in ["cc-local", "cc-sse", "cc-other"] {
            assert!(!names.contains(&hidden.to_owned()), "{hidden} seen from {}: {names:?}", dir.display());
        }
        assert_eq!(c.env_of(dir, "cc-shared", "GREETING"), "user scope");
    }
    let other = c.work.join("proj-other");
    c.assert_served(&other, "cc-other", &file, "claude-code");
    assert_eq!(c.env_of(&other, "cc-shared", "GREETING"), "user scope");
}

/// Claude Code's project file, `.mcp.json` as `claude mcp add --scope project` writes
/// it, is found upward: `${VAR}` and `${VAR:-default}` in `env`, `url` and `headers`.
#[test]
fn claude_code_project_file_found_upward() {
    let c = Clients::new().with_http();
    let project = c.work.join("proj");
    let file = c.place("claude-code-project/.mcp.json", &project.join(".mcp.json"));
    let below = project.join("src");
    std::fs::create_dir_all(&below).unwrap();
    c.w.trust_in(&below);
    for server in ["cc-project", "cc-project-http"] {
        let row = c.row(&below, server);
        assert_source(&row, &file, None);
        let out = c.call(&below, &format!("{server}.echo"), json!({ "message": "up" }));
        assert_eq!(out, "up\n", "{server}");
    }
    assert_eq!(c.env_of(&below, "cc-project", "TOKEN"), TOKEN);
    assert_eq!(c.env_of(&below, "cc-project", "GREETING"), "from the project scope");
    assert!(c.http_headers().contains("authorization"), "{}", c.http_headers());
}

/// Cursor's global `~/.cursor/mcp.json`, imported: stdio with `${env:NAME}`, and a
/// remote `url` with headers. From a directory under `HOME` it is still the user file,
/// not a project file: without `imports` its servers are not there.
#[test]
fn cursor_global_file_through_imports() {
    let c = Clients::new().with_http();
    let file = c.place_user_file("cursor");
    let under_home = c.home.join("code/app");
    std::fs::create_dir_all(&under_home).unwrap();
    c.user_config(&[], json!({}));
    let names = c.names(&under_home);
    assert!(!names.iter().any(|n| n.starts_with("cursor-")), "~/.cursor/mcp.json read as a project file: {names:?}");

    c.user_config(&["cursor"], json!({}));
    for dir in [&c.work, &under_home] {
        for server in ["cursor-global", "cursor-remote"] {
            c.assert_served(dir, server, &file, "cursor");
        }
    }
    assert_eq!(c.env_of(&c.work, "cursor-global", "TOKEN"), TOKEN);
    assert!(c.http_headers().contains("authorization"), "{}", c.http_headers());
}

/// A project's `.cursor/mcp.json` is found upward, with no `imports`, and
/// `${workspaceFolder}` is the project (the directory holding `.cursor/`).
#[test]
fn cursor_project_file_found_upward() {
    let c = Clients::new();
    let project = c.work.join("proj");
    let file = c.place("cursor-project/.cursor/mcp.json", &project.join(".cursor/mcp.json"));
    let below = project.join("src/deep");
    std::fs::create_dir_all(&below).unwrap();
    c.w.trust_in(&below);
    c.assert_served(&below, "cursor-proj", &file, "cursor");
    assert_eq!(c.env_of(&below, "cursor-proj", "PROJECT_DIR"), project.display().to_string());
    assert_eq!(c.env_of(&below, "cursor-proj", "HOME_DIR"), c.home.display().to_string());
    assert_eq!(c.env_of(&below, "cursor-proj", "TOKEN"), TOKEN);
    assert!(!c.names(&c.work).contains(&"cursor-proj".to_owned()), "seen from outside the project");
}

/// VS Code's user `mcp.json` (`servers`, `type`), imported: stdio with `${userHome}`,
/// and `type: http`.
#[test]
fn vscode_user_file_through_imports() {
    let c = Clients::new().with_http();
    let file = c.place_user_file("vscode");
    c.user_config(&["vscode"], json!({}));
    let dir = &c.work;
    for server in ["vscode-user", "vscode-http"] {
        c.assert_served(dir, server, &file, "vscode");
    }
    assert_eq!(c.env_of(dir, "vscode-user", "HOME_DIR"), c.home.display().to_string());
}

/// A project's `.vscode/mcp.json` (comments, `inputs`, `servers`) is found upward:
/// `${workspaceFolder}`, `${userHome}` and `${env:NAME}` expand, `type: sse` is
/// reached over SSE, and the server that uses `${input:ID}` alone fails while the
/// secret store lacks `ID`, saying what to do.
#[test]
fn vscode_project_file_found_upward_and_an_input_variable_fails_only_its_server() {
    let c = Clients::new().with_sse();
    let project = c.work.join("proj");
    let file = c.place("vscode-project/.vscode/mcp.json", &project.join(".vscode/mcp.json"));
    let below = project.join("src");
    std::fs::create_dir_all(&below).unwrap();
    c.w.trust_in(&below);
    for server in ["vscode-proj", "vscode-sse"] {
        c.assert_served(&below, server, &file, "vscode");
    }
    assert_eq!(c.env_of(&below, "vscode-proj", "PROJECT_DIR"), project.display().to_string());
    assert_eq!(c.env_of(&below, "vscode-proj", "HOME_DIR"), c.home.display().to_string());
    assert_eq!(c.env_of(&below, "vscode-proj", "TOKEN"), TOKEN);

    let row = c.row(&below, "vscode-input");
    assert_eq!(row["state"], "error", "{row}");
    assert_source(&row, &file, Some("vscode"));
    let error = row["error"].as_str().unwrap_or_else(|| panic!("{row}"));
    for part in ["vscode-input", "api-key", "run `mcpx secret set api-key`"] {
        assert!(error.contains(part), "`{part}` not in {error}");
    }
    let call = c.run_in(&below, &["call", "vscode-input.echo", r#"{"message":"no"}"#]);
    assert_eq!(call.code, 2, "{call:?}");
    assert!(call.stderr.contains("mcpx secret set api-key"), "{call:?}");
}

/// Codex's `config.toml` (`[mcp_servers.NAME]`), imported: stdio with `env` and
/// `env_vars`; streamable HTTP with `bearer_token_env_var` and `http_headers`, whose
/// `enabled_tools`/`disabled_tools` leave `echo` and `env`; `enabled = false` is
/// disabled.
#[test]
fn codex_toml_through_imports() {
    let c = Clients::new().with_http();
    let file = c.place_user_file("codex");
    c.user_config(&["codex"], json!({}));
    let dir = &c.work;
    for server in ["codex", "codex-http"] {
        c.assert_served(dir, server, &file, "codex");
    }
    assert_eq!(c.env_of(dir, "codex", "GREETING"), "from codex");
    assert_eq!(c.env_of(dir, "codex", "MCPX_T_TOKEN"), TOKEN);
    let headers = c.http_headers();
    for header in ["authorization", "x-static", "x-from-env"] {
        assert!(headers.contains(header), "`{header}` never reached the server: {headers}");
    }
    let row = c.row(dir, "codex-http");
    assert_eq!(row["tools"], 2, "enabled_tools minus disabled_tools: {row}");
    let off = c.row(dir, "codex-off");
    assert_eq!(off["state"], "disabled", "{off}");
    assert_source(&off, &file, Some("codex"));
}

/// Gemini CLI's `settings.json`, imported: stdio with `$VAR` and `${VAR:-default}` in
/// `env` and `includeTools`; `httpUrl` (streamable HTTP); `url` (SSE).
#[test]
fn gemini_settings_through_imports() {
    let c = Clients::new().with_http().with_sse();
    let file = c.place_user_file("gemini");
    c.user_config(&["gemini"], json!({}));
    let dir = &c.work;
    for server in ["gemini", "gemini-http", "gemini-sse"] {
        c.assert_served(dir, server, &file, "gemini");
    }
    assert_eq!(c.env_of(dir, "gemini", "TOKEN"), TOKEN);
    assert_eq!(c.env_of(dir, "gemini", "GREETING"), "from gemini");
    let row = c.row(dir, "gemini");
    assert_eq!(row["tools"], 2, "includeTools: {row}");
}

/// Windsurf's `mcp_config.json`, imported: stdio with `${env:NAME}` and
/// `disabledTools`; `serverUrl` with headers; `disabled: true`.
#[test]
fn windsurf_config_through_imports() {
    let c = Clients::new().with_http();
    let file = c.place_user_file("windsurf");
    c.user_config(&["windsurf"], json!({}));
    let dir = &c.work;
    for server in ["windsurf", "windsurf-remote"] {
        c.assert_served(dir, server, &file, "windsurf");
    }
    assert_eq!(c.env_of(dir, "windsurf", "TOKEN"), TOKEN);
    let counter = c.run_in(dir, &["call", "windsurf.counter", "{}"]);
    assert_ne!(counter.code, 0, "a disabledTools tool was called: {counter:?}");
    let off = c.row(dir, "windsurf-off");
    assert_eq!(off["state"], "disabled", "{off}");
}

/// The clients that `mcpx connect` added (OpenCode's JSONC `mcp`, Zed's
/// `context_servers`, Goose's and Continue's YAML, and seven `mcpServers` dialects), all
/// imported at once: each one's stdio server is listed with its client, called, and gets
/// its token (through the client's own variable syntax where it has one); each remote
/// server is called with its headers; a server switched off in the client is disabled;
/// a tool the client filters out is not called; Goose's built-in extension is no server.
#[test]
fn the_newer_clients_files_through_imports() {
    let c = Clients::new().with_http();
    let clients = &ALL[7..];
    let files: Vec<PathBuf> = clients.iter().map(|client| c.place_user_file(client)).collect();
    c.user_config(clients, json!({}));
    let dir = &c.work;
    let names = c.names(dir);
    assert!(!names.iter().any(|n| n == "developer"), "Goose's built-in extension is no server: {names:?}");
    for (client, file) in clients.iter().zip(&files) {
        c.assert_served(dir, client, file, client);
        assert_eq!(c.env_of(dir, client, "TOKEN"), TOKEN, "{client}");
        c.assert_served(dir, &format!("{client}-remote"), file, client);
        let off = format!("{client}-off");
        if names.contains(&off) {
            assert_eq!(c.row(dir, &off)["state"], "disabled", "{client}");
        }
    }
    let headers = c.http_headers();
    assert!(headers.to_ascii_lowercase().contains("authorization"), "{headers}");
    for client in ["roo-code", "kiro", "crush"] {
        let counter = c.run_in(dir, &["call", &format!("{client}.counter"), "{}"]);
        assert_ne!(counter.code, 0, "{client}: a tool it filters out was called: {counter:?}");
    }
    let off: Vec<&String> = names.iter().filter(|n| n.ends_with("-off")).collect();
    assert_eq!(off.len(), 8, "{names:?}");
}

/// Every fixture imported at once: each server of each file is listed once, from its
/// file, and mcpx's own user servers keep no `client`.
#[test]
fn every_user_level_file_imported_together() {
    let c = Clients::new().with_http().with_sse();
    let clients = ["claude-desktop", "claude-code", "cursor", "vscode", "codex", "gemini", "windsurf"];
    let files: Vec<PathBuf> = clients.iter().map(|client| c.place_user_file(client)).collect();
    let user = c.home.join(".config/mcpx/config.json");
    c.user_config(&clients, json!({ "mine": { "command": fake_server() } }));
    let rows = c.rows(&c.work);
    for (client, file) in clients.iter().zip(&files) {
        let from: Vec<&Value> = rows.iter().filter(|r| r["source"]["client"] == *client).collect();
        assert!(!from.is_empty(), "nothing from {client}: {rows:?}");
        for row in from {
            assert_eq!(row["source"]["file"], file.display().to_string(), "{row}");
        }
    }
    let mine = rows.iter().find(|r| r["name"] == "mine").unwrap_or_else(|| panic!("{rows:?}"));
    assert_source(mine, &user, None);
    assert_eq!(c.call(&c.work, "mine.echo", json!({ "message": "own" })), "own\n");
}

/// Two imports define `same`: the first listed in `imports` wins, and reordering the
/// list (the user config re-read) flips it.
#[test]
fn between_imports_the_first_listed_wins() {
    let c = Clients::new();
    let same = |greeting: &str| {
        json!({ "mcpServers": { "same": { "command": fake_server(), "env": { "GREETING": greeting } } } }).to_string()
    };
    let cursor = c.home.join(".cursor/mcp.json");
    let windsurf = c.home.join(".codeium/windsurf/mcp_config.json");
    for (file, greeting) in [(&cursor, "cursor"), (&windsurf, "windsurf")] {
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, same(greeting)).unwrap();
    }
    let dir = &c.work;
    c.user_config(&["windsurf", "cursor"], json!({}));
    assert_source(&c.row(dir, "same"), &windsurf, Some("windsurf"));
    assert_eq!(c.env_of(dir, "same", "GREETING"), "windsurf");
    c.user_config(&["cursor", "windsurf"], json!({}));
    assert_source(&c.row(dir, "same"), &cursor, Some("cursor"));
    assert_eq!(c.env_of(dir, "same", "GREETING"), "cursor");
}

/// mcpx's own user servers beat an import of the same name; a project file beats
/// both, for callers in that project only.
#[test]
fn a_project_file_wins_over_an_import_and_mcpx_own_user_file_too() {
    let c = Clients::new();
    let file = c.place_user_file("claude-desktop");
    let user = c.home.join(".config/mcpx/config.json");
    let mine = |greeting: &str| json!({ "command": fake_server(), "env": { "GREETING": greeting } });
    c.user_config(&["claude-desktop"], json!({ "both": mine("user config") }));
    // `desktop` comes from the import, `both` from the user config; the project
    // overrides `desktop`.
    let desktop = std::fs::read_to_string(&file).unwrap();
    let mut parsed: Value = serde_json::from_str(&desktop).unwrap();
    parsed["mcpServers"]["both"] = mine("import");
    std::fs::write(&file, parsed.to_string()).unwrap();
    let project = c.work.join("proj");
    let project_file = project.join(".mcp.json");
    std::fs::write(&project_file, json!({ "mcpServers": { "desktop": mine("project") } }).to_string()).unwrap();
    c.w.trust_in(&project);

    assert_source(&c.row(&c.work, "desktop"), &file, Some("claude-desktop"));
    assert_eq!(c.env_of(&c.work, "desktop", "GREETING"), "from claude desktop");
    assert_source(&c.row(&c.work, "both"), &user, None);
    assert_eq!(c.env_of(&c.work, "both", "GREETING"), "user config");
    let row = c.row(&project, "desktop");
    assert_eq!(row["source"]["file"], project_file.display().to_string(), "{row}");
    assert_eq!(c.env_of(&project, "desktop", "GREETING"), "project");
}

/// An imported file edited while the daemon runs is read again: the next `ls` shows a
/// server added to it, and one removed from it is gone.
#[test]
fn an_imported_file_edited_while_the_daemon_runs_is_read_again() {
    let c = Clients::new().with_http();
    let file = c.place_user_file("cursor");
    c.user_config(&["cursor"], json!({}));
    let dir = &c.work;
    c.assert_served(dir, "cursor-global", &file, "cursor");
    let mut parsed: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let servers = parsed["mcpServers"].as_object_mut().unwrap();
    servers.remove("cursor-remote");
    servers.insert("cursor-added".to_owned(), json!({ "command": fake_server() }));
    std::fs::write(&file, serde_json::to_string_pretty(&parsed).unwrap()).unwrap();
    let names = c.names(dir);
    assert!(names.contains(&"cursor-added".to_owned()), "{names:?}");
    assert!(!names.contains(&"cursor-remote".to_owned()), "{names:?}");
    c.assert_served(dir, "cursor-added", &file, "cursor");
}

/// `imports` in a project file is ignored with a warning: the client it names is not
/// imported for callers there, `ls --json` has a `warning` row named by the file, and
/// the table `ls` prints the warning as a footnote on stderr.
#[test]
fn imports_in_a_project_file_are_ignored_with_a_warning() {
    let c = Clients::new();
    c.place_user_file("claude-desktop");
    c.user_config(&[], json!({}));
    let project = c.work.join("proj");
    let project_file = project.join(".mcpx.json");
    let text = json!({ "imports": ["claude-desktop"], "mcpServers": { "local": { "command": fake_server() } } });
    std::fs::write(&project_file, text.to_string()).unwrap();

    let rows = c.rows(&project);
    assert!(!rows.iter().any(|r| r["name"] == "desktop"), "the project's imports took effect: {rows:?}");
    let warning = rows
        .iter()
        .find(|r| r["name"] == project_file.display().to_string())
        .unwrap_or_else(|| panic!("no row for {}: {rows:?}", project_file.display()));
    assert_eq!(warning["state"], "warning", "{warning}");
    let message = warning["warnings"][0].as_str().unwrap_or_else(|| panic!("{warning}"));
    assert!(message.contains("imports"), "{message}");

    let table = c.run_in(&project, &["ls"]);
    assert_eq!(table.code, 0, "{table:?}");
    assert!(table.stderr.contains(message), "no footnote: {table:?}");
    assert!(!table.stdout.contains("desktop"), "{table:?}");
}

/// `mcpx import` finds every fixture and counts the servers each gives a caller in the
/// project; `--copy` writes their entries, rewritten into mcpx's shape, into the user
/// config, where they work with the clients' files gone.
#[test]
fn mcpx_import_counts_each_fixture_and_its_copies_work_alone() {
    let c = Clients::new().with_http().with_sse();
    let clients = ALL;
    let files: Vec<PathBuf> = clients.iter().map(|client| c.place_user_file(client)).collect();
    c.user_config(&[], json!({}));
    let project = c.work.join("proj");

    let listed = c.run_in(&project, &["import", "--json"]);
    assert_eq!(listed.code, 0, "{listed:?}");
    let listed = listed.json();
    let counts: Vec<(String, Value)> = listed["clients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["client"].as_str().unwrap().to_owned(), e["servers"].clone()))
        .collect();
    let expected = [1, 4, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 3, 3, 3, 2].map(|n| json!(n));
    let expected: Vec<(String, Value)> = clients.iter().map(|c| (*c).to_owned()).zip(expected).collect();
    assert_eq!(counts, expected, "{listed}");

    let mut args = vec!["import", "--copy"];
    args.extend(clients);
    c.run_in(&project, &args).ok();
    for file in &files {
        std::fs::remove_file(file).unwrap();
    }
    let user = c.home.join(".config/mcpx/config.json");
    let servers = [
        "desktop",
        "cc-user",
        "cc-local",
        "cc-sse",
        "cc-shared",
        "cursor-global",
        "cursor-remote",
        "vscode-user",
        "vscode-http",
        "codex",
        "codex-http",
        "gemini",
        "gemini-http",
        "gemini-sse",
        "windsurf",
        "windsurf-remote",
    ];
    let newer = clients[7..].iter().flat_map(|c| [(*c).to_owned(), format!("{c}-remote")]);
    let servers: Vec<String> = servers.iter().map(|s| (*s).to_owned()).chain(newer).collect();
    for server in &servers {
        let row = c.row(&c.work, server);
        assert_source(&row, &user, None);
        let out = c.call(&c.work, &format!("{server}.echo"), json!({ "message": format!("copied {server}") }));
        assert!(out.contains(&format!("copied {server}")), "{server}: {out}");
    }
    assert_eq!(c.env_of(&c.work, "cc-shared", "GREETING"), "local scope");
    assert_eq!(c.env_of(&c.work, "gemini", "TOKEN"), TOKEN);
    for client in &clients[7..] {
        assert_eq!(c.env_of(&c.work, client, "TOKEN"), TOKEN, "{client}");
    }
    assert_eq!(c.env_of(&c.work, "vscode-user", "HOME_DIR"), c.home.display().to_string());
    assert_eq!(c.row(&c.work, "gemini")["tools"], 2);
    for off in ["codex-off", "windsurf-off", "opencode-off", "goose-off", "kiro-off"] {
        assert_eq!(c.row(&c.work, off)["state"], "disabled", "{off}");
    }
}
