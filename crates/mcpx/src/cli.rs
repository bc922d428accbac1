//! The command line (interface contract in the design): parsing, talking to the
//! daemon, and exit codes (0 success, 1 the tool returned `isError`, 2 usage or
//! configuration, 3 daemon, 4 server, 5 timeout).

use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand};
use mcpx_api::client::{Client, Method, connect_or_start};
use mcpx_api::paths::{Dirs, OpenDirs};
use mcpx_api::{
    ApiError, AuthRequest, Caller, CallerRequest, ErrorKind, RefreshRequest, RestartRequest, SearchHit, SearchRequest,
    ServerRow, Status, StopRequest, UpgradeRequest,
};

use self::actions::{AuthAction, PinsAction, SecretAction, ServiceAction};
use crate::output;

mod actions;

/// Run every MCP server you have configured behind one daemon.
#[derive(Debug, Parser)]
#[command(name = "mcpx", version, about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Args)]
struct Global {
    /// Use only this configuration file (else .mcp.json/.mcpx.json upward from here, then ~/.config/mcpx/config.json).
    #[arg(long, global = true, env = "MCPX_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print JSON instead of tables and text.
    #[arg(long, global = true)]
    json: bool,
    /// Offer only this profile's servers and tools (`profiles` in the user config).
    #[arg(long, global = true, env = "MCPX_PROFILE", value_name = "NAME")]
    profile: Option<String>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List configured servers, from the schema cache (starts nothing).
    Ls {
        /// Add a SOURCE column: the client of an imported file, else the file that defines the server.
        #[arg(short, long)]
        long: bool,
    },
    /// Show a server's tools, or one tool's full schema.
    Tools {
        /// The server.
        server: String,
        /// One tool: print its whole definition.
        tool: Option<String>,
    },
    /// List resources and resource templates, of one server or of all (a named server never listed is started).
    Resources {
        /// The server (all when omitted; then nothing is started).
        server: Option<String>,
    },
    /// Read a resource: text to stdout; blobs saved with --out, else described.
    Read {
        /// The server.
        server: String,
        /// The resource's URI (see `mcpx resources <server>`).
        uri: String,
        /// Save binary contents here: a file, or an existing directory (named after the URI).
        #[arg(long, value_name = "PATH")]
        out: Option<PathBuf>,
    },
    /// List prompts and their arguments, of one server or of all (a named server never listed is started).
    Prompts {
        /// The server (all when omitted; then nothing is started).
        server: Option<String>,
    },
    /// Get a prompt's messages: `mcpx prompt <server>.<prompt> key=value ...`, or with a JSON object (`-`: from stdin).
    Prompt(crate::offers::PromptArgs),
    /// Find tools by name, title, description and parameters: the best 20, best first.
    Search {
        /// What you are looking for, in your words ("take a screenshot").
        #[arg(required = true)]
        words: Vec<String>,
    },
    /// Print TypeScript declarations of the tools, one namespace per server, from the schema cache.
    Types {
        /// The servers (all listed ones when omitted; then nothing is started).
        servers: Vec<String>,
        /// Write the declarations to this file (replaced) instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Call a tool: `mcpx call <server>.<tool> key=value ...`, or with a JSON object (`-`: from stdin).
    Call(crate::call_stream::CallArgs),
    /// Run a TypeScript or JavaScript file that calls tools as typed async functions, type-checked, in a sandbox.
    Run(crate::code::RunArgs),
    /// Run code (the body of an async function; `-`: from stdin) that calls tools, in a sandbox; print what it returns.
    Exec(crate::code::ExecArgs),
    /// Show the daemon and every instance.
    Status,
    /// Open the dashboard in a browser: servers, instances, logins and calls, live.
    Ui {
        /// Print the one-time link instead of opening a browser.
        #[arg(long)]
        no_open: bool,
    },
    /// Restart a server's instances.
    Restart {
        /// The server.
        server: String,
        /// Only the instance with this pool key (as `mcpx status` shows it).
        #[arg(long)]
        key: Option<String>,
    },
    /// Re-read the tools of one server, or of all, starting them if needed.
    Refresh {
        /// The server (all when omitted).
        server: Option<String>,
    },
    /// Stop the daemon; supervised servers keep running and remote sessions stay kept, for the next daemon.
    Stop {
        /// Also stop every server (and its supervisor).
        #[arg(long)]
        all: bool,
    },
    /// Show the daemon's log, or the lines about one server.
    Logs {
        /// Only lines about this server.
        server: Option<String>,
        /// Keep printing new lines.
        #[arg(short, long)]
        follow: bool,
        /// How many lines of the end to show first.
        #[arg(short = 'n', long, default_value_t = 100)]
        lines: usize,
    },
    /// Run the daemon in the foreground.
    Daemon,
    /// Be an MCP server over stdio presenting every configured server (or one, with --server).
    Serve(crate::serve::ServeArgs),
    /// Add a server to the user config (or the project's .mcpx.json): `NAME -- COMMAND ARGS...`,
    /// `NAME URL`, or a registry server by name (`io.github.user/server[@VERSION]`).
    Add(crate::add::AddArgs),
    /// Take a server out of the user config (or the project's .mcpx.json), keeping the rest as it was.
    Remove(crate::add::RemoveArgs),
    /// Search and show servers of the MCP registries (`registries` in the user config).
    #[command(subcommand)]
    Registry(crate::registry::RegistryAction),
    /// Re-execute the running daemon in place (same pid), from its own binary or --binary;
    /// servers keep running and calls in flight finish first.
    Upgrade {
        /// The new mcpx binary (default: the one the daemon runs).
        #[arg(long, value_name = "PATH")]
        binary: Option<PathBuf>,
    },
    /// Show the other MCP clients' config files and their servers, or add them to the mcpx user config.
    ///
    /// With no NAME: which clients' user-level files exist, how many servers each holds, and which
    /// are imported. With names: adds them to `imports` in the user config (or --config), comments
    /// kept; the daemon then reads those files live.
    Import {
        /// Clients to import, as `mcpx connect` lists them (claude-desktop, claude-code, cursor, vscode, codex, gemini, windsurf, opencode, zed, goose, cline, roo-code, continue, lm-studio, kiro, crush, amazon-q, copilot-cli).
        names: Vec<String>,
        /// Copy their entries into "mcpServers" instead (a name already defined there is refused).
        #[arg(long, requires = "names")]
        copy: bool,
        /// With --copy: replace entries of the same name.
        #[arg(long, requires = "copy")]
        force: bool,
    },
    /// Put mcpx into MCP clients' files (`mcpx serve`, comments kept, a backup beside each); with no client, list them.
    Connect(crate::connect::ConnectArgs),
    /// Take mcpx out of MCP clients' files (every entry running `mcpx serve`), with a backup beside each; --restore undoes `connect` from its backup.
    Disconnect(crate::connect::DisconnectArgs),
    /// Install the daemon as a user service (systemd user unit or launchd agent) that keeps supervisors alive.
    Service {
        #[command(subcommand)]
        action: ServiceAction,
    },
    /// Keep secrets for `${secret:NAME}` (and VS Code's `${input:ID}`) in config files.
    Secret {
        #[command(subcommand)]
        action: SecretAction,
    },
    /// Review and trust the servers of the project files found upward from DIR (default: here).
    Trust {
        /// Where to look upward from; default the working directory.
        dir: Option<PathBuf>,
        /// Trust without asking (required when stdin is not a terminal).
        #[arg(long, short)]
        yes: bool,
        /// List what is trusted instead.
        #[arg(long, conflicts_with_all = ["dir", "yes"])]
        list: bool,
    },
    /// Remove the trust of the project files found upward from DIR (default: here).
    Untrust {
        /// Where to look upward from; default the working directory.
        dir: Option<PathBuf>,
    },
    /// What callers asked servers through the daemon, newest first (the activity record).
    Activity(crate::activity::ActivityArgs),
    /// Pinned tool and prompt definitions: what is held for review, and the review.
    ///
    /// A server's first listing pins each tool's and prompt's definition; one that
    /// changes, or is new, is held (left out of every listing, refused to calls) until
    /// the user reviews it (`"pinning"` in the config: off, warn, hold, strict).
    Pins {
        #[command(subcommand)]
        action: PinsAction,
    },
    /// Log in to remote servers that use OAuth (MCP authorization).
    Auth {
        #[command(subcommand)]
        action: AuthAction,
    },
    /// Show the resolved servers: source file, command or URL as written, trust, and the mcpx block with defaults.
    Config,
    /// Check the directories, the daemon, supervisors, service unit, commands, config files, secret store and logins; exit 1 on any error.
    Doctor,
    /// Print a shell completion script (bash: `source <(mcpx completions bash)`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: crate::completions::Shell,
    },
    /// Print the man page of mcpx, or write one per subcommand into a directory.
    Man {
        /// Write `mcpx.1` and `mcpx-<subcommand>.1` here instead.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Supervise one server instance (started by the daemon; reads its launch request on stdin).
    #[command(hide = true)]
    Supervise,
    /// Print server or tool names for the completion scripts, from local files only.
    #[command(name = "__complete", hide = true)]
    Complete {
        #[arg(value_enum)]
        what: crate::completions::Names,
        server: Option<String>,
    },
}

/// Parses the command line, runs the command, prints, and returns the exit status.
pub fn main() -> i32 {
    // `mcpx supervise`, as the daemon runs it, goes straight to the supervisor: before
    // the parser builds its tree of every command, whose heap and stack pages each
    // long-lived supervisor would otherwise keep (`docs/profile.md`, "The supervisor's
    // memory"), and before any runtime or thread: the supervisor forks.
    let mut args = std::env::args_os().skip(1);
    if let (Some(first), None) = (args.next(), args.next()) {
        if first == "supervise" {
            return mcpx_supervisor::main();
        }
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    let json = cli.global.json;
    match &cli.command {
        Command::Completions { shell } => {
            print!("{}", crate::completions::script(*shell, Cli::command()));
            return 0;
        }
        Command::Complete { what, server } => {
            return crate::completions::names(*what, server.as_deref(), cli.global.config.clone());
        }
        Command::Man { out } => {
            return crate::completions::man(Cli::command(), out.as_deref()).unwrap_or_else(|e| output::error(json, &e));
        }
        _ => {}
    }
    if let Command::Supervise = cli.command {
        return mcpx_supervisor::main();
    }
    // A closed output pipe (`mcpx ls | head`) ends the command quietly with the status
    // a shell gives SIGPIPE (141), as in other shell tools. SIGPIPE itself stays
    // ignored: the CLI also writes to the daemon's socket, where a daemon that dies
    // must be an error (exit 3), not a silent death.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to std") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default_hook(info);
    }));
    if let Command::Daemon = cli.command {
        return match crate::foreground::run(cli.global.config.clone()) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("mcpx daemon: {e:#}");
                3
            }
        };
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            return output::error(json, &ApiError::new(ErrorKind::Daemon, format!("cannot start the runtime: {e}")));
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => output::error(json, &e),
    }
}

async fn run(cli: Cli) -> Result<i32, ApiError> {
    if let Command::Import { names, copy, force } = cli.command {
        // Local files only: no daemon is needed (the runtime directory holds the lock that
        // makes concurrent imports take turns; a running daemon is asked where it reads).
        let cwd = std::env::current_dir().ok();
        let config = absolute(cli.global.config, cwd.as_deref());
        return crate::import::run(crate::import::Import { names, copy, force, config, cwd }, cli.global.json).await;
    }
    let env: std::collections::HashMap<String, String> = std::env::vars().collect();
    let config_arg = |cli: &Cli| absolute(cli.global.config.clone(), std::env::current_dir().ok().as_deref());
    match &cli.command {
        Command::Connect(args) if args.clients.is_empty() => {
            return crate::connect::list(&env, args.project.as_deref(), cli.global.json);
        }
        Command::Connect(args) => {
            let profile = cli.global.profile.as_deref().filter(|p| !p.is_empty());
            return crate::connect::connect(&env, args, config_arg(&cli), profile, cli.global.json);
        }
        Command::Disconnect(args) => return crate::connect::disconnect(&env, args, config_arg(&cli), cli.global.json),
        _ => {}
    }
    let dirs = Dirs::from_env(&env).map_err(|e| ApiError::new(ErrorKind::Daemon, e.to_string()))?;
    if let Command::Doctor = cli.command {
        // Before the directories are opened: a refused one is a finding, not the end.
        let exe = this_binary()?;
        let cwd = std::env::current_dir().ok();
        let caller = Caller { config: absolute(cli.global.config, cwd.as_deref()), cwd, ..Caller::default() };
        return Ok(crate::doctor::run(&dirs, &exe, &env, CallerRequest { caller }, cli.global.json).await);
    }
    // Opened and checked before anything connects: a runtime directory another user
    // made, or a link, gets nothing (docs/security.md).
    let opened = dirs.open().map_err(|e| ApiError::new(ErrorKind::Daemon, e.to_string()))?;
    let json = cli.global.json;
    let cwd = std::env::current_dir().ok();
    let config = absolute(cli.global.config.clone(), cwd.as_deref());
    let caller = Caller {
        cwd,
        config,
        session: env.get("MCPX_SESSION_ID").filter(|s| !s.is_empty()).cloned(),
        parent_session: env.get("MCPX_PARENT_SESSION_ID").filter(|s| !s.is_empty()).cloned(),
        // The process that ran this command: the agent's shell or script (`pid` scope).
        ppid: u32::try_from(nix::unistd::getppid().as_raw()).ok(),
        profile: cli.global.profile.clone().filter(|p| !p.is_empty()),
        ..Caller::default()
    };
    match cli.command {
        Command::Service { action: ServiceAction::Install { print } } => {
            let exe = std::env::current_exe()
                .map_err(|e| ApiError::new(ErrorKind::Usage, format!("cannot find the mcpx binary: {e}")))?;
            let home =
                env.get("HOME").map(PathBuf::from).ok_or_else(|| ApiError::new(ErrorKind::Usage, "HOME is not set"))?;
            let xdg = env.get("XDG_CONFIG_HOME").map(PathBuf::from);
            let text = crate::service::install(print, &exe, &home, xdg.as_deref())
                .map_err(|e| ApiError::new(ErrorKind::Usage, format!("cannot install the service: {e}")))?;
            if print {
                print!("{text}");
            } else {
                println!("{text}");
            }
            Ok(0)
        }
        Command::Logs { server, follow, lines } => {
            crate::logs::show(&daemons_dirs(&dirs, &env).await.log_file(), server.as_deref(), lines, follow).await?;
            Ok(0)
        }
        Command::Stop { all } => stop(&opened, all, json).await,
        Command::Secret { action } => {
            // The running daemon's state directory, where it reads the store.
            let state = daemons_dirs(&dirs, &env).await.state;
            let action = match action {
                SecretAction::Set { name } => crate::secret::Action::Set(name),
                SecretAction::Ls => crate::secret::Action::Ls,
                SecretAction::Rm { name } => crate::secret::Action::Rm(name),
            };
            crate::secret::run(&state, action, json)
        }
        Command::Trust { dir, yes, list } => {
            // The running daemon's state directory, where it reads the records.
            let state = daemons_dirs(&dirs, &env).await.state;
            let here = || caller.cwd.clone().unwrap_or_else(|| PathBuf::from("."));
            let dir = absolute(dir, caller.cwd.as_deref()).unwrap_or_else(here);
            let action = if list { crate::trust::Action::List } else { crate::trust::Action::Trust { dir, yes } };
            crate::trust::run(&state, &env, action, json)
        }
        Command::Config => {
            // The running daemon's state directory, where it reads the trust records.
            let state = daemons_dirs(&dirs, &env).await.state;
            crate::show_config::run(&state, &env, &caller, json)
        }
        Command::Untrust { dir } => {
            let state = daemons_dirs(&dirs, &env).await.state;
            let here = || caller.cwd.clone().unwrap_or_else(|| PathBuf::from("."));
            let dir = absolute(dir, caller.cwd.as_deref()).unwrap_or_else(here);
            crate::trust::run(&state, &env, crate::trust::Action::Untrust { dir }, json)
        }
        Command::Add(args) => {
            let listed = !(args.no_list || args.dry_run || json);
            let client = if listed { Some(connect_or_start(&dirs, &this_binary()?).await?) } else { None };
            crate::registry::add_command(&env, client, caller, args, json).await
        }
        Command::Remove(args) => crate::add::remove(&env, caller, args, json),
        Command::Registry(action) => crate::registry::run(&env, &caller, action, json).await,
        Command::Serve(args) => {
            let exe = this_binary()?;
            let client = connect_or_start(&dirs, &exe).await?;
            if args.code {
                return crate::serve_code::run(client, &opened, &env, caller, args.server, args.unconfined).await;
            }
            crate::serve::run(client, args.server, args.discover, &caller).await
        }
        Command::Run(_) | Command::Exec(_) => {
            let exe = this_binary()?;
            let client = connect_or_start(&dirs, &exe).await?;
            let what = match cli.command {
                Command::Run(a) => crate::code::command::What::Run(a),
                Command::Exec(a) => crate::code::command::What::Exec(a),
                _ => unreachable!("matched above"),
            };
            crate::code::command::run(&client, &opened, &env, caller, what, json).await
        }
        command => {
            let exe = this_binary()?;
            // The daemon is started by the command's first request if none answers it.
            dispatch(&Client::starting(&dirs, &exe), command, &caller, json).await
        }
    }
}

async fn dispatch(client: &Client, command: Command, caller: &Caller, json: bool) -> Result<i32, ApiError> {
    let caller = || caller.clone();
    match command {
        Command::Ls { long } => {
            let req = CallerRequest { caller: caller() };
            let body = client.call(Method::POST, "/v1/ls", Some(&req)).await?;
            let rows: Vec<ServerRow> = parse(&body)?;
            let nothing = rows.iter().all(output::is_file_warning);
            // Only for a person, and only when there is nothing: it reads every client's file.
            let hint = if nothing && !json { crate::import::ls_hint(req.caller.config, req.caller.cwd) } else { None };
            output::ls(json, &rows, long, hint.as_deref());
            Ok(0)
        }
        Command::Tools { server, tool } => crate::offers::tools(client, caller(), server, tool, json).await,
        Command::Resources { server } => crate::offers::resources(client, caller(), server, json).await,
        Command::Read { server, uri, out } => crate::offers::read(client, caller(), server, uri, out, json).await,
        Command::Prompts { server } => crate::offers::prompts(client, caller(), server, json).await,
        Command::Prompt(args) => crate::offers::prompt(client, caller(), args, json).await,
        Command::Search { words } => {
            let body =
                client.call(Method::POST, "/v1/search", Some(&SearchRequest { caller: caller(), words })).await?;
            let hits: Vec<SearchHit> = parse(&body)?;
            output::search(json, &hits);
            Ok(0)
        }
        Command::Types { servers, out } => crate::types::run(client, caller(), servers, out, json).await,
        Command::Call(args) => crate::call_stream::call(client, args, caller(), json).await,
        Command::Status => {
            let body = client.call(Method::GET, "/v1/status", None::<&()>).await?;
            let status: Status = parse(&body)?;
            output::status(json, &status, &body);
            Ok(0)
        }
        Command::Ui { no_open } => crate::ui::run(client, caller(), no_open, json).await,
        Command::Restart { server, key } => {
            let restart = RestartRequest { caller: caller(), server: Some(server), key };
            let body = client.call(Method::POST, "/v1/restart", Some(&restart)).await?;
            output::done(json, &body, "restarted");
            Ok(0)
        }
        Command::Upgrade { binary } => upgrade(client, binary, json).await,
        Command::Serve(_) => unreachable!("serve runs without dispatch"),
        Command::Auth { action: AuthAction::Login { server, no_browser, device } } => {
            let req = AuthRequest { caller: caller(), server: Some(server), device };
            crate::auth::login(client, req, no_browser, json).await
        }
        Command::Auth { action: AuthAction::Status } => {
            crate::auth::status(client, AuthRequest { caller: caller(), ..AuthRequest::default() }, json).await
        }
        Command::Auth { action: AuthAction::Logout { server } } => {
            let req = AuthRequest { caller: caller(), server: Some(server), ..AuthRequest::default() };
            crate::auth::logout(client, req, json).await
        }
        Command::Activity(args) => crate::activity::run(client, args, json).await,
        Command::Pins { action: PinsAction::Ls { server } } => crate::pins::ls(client, caller(), server, json).await,
        Command::Pins { action: PinsAction::Review { server, yes } } => {
            crate::pins::review(client, caller(), server, yes, json).await
        }
        Command::Refresh { server } => {
            let req = RefreshRequest { caller: caller(), server, ..RefreshRequest::default() };
            let body = client.call(Method::POST, "/v1/refresh", Some(&req)).await?;
            output::refresh(json, &body)
        }
        Command::Stop { .. }
        | Command::Logs { .. }
        | Command::Daemon
        | Command::Supervise
        | Command::Service { .. }
        | Command::Secret { .. }
        | Command::Trust { .. }
        | Command::Untrust { .. }
        | Command::Config
        | Command::Doctor
        | Command::Completions { .. }
        | Command::Man { .. }
        | Command::Complete { .. }
        | Command::Run(_)
        | Command::Exec(_)
        | Command::Import { .. }
        | Command::Connect(_)
        | Command::Add(_)
        | Command::Remove(_)
        | Command::Registry(_)
        | Command::Disconnect(_) => {
            unreachable!("handled before connecting")
        }
    }
}

async fn stop(opened: &OpenDirs, all: bool, json: bool) -> Result<i32, ApiError> {
    let dirs = &opened.paths;
    let mut client = Client::new(dirs.socket());
    if !client.is_up().await? {
        // Supervisors outlive a dead daemon: with --all, a daemon adopts them to stop them.
        let supervised = opened
            .sup(false)
            .ok()
            .and_then(|sup| sup.names().ok())
            .is_some_and(|names| names.iter().any(|n| n.to_string_lossy().ends_with(".json")));
        if !(all && supervised) {
            output::done(json, br#"{"stopped":false,"reason":"no daemon is running"}"#, "no daemon is running");
            return Ok(0);
        }
        let exe = this_binary()?;
        client = connect_or_start(dirs, &exe).await?;
    }
    client.call(Method::POST, "/v1/stop", Some(&StopRequest { all })).await?;
    // Wait until the daemon is gone, so `stop` returning means stopped: it holds
    // `daemon.lock` until its process ends (a zombie no longer holds it).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if daemon_lock_free(opened) {
            output::done(json, br#"{"stopped":true}"#, "daemon stopped");
            return Ok(0);
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    Err(ApiError::new(ErrorKind::Daemon, "the daemon did not exit within 20s; see `mcpx logs`"))
}

/// `mcpx upgrade`: asks the daemon to drain and re-execute, then waits for the new
/// image to answer (same pid, a new start time).
async fn upgrade(client: &Client, binary: Option<PathBuf>, json: bool) -> Result<i32, ApiError> {
    #[derive(serde::Deserialize)]
    struct Health {
        pid: u32,
        build: String,
        #[serde(default)]
        started_at_ms: u64,
    }
    let health = |bytes: &[u8]| serde_json::from_slice::<Health>(bytes).ok();
    let before = health(&client.call(Method::GET, "/v1/health", None::<&()>).await?)
        .ok_or_else(|| ApiError::new(ErrorKind::Daemon, "the daemon's health answer is malformed"))?;
    let binary = binary.map(|b| std::path::absolute(&b).unwrap_or(b));
    client.call(Method::POST, "/v1/upgrade", Some(&UpgradeRequest { binary })).await?;
    let deadline = std::time::Instant::now() + mcpx_daemon::server::DRAIN + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        if let Ok((200, bytes)) = client.send(Method::GET, "/v1/health", None).await {
            if let Some(after) = health(&bytes).filter(|h| h.started_at_ms != before.started_at_ms) {
                let text = format!("daemon pid {} upgraded: build {} -> {}", after.pid, before.build, after.build);
                let body = serde_json::json!({ "pid": after.pid, "from": before.build, "to": after.build });
                output::done(json, body.to_string().as_bytes(), &text);
                return Ok(if after.pid == before.pid { 0 } else { 3 });
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    Err(ApiError::new(ErrorKind::Daemon, "the daemon did not come back from the upgrade; see `mcpx logs`"))
}

/// Whether no process holds the daemon lock.
fn daemon_lock_free(dirs: &OpenDirs) -> bool {
    let Ok(file) = dirs.runtime.open_read(mcpx_api::paths::LOCK) else { return true };
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockSharedNonblock).is_ok()
}

/// The directories of the daemon that answers on `dirs`' socket, as its
/// `/v1/health` says: a client that found the daemon uses its state and cache
/// directories rather than its own, so a shell with another `XDG_STATE_HOME` does not
/// split them (docs/configuration.md). `MCPX_STATE_DIR` and `MCPX_CACHE_DIR` still
/// win; `dirs` when no daemon answers, or it does not say.
async fn daemons_dirs(dirs: &Dirs, env: &std::collections::HashMap<String, String>) -> Dirs {
    let explicit = |var: &str| env.get(var).is_some_and(|v| !v.is_empty());
    #[derive(serde::Deserialize)]
    struct Health {
        state: PathBuf,
        cache: PathBuf,
    }
    match Client::new(dirs.socket()).send(Method::GET, "/v1/health", None).await {
        Ok((200, body)) => match serde_json::from_slice::<Health>(&body) {
            Ok(h) => Dirs {
                state: if explicit("MCPX_STATE_DIR") { dirs.state.clone() } else { h.state },
                cache: if explicit("MCPX_CACHE_DIR") { dirs.cache.clone() } else { h.cache },
                runtime: dirs.runtime.clone(),
            },
            Err(_) => dirs.clone(),
        },
        _ => dirs.clone(),
    }
}

/// `--config`'s file, relative to the working directory when it is relative.
fn absolute(config: Option<PathBuf>, cwd: Option<&std::path::Path>) -> Option<PathBuf> {
    config.map(|c| match cwd {
        Some(cwd) if c.is_relative() => cwd.join(c),
        _ => c,
    })
}

fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::new(ErrorKind::Daemon, format!("unexpected answer from the daemon: {e}")))
}

/// The path of this mcpx binary. Errors: the OS cannot say (`daemon`).
fn this_binary() -> Result<PathBuf, ApiError> {
    std::env::current_exe().map_err(|e| ApiError::new(ErrorKind::Daemon, format!("cannot find the mcpx binary: {e}")))
}
