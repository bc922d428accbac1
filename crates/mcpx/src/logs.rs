//! `mcpx logs`: the daemon's log file, whole or the lines about one server, and
//! following it as it grows. Read directly from the state directory, so it works
//! when the daemon is down. Lines are printed with their control characters
//! escaped: they quote what servers sent.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::Duration;

use mcpx_api::{ApiError, ErrorKind};

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
    let mut partial = Vec::new();
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        // The daemon rotates its log at a size cap: the path names a new file then.
        // The rest of the old one is read first, then the new one from its start.
        let replaced = replaced(file, &f);
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < pos {
            pos = 0; // The file was truncated.
        }
        if len > pos {
            let _ = f.seek(SeekFrom::Start(pos));
            let mut more = Vec::new();
            let _ = f.read_to_end(&mut more);
            pos += more.len() as u64;
            partial.extend_from_slice(&more);
            // Whole lines only, so a character cut between two reads stays whole.
            while let Some(i) = partial.iter().position(|&b| b == b'\n') {
                let bytes: Vec<u8> = partial.drain(..=i).collect();
                let line = String::from_utf8_lossy(&bytes);
                if matches(line.trim_end()) {
                    crate::output::say(line.trim_end_matches('\n'));
                }
            }
        }
        if let Some(new) = replaced {
            (f, pos) = (new, 0);
        }
    }
}

/// The file now at `path`, when it is another file than `open` (the log was
/// rotated); `None` while it is the same one, or while none is there.
fn replaced(path: &Path, open: &std::fs::File) -> Option<std::fs::File> {
    use std::os::unix::fs::MetadataExt;
    let now = std::fs::metadata(path).ok()?;
    let held = open.metadata().ok()?;
    if (now.dev(), now.ino()) == (held.dev(), held.ino()) {
        return None;
    }
    std::fs::File::open(path).ok()
}
