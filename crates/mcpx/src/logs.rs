//! `mcpx logs`: the daemon's log file, whole or the lines about one server, and
//! following it as it grows. Read directly from the state directory, so it works
//! when the daemon is down. Lines are printed with their control characters
//! escaped: they quote what servers sent.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::Duration;

use mcpx_daemon::api::{ApiError, ErrorKind};

/// Prints the last `lines` lines (of one server's, when given), then keeps
/// printing new ones when `follow` is set.
pub async fn show(file: &Path, server: Option<&str>, lines: usize, follow: bool) -> Result<(), ApiError> {
    let needle = server.map(|s| format!("server={s}"));
    let matches = |line: &str| needle.as_ref().is_none_or(|n| line.split_whitespace().any(|w| w == n));
    let mut f = match std::fs::File::open(file) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !follow => {
            println!("no log yet at {}; the daemon writes it once it starts", file.display());
            return Ok(());
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if let Ok(f) = std::fs::File::open(file) {
                break f;
            }
        },
        Err(e) => {
            return Err(ApiError::new(ErrorKind::Usage, format!("cannot read {}: {e}", file.display())));
        }
    };
    let mut text = String::new();
    f.read_to_string(&mut text)
        .map_err(|e| ApiError::new(ErrorKind::Usage, format!("cannot read {}: {e}", file.display())))?;
    let picked: Vec<&str> = text.lines().filter(|l| matches(l)).collect();
    if let (Some(server), true) = (server, picked.is_empty()) {
        eprintln!("no lines about server `{server}` in {} yet; `mcpx ls` lists the configured servers", file.display());
    }
    for line in &picked[picked.len().saturating_sub(lines)..] {
        crate::output::say(line);
    }
    if !follow {
        return Ok(());
    }
    let mut pos = text.len() as u64;
    let mut partial = String::new();
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let len = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
        if len < pos {
            pos = 0; // The file was truncated or replaced.
        }
        if len == pos {
            continue;
        }
        let _ = f.seek(SeekFrom::Start(pos));
        let mut more = String::new();
        let _ = f.read_to_string(&mut more);
        pos += more.len() as u64;
        partial.push_str(&more);
        while let Some(i) = partial.find('\n') {
            let line: String = partial.drain(..=i).collect();
            if matches(line.trim_end()) {
                crate::output::say(line.trim_end_matches('\n'));
            }
        }
    }
}
