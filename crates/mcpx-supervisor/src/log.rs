//! The supervisor's own log: plain lines appended to a file named by the daemon
//! (the supervisor has no terminal and no tracing subscriber, to stay small).

use std::fs::File;
use std::io::Write;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

static LOG: Mutex<Option<File>> = Mutex::new(None);

/// Opens the log file (mode 0600, appended to, never through a link, in a directory
/// that is the user's alone); lines logged before (or without) it are dropped.
pub fn open(path: &std::path::Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else { return };
    let opened = mcpx_platform::fs::Dir::open_private(dir, false)
        .and_then(|dir| dir.open_file(name, mcpx_platform::fs::FileUse::Append));
    if let Ok(f) = opened {
        *LOG.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(f);
    }
}

/// Appends one line: time, pid, message.
pub fn line(message: std::fmt::Arguments<'_>) {
    let mut guard = LOG.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(f) = guard.as_mut() {
        let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let _ = writeln!(f, "{}.{:03} supervisor[{}] {message}", t.as_secs(), t.subsec_millis(), std::process::id());
    }
}

/// Logs a formatted line.
macro_rules! log {
    ($($arg:tt)*) => { $crate::log::line(format_args!($($arg)*)) };
}
pub(crate) use log;
