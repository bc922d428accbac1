//! At daemon start: is the daemon a systemd service whose stop or restart would kill the server
//! supervisors with it?
//!
//! The supervisors stay in the daemon's cgroup, so with any `KillMode` but `process` (or `none`)
//! `systemctl restart` kills every server along with the daemon (see
//! [`mcpx_platform::systemd`]). The unit's `KillMode` is read from its unit file and drop-ins in
//! the standard unit directories, without asking systemd (no `systemctl` is run).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use mcpx_platform::systemd::{read_cgroup, service_unit, unit_kills_supervisors};

/// The warnings to log at daemon start about the service the daemon runs in: one line when
/// the daemon runs inside a systemd service unit (its `INVOCATION_ID` is set and its cgroup is a
/// service's) whose `KillMode` would kill the supervisors on a stop or restart of the unit,
/// saying what to do about it; none otherwise, and none when anything cannot be read.
///
/// `env` is the daemon's environment: `INVOCATION_ID`, and `HOME`, `XDG_CONFIG_HOME`,
/// `XDG_DATA_HOME` and `XDG_RUNTIME_DIR` to find user units.
pub fn supervisor_warnings(env: &HashMap<String, String>) -> Vec<String> {
    let Some(invocation_id) = env.get("INVOCATION_ID").filter(|id| !id.trim().is_empty()) else {
        return Vec::new();
    };
    let Ok(cgroup) = read_cgroup() else {
        return Vec::new();
    };
    let Some(unit) = service_unit(&cgroup) else {
        return Vec::new();
    };
    let dirs = if unit.user { user_unit_dirs(env) } else { system_unit_dirs() };
    warnings_for(&cgroup, Some(invocation_id), |name| unit_text(&dirs, name))
}

/// The `KillMode` of the user unit `mcpx.service` (what `mcpx service install` writes), read
/// from its unit file and drop-ins in the user unit directories of `env` (as
/// [`supervisor_warnings`] finds them): `None` when no such unit file exists, else the mode in
/// effect (`control-group` when none is set). For `mcpx doctor`, which runs outside the unit.
pub fn installed_unit_kill_mode(env: &HashMap<String, String>) -> Option<String> {
    let text = unit_text(&user_unit_dirs(env), "mcpx.service")?;
    Some(kill_mode(&text).filter(|mode| !mode.is_empty()).unwrap_or("control-group").to_owned())
}

/// [`supervisor_warnings`] on recorded inputs.
///
/// - `cgroup`, `invocation_id`: see [`unit_kills_supervisors`].
/// - `unit_file_text`: the text of the unit with the given name as systemd reads it, the unit
///   file followed by its drop-ins in order, or `None` when no unit file was found (then the
///   `KillMode` is unknown and taken as the default). Files are joined with a `[]` line, an
///   empty section header, so that a drop-in's lines before its first section header belong to
///   no section, as in systemd. Only called for a service unit.
fn warnings_for(
    cgroup: &str,
    invocation_id: Option<&str>,
    unit_file_text: impl Fn(&str) -> Option<String>,
) -> Vec<String> {
    if invocation_id.is_none_or(|id| id.trim().is_empty()) {
        return Vec::new();
    }
    let Some(unit) = service_unit(cgroup) else {
        return Vec::new();
    };
    // A unit file without KillMode (or one reset by an empty `KillMode=`) has the default.
    let kill_mode = unit_file_text(&unit.name)
        .map(|text| kill_mode(&text).filter(|mode| !mode.is_empty()).unwrap_or("control-group").to_owned());
    let Some(mut warning) = unit_kills_supervisors(cgroup, invocation_id, kill_mode.as_deref()) else {
        return Vec::new();
    };
    if unit.user && unit.name == "mcpx.service" {
        warning.push_str(
            " Or run `mcpx service install`, which writes this unit with KillMode=process, then \
             `systemctl --user daemon-reload && systemctl --user restart mcpx`.",
        );
    } else if unit.user {
        warning.push_str(" Or use the unit `mcpx service install` writes (mcpx.service) instead of this one.");
    }
    vec![warning]
}

/// The value of the last `KillMode=` assignment in a `[Service]` section of `text` (unit file
/// syntax, systemd.syntax(7): `#` and `;` comments, `\` line continuations), trimmed;
/// `Some("")` for an empty assignment (a reset to the default).
fn kill_mode(text: &str) -> Option<&str> {
    let mut in_service = false;
    let mut continued = false;
    let mut mode = None;
    for line in text.lines() {
        let line = line.trim();
        if continued {
            // The rest of a continued assignment; comment lines inside one are skipped.
            if !line.starts_with(['#', ';']) {
                continued = line.ends_with('\\');
            }
            continue;
        }
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if line.starts_with('[') && line.ends_with(']') {
            in_service = line == "[Service]";
            continue;
        }
        continued = line.ends_with('\\');
        if let Some((key, value)) = line.split_once('=') {
            if in_service && !continued && key.trim() == "KillMode" {
                mode = Some(value.trim());
            }
        }
    }
    mode
}

/// The directories of user units, most important first (systemd.unit(5), "User Unit Search
/// Path"), leaving out the generator and `$XDG_CONFIG_DIRS`/`$XDG_DATA_DIRS` ones.
fn user_unit_dirs(env: &HashMap<String, String>) -> Vec<PathBuf> {
    let var = |name: &str| env.get(name).map(PathBuf::from).filter(|p| p.is_absolute());
    let home = var("HOME");
    let config = var("XDG_CONFIG_HOME").or_else(|| home.as_ref().map(|h| h.join(".config")));
    let data = var("XDG_DATA_HOME").or_else(|| home.as_ref().map(|h| h.join(".local/share")));
    let runtime = var("XDG_RUNTIME_DIR");
    let mut dirs = Vec::new();
    dirs.extend(config.as_ref().map(|c| c.join("systemd/user.control")));
    dirs.extend(runtime.as_ref().map(|r| r.join("systemd/user.control")));
    dirs.extend(runtime.as_ref().map(|r| r.join("systemd/transient")));
    dirs.extend(config.as_ref().map(|c| c.join("systemd/user")));
    dirs.push(PathBuf::from("/etc/systemd/user"));
    dirs.extend(runtime.as_ref().map(|r| r.join("systemd/user")));
    dirs.push(PathBuf::from("/run/systemd/user"));
    dirs.extend(data.as_ref().map(|d| d.join("systemd/user")));
    dirs.extend(["/usr/local/lib/systemd/user", "/usr/lib/systemd/user"].map(PathBuf::from));
    dirs
}

/// The directories of system units, most important first (systemd.unit(5), "System Unit Search
/// Path"), leaving out the generator ones; `/lib/systemd/system` for distributions that keep it.
fn system_unit_dirs() -> Vec<PathBuf> {
    [
        "/etc/systemd/system.control",
        "/run/systemd/system.control",
        "/run/systemd/transient",
        "/etc/systemd/system",
        "/run/systemd/system",
        "/usr/local/lib/systemd/system",
        "/usr/lib/systemd/system",
        "/lib/systemd/system",
    ]
    .map(PathBuf::from)
    .to_vec()
}

/// The unit `name` as systemd reads it from `dirs` (most important first): the first unit file
/// found (for an instance `a@i.service` without its own file, the template's `a@.service`), then
/// the `*.conf` drop-ins of `<name>.d`, of the template's and of the prefixes' directories
/// (`a-.service.d` for `a-b.service`) and of `service.d`, in file-name order, a file name in a
/// more important directory hiding the same name in a less important one. Joined as
/// [`warnings_for`] expects; `None` without a unit file.
fn unit_text(dirs: &[PathBuf], name: &str) -> Option<String> {
    let (stem, suffix) = name.rsplit_once('.')?;
    let template = stem.split_once('@').map(|(prefix, _)| format!("{prefix}@.{suffix}"));
    let read = |path: PathBuf| std::fs::read_to_string(path).ok();
    let mut text = dirs
        .iter()
        .find_map(|dir| read(dir.join(name)))
        .or_else(|| template.as_ref().and_then(|t| dirs.iter().find_map(|dir| read(dir.join(t)))))?;

    let mut dropin_dirs = vec![format!("{suffix}.d")];
    let unprefixed = stem.split_once('@').map_or(stem, |(prefix, _)| prefix);
    dropin_dirs.extend(unprefixed.match_indices('-').map(|(i, _)| format!("{}-.{suffix}.d", &unprefixed[..i])));
    dropin_dirs.extend(template.iter().map(|t| format!("{t}.d")));
    dropin_dirs.push(format!("{name}.d"));

    let mut dropins: BTreeMap<String, PathBuf> = BTreeMap::new();
    for dir in dirs {
        for dropin_dir in &dropin_dirs {
            for (file_name, path) in conf_files(&dir.join(dropin_dir)) {
                dropins.entry(file_name).or_insert(path);
            }
        }
    }
    for path in dropins.into_values() {
        if let Some(dropin) = read(path) {
            text.push_str("\n[]\n");
            text.push_str(&dropin);
        }
    }
    Some(text)
}

/// The `*.conf` files in `dir` by file name; none if it cannot be listed.
fn conf_files(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            name.ends_with(".conf").then(|| (name, entry.path()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    const USER_UNIT: &str = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/mcpx.service\n";
    const LOGIN_SHELL: &str = "0::/user.slice/user-1000.slice/session-3.scope\n";
    const SYSTEM_UNIT: &str = "0::/system.slice/mcpx.service\n";
    const INVOCATION: Option<&str> = Some("8f1c2a4e6b0d4c3f9e7a5b1d2c3e4f50");

    const NO_KILL_MODE: &str = "\
[Unit]
Description=mcpx daemon

[Service]
ExecStart=/usr/local/bin/mcpx daemon
Restart=on-failure

[Install]
WantedBy=default.target
";

    const KILL_MODE_PROCESS: &str = "\
[Unit]
Description=mcpx daemon

[Service]
ExecStart=/usr/local/bin/mcpx daemon
# Keep the supervisors on restart.
KillMode=process
Restart=on-failure
";

    /// A `unit_file_text` that knows only `mcpx.service`.
    fn unit(text: &'static str) -> impl Fn(&str) -> Option<String> {
        move |name| (name == "mcpx.service").then(|| text.to_owned())
    }

    #[test]
    fn user_unit_without_kill_mode_warns() {
        let warnings = warnings_for(USER_UNIT, INVOCATION, unit(NO_KILL_MODE));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let warning = &warnings[0];
        assert!(warning.contains("user service mcpx.service with KillMode=control-group:"), "{warning}");
        assert!(warning.contains("Set KillMode=process"), "{warning}");
        assert!(warning.contains("`mcpx service install`"), "{warning}");
        assert!(warning.contains("systemctl --user restart mcpx"), "{warning}");
        assert!(!warning.contains('\n'), "{warning}");
    }

    #[test]
    fn user_unit_with_kill_mode_process_is_fine() {
        assert_eq!(warnings_for(USER_UNIT, INVOCATION, unit(KILL_MODE_PROCESS)), Vec::<String>::new());
    }

    #[test]
    fn login_session_is_not_a_service() {
        let called = Cell::new(false);
        let warnings = warnings_for(LOGIN_SHELL, INVOCATION, |_| {
            called.set(true);
            Some(NO_KILL_MODE.to_owned())
        });
        assert_eq!(warnings, Vec::<String>::new());
        assert!(!called.get(), "read a unit file for a login session");
    }

    #[test]
    fn without_invocation_id_no_warning() {
        assert_eq!(warnings_for(USER_UNIT, None, unit(NO_KILL_MODE)), Vec::<String>::new());
        assert_eq!(warnings_for(USER_UNIT, Some(""), unit(NO_KILL_MODE)), Vec::<String>::new());
        assert_eq!(supervisor_warnings(&HashMap::new()), Vec::<String>::new());
    }

    #[test]
    fn unit_file_not_found_counts_as_the_default() {
        let warnings = warnings_for(USER_UNIT, INVOCATION, |_| None);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("the default KillMode=control-group (its KillMode is not known)"), "{warnings:?}");
    }

    #[test]
    fn system_unit_and_other_user_units_get_no_install_advice() {
        let system = warnings_for(SYSTEM_UNIT, INVOCATION, unit(NO_KILL_MODE));
        assert!(system[0].contains("systemd system service mcpx.service"), "{system:?}");
        assert!(!system[0].contains("mcpx service install"), "{system:?}");
        let other = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/my-mcpx.service\n";
        let warnings = warnings_for(other, INVOCATION, |_| Some("[Service]\nKillMode=mixed\n".to_owned()));
        assert!(warnings[0].contains("my-mcpx.service with KillMode=mixed:"), "{warnings:?}");
        assert!(warnings[0].contains("Or use the unit `mcpx service install` writes"), "{warnings:?}");
    }

    #[test]
    fn kill_mode_parsing() {
        assert_eq!(kill_mode(NO_KILL_MODE), None);
        assert_eq!(kill_mode(KILL_MODE_PROCESS), Some("process"));
        // The last assignment wins, drop-ins included; an empty one resets.
        let dropin = format!("{KILL_MODE_PROCESS}\n[]\n[Service]\nKillMode = mixed \n");
        assert_eq!(kill_mode(&dropin), Some("mixed"));
        assert_eq!(kill_mode(&format!("{dropin}\n[]\n[Service]\nKillMode=\n")), Some(""));
        // Only in [Service], not in comments, not outside a section of its own file.
        assert_eq!(kill_mode("[Unit]\nKillMode=process\n[Install]\nKillMode=process\n"), None);
        assert_eq!(kill_mode("[Service]\n#KillMode=process\n; KillMode=process\n"), None);
        assert_eq!(kill_mode("[Service]\nKillMode=mixed\n[]\nKillMode=process\n"), Some("mixed"));
        // A continued line is one assignment.
        assert_eq!(kill_mode("[Service]\nExecStart=/bin/mcpx \\\n  KillMode=none\n"), None);
        assert_eq!(kill_mode("[Service]\nExecStart=/bin/mcpx \\\n# c\n  daemon\nKillMode=none\n"), Some("none"));
    }

    #[test]
    fn drop_ins_override_the_unit_file() {
        let root = tempfile::tempdir().unwrap();
        let (etc, usr) = (root.path().join("etc"), root.path().join("usr"));
        let write = |path: PathBuf, text: &str| {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write(usr.join("mcpx.service"), NO_KILL_MODE);
        let dirs = [etc.clone(), usr.clone()];
        assert_eq!(warnings_for(USER_UNIT, INVOCATION, |name| unit_text(&dirs, name)).len(), 1);

        write(usr.join("mcpx.service.d/50-kill.conf"), "[Service]\nKillMode=process\n");
        assert_eq!(warnings_for(USER_UNIT, INVOCATION, |name| unit_text(&dirs, name)), Vec::<String>::new());

        // A same-named drop-in in a more important directory hides it; later names win.
        write(etc.join("mcpx.service.d/50-kill.conf"), "[Service]\nKillMode=mixed\n");
        assert_eq!(kill_mode(&unit_text(&dirs, "mcpx.service").unwrap()), Some("mixed"));
        write(etc.join("service.d/60-all.conf"), "[Service]\nKillMode=process\n");
        assert_eq!(kill_mode(&unit_text(&dirs, "mcpx.service").unwrap()), Some("process"));
        // A drop-in's assignments before its first section header are in no section.
        write(etc.join("mcpx.service.d/70-bad.conf"), "KillMode=control-group\n");
        assert_eq!(kill_mode(&unit_text(&dirs, "mcpx.service").unwrap()), Some("process"));

        // Instances fall back to their template, and get its and their prefixes' drop-ins.
        write(usr.join("mcpx-user@.service"), KILL_MODE_PROCESS);
        assert_eq!(kill_mode(&unit_text(&dirs, "mcpx-user@alice.service").unwrap()), Some("process"));
        write(etc.join("mcpx-.service.d/override.conf"), "[Service]\nKillMode=mixed\n");
        assert_eq!(kill_mode(&unit_text(&dirs, "mcpx-user@alice.service").unwrap()), Some("mixed"));
        write(etc.join("mcpx-user@.service.d/zz.conf"), "[Service]\nKillMode=none\n");
        assert_eq!(kill_mode(&unit_text(&dirs, "mcpx-user@alice.service").unwrap()), Some("none"));
        assert_eq!(unit_text(&dirs, "other.service"), None);
    }

    #[test]
    fn user_unit_dirs_follow_xdg() {
        let env: HashMap<String, String> = [
            ("HOME", "/h"),
            ("XDG_CONFIG_HOME", "/xc"),
            ("XDG_DATA_HOME", "relative"),
            ("XDG_RUNTIME_DIR", "/run/user/1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let dirs = user_unit_dirs(&env);
        let position = |dir: &str| dirs.iter().position(|d| d == Path::new(dir)).unwrap_or_else(|| panic!("{dir}"));
        assert!(position("/xc/systemd/user") < position("/etc/systemd/user"));
        assert!(position("/etc/systemd/user") < position("/h/.local/share/systemd/user"));
        assert!(position("/h/.local/share/systemd/user") < position("/usr/lib/systemd/user"));
        assert!(position("/run/user/1/systemd/transient") < position("/xc/systemd/user"));
        assert!(!dirs.iter().any(|d| d.starts_with("/h/.config")), "{dirs:?}");
    }
}
