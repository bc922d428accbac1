//! Code mode (docs/code-mode.md): `mcpx run FILE` and `mcpx exec CODE` run a script
//! that calls tools as typed async functions, type-checked against the daemon's
//! declarations and confined in a Deno sandbox whose one way out is the channel
//! of tool calls this process serves through the daemon. `mcpx serve --code` runs
//! code the same way ([`execute`]).

pub mod channel;
pub mod command;
pub mod graph;
pub mod sandbox;

use std::path::PathBuf;
use std::time::Duration;

use mcpx_api::client::{Client, Method};
use mcpx_api::{ApiError, Caller, ErrorKind, TypesAnswer, TypesRequest};
use mcpx_platform::fs::Dir;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};

use self::channel::Frame;
use self::sandbox::{Access, Group, Limits, RunDir};

/// The options `run` and `exec` share.
#[derive(Debug, clap::Args)]
pub struct Options {
    /// Skip the type check against the servers' declarations.
    #[arg(long)]
    pub no_check: bool,
    /// Let the script read this directory (repeatable); by default it reads no file.
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub allow_read: Vec<PathBuf>,
    /// Let the script write this directory (repeatable); by default it writes no file.
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub allow_write: Vec<PathBuf>,
    /// Stop the script after this long (500ms, 30s, 5m); default 60s.
    #[arg(long, value_name = "DUR")]
    pub timeout: Option<String>,
    /// The script's heap limit (64MiB, 1GiB); default 512MiB.
    #[arg(long, value_name = "SIZE")]
    pub max_memory: Option<String>,
    /// Cut the answer, and the script's log output, after this much (64KiB, 1MiB); default 1MiB.
    #[arg(long, value_name = "SIZE")]
    pub max_output: Option<String>,
    /// Session id for session-scoped servers (else MCPX_SESSION_ID).
    #[arg(long, env = "MCPX_SESSION_ID")]
    pub session: Option<String>,
    /// Run under Node's permission model instead of Deno: no type check, and the network stays open.
    #[arg(long)]
    pub unsafe_node: bool,
    /// Run without the kernel's confinement, with Deno's permission flags alone (for a
    /// kernel without Landlock; says what stays open).
    #[arg(long)]
    pub unconfined: bool,
}

/// `mcpx run`'s arguments.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The script (TypeScript or JavaScript); its awaited default export is printed.
    #[arg(value_hint = clap::ValueHint::FilePath)]
    pub file: PathBuf,
    /// Arguments for the script (`Deno.args`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
    #[command(flatten)]
    pub options: Options,
}

/// `mcpx exec`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// The body of an async function (`-`: read it from stdin); what it returns is printed.
    pub code: String,
    #[command(flatten)]
    pub options: Options,
}

/// What a script is.
#[derive(Debug, Clone)]
pub enum Source {
    /// A file run in place (`mcpx run`), absolute.
    File(PathBuf),
    /// The body of an async function (`mcpx exec`, `mcpx_exec`).
    Code(String),
}

/// One script to run, and how.
#[derive(Debug, Clone)]
pub struct Job {
    pub source: Source,
    /// `Deno.args`.
    pub args: Vec<String>,
    /// Type-check first.
    pub check: bool,
    pub limits: Limits,
    pub access: Access,
}

/// What a script gave back.
#[derive(Debug)]
pub enum Returned {
    Text(String),
    Value(serde_json::Value),
    Nothing,
}

/// How a run ended, short of an error of mcpx's own.
#[derive(Debug)]
pub enum Outcome {
    /// The script returned.
    Returned(Returned),
    /// The script threw, ran out of memory, or broke the channel: one line saying so
    /// (and where, when the error says).
    Failed(String),
}

/// Where the script's log output (its stderr) goes.
pub enum Logs {
    /// Straight to this process's stderr, as it comes.
    Forward,
    /// Kept, up to the output limit, for an MCP client (`serve --code`).
    Collect(String),
}

/// What a run needs from its caller.
#[derive(Clone)]
pub struct Context {
    pub client: Client,
    /// The caller the tool calls are made as (pools, scopes, session).
    pub caller: Caller,
    /// The runtime directory, where the run's private directory goes.
    pub runtime: Dir,
    /// Deno, or Node with `--unsafe-node`.
    pub engine: sandbox::Engine,
    /// `DENO_DIR`: Deno's cache, under mcpx's cache directory.
    pub deno_dir: PathBuf,
    /// Only this server's tools (`serve --code --server`).
    pub only: Option<String>,
    /// Run without the kernel's confinement (`--unconfined`).
    pub unconfined: bool,
    /// How the script came, for the activity record: `run`, `exec`, `serve --code`.
    pub via: &'static str,
    /// The MCP client a `serve --code` runs scripts for (`name version`, from its
    /// `initialize` or a 2026-07-28 request's `_meta`); `None` for the shell.
    pub for_client: std::sync::Arc<std::sync::Mutex<Option<String>>>,
}

/// Runs `job`: fetches the runtime module and the declarations from the daemon, writes
/// them beside the entry in a private directory, type-checks (unless told not to),
/// then runs the script in the sandbox, serving its tool calls until it answers.
///
/// Errors: `usage` for a script that does not type-check (the compiler's message,
/// naming the line), `timeout` when it runs past its limit, `daemon` when the daemon
/// cannot be reached; the sandbox's process group is killed on every way out.
pub async fn execute(cx: &Context, job: &Job, logs: &mut Logs) -> Result<Outcome, ApiError> {
    #[derive(serde::Deserialize)]
    struct Runtime {
        module: String,
        declarations: String,
    }
    let runtime: Runtime = parse(&cx.client.call(Method::GET, "/v1/code/runtime", None::<&()>).await?)?;
    let (servers_dts, table) = declarations(cx).await?;
    let dir = RunDir::new(&cx.runtime)?;
    dir.write(sandbox::RUNTIME_FILE, &runtime.module)?;
    dir.write("mcpx.d.ts", &runtime.declarations)?;
    dir.write("servers.d.ts", &servers_dts)?;
    let config = serde_json::json!({
        "compilerOptions": { "strict": true, "types": ["./mcpx.d.ts", "./servers.d.ts"] },
        "lock": false,
    });
    dir.write("deno.json", &config.to_string())?;
    dir.write("setup.ts", &format!("import {{ install }} from \"./mcpx.ts\";\ninstall({table});\n"))?;
    let script = match &job.source {
        Source::File(path) => file_url(path),
        Source::Code(code) => {
            dir.write(sandbox::EXEC_FILE, &format!("export default async function () {{\n{code}\n}}\n"))?;
            format!("./{}", sandbox::EXEC_FILE)
        }
    };
    let node = matches!(cx.engine, sandbox::Engine::Node(_));
    if node {
        dir.write(sandbox::NODE_SHIM_FILE, sandbox::NODE_SHIM)?;
    }
    let script = serde_json::Value::String(script);
    // Deno: a type-only import puts the script in the graph `deno check` checks, while
    // `main` loads it, so an error at its top level is reported as any other.
    let shim = if node {
        format!("import \"./{}\";\n", sandbox::NODE_SHIM_FILE)
    } else {
        format!("import type * as _checked from {script};\n")
    };
    let entry = format!(
        "{shim}import \"./setup.ts\";\nimport {{ main }} from \"./mcpx.ts\";\nawait main(() => import({script}));\n"
    );
    dir.write(sandbox::ENTRY_FILE, &entry)?;
    let file = match &job.source {
        Source::File(path) => Some(path.as_path()),
        Source::Code(_) => None,
    };
    let mut run_cache = None;
    let group = match &cx.engine {
        sandbox::Engine::Deno(deno) => {
            let env = sandbox::deno_env(&cx.deno_dir);
            let policy = sandbox::policy(deno, &dir, Some(&cx.deno_dir), file, &job.access);
            let confine = sandbox::confinement(&policy, cx.unconfined)?;
            if !mcpx_platform::confine::runtime_flags_off() {
                let loadable = graph::Loadable {
                    dirs: [dir.path("")].into_iter().chain(job.access.read.clone()).collect(),
                    files: file.map(Into::into).into_iter().collect(),
                };
                if let Err(refused) = check_graph(deno, &dir, env.clone(), confine.clone(), &loadable).await? {
                    return Ok(Outcome::Failed(refused));
                }
            }
            if job.check {
                check(deno, &dir, env.clone(), confine.clone()).await?;
            }
            // The script itself runs with a cache of its own, removed after it: the
            // shared one holds other runs' compiled modules, and what a script wrote
            // there a later run would load.
            let cache = run_cache.insert(sandbox::RunDir::in_cache(&cx.deno_dir)?);
            let own = cache.path("");
            let policy = sandbox::policy(deno, &dir, Some(&own), file, &job.access);
            let confine = sandbox::confinement(&policy, cx.unconfined)?;
            let env = sandbox::deno_env(&own);
            Group::start(deno, sandbox::run_args(&dir, &job.access, &job.limits, &job.args), env, confine)?
        }
        sandbox::Engine::Node(node) => {
            let mut policy = sandbox::policy(node, &dir, None, file, &job.access);
            policy.grants.extend(sandbox::node_extra());
            let confine = sandbox::confinement(&policy, cx.unconfined)?;
            let args = sandbox::node_args(&dir, file, &job.access, &job.limits, &job.args);
            Group::start(node, args, std::collections::BTreeMap::new(), confine)?
        }
    };
    let outcome = serve_channel(cx, job, group, &dir, logs).await;
    drop(run_cache);
    outcome
}

/// What the type check's refusal adds for a shell user; `serve --code`, whose client
/// cannot skip the check, removes it.
pub const NO_CHECK_ADVICE: &str = ", or pass --no-check";

/// The callable name (`namespace.function`) of each listed tool of the caller's offered
/// servers, by server and tool name as the servers list them (`POST /v1/types`, from the
/// schema cache; nothing is started).
///
/// Errors: the daemon's.
pub async fn callable_names(cx: &Context) -> Result<std::collections::HashMap<(String, String), String>, ApiError> {
    let req = TypesRequest { caller: cx.caller.clone(), ..TypesRequest::default() };
    let answer: TypesAnswer = parse(&cx.client.call(Method::POST, "/v1/types", Some(&req)).await?)?;
    Ok(answer
        .declarations
        .names
        .into_iter()
        .map(|n| ((n.server, n.tool), format!("{}.{}", n.namespace, n.function)))
        .collect())
}

/// The module graph check ([`graph`]): `deno info --json` of the entry, confined as the
/// script will be, then each module it lists against `loadable`. `Ok(Err(_))` is a
/// refusal, naming each module refused.
///
/// Errors: `deno info` cannot start, or takes over 120 s.
async fn check_graph(
    deno: &std::path::Path,
    dir: &RunDir,
    env: std::collections::BTreeMap<std::ffi::OsString, std::ffi::OsString>,
    confine: Option<std::sync::Arc<mcpx_platform::confine::Prepared>>,
    loadable: &graph::Loadable,
) -> Result<Result<(), String>, ApiError> {
    let (out, err, status) =
        collect(Group::start(deno, sandbox::info_args(dir), env, confine)?, "reading the module graph").await?;
    if out.trim_ascii().is_empty() {
        let how = status.map_or_else(|e| e.to_string(), |s| s.to_string());
        let said = String::from_utf8_lossy(&err);
        return Ok(Err(if said.trim().is_empty() {
            format!(
                "the script did not run: asked for its module graph, {} exited ({how}) and printed nothing: check that {} is Deno (MCPX_DENO, or `deno` on PATH)",
                deno.display(),
                deno.display()
            )
        } else {
            format!("the script did not run: its module graph could not be read ({how}):\n{}", said.trim_end())
        }));
    }
    Ok(graph::check(&out, loadable))
}

/// What a process of the sandbox printed on stdout and stderr, and how it ended, within
/// 120 s (`doing` names the step for the timeout's message).
async fn collect(
    mut group: Group,
    doing: &str,
) -> Result<(Vec<u8>, Vec<u8>, std::io::Result<std::process::ExitStatus>), ApiError> {
    drop(group.child.stdin.take());
    let (out, err) = (group.child.stdout.take(), group.child.stderr.take());
    let read = async {
        // Both at once: a process that fills one pipe while the other is read would stall.
        let (a, b) = tokio::join!(read_all(out), read_all(err));
        (a, b, group.child.wait().await)
    };
    tokio::time::timeout(Duration::from_secs(120), read).await.map_err(|_| {
        ApiError::new(ErrorKind::Timeout, format!("{doing} took over 120s and was stopped; try --no-check"))
    })
}

/// Reads one line of the channel into `line` (its newline included), at most
/// [`channel::MAX_FRAME`] bytes: a script that writes without a newline is not held in
/// memory without end. Cancel-safe: what was read stays in `line`.
///
/// Errors: `InvalidData` past the limit (`line` then holds more than it); the pipe's.
async fn read_frame(reader: &mut (impl tokio::io::AsyncBufRead + Unpin), line: &mut Vec<u8>) -> std::io::Result<usize> {
    use tokio::io::AsyncBufReadExt as _;
    let start = line.len();
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(line.len() - start);
        }
        let (taken, done) = match available.iter().position(|&b| b == b'\n') {
            Some(at) => (at + 1, true),
            None => (available.len(), false),
        };
        line.extend_from_slice(&available[..taken]);
        reader.consume(taken);
        if line.len() > channel::MAX_FRAME {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "a channel line past its limit"));
        }
        if done {
            return Ok(line.len() - start);
        }
    }
}

/// Everything `pipe` gives until it ends (nothing without one; a read error ends it).
async fn read_all(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Some(mut pipe) = pipe {
        let _ = pipe.read_to_end(&mut bytes).await;
    }
    bytes
}

/// `deno check` of the entry; the compiler's message as a `usage` error when it fails.
async fn check(
    deno: &std::path::Path,
    dir: &RunDir,
    env: std::collections::BTreeMap<std::ffi::OsString, std::ffi::OsString>,
    confine: Option<std::sync::Arc<mcpx_platform::confine::Prepared>>,
) -> Result<(), ApiError> {
    let (mut text, err, status) =
        collect(Group::start(deno, sandbox::check_args(dir), env, confine)?, "the type check").await?;
    text.extend(err);
    match status {
        Ok(s) if s.success() => Ok(()),
        _ => Err(ApiError::new(
            ErrorKind::Usage,
            format!(
                "the script does not type-check, so it did not run (fix it{NO_CHECK_ADVICE}):\n{}",
                sandbox::readable_diagnostics(&String::from_utf8_lossy(&text), dir)
            ),
        )),
    }
}

/// Serves the running script's channel: its tool calls go to the daemon, their answers
/// back, until it answers, fails, or passes its time limit.
async fn serve_channel(
    cx: &Context,
    job: &Job,
    mut group: Group,
    dir: &RunDir,
    logs: &mut Logs,
) -> Result<Outcome, ApiError> {
    let broken = || ApiError::new(ErrorKind::Daemon, "the sandbox's standard streams were not piped");
    let mut stdin = group.child.stdin.take().ok_or_else(broken)?;
    let mut stdout = BufReader::new(group.child.stdout.take().ok_or_else(broken)?);
    let stderr = group.child.stderr.take().ok_or_else(broken)?;
    let limit = job.limits.output_bytes;
    let collect = matches!(logs, Logs::Collect(_));
    let logged = tokio::spawn(pass_logs(stderr, limit, collect));
    // The limits are capped ([`sandbox::MAX_TIMEOUT`]); a deadline past the clock's
    // range is none.
    let far = tokio::time::Instant::now() + sandbox::MAX_TIMEOUT;
    let deadline = tokio::time::Instant::now().checked_add(job.limits.timeout).unwrap_or(far);
    let mut calls = tokio::task::JoinSet::new();
    let mut line = Vec::new();
    let ended = loop {
        tokio::select! {
            read = read_frame(&mut stdout, &mut line) => {
                match read {
                    Ok(0) | Err(_) if line.len() <= channel::MAX_FRAME => break None,
                    Err(_) => break Some(Outcome::Failed(format!(
                        "the script wrote a line of over {} MiB on its channel, which carries tool calls only; it was stopped",
                        channel::MAX_FRAME >> 20
                    ))),
                    _ => {}
                }
                let frame = channel::parse(line.trim_ascii());
                line.clear();
                match frame {
                    Ok(Frame::Call { id, server, tool, arguments }) => {
                        let client = cx.client.clone();
                        let asker = channel::Asker {
                            caller: cx.caller.clone(),
                            only: cx.only.clone(),
                            via: cx.via,
                            client: cx.for_client.lock().ok().and_then(|c| c.clone()),
                        };
                        calls.spawn(async move { channel::call(&client, &asker, id, server, tool, arguments).await });
                    }
                    Ok(Frame::Text(t)) => break Some(Outcome::Returned(Returned::Text(t))),
                    Ok(Frame::Value(v)) => break Some(Outcome::Returned(Returned::Value(v))),
                    Ok(Frame::Nothing) => break Some(Outcome::Returned(Returned::Nothing)),
                    Ok(Frame::Failed { name, message, stack }) => {
                        break Some(Outcome::Failed(failure(&name, &message, stack.as_deref(), dir)));
                    }
                    Err(what) => break Some(Outcome::Failed(format!(
                        "the script wrote {what} on its channel, which carries tool calls only; it was stopped"
                    ))),
                }
            }
            Some(Ok(answer)) = calls.join_next() => {
                // A script that stopped reading is ended by the next frame or its limit.
                let _ = stdin.write_all(&answer).await;
            }
            () = tokio::time::sleep_until(deadline) => {
                return Err(ApiError::new(ErrorKind::Timeout, format!(
                    "the script ran longer than {} and was stopped (--timeout raises the limit)",
                    show_duration(job.limits.timeout)
                )));
            }
        }
    };
    drop(stdin);
    let status = match ended {
        Some(_) => None,
        None => tokio::time::timeout(Duration::from_secs(10), group.child.wait()).await.ok().and_then(Result::ok),
    };
    drop(group);
    let (kept, tail) = logged.await.unwrap_or_default();
    if let Logs::Collect(text) = logs {
        *text = kept;
    }
    if let Some(outcome) = ended {
        return Ok(outcome);
    }
    if tail.contains("out of memory") || tail.contains("heap limit") {
        return Ok(Outcome::Failed(format!(
            "the script ran out of memory: it passed its heap limit of {} MiB and was stopped (--max-memory raises it)",
            job.limits.memory_mib
        )));
    }
    let how = status.map_or_else(|| "ended".to_owned(), |s| format!("exited ({s})"));
    if tail.trim().is_empty() {
        // Nothing said at all: most likely not a JavaScript runtime (a wrong MCPX_DENO).
        let (sandbox::Engine::Deno(path) | sandbox::Engine::Node(path)) = &cx.engine;
        return Ok(Outcome::Failed(format!(
            "the script {how} before it returned, and printed nothing: check that {} is Deno (MCPX_DENO, or `deno` on PATH)",
            path.display()
        )));
    }
    Ok(Outcome::Failed(format!("the script {how} before it returned; see its output above")))
}

/// Passes the script's log output on (or keeps it, with `collect`), cut after `limit`
/// bytes with a note; returns what it kept and the last 4 KiB it read.
async fn pass_logs(mut stderr: tokio::process::ChildStderr, limit: usize, collect: bool) -> (String, String) {
    let mut kept = Vec::new();
    let mut tail: Vec<u8> = Vec::new();
    let mut passed = 0usize;
    let mut cut = false;
    let mut buf = vec![0u8; 16 * 1024];
    let mut out = tokio::io::stderr();
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let chunk = &buf[..n];
        tail.extend_from_slice(chunk);
        let excess = tail.len().saturating_sub(4096);
        tail.drain(..excess);
        let room = limit.saturating_sub(passed).min(n);
        if collect {
            kept.extend_from_slice(&chunk[..room]);
        } else {
            // Escaped as every other human output is (a chunk cut inside a character
            // shows it replaced).
            let text = String::from_utf8_lossy(&chunk[..room]);
            let _ = out.write_all(mcpx_platform::sanitize::text(&text).as_bytes()).await;
        }
        passed += room;
        if room < n && !cut {
            cut = true;
            let note = format!("\n[mcpx: the script's log output was cut at {limit} bytes (--max-output)]\n");
            if collect {
                kept.extend_from_slice(note.as_bytes());
            } else {
                let _ = out.write_all(note.as_bytes()).await;
            }
        }
    }
    let _ = out.flush().await;
    (String::from_utf8_lossy(&kept).into_owned(), String::from_utf8_lossy(&tail).into_owned())
}

/// The message of a script's uncaught error: its name and message (Deno's permission
/// advice replaced by the sandbox's), and the first place in the script it names.
fn failure(name: &str, message: &str, stack: Option<&str>, dir: &RunDir) -> String {
    let message = message.split(", run again with the --allow-").next().unwrap_or(message);
    let mut text = format!("the script failed: {name}: {message}");
    if let Some(hint) = sandbox::permission_hint(message) {
        text.push_str(&format!(" ({hint})"));
    }
    let runtime = format!("{}", dir.path(sandbox::RUNTIME_FILE).display());
    let place = stack
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("at ") && l.contains("file://") && !l.contains(&runtime) && !l.contains("ext:"));
    if let Some(place) = place {
        text.push_str(&format!("\n    {}", sandbox::readable_diagnostics(place, dir)));
    }
    text
}

/// The declarations of the caller's servers and the table `install` takes (which
/// global calls which server and tool, and whether its result is the structured
/// content), from the daemon's generator (`POST /v1/types`).
async fn declarations(cx: &Context) -> Result<(String, String), ApiError> {
    declarations_of(cx, &[]).await
}

/// The declarations of `servers` (all the caller's when empty) for a reader: what
/// `mcpx_types` answers.
///
/// Errors: those of the daemon's answer.
pub async fn declarations_for(cx: &Context, servers: &[String]) -> Result<String, ApiError> {
    Ok(declarations_of(cx, servers).await?.0)
}

/// `POST /v1/types` for `servers` (with `only`, that server). A server never listed
/// has no declarations yet: it is declared `any` and still callable (the daemon starts
/// it on the first call), so an untyped script reaches it.
async fn declarations_of(cx: &Context, servers: &[String]) -> Result<(String, String), ApiError> {
    let servers = match &cx.only {
        Some(only) => vec![only.clone()],
        None => servers.to_vec(),
    };
    // Servers named (by the client, or `--server`) are started and listed when never
    // listed, as `mcpx types <server>` does; all of them, never.
    let start = !servers.is_empty();
    let req = TypesRequest { caller: cx.caller.clone(), servers, start };
    let answer: TypesAnswer = parse(&cx.client.call(Method::POST, "/v1/types", Some(&req)).await?)?;
    let mut dts = answer.declarations.text;
    let mut namespaces = serde_json::Map::new();
    for name in &answer.declarations.names {
        let entry = namespaces
            .entry(name.namespace.clone())
            .or_insert_with(|| serde_json::json!({ "server": name.server, "tools": {} }));
        entry["tools"][&name.function] = serde_json::json!({ "tool": name.tool, "structured": name.structured });
    }
    for server in &answer.unlisted {
        let ident = identifier(server);
        if namespaces.contains_key(&ident) {
            continue;
        }
        dts.push_str(&format!(
            "\n/** Server `{server}`, never listed: untyped until `mcpx tools {server}` lists it. */\ndeclare const {ident}: any;\n"
        ));
        namespaces.insert(ident, serde_json::json!({ "server": server, "tools": {} }));
    }
    Ok((dts, serde_json::json!({ "namespaces": namespaces }).to_string()))
}

/// A JavaScript identifier for a server name: characters other than letters, digits,
/// `_` and `$` become `_`, and a leading digit gets a `_` before it.
fn identifier(name: &str) -> String {
    let mut s: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '$' { c } else { '_' }).collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

/// `file://` URL of an absolute path, each byte outside the unreserved set and `/`
/// percent-encoded (RFC 3986, section 2).
fn file_url(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut url = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            url.push(char::from(b));
        } else {
            url.push_str(&format!("%{b:02X}"));
        }
    }
    url
}

fn show_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 { format!("{}s", d.as_secs()) } else { format!("{}ms", d.as_millis()) }
}

fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::new(ErrorKind::Daemon, format!("unexpected answer from the daemon: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_and_file_urls() {
        assert_eq!(identifier("server-memory"), "server_memory");
        assert_eq!(identifier("9x"), "_9x");
        assert_eq!(file_url(std::path::Path::new("/tmp/a b/c#.ts")), "file:///tmp/a%20b/c%23.ts");
    }
}
