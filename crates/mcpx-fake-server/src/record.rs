//! `FAKE_RECORD`: a transcript of everything the client sent us.
//!
//! Tests use it to check what a proxy actually forwarded:
//! - `<path>` gets every non-blank stdin line, verbatim, one per line;
//! - `<path>.invalid` gets the lines that were not valid JSON;
//! - `<path>.inflight` is rewritten after every `tools/call` with the maximum
//!   number of `tools/call` requests seen in flight at once;
//! - in HTTP mode, `<path>` gets every POSTed message instead (one line each), and
//!   `<path>.http` one line per HTTP request: `<METHOD> <session-id or -> <JSON-RPC
//!   method or ->`, and `<path>.headers` one line per HTTP request: the names of
//!   its headers, lowercase, sorted, comma-separated (`accept,content-type,host`).
//!
//! Every write is flushed immediately so a test can read the files while
//! the server is still running. I/O errors are reported on stderr and
//! otherwise ignored: recording must never change the server's behaviour.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::sync::Mutex;

/// Appends received lines to the record files.
pub struct Recorder {
    /// Base path (`FAKE_RECORD`).
    path: String,
    /// The transcript file, opened once in append mode.
    lines: Mutex<Option<File>>,
    /// Serializes rewrites of `<path>.inflight` so an older (smaller) value
    /// can never overwrite a newer one.
    inflight: Mutex<()>,
    /// `<path>.http`, opened on the first HTTP request.
    http: Mutex<Option<File>>,
    /// `<path>.headers`, opened on the first HTTP request.
    headers: Mutex<Option<File>>,
}

impl Recorder {
    /// Creates a recorder writing next to `path`.
    pub fn new(path: String) -> Self {
        let lines = open_append(&path);
        Self {
            path,
            lines: Mutex::new(lines),
            inflight: Mutex::new(()),
            http: Mutex::new(None),
            headers: Mutex::new(None),
        }
    }

    /// Records one HTTP request as a line of `<path>.http`.
    pub fn http(&self, line: &str) {
        self.append_to(&self.http, "http", line);
    }

    /// Records the header names of one HTTP request as a line of `<path>.headers`.
    pub fn headers(&self, line: &str) {
        self.append_to(&self.headers, "headers", line);
    }

    /// Appends `line` to `<path>.<suffix>`, opening it through `slot` the first time.
    fn append_to(&self, slot: &Mutex<Option<File>>, suffix: &str, line: &str) {
        let path = format!("{}.{suffix}", self.path);
        let mut file = slot.lock().unwrap_or_else(|p| p.into_inner());
        if file.is_none() {
            *file = open_append(&path);
        }
        if let Some(file) = file.as_mut() {
            append(file, line.as_bytes(), &path);
        }
    }

    /// Records one received line (without its trailing newline).
    /// `valid_json` = false also appends it to `<path>.invalid`.
    pub fn line(&self, line: &[u8], valid_json: bool) {
        let mut file = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(file) = file.as_mut() {
            append(file, line, &self.path);
        }
        drop(file);
        if !valid_json {
            let invalid = format!("{}.invalid", self.path);
            if let Some(mut file) = open_append(&invalid) {
                append(&mut file, line, &invalid);
            }
        }
    }

    /// Rewrites `<path>.inflight` with the current maximum. `current_max`
    /// is called under the file lock so the value written is never stale.
    pub fn inflight(&self, current_max: impl FnOnce() -> usize) {
        let _guard = self.inflight.lock().unwrap_or_else(|p| p.into_inner());
        let path = format!("{}.inflight", self.path);
        if let Err(err) = fs::write(&path, current_max().to_string()) {
            eprintln!("mcpx-fake-server: cannot write {path}: {err}");
        }
    }
}

/// Opens `path` for appending (creating it), reporting failures on stderr.
fn open_append(path: &str) -> Option<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|err| eprintln!("mcpx-fake-server: cannot open {path}: {err}"))
        .ok()
}

/// Appends `line` + `"\n"` to `file` and flushes.
fn append(file: &mut File, line: &[u8], path: &str) {
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line);
    buf.push(b'\n');
    if let Err(err) = file.write_all(&buf).and_then(|()| file.flush()) {
        eprintln!("mcpx-fake-server: cannot write {path}: {err}");
    }
}
