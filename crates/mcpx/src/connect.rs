//! `mcpx connect` with no client named: the MCP clients whose user-level files mcpx
//! knows, whether each exists, and whether it already reaches mcpx (an entry that runs
//! `mcpx serve`, recognised in each client's own shape). Local files only: no daemon is
//! needed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use mcpx_api::ApiError;
use mcpx_daemon::config::{Client, ConfigEnv, mcpx_entries};
use serde::Serialize;

use crate::output::{say_json, table};

/// One client, as `mcpx connect` lists it.
#[derive(Debug, Serialize)]
struct Row {
    /// The client, as `imports` names it.
    client: &'static str,
    /// Its user-level file on this system; null when HOME is not set.
    file: Option<PathBuf>,
    /// Whether that file exists.
    exists: bool,
    /// Its entries that run `mcpx serve`: the client is connected when there is one.
    mcpx: Vec<String>,
    /// Why the file cannot be read (naming file, line and column).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Lists every client's file and whether it reaches mcpx; exit 0. With `json`, one array
/// of `{client, file, exists, mcpx, error?}`.
///
/// Errors: none; a file that cannot be read is shown with why.
pub fn list(vars: &HashMap<String, String>, json: bool) -> Result<i32, ApiError> {
    let env = ConfigEnv::from_vars(vars);
    let home = vars.get("HOME").map(PathBuf::from);
    let rows: Vec<Row> = Client::ALL
        .iter()
        .map(|&client| {
            let file = client.user_file(&env);
            let exists = file.as_deref().is_some_and(Path::is_file);
            let (mut mcpx, mut error) = (Vec::new(), None);
            if let (true, Some(path)) = (exists, &file) {
                match mcpx_entries(client, path) {
                    Ok(names) => mcpx = names,
                    Err(e) => error = Some(e.to_string()),
                }
            }
            Row { client: client.name(), file, exists, mcpx, error }
        })
        .collect();
    if json {
        say_json(&serde_json::to_string(&rows).unwrap_or_default());
        return Ok(0);
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let file = r
                .file
                .as_deref()
                .map_or_else(|| "(HOME is not set)".to_owned(), |f| crate::output::tilde(f, home.as_deref()));
            let state = match (&r.error, r.exists, r.mcpx.as_slice()) {
                (Some(e), _, _) => format!("cannot read it: {}", mcpx_platform::sanitize::line(e)),
                (None, false, _) => "no file".to_owned(),
                (None, true, []) => "not connected".to_owned(),
                (None, true, names) => format!("connected ({})", mcpx_platform::sanitize::line(&names.join(", "))),
            };
            vec![r.client.to_owned(), file, state]
        })
        .collect();
    table(&["CLIENT", "FILE", "MCPX"], &cells);
    Ok(0)
}
