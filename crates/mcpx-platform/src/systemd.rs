//! Detecting that the daemon runs as a systemd service whose stop or restart would kill the
//! server supervisors with it.
//!
//! systemd stops a service by killing its control group: with the default
//! `KillMode=control-group` (and with `mixed`) every process left in the unit's cgroup is
//! killed, including supervisors the daemon started and meant to outlive it. Only
//! `KillMode=process` (or the deprecated `none`) leaves them alone; see systemd.kill(5).
//!
//! The detection is pure ([`unit_kills_supervisors`], [`service_unit`]) so it can be tested on
//! recorded inputs; [`read_cgroup`] supplies the input on the running system.

use std::io;

/// The systemd service unit a process runs in, found from its cgroup path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceUnit {
    /// The unit name, e.g. `"mcpx.service"`.
    pub name: String,
    /// `true` for a unit of a user's service manager (`systemctl --user`, under
    /// `user@<uid>.service`), `false` for a system unit (under `system.slice`).
    pub user: bool,
}

/// The contents of `/proc/self/cgroup` (see cgroups(7)): one `hierarchy-ID:controllers:path`
/// line per hierarchy, e.g. `0::/user.slice/user-1000.slice/session-3.scope` on cgroup v2.
///
/// On macOS, which has no cgroups, an empty string.
///
/// # Errors
///
/// IO errors reading the file (e.g. `NotFound` when `/proc` is not mounted).
pub fn read_cgroup() -> io::Result<String> {
    crate::sys::read_cgroup()
}

/// The service unit whose cgroup contains the process, given the contents of
/// `/proc/<pid>/cgroup` (see [`read_cgroup`]), or `None` if it is not in a service: a login
/// session (`session-N.scope`), an app scope, a container's root (`0::/`), or no cgroup
/// information (macOS).
///
/// The path is taken from the cgroup v2 line (`0::<path>`), else from the v1 `name=systemd`
/// line. The unit is the first segment ending in `.service` below `system.slice` (system
/// unit) or below `user@<uid>.service` (a unit of that user's manager; the manager's own cgroup
/// `user@<uid>.service/init.scope` is not a service). Deeper segments (a unit's delegated
/// sub-cgroups) are ignored. Units in other top-level slices are not recognized.
pub fn service_unit(cgroup: &str) -> Option<ServiceUnit> {
    let path = cgroup_path(cgroup)?;
    let mut anchor = None;
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        if is_user_manager(segment) {
            anchor = Some(true);
        } else if segment == "system.slice" && anchor.is_none() {
            anchor = Some(false);
        } else if let Some(user) = anchor {
            if segment.ends_with(".service") {
                return Some(ServiceUnit { name: segment.to_owned(), user });
            }
        }
    }
    None
}

/// A warning to show when the daemon runs inside a systemd service unit whose stop or restart
/// would kill the supervisors, or `None` when it does not.
///
/// - `cgroup`: the contents of `/proc/self/cgroup` ([`read_cgroup`]), see [`service_unit`].
/// - `invocation_id`: the `INVOCATION_ID` environment variable, which systemd sets for the
///   processes of a service (see systemd.exec(5)); unset or empty means "not started by
///   systemd" and no warning, whatever the cgroup says.
/// - `kill_mode`: the unit's `KillMode` if known (e.g. from `systemctl show -p KillMode
///   --value <unit>`). `None` counts as the default `control-group`. `process` and `none`
///   leave the supervisors alone; any other value (`control-group`, `mixed`) gets a warning.
///
/// The message names the unit, the kill mode and the fix (`KillMode=process`).
pub fn unit_kills_supervisors(cgroup: &str, invocation_id: Option<&str>, kill_mode: Option<&str>) -> Option<String> {
    invocation_id.map(str::trim).filter(|id| !id.is_empty())?;
    let unit = service_unit(cgroup)?;
    let kill_mode = kill_mode.map(str::trim).filter(|mode| !mode.is_empty());
    if matches!(kill_mode, Some("process" | "none")) {
        return None;
    }
    let mode = match kill_mode {
        Some(mode) => format!("KillMode={mode}"),
        None => "the default KillMode=control-group (its KillMode is not known)".to_owned(),
    };
    let (kind, flag) = if unit.user { ("user", "--user ") } else { ("system", "") };
    Some(format!(
        "mcpx runs inside the systemd {kind} service {name} with {mode}: stopping or restarting the unit \
         kills every server supervisor with it. Set KillMode=process in its [Service] section \
         (systemctl {flag}edit {name}).",
        name = unit.name,
    ))
}

/// The cgroup path of the unified (v2) hierarchy, else of the v1 `name=systemd` hierarchy.
fn cgroup_path(cgroup: &str) -> Option<&str> {
    let mut v1 = None;
    for line in cgroup.lines() {
        let mut parts = line.trim().splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            return Some(path);
        }
        if controllers.split(',').any(|c| c == "name=systemd") {
            v1 = Some(path);
        }
    }
    v1
}

/// `user@<uid>.service`, the cgroup of a user's service manager.
fn is_user_manager(segment: &str) -> bool {
    segment
        .strip_prefix("user@")
        .and_then(|rest| rest.strip_suffix(".service"))
        .is_some_and(|uid| !uid.is_empty() && uid.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const USER_UNIT: &str = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/mcpx.service\n";
    const LOGIN_SHELL: &str = "0::/user.slice/user-1000.slice/session-3.scope\n";
    const CONTAINER: &str = "0::/\n";
    const SYSTEM_UNIT: &str = "0::/system.slice/mcpx.service\n";
    const INVOCATION: Option<&str> = Some("8f1c2a4e6b0d4c3f9e7a5b1d2c3e4f50");

    #[test]
    fn user_unit_with_unknown_kill_mode_warns() {
        let warning = unit_kills_supervisors(USER_UNIT, INVOCATION, None).unwrap();
        assert!(warning.contains("mcpx.service"), "{warning}");
        assert!(warning.contains("KillMode=control-group"), "{warning}");
        assert!(warning.contains("KillMode=process"), "{warning}");
        assert!(warning.contains("systemctl --user edit mcpx.service"), "{warning}");
    }

    #[test]
    fn user_unit_with_kill_mode_process_is_fine() {
        assert_eq!(unit_kills_supervisors(USER_UNIT, INVOCATION, Some("process")), None);
        assert_eq!(unit_kills_supervisors(USER_UNIT, INVOCATION, Some("process\n")), None);
        assert_eq!(unit_kills_supervisors(USER_UNIT, INVOCATION, Some("none")), None);
    }

    #[test]
    fn user_unit_with_kill_mode_control_group_or_mixed_warns() {
        for mode in ["control-group", "mixed"] {
            let warning = unit_kills_supervisors(USER_UNIT, INVOCATION, Some(mode)).unwrap();
            assert!(warning.contains(&format!("with KillMode={mode}:")), "{warning}");
        }
    }

    #[test]
    fn system_unit_warns_without_user_flag() {
        let warning = unit_kills_supervisors(SYSTEM_UNIT, INVOCATION, Some("control-group")).unwrap();
        assert!(warning.contains("systemd system service mcpx.service"), "{warning}");
        assert!(warning.contains("(systemctl edit mcpx.service)"), "{warning}");
        let nested = "0::/system.slice/system-mcpx.slice/mcpx@alice.service/supervisors\n";
        assert_eq!(service_unit(nested), Some(ServiceUnit { name: "mcpx@alice.service".to_owned(), user: false }));
    }

    #[test]
    fn not_a_service_means_no_warning() {
        for cgroup in [LOGIN_SHELL, CONTAINER, "", "0::/user.slice/user-1000.slice/user@1000.service/init.scope\n"] {
            assert_eq!(service_unit(cgroup), None, "{cgroup:?}");
            assert_eq!(unit_kills_supervisors(cgroup, INVOCATION, None), None, "{cgroup:?}");
        }
    }

    #[test]
    fn without_invocation_id_no_warning() {
        assert_eq!(unit_kills_supervisors(USER_UNIT, None, None), None);
        assert_eq!(unit_kills_supervisors(USER_UNIT, Some(""), None), None);
    }

    #[test]
    fn finds_the_user_unit() {
        assert_eq!(service_unit(USER_UNIT), Some(ServiceUnit { name: "mcpx.service".to_owned(), user: true }));
    }

    #[test]
    fn cgroup_v1_uses_the_systemd_hierarchy() {
        let v1 = "12:pids:/user.slice/user-1000.slice/user@1000.service\n\
                  3:cpu,cpuacct:/user.slice\n\
                  1:name=systemd:/user.slice/user-1000.slice/user@1000.service/app.slice/mcpx.service\n";
        assert_eq!(service_unit(v1), Some(ServiceUnit { name: "mcpx.service".to_owned(), user: true }));
    }
}
