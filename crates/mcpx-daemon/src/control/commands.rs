//! `POST /v1/commands`: whether each stdio server's command is found on the `PATH` the
//! daemon gives it, for `mcpx doctor` (`docs/api.md`). Nothing is started.

use serde::{Deserialize, Serialize};

use crate::api::{ApiError, CallerRequest};
use crate::config::TransportSpec;
use crate::daemon::Daemon;
use crate::policy;

/// One stdio server's command, as `POST /v1/commands` answers it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CommandCheck {
    /// The server's name.
    pub server: String,
    /// The command as written in the configuration.
    pub command: String,
    /// `found`, `not_found` (the message names the `PATH` searched), `error` (the entry
    /// cannot be expanded: an unset `${VAR}` or secret), `disabled` or `untrusted` (not
    /// looked up).
    pub state: String,
    /// What is wrong, for `not_found` and `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `POST /v1/commands`: a [`CommandCheck`] per stdio server of the caller's configuration,
/// by name. The lookup is the one a start makes ([`crate::target::Targets::target`]): the
/// daemon's `PATH`, or the one the entry's `env` sets.
///
/// Errors: the caller's configuration cannot be read (`config`).
pub fn commands(d: &Daemon, req: &CallerRequest) -> Result<Vec<CommandCheck>, ApiError> {
    let config = d.resolve_for(&req.caller)?;
    let mut checks = Vec::new();
    for entry in config.servers.values() {
        let TransportSpec::Stdio { command, .. } = &entry.transport else { continue };
        let (state, error) = if !policy::server_trusted(entry) {
            ("untrusted", None)
        } else if !policy::server_offered(entry) {
            ("disabled", None)
        } else {
            match d.targets.target(entry) {
                Ok(target) => match &target.launch {
                    Ok(_) => ("found", None),
                    Err(e) => ("not_found", Some(e.clone())),
                },
                Err(e) => ("error", Some(e.to_string())),
            }
        };
        checks.push(CommandCheck {
            server: entry.name.clone(),
            command: command.clone(),
            state: state.to_owned(),
            error,
        });
    }
    Ok(checks)
}
