//! The daemon's log file, `<state>/daemon.log`: appended through the state
//! directory's descriptor (never through a link), and rotated at a size cap, so a
//! chatty server or a long life never fills the disk. At the cap, `daemon.log`
//! becomes `daemon.log.1` (replacing the one before) and a new `daemon.log` is
//! started; `mcpx logs -f` follows across the rotation.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};

use mcpx_platform::fs::{Dir, FileUse, OpenError};

use crate::paths::LOG;

/// The size at which the log is rotated: 10 MiB. With the one old file kept, the
/// log takes at most about twice that.
pub const LOG_CAP: u64 = 10 << 20;

/// The name the log is rotated to, in the state directory.
pub const ROTATED_LOG: &str = "daemon.log.1";

/// The daemon's log, an [`io::Write`] that rotates itself at its cap.
#[derive(Debug)]
pub struct LogFile {
    dir: Dir,
    file: File,
    /// Bytes in the current file.
    written: u64,
    cap: u64,
}

impl LogFile {
    /// Opens `daemon.log` in `state` for appending (mode 0600, never through a
    /// link), to be rotated at [`LOG_CAP`] (with the `test-hooks` feature,
    /// `MCPX_TEST_LOG_CAP` bytes from `env` when set).
    ///
    /// Errors: the file is refused (a link, another user's) or cannot be opened.
    pub fn open(state: &Dir, env: &HashMap<String, String>) -> Result<LogFile, OpenError> {
        let file = state.open_file(LOG, FileUse::Append)?;
        let written = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(LogFile { dir: state.clone(), file, written, cap: cap(env) })
    }

    /// Moves the full log aside and starts a new one. A failure keeps the current
    /// file, to try again after another cap's worth.
    fn rotate(&mut self) {
        let rotated = self.dir.rename(LOG, ROTATED_LOG).map_err(OpenError::Io);
        match rotated.and_then(|()| self.dir.open_file(LOG, FileUse::Append)) {
            Ok(file) => self.file = file,
            Err(e) => {
                let _ = writeln!(self.file, "mcpx: cannot rotate the log ({e}); it keeps growing until the next try");
            }
        }
        self.written = 0;
    }
}

impl Write for LogFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.written > 0 && self.written + buf.len() as u64 > self.cap {
            self.rotate();
        }
        let n = self.file.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// The rotation size: [`LOG_CAP`], or the test hook's.
fn cap(env: &HashMap<String, String>) -> u64 {
    #[cfg(feature = "test-hooks")]
    if let Some(cap) = env.get("MCPX_TEST_LOG_CAP").and_then(|c| c.parse().ok()) {
        return cap;
    }
    let _ = env;
    LOG_CAP
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::DirBuilderExt;

    use super::*;

    #[test]
    fn the_log_rotates_at_its_cap_keeping_one_old_file() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("state");
        std::fs::DirBuilder::new().mode(0o700).create(&path).unwrap();
        let dir = Dir::open_private(&path, false).unwrap();
        let mut log = LogFile::open(&dir, &HashMap::new()).unwrap();
        log.cap = 100;
        // As the log's writer thread does: one write of each whole line.
        for n in 0..30 {
            log.write_all(format!("line {n:02} of the log\n").as_bytes()).unwrap();
        }
        let now = std::fs::read_to_string(path.join(LOG)).unwrap();
        let old = std::fs::read_to_string(path.join(ROTATED_LOG)).unwrap();
        assert!(now.len() <= 100 && old.len() <= 100, "{now:?} {old:?}");
        assert!(now.ends_with("line 29 of the log\n"), "{now:?}");
        assert!(old.lines().all(|l| l.starts_with("line ")), "whole lines only: {old:?}");
        assert_eq!(std::fs::read_dir(tmp.path().join("state")).unwrap().count(), 2, "one old file is kept");
    }
}
