//! The `mcpx run` and `mcpx exec` commands: options to a [`Job`], Deno found (or the
//! refusal that says how to install it), the run, and what it printed and its exit
//! status (0 returned, 1 the script failed, 2 it does not type-check, 5 its time ran out).

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;

use mcpx_api::client::Client;
use mcpx_api::paths::OpenDirs;
use mcpx_api::{ApiError, Caller, ErrorKind};

use super::sandbox::{self, Access, Limits};
use super::{Context, ExecArgs, Job, Logs, Options, Outcome, Returned, RunArgs, Source};
use crate::output;

/// What to run: a file with its arguments, or code.
pub enum What {
    Run(RunArgs),
    Exec(ExecArgs),
}

/// Runs the script and prints its answer (JSON for values, text for strings; with
/// `json`, always JSON); returns the exit status.
pub async fn run(
    client: &Client,
    opened: &OpenDirs,
    env: &HashMap<String, String>,
    mut caller: Caller,
    what: What,
    json: bool,
) -> Result<i32, ApiError> {
    let via = match &what {
        What::Run(_) => "run",
        What::Exec(_) => "exec",
    };
    let (source, args, options) = match what {
        What::Run(a) => {
            let file = std::path::absolute(&a.file).unwrap_or(a.file.clone());
            if !file.is_file() {
                return Err(ApiError::new(ErrorKind::Usage, format!("no script at {}", a.file.display())));
            }
            (Source::File(file), a.args, a.options)
        }
        What::Exec(a) => {
            let code = if a.code == "-" {
                let mut code = String::new();
                std::io::stdin()
                    .read_to_string(&mut code)
                    .map_err(|e| ApiError::new(ErrorKind::Usage, format!("cannot read the code from stdin: {e}")))?;
                code
            } else {
                a.code
            };
            (Source::Code(code), Vec::new(), a.options)
        }
    };
    if let Some(session) = options.session.clone().filter(|s| !s.is_empty()) {
        caller.session = Some(session);
    }
    let job = job(source, args, &options, caller.cwd.as_deref())?;
    let engine = if options.unsafe_node {
        let node = sandbox::find_on_path(env, "node").ok_or_else(|| {
            ApiError::new(ErrorKind::Usage, "--unsafe-node: Node is not on PATH; install Node 22 or later, or Deno")
        })?;
        sandbox::check_node(&node).map_err(|message| ApiError::new(ErrorKind::Usage, message))?;
        output::warn(&format!("mcpx: {}", sandbox::node_left_open(!options.unconfined)));
        sandbox::Engine::Node(node)
    } else {
        sandbox::Engine::Deno(sandbox::find_deno(env).map_err(|message| ApiError::new(ErrorKind::Usage, message))?)
    };
    let deno_dir = deno_dir(opened)?;
    if options.unconfined {
        output::warn(&format!("mcpx: {}", sandbox::unconfined_left_open(&engine)));
    }
    let cx = Context {
        client: client.clone(),
        caller,
        runtime: opened.runtime.clone(),
        engine,
        deno_dir,
        only: None,
        unconfined: options.unconfined,
        via,
        for_client: Default::default(),
    };
    let mut logs = Logs::Forward;
    let outcome = tokio::select! {
        outcome = super::execute(&cx, &job, &mut logs) => outcome?,
        _ = tokio::signal::ctrl_c() => {
            // Leaving drops the sandbox, whose process group is killed.
            eprintln!("mcpx: cancelled");
            return Ok(130);
        }
    };
    match outcome {
        Outcome::Returned(returned) => {
            print_returned(returned, json, job.limits.output_bytes);
            Ok(0)
        }
        Outcome::Failed(message) => {
            if json {
                println!("{}", serde_json::json!({ "error": { "kind": "script", "message": message } }));
            } else {
                output::warn(&format!("mcpx: {message}"));
            }
            Ok(1)
        }
    }
}

/// The job the options describe, relative directories taken from `cwd`.
///
/// Errors: `usage` for a malformed duration or size.
pub fn job(
    source: Source,
    args: Vec<String>,
    options: &Options,
    cwd: Option<&std::path::Path>,
) -> Result<Job, ApiError> {
    let mut limits = Limits::default();
    let bad = |flag: &str, e: String, like: &str| {
        ApiError::new(ErrorKind::Usage, format!("{flag}: {e} (write it like {like})"))
    };
    if let Some(t) = &options.timeout {
        let longest = || bad("--timeout", format!("{t} is longer than the 24h a script may run"), "30s or 5m");
        limits.timeout = match mcpx_daemon::config::units::parse_duration(t) {
            Ok(d) if d > sandbox::MAX_TIMEOUT => return Err(longest()),
            Ok(d) if d.is_zero() => {
                return Err(bad(
                    "--timeout",
                    "a script needs a limit: 0 would stop it at once".to_owned(),
                    "30s or 5m",
                ));
            }
            Ok(d) => d,
            Err(e) if e.contains("365 days") => return Err(longest()),
            Err(e) => return Err(bad("--timeout", e, "30s or 5m")),
        };
    }
    if let Some(m) = &options.max_memory {
        let bytes = mcpx_daemon::config::units::parse_size(m).map_err(|e| bad("--max-memory", e, "256MiB or 1GiB"))?;
        limits.memory_mib = (bytes >> 20).max(16);
    }
    if let Some(o) = &options.max_output {
        let bytes = mcpx_daemon::config::units::parse_size(o).map_err(|e| bad("--max-output", e, "64KiB or 1MiB"))?;
        limits.output_bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    }
    let absolute = |dirs: &[PathBuf]| -> Vec<PathBuf> {
        dirs.iter()
            .map(|d| match cwd {
                Some(cwd) if d.is_relative() => cwd.join(d),
                _ => d.clone(),
            })
            .collect()
    };
    let access = Access { read: absolute(&options.allow_read), write: absolute(&options.allow_write) };
    Ok(Job { source, args, check: !options.no_check, limits, access })
}

/// `DENO_DIR`: `deno` under mcpx's cache directory (made when missing, private).
pub fn deno_dir(opened: &OpenDirs) -> Result<PathBuf, ApiError> {
    opened.cache.subdir("deno", true).map(|d| d.path().to_path_buf()).map_err(|e| {
        ApiError::new(ErrorKind::Daemon, format!("cannot make Deno's cache directory under the cache directory: {e}"))
    })
}

/// The text a returned value prints as, cut at `limit` bytes: the text itself, or
/// JSON; and whether it was cut.
pub fn returned_text(returned: Returned, json: bool, limit: usize) -> (String, bool) {
    let text = match returned {
        Returned::Nothing => return (String::new(), false),
        Returned::Text(t) if !json => t,
        Returned::Text(t) => serde_json::Value::String(t).to_string(),
        Returned::Value(v) => serde_json::to_string_pretty(&v).unwrap_or_default(),
    };
    if text.len() <= limit {
        return (text, false);
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (text[..end].to_owned(), true)
}

fn print_returned(returned: Returned, json: bool, limit: usize) {
    let (text, cut) = returned_text(returned, json, limit);
    if !text.is_empty() {
        // Through the sanitizer: what a script returns (a tool's text, say) cannot drive
        // the terminal.
        let text = text.strip_suffix('\n').unwrap_or(&text);
        if json { output::say_json(text) } else { output::say(text) }
    }
    if cut {
        output::warn(&format!("mcpx: the answer was cut at {limit} bytes (--max-output raises the limit)"));
    }
}
