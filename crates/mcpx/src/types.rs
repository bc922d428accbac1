//! `mcpx types [<server>...] [--out FILE]`: TypeScript declarations of the tools, from the
//! daemon's schema cache (`POST /v1/types`), for scripts that call tools as typed functions.

use std::path::{Path, PathBuf};

use mcpx_api::client::{Client, Method};
use mcpx_api::{ApiError, Caller, ErrorKind, TypesAnswer, TypesRequest};
use mcpx_platform::fs::Dir;

/// `mcpx types`: the declarations on stdout, or written to `out` (replaced atomically); with
/// `--json`, the whole answer (`text`, `names`, `unlisted`). Servers never listed are named
/// on stderr when none was asked for; named ones are started and listed first, with a status
/// line on a terminal.
///
/// Errors: those of `POST /v1/types`; `out` cannot be written (`usage`).
pub async fn run(
    client: &Client,
    caller: Caller,
    servers: Vec<String>,
    out: Option<PathBuf>,
    json: bool,
) -> Result<i32, ApiError> {
    let req = TypesRequest { caller, servers: servers.clone(), start: false };
    let call = |req: TypesRequest| async move { client.call(Method::POST, "/v1/types", Some(&req)).await };
    let body = match call(req.clone()).await {
        Err(e) if e.kind == ErrorKind::Server && !servers.is_empty() => {
            let what =
                format!("starting {} to list {}", servers.join(", "), if servers.len() > 1 { "them" } else { "it" });
            crate::status_line::StatusLine::during(true, &what, call(TypesRequest { start: true, ..req })).await?
        }
        answer => answer?,
    };
    let answer: TypesAnswer = serde_json::from_slice(&body)
        .map_err(|e| ApiError::new(ErrorKind::Daemon, format!("the daemon's answer to /v1/types is not valid: {e}")))?;
    if !answer.unlisted.is_empty() && !json {
        eprintln!(
            "mcpx: not declared, never listed: {} (`mcpx types <server>` starts and lists one)",
            answer.unlisted.join(", ")
        );
    }
    let text = match json {
        true => String::from_utf8_lossy(&body).into_owned() + "\n",
        false => answer.declarations.text,
    };
    match out {
        Some(file) => write(&file, text.as_bytes())?,
        None => print!("{text}"),
    }
    Ok(0)
}

/// Writes `bytes` to `file`, replacing it atomically.
fn write(file: &Path, bytes: &[u8]) -> Result<(), ApiError> {
    let usage = |why: String| ApiError::new(ErrorKind::Usage, why);
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| usage(format!("--out {}: name a file", file.display())))?;
    let parent = file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let cannot = |e: std::io::Error| {
        usage(format!("cannot write {}: {e}; name a file in a directory you can write", file.display()))
    };
    let dir = Dir::open_unchecked(parent).map_err(cannot)?;
    mcpx_platform::fs::write_atomic(&dir, name, bytes, 0o644).map_err(cannot)
}
