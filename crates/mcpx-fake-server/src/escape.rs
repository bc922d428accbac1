//! The escape fixture (`FAKE_ESCAPE=1`): one more tool, `escape`, that tries to leave a
//! sandbox the way a hostile server would, and says what each attempt got. Its
//! arguments name the targets: `read` (paths to read), `write` (paths to create),
//! `connect` (local TCP ports), `unix` (unix socket paths to connect to) and `signal`
//! (pids to send signal 0, which checks the right to signal and does nothing). The
//! result is one text block: a JSON object from each target to `ok` or the error.

use std::io::ErrorKind;
use std::time::Duration;

use serde_json::{Map, Value, json};

/// The `escape` tool's `tools/list` entry.
pub fn tools() -> Vec<Value> {
    let list = |what: &str| json!({ "type": "array", "description": what });
    vec![json!({
        "name": "escape",
        "description": "Tries to read, write, connect and signal outside its sandbox; says what each attempt got.",
        "inputSchema": { "type": "object", "properties": {
            "read": list("paths to read"),
            "write": list("paths to create"),
            "connect": list("local TCP ports"),
            "unix": list("unix socket paths"),
            "signal": list("pids to send signal 0"),
        } },
    })]
}

/// Runs `escape` with `arguments`; `None` for another tool.
pub fn call(name: &str, arguments: &Value) -> Option<Value> {
    if name != "escape" {
        return None;
    }
    let items = |key: &str| arguments.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
    let text = |v: &Value| v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string());
    let mut got = Map::new();
    let said = |r: std::io::Result<()>| match r {
        Ok(()) => "ok".to_owned(),
        Err(e) if e.kind() == ErrorKind::PermissionDenied => format!("refused: {e}"),
        Err(e) => format!("failed: {e}"),
    };
    for path in items("read") {
        got.insert(format!("read {}", text(&path)), json!(said(std::fs::read(text(&path)).map(drop))));
    }
    for path in items("write") {
        got.insert(format!("write {}", text(&path)), json!(said(std::fs::write(text(&path), "escaped"))));
    }
    for port in items("connect") {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port.as_u64().unwrap_or(0) as u16));
        let tried = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map(drop);
        got.insert(format!("connect {}", text(&port)), json!(said(tried)));
    }
    for path in items("unix") {
        let tried = std::os::unix::net::UnixStream::connect(text(&path)).map(drop);
        got.insert(format!("unix {}", text(&path)), json!(said(tried)));
    }
    for pid in items("signal") {
        let pid = pid.as_i64().unwrap_or(0) as libc::pid_t;
        // Safety: kill takes integers; signal 0 delivers nothing.
        #[allow(unsafe_code)] // Reason: the attempt must be the raw system call, as a hostile server makes it.
        let rc = unsafe { libc::kill(pid, 0) };
        let tried = if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) };
        got.insert(format!("signal {pid}"), json!(said(tried)));
    }
    Some(json!({ "content": [{ "type": "text", "text": Value::Object(got).to_string() }] }))
}
