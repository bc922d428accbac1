//! Opening a URL in the user's browser: `$BROWSER` when set, else the platform's
//! opener (`xdg-open`, `open`), started detached and reaped when it exits.

use std::collections::BTreeMap;
use std::ffi::OsString;

use mcpx_daemon::config::resolve_command;
use mcpx_platform::process::{Detach, SpawnSpec, URL_OPENER};

/// Opens `url` in a browser, without waiting for it.
///
/// Errors: why no browser was started, in a few words (no opener on `PATH`, or it
/// could not be spawned); the caller prints the URL instead.
pub fn open(url: &str) -> Result<(), String> {
    let browser = std::env::var("BROWSER").ok().filter(|b| !b.trim().is_empty());
    let program = browser.unwrap_or_else(|| URL_OPENER.to_owned());
    let path = std::env::var("PATH").ok();
    let program =
        resolve_command(&program, path.as_deref(), None).map_err(|_| format!("`{program}` is not on PATH"))?;
    let env: BTreeMap<OsString, OsString> = std::env::vars_os().collect();
    let spec = SpawnSpec {
        program,
        args: vec![url.into()],
        env,
        cwd: None,
        piped: false,
        detach: Detach::Group,
        confine: None,
    };
    let mut child =
        mcpx_platform::process::command(&spec).spawn().map_err(|e| format!("cannot open a browser ({e})"))?;
    // Reaped when it exits; nothing waits for it.
    std::thread::spawn(move || child.wait());
    Ok(())
}

/// Whether a graphical browser can be shown here: a display on Linux (X11 or
/// Wayland), always on macOS; `$BROWSER` set counts as one.
pub fn can_show() -> bool {
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    set("BROWSER") || cfg!(target_os = "macos") || set("DISPLAY") || set("WAYLAND_DISPLAY")
}
