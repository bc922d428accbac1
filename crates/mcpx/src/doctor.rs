//! `mcpx doctor`: checks what mcpx needs and says what to do about each problem: the
//! directories, the daemon and its build, the supervisors, the service unit, each server's
//! command, the configuration files, the secret store and the logins.
//!
//! Each finding is one line marked `ok`, `warn` or `error`; `--json` prints
//! `{"ok", "findings": [{"check", "level", "message"}]}`. The exit status is 1 when any
//! finding is an `error` (an exception to the exit-code table: the problems are the output),
//! else 0.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcpx_api::client::{Client, Method, connect_or_start};
use mcpx_api::paths::{DirError, Dirs};
use mcpx_api::{ApiError, CallerRequest, ErrorKind, ServerRow, Status};
use mcpx_daemon::control::commands::CommandCheck;
use mcpx_platform::fs::{Dir, OpenError};
use mcpx_platform::secrets::SecretStore;
use serde::Serialize;
use serde_json::Value;

use crate::output;

/// A login that expires within this long, and cannot renew itself, is a warning.
const EXPIRY_WARNING: Duration = Duration::from_secs(7 * 24 * 3600);

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Nothing to do.
    Ok,
    /// Works now, but something will go wrong or is worth a look.
    Warn,
    /// Something does not work; the message says what to do.
    Error,
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// Which check: `directories`, `daemon`, `supervisors`, `service`, `code-mode`,
    /// `commands`, `config`, `secrets` or `logins`.
    pub check: &'static str,
    /// How bad it is.
    pub level: Level,
    /// What was found and, unless `ok`, what to do.
    pub message: String,
}

/// Runs every check and prints the report; returns the exit status (1 when any finding
/// is an error). `request` is the caller's request (working directory, `--config`).
pub async fn run(dirs: &Dirs, exe: &Path, env: &HashMap<String, String>, request: CallerRequest, json: bool) -> i32 {
    let mut report = Report::default();
    let dirs_ok = report.directories(dirs);
    if dirs_ok {
        match connect_or_start(dirs, exe).await {
            Ok(client) => report.daemon_checks(&client, &request).await,
            Err(e) => report.add("daemon", Level::Error, format!("the daemon does not answer: {}", e.message)),
        }
    } else {
        report.add(
            "daemon",
            Level::Error,
            "not asked: a refused directory comes first (fix it as said above, then run `mcpx doctor` again)".into(),
        );
    }
    report.service(env);
    report.code_mode();
    report.secrets(dirs);
    print(&report.findings, json);
    i32::from(report.findings.iter().any(|f| f.level == Level::Error))
}

#[derive(Default)]
struct Report {
    findings: Vec<Finding>,
}

impl Report {
    fn add(&mut self, check: &'static str, level: Level, message: String) {
        self.findings.push(Finding { check, level, message });
    }

    /// The state, cache and runtime directories as the daemon checks them: each the user's,
    /// a directory and not a link, with no group or other access. A missing one is made at
    /// the first start. Returns whether none is refused.
    fn directories(&mut self, dirs: &Dirs) -> bool {
        let mut ok = true;
        for (what, path, var) in [
            ("state", &dirs.state, "MCPX_STATE_DIR"),
            ("cache", &dirs.cache, "MCPX_CACHE_DIR"),
            ("runtime", &dirs.runtime, "MCPX_RUNTIME_DIR"),
        ] {
            match Dir::open_private(path, false) {
                Ok(_) => self.add("directories", Level::Ok, format!("{what} directory {}: private", path.display())),
                Err(OpenError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => self.add(
                    "directories",
                    Level::Ok,
                    format!("{what} directory {}: not made yet (the daemon makes it, mode 0700)", path.display()),
                ),
                Err(e) => {
                    ok = false;
                    self.add("directories", Level::Error, DirError::of(path, var, e).to_string());
                }
            }
        }
        ok
    }

    /// What the running daemon tells: its build, its supervisors and start-up warnings, the
    /// servers' commands, the configuration files and the logins.
    async fn daemon_checks(&mut self, client: &Client, request: &CallerRequest) {
        match get::<Status>(client, Method::GET, "/v1/status", None).await {
            Ok(status) => self.status(&status),
            Err(e) => self.add("daemon", Level::Error, format!("the daemon does not answer `status`: {}", e.message)),
        }
        match get::<Vec<ServerRow>>(client, Method::POST, "/v1/ls", Some(request)).await {
            Ok(rows) => self.config(&rows),
            Err(e) => self.add("config", Level::Error, e.message),
        }
        // A configuration that cannot be read is reported once, above.
        if let Ok(checks) = get::<Vec<CommandCheck>>(client, Method::POST, "/v1/commands", Some(request)).await {
            self.commands(&checks);
        }
        match get::<Value>(client, Method::POST, "/v1/auth/status", Some(request)).await {
            Ok(answer) => self.logins(&answer, SystemTime::now()),
            Err(e) if e.kind == ErrorKind::Config => {}
            Err(e) => self.add("logins", Level::Error, format!("cannot read the logins: {}", e.message)),
        }
    }

    fn status(&mut self, status: &Status) {
        let d = &status.daemon;
        let ours = mcpx_platform::build::build_id();
        if d.build == ours {
            self.add(
                "daemon",
                Level::Ok,
                format!("daemon {} answers (pid {}), same build as this mcpx", d.version, d.pid),
            );
        } else {
            self.add(
                "daemon",
                Level::Warn,
                format!(
                    "the daemon (pid {}) runs build {}, this mcpx is {ours}: run `mcpx upgrade` to run this one",
                    d.pid, d.build
                ),
            );
        }
        for warning in &d.warnings {
            self.add("daemon", Level::Warn, warning.clone());
        }
        let incompatible: Vec<_> = status.instances.iter().filter(|i| i.state == "incompatible").collect();
        for i in &incompatible {
            self.add(
                "supervisors",
                Level::Error,
                format!(
                    "the supervisor of `{}` (pid {}) speaks another attach protocol: run `mcpx restart {}` to replace it",
                    i.server,
                    i.supervisor_pid.map_or_else(|| "?".to_owned(), |p| p.to_string()),
                    i.server
                ),
            );
        }
        if incompatible.is_empty() {
            let n = status.instances.iter().filter(|i| i.supervised).count();
            self.add("supervisors", Level::Ok, format!("{n} supervised instance(s), every supervisor compatible"));
        }
        self.pins(d);
        if let Some(error) = &d.activity_error {
            let lost = d.activity_lost;
            self.add("activity", Level::Warn, format!("the activity record lost {lost} entries: {error}"));
        }
        if let Some(error) = &d.otel_error {
            let dropped = d.spans_dropped;
            self.add("telemetry", Level::Warn, format!("{dropped} spans dropped; {error}"));
        }
    }

    /// Pinning: tools and prompts held for the user's review, and definitions the
    /// poisoning scan flagged (`docs/configuration.md`, "Pinning").
    fn pins(&mut self, d: &mcpx_api::DaemonStatus) {
        for (server, n) in &d.held {
            self.add(
                "pins",
                Level::Warn,
                format!("{n} of `{server}`'s tools and prompts are held: the user reviews them with `mcpx pins review {server}`"),
            );
        }
        match d.flagged_definitions {
            0 if d.held.is_empty() => self.add("pins", Level::Ok, "nothing held, no definition flagged".into()),
            0 => {}
            n => self.add(
                "pins",
                Level::Warn,
                format!(
                    "{n} tool or prompt definitions look like tool poisoning: `mcpx pins ls` shows what the scan found"
                ),
            ),
        }
    }

    /// Files that do not parse (rows named by a path), files with a problem of their own,
    /// and servers defined twice.
    fn config(&mut self, rows: &[ServerRow]) {
        let mut servers = 0;
        for row in rows {
            let is_file = Path::new(&row.name) == row.source.file;
            if is_file && row.state == "error" {
                self.add(
                    "config",
                    Level::Error,
                    row.error.clone().unwrap_or_else(|| format!("{}: unreadable", row.name)),
                );
            } else if is_file {
                for w in &row.warnings {
                    self.add("config", Level::Warn, format!("{}: {w}", row.name));
                }
            } else {
                servers += 1;
                for w in &row.warnings {
                    self.add("config", Level::Warn, format!("server `{}`: {w}", row.name));
                }
            }
        }
        if !self.findings.iter().any(|f| f.check == "config") {
            self.add("config", Level::Ok, format!("every configuration file parses ({servers} server(s))"));
        }
    }

    fn commands(&mut self, checks: &[CommandCheck]) {
        let mut found = 0;
        for c in checks {
            match c.state.as_str() {
                "found" => found += 1,
                "not_found" => self.add(
                    "commands",
                    Level::Error,
                    format!(
                        "server `{}`: {}: install it, or give `command` as a full path or the entry an `env` PATH",
                        c.server,
                        c.error.as_deref().unwrap_or("command not found")
                    ),
                ),
                "error" => self.add(
                    "commands",
                    Level::Error,
                    format!("server `{}`: {}", c.server, c.error.as_deref().unwrap_or("cannot be expanded")),
                ),
                _ => {}
            }
        }
        if !self.findings.iter().any(|f| f.check == "commands") {
            self.add("commands", Level::Ok, format!("{found} server command(s) found on the PATH the daemon gives"));
        }
    }

    /// Remote servers' logins (`POST /v1/auth/status`): an expired one, or one expiring within
    /// [`EXPIRY_WARNING`] that cannot renew itself.
    fn logins(&mut self, answer: &Value, now: SystemTime) {
        let now_s = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        let rows = answer["servers"].as_array().map(Vec::as_slice).unwrap_or_default();
        let mut kept = 0;
        for row in rows {
            let server = row["server"].as_str().unwrap_or("?");
            let login = format!("run `mcpx auth login {server}`");
            match row["state"].as_str() {
                Some("expired") => {
                    self.add("logins", Level::Error, format!("server `{server}`: the login has expired: {login}"));
                }
                Some("error") => {
                    let error = row["error"].as_str().unwrap_or("the login cannot be read");
                    // The daemon's error may name the server already.
                    let named = format!("server `{server}`");
                    let finding =
                        if error.starts_with(&named) { error.to_owned() } else { format!("{named}: {error}") };
                    self.add("logins", Level::Error, finding);
                }
                Some("logged_in") => {
                    kept += 1;
                    let expires = row["expires_at"].as_u64();
                    let renews = row["refreshable"].as_bool().unwrap_or(false);
                    if let Some(at) = expires.filter(|at| !renews && *at < now_s + EXPIRY_WARNING.as_secs()) {
                        let hours = at.saturating_sub(now_s) / 3600;
                        self.add(
                            "logins",
                            Level::Warn,
                            format!(
                                "server `{server}`: the login expires in {hours} h and cannot renew itself: {login}"
                            ),
                        );
                    }
                }
                _ => {}
            }
        }
        if !self.findings.iter().any(|f| f.check == "logins") {
            self.add("logins", Level::Ok, format!("{kept} login(s) kept, none expiring within 7 days"));
        }
    }

    /// The user unit `mcpx service install` writes: a `KillMode` other than `process` (or
    /// `none`) kills every server when the unit stops or restarts.
    fn service(&mut self, env: &HashMap<String, String>) {
        match mcpx_daemon::service_check::installed_unit_kill_mode(env) {
            None => self.add("service", Level::Ok, "no mcpx.service user unit installed".into()),
            Some(mode) if mode == "process" || mode == "none" => {
                self.add("service", Level::Ok, format!("mcpx.service has KillMode={mode}: servers survive its restarts"))
            }
            Some(mode) => self.add(
                "service",
                Level::Error,
                format!(
                    "mcpx.service has KillMode={mode}, which kills every server when the unit stops or restarts: run `mcpx service install` again (it writes KillMode=process), then `systemctl --user daemon-reload`"
                ),
            ),
        }
    }

    /// The secret store recorded in the state directory answers a listing.
    /// Whether the kernel confines code mode's scripts (Landlock's ABI on Linux), and
    /// what the sandbox may reach; without confinement code mode refuses to run unless
    /// `--unconfined`, a warning rather than an error: the rest of mcpx works.
    fn code_mode(&mut self) {
        use mcpx_platform::confine;
        let system: Vec<String> = confine::runtime_base().iter().map(|g| g.path.display().to_string()).collect();
        match confine::support() {
            confine::Support::Kernel { mechanism, scoped, .. } => self.add(
                "code-mode",
                Level::Ok,
                format!(
                    "code mode is confined by {mechanism}{}: a script reads Deno's binary, the system files {}, \
                     Deno's cache, its run directory and --allow-read directories, and writes --allow-write \
                     directories and Deno's cache; it opens no network or socket, starts no process and signals no one",
                    if scoped {
                        ""
                    } else {
                        " (signals refused by seccomp only: Landlock below ABI 6 cannot scope them)"
                    },
                    system.join(", ")
                ),
            ),
            confine::Support::Unavailable(why) => self.add(
                "code-mode",
                Level::Warn,
                format!(
                    "code mode is not confined: {why}; `mcpx exec` and `mcpx run` refuse to run unless --unconfined, \
                     which leaves Deno's permission flags as the only wall"
                ),
            ),
        }
    }

    fn secrets(&mut self, dirs: &Dirs) {
        let state = match Dir::open_private(&dirs.state, false) {
            Ok(state) => state,
            Err(_) => return,
        };
        match SecretStore::open(&state).and_then(|store| store.list().map(|names| (store, names.len()))) {
            Ok((store, n)) => {
                self.add("secrets", Level::Ok, format!("the {} store answers ({n} secret(s))", store.kind()))
            }
            Err(e) => self.add(
                "secrets",
                Level::Error,
                format!("the secret store does not answer: {e}; servers that use ${{secret:...}} cannot start"),
            ),
        }
    }
}

/// Asks the daemon and reads its JSON answer.
async fn get<T: serde::de::DeserializeOwned>(
    client: &Client,
    method: Method,
    path: &str,
    body: Option<&CallerRequest>,
) -> Result<T, ApiError> {
    let bytes = client.call(method, path, body).await?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::new(ErrorKind::Daemon, format!("the daemon answered {path} unreadably: {e}")))
}

fn print(findings: &[Finding], json: bool) {
    if json {
        let ok = !findings.iter().any(|f| f.level == Level::Error);
        let body = serde_json::json!({ "ok": ok, "findings": findings });
        output::say_json(&serde_json::to_string_pretty(&body).unwrap_or_default());
        return;
    }
    output::say(&text(findings));
}

/// The human report: a line per finding, its mark first, then a summary line.
fn text(findings: &[Finding]) -> String {
    let mut out = String::new();
    for f in findings {
        let mark = match f.level {
            Level::Ok => "ok   ",
            Level::Warn => "warn ",
            Level::Error => "error",
        };
        out.push_str(&format!("{mark}  {:<11}  {}\n", f.check, f.message));
    }
    let count = |l| findings.iter().filter(|f| f.level == l).count();
    let (errors, warnings) = (count(Level::Error), count(Level::Warn));
    out.push_str(&match (errors, warnings) {
        (0, 0) => "no problem found".to_owned(),
        (e, w) => format!("{e} error(s), {w} warning(s)"),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logins_expired_or_expiring_without_renewal_are_findings() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let answer = serde_json::json!({ "servers": [
            { "server": "old", "state": "expired" },
            { "server": "soon", "state": "logged_in", "expires_at": 1_000_000 + 49 * 3600, "refreshable": false },
            { "server": "renews", "state": "logged_in", "expires_at": 1_000_000 + 3600, "refreshable": true },
            { "server": "later", "state": "logged_in", "expires_at": 1_000_000 + 30 * 24 * 3600, "refreshable": false },
            { "server": "never", "state": "not_logged_in" },
            { "server": "bad", "state": "error", "error": "server `bad`: the `url` is not a URL; fix it in the entry" },
            { "server": "worse", "state": "error", "error": "the store cannot be read" },
        ] });
        let mut report = Report::default();
        report.logins(&answer, now);
        insta::assert_snapshot!(text(&report.findings), @r"
        error  logins       server `old`: the login has expired: run `mcpx auth login old`
        warn   logins       server `soon`: the login expires in 49 h and cannot renew itself: run `mcpx auth login soon`
        error  logins       server `bad`: the `url` is not a URL; fix it in the entry
        error  logins       server `worse`: the store cannot be read
        3 error(s), 1 warning(s)
        ");
        let mut report = Report::default();
        report.logins(&serde_json::json!({ "servers": [] }), now);
        assert_eq!(report.findings[0].level, Level::Ok);
    }
}
