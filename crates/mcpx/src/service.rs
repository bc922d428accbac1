//! `mcpx service install`: runs the daemon as a service of the user's service manager, a
//! systemd user unit on Linux and a launchd agent on macOS.
//!
//! The one thing both files must get right: each stdio server is owned by an `mcpx supervise`
//! process that must outlive the daemon (the next daemon adopts it). Under systemd the
//! supervisors stay in the unit's cgroup, and the default `KillMode=control-group` kills them on
//! every stop or restart of the unit, so the unit sets `KillMode=process`. Under launchd the
//! agent sets `AbandonProcessGroup`, so launchd does not kill what the daemon left behind.

use std::io;
use std::path::{Path, PathBuf};

/// The launchd label of the daemon's agent, also the plist's file name.
pub const LAUNCHD_LABEL: &str = "dev.mcpx.daemon";

/// The systemd user unit running `<exe> daemon`.
///
/// `exe` should be absolute (systemd requires it in `ExecStart=`); it is quoted and escaped
/// for the unit file syntax, non-UTF-8 bytes are replaced (see [`install`], which refuses them).
pub fn systemd_unit(exe: &Path) -> String {
    format!(
        "\
# The mcpx daemon, as a systemd user unit. Written by `mcpx service install`.
[Unit]
Description=mcpx daemon: runs your MCP servers

[Service]
ExecStart={exe} daemon
# The daemon runs each stdio server under its own `mcpx supervise` process, which stays in
# this unit's cgroup and must outlive the daemon: the next daemon adopts it. The default
# KillMode=control-group would kill every supervisor, and so every server, on each stop or
# restart of the unit. KillMode=process kills only the daemon, so
# `systemctl --user restart mcpx` keeps the servers running. To stop the servers as well,
# run `mcpx stop --all` before stopping the unit.
KillMode=process
Restart=on-failure
RestartSec=1

[Install]
WantedBy=default.target
",
        exe = systemd_quote(&exe.to_string_lossy()),
    )
}

/// The launchd agent plist running `<exe> daemon`, labelled [`LAUNCHD_LABEL`].
///
/// No `StandardOutPath`/`StandardErrorPath`: the daemon logs to its state directory.
pub fn launchd_plist(exe: &Path) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- The mcpx daemon, as a launchd agent. Written by `mcpx service install`. -->
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>{label}</string>
	<key>ProgramArguments</key>
	<array>
		<string>{exe}</string>
		<string>daemon</string>
	</array>
	<key>RunAtLoad</key>
	<true/>
	<key>KeepAlive</key>
	<dict>
		<key>SuccessfulExit</key>
		<false/>
	</dict>
	<!-- The daemon runs each stdio server under its own `mcpx supervise` process, which must
	     outlive the daemon: the next daemon adopts it. AbandonProcessGroup keeps launchd from
	     killing what is left of the daemon's process group when the daemon exits. -->
	<key>AbandonProcessGroup</key>
	<true/>
</dict>
</plist>
"#,
        label = LAUNCHD_LABEL,
        exe = xml_escape(&exe.to_string_lossy()),
    )
}

/// Where the systemd user unit goes: `$XDG_CONFIG_HOME/systemd/user/mcpx.service`, else
/// `~/.config/systemd/user/mcpx.service`. An empty or relative `xdg_config_home` is ignored,
/// as the XDG base directory specification requires.
pub fn unit_path(home: &Path, xdg_config_home: Option<&Path>) -> PathBuf {
    let config = match xdg_config_home.filter(|p| p.is_absolute()) {
        Some(config) => config.to_path_buf(),
        None => home.join(".config"),
    };
    config.join("systemd/user/mcpx.service")
}

/// Where the launchd agent goes: `~/Library/LaunchAgents/dev.mcpx.daemon.plist`.
pub fn plist_path(home: &Path) -> PathBuf {
    home.join("Library/LaunchAgents").join(format!("{LAUNCHD_LABEL}.plist"))
}

/// `mcpx service install [--print]` for this platform (Linux: the systemd user unit; macOS: the
/// launchd agent).
///
/// With `print`, returns the file without writing anything (it ends with a newline: print it
/// with `print!`). Otherwise writes it, creating its directory, and returns a message (no
/// trailing newline) naming the file, saying whether it was new, replaced a different file or
/// was already up to date, and the commands to run next. Writing the same file twice changes
/// nothing.
///
/// # Errors
///
/// `InvalidInput` when `exe` is not an absolute UTF-8 path (it could not be written into the
/// file faithfully); IO errors creating the directory or writing the file.
pub fn install(print: bool, exe: &Path, home: &Path, xdg_config_home: Option<&Path>) -> io::Result<String> {
    if !exe.is_absolute() || exe.to_str().is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("the mcpx executable must be an absolute UTF-8 path, not {}", exe.display()),
        ));
    }
    let (path, text) = if cfg!(target_os = "macos") {
        (plist_path(home), launchd_plist(exe))
    } else {
        (unit_path(home, xdg_config_home), systemd_unit(exe))
    };
    if print {
        return Ok(text);
    }
    let state = match std::fs::read(&path) {
        Ok(old) if old == text.as_bytes() => State::Same,
        Ok(_) => State::Replaced,
        Err(e) if e.kind() == io::ErrorKind::NotFound => State::New,
        Err(e) => return Err(io::Error::new(e.kind(), format!("cannot read {}: {e}", path.display()))),
    };
    if state != State::Same {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display())))?;
        }
        // The service manager's directory, not mcpx's: it keeps its usual mode.
        let written = path.parent().zip(path.file_name().and_then(|n| n.to_str())).map_or_else(
            || Err(io::Error::new(io::ErrorKind::InvalidInput, "no file name")),
            |(dir, name)| {
                let dir = mcpx_platform::fs::Dir::open_unchecked(dir)?;
                mcpx_platform::fs::write_atomic(&dir, name, text.as_bytes(), 0o644)
            },
        );
        written.map_err(|e| io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display())))?;
    }
    let what = match state {
        State::New => "written:",
        State::Replaced => "replaced (it differed from this one):",
        State::Same => "is already up to date:",
    };
    let (kind, next) = if cfg!(target_os = "macos") {
        let plist = path.display();
        let next = match state {
            // A loaded agent keeps its old definition until it is unloaded.
            State::Replaced => format!("launchctl unload {plist}; launchctl load -w {plist}"),
            State::New | State::Same => format!("launchctl load -w {plist}"),
        };
        ("launchd agent", next)
    } else {
        let next = match state {
            // After the reload, the restart stops the running daemon with the new KillMode=process.
            State::Replaced => {
                "systemctl --user daemon-reload && systemctl --user enable mcpx && systemctl --user restart mcpx"
            }
            State::New | State::Same => "systemctl --user daemon-reload && systemctl --user enable --now mcpx",
        };
        ("systemd user unit", next.to_owned())
    };
    Ok(format!("{kind} {what} {}\nnext: {next}", path.display()))
}

/// What [`install`] found where the file goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No file.
    New,
    /// A different file.
    Replaced,
    /// The same file.
    Same,
}

/// `s` as the executable of a systemd command line (systemd.service(5), "Command lines"): quoted
/// when it holds whitespace, quotes, backslashes or `;`, with `%` (specifiers) escaped. `$` is
/// left alone: systemd expands variables in the arguments, not in the executable's path.
fn systemd_quote(s: &str) -> String {
    let escaped = s.replace('%', "%%");
    if !escaped.chars().any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | ';')) {
        return escaped;
    }
    let mut quoted = String::with_capacity(escaped.len() + 2);
    quoted.push('"');
    for c in escaped.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// `s` as XML character data.
fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXE: &str = "/usr/local/bin/mcpx";

    #[test]
    fn systemd_unit_file() {
        insta::assert_snapshot!(systemd_unit(Path::new(EXE)));
    }

    #[test]
    fn launchd_plist_file() {
        insta::assert_snapshot!(launchd_plist(Path::new(EXE)));
    }

    #[test]
    fn paths() {
        let home = Path::new("/home/u");
        assert_eq!(unit_path(home, None), PathBuf::from("/home/u/.config/systemd/user/mcpx.service"));
        assert_eq!(unit_path(home, Some(Path::new("/xc"))), PathBuf::from("/xc/systemd/user/mcpx.service"));
        assert_eq!(unit_path(home, Some(Path::new(""))), PathBuf::from("/home/u/.config/systemd/user/mcpx.service"));
        assert_eq!(unit_path(home, Some(Path::new("rel"))), PathBuf::from("/home/u/.config/systemd/user/mcpx.service"));
        assert_eq!(plist_path(home), PathBuf::from("/home/u/Library/LaunchAgents/dev.mcpx.daemon.plist"));
    }

    #[test]
    fn odd_executable_paths_are_escaped() {
        let unit = systemd_unit(Path::new("/opt/my tools/100%/$x/mcpx"));
        assert!(unit.contains("ExecStart=\"/opt/my tools/100%%/$x/mcpx\" daemon\n"), "{unit}");
        assert!(systemd_unit(Path::new("/a\"b\\c")).contains("ExecStart=\"/a\\\"b\\\\c\" daemon\n"));
        let plist = launchd_plist(Path::new("/opt/a&b/<mcpx>"));
        assert!(plist.contains("<string>/opt/a&amp;b/&lt;mcpx&gt;</string>"), "{plist}");
    }

    /// The file `install` writes on this platform, under `home`.
    fn installed(home: &Path, xdg: Option<&Path>) -> (PathBuf, String) {
        if cfg!(target_os = "macos") {
            (plist_path(home), launchd_plist(Path::new(EXE)))
        } else {
            (unit_path(home, xdg), systemd_unit(Path::new(EXE)))
        }
    }

    #[test]
    fn install_writes_once_then_is_idempotent() {
        let home = tempfile::tempdir().unwrap();
        let (path, text) = installed(home.path(), None);

        let printed = install(true, Path::new(EXE), home.path(), None).unwrap();
        assert_eq!(printed, text);
        assert!(!path.exists(), "--print must not write");

        let first = install(false, Path::new(EXE), home.path(), None).unwrap();
        assert!(first.contains(" written: ") && first.contains(&path.display().to_string()), "{first}");
        let next = if cfg!(target_os = "macos") { "launchctl load -w" } else { "systemctl --user enable --now mcpx" };
        assert!(first.contains(next), "{first}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();

        let second = install(false, Path::new(EXE), home.path(), None).unwrap();
        assert!(second.contains(" is already up to date: "), "{second}");
        assert!(second.contains(next), "{second}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), modified, "rewritten");
    }

    #[test]
    fn install_replaces_a_different_file_and_says_so() {
        let home = tempfile::tempdir().unwrap();
        let xdg = home.path().join("xdg");
        let (path, text) = installed(home.path(), Some(&xdg));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "[Service]\nExecStart=/old/mcpx daemon\n").unwrap();

        let message = install(false, Path::new(EXE), home.path(), Some(&xdg)).unwrap();
        assert!(message.contains(" replaced (it differed from this one): "), "{message}");
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }

    #[test]
    fn install_refuses_a_relative_executable() {
        let home = tempfile::tempdir().unwrap();
        let err = install(false, Path::new("mcpx"), home.path(), None).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
