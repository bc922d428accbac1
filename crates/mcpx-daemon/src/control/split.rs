//! How the control API reads a `<server>.<name>` target (`mcpx call everything.echo`,
//! `mcpx prompt everything.simple-prompt`): split after the longest configured server
//! name, with the right hint for the forms people mistype.

use crate::api::{ApiError, ErrorKind};
use crate::config::ResolvedConfig;
use crate::daemon::unknown_server;

/// What a `<server>.<name>` target names, for the hints of [`split_target`]: the
/// command that takes it, the thing it names, and the command that lists those.
pub(super) struct Named {
    /// The command that takes the target (`call`).
    command: &'static str,
    /// What follows the dot (`tool`).
    noun: &'static str,
    /// The command that lists them (`tools`).
    list: &'static str,
    /// A whole command line's example after the command (`everything.echo '{}'`).
    example: &'static str,
}

/// A tool, as `mcpx call` names it.
pub(super) const TOOL: Named = Named { command: "call", noun: "tool", list: "tools", example: "everything.echo '{}'" };

/// A prompt, as `mcpx prompt` names it.
pub(super) const PROMPT: Named =
    Named { command: "prompt", noun: "prompt", list: "prompts", example: "everything.simple-prompt" };

/// How a request names a tool or prompt: `server` and `name`, or a `target`
/// (`<server>.<name>`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Naming<'a> {
    pub server: Option<&'a str>,
    pub name: Option<&'a str>,
    pub target: Option<&'a str>,
}

/// Splits `<server>.<name>` after the longest configured server name followed by a
/// dot, or takes `server` and the name as given.
pub(super) fn split_target(
    config: &ResolvedConfig,
    named: Naming<'_>,
    what: &Named,
) -> Result<(String, String), ApiError> {
    if let (Some(s), Some(t)) = (named.server, named.name) {
        return Ok((s.to_owned(), t.to_owned()));
    }
    let target = named.target.ok_or_else(|| {
        ApiError::new(
            ErrorKind::Usage,
            format!("name the {0} as <server>.<{0}>, like `mcpx {1} {2}`", what.noun, what.command, what.example),
        )
    })?;
    let best = config
        .servers
        .keys()
        .filter(|name| {
            target.len() > name.len() + 1 && target.starts_with(name.as_str()) && target.as_bytes()[name.len()] == b'.'
        })
        .max_by_key(|name| name.len());
    match best {
        Some(name) => Ok((name.clone(), target[name.len() + 1..].to_owned())),
        None => Err(target_hint(config, target, what)),
    }
}

/// The error for a target no configured server name and dot begins: the dotted form
/// of `server/name` and of `server__name` (the name `mcpx serve` gives MCP clients),
/// a name to add after a bare server name, else the unknown server with the closest
/// names.
fn target_hint(config: &ResolvedConfig, target: &str, what: &Named) -> ApiError {
    let usage = |text: String| ApiError::new(ErrorKind::Usage, text);
    let known = |name: &str| config.servers.contains_key(name);
    let Named { command, noun, list, .. } = what;
    let name = target.strip_suffix('.').unwrap_or(target);
    if known(name) {
        return usage(format!(
            "name a {noun} after the dot: `mcpx {command} {name}.<{noun}>` (see `mcpx {list} {name}`)"
        ));
    }
    if let Some((server, tool)) = target.split_once('/').filter(|(s, t)| known(s) && !t.is_empty()) {
        return usage(format!("write `{server}.{tool}`, with a dot: `mcpx {command} {server}.{tool}`"));
    }
    let exposed = config
        .servers
        .keys()
        .filter(|s| target.len() > s.len() + 2 && target.starts_with(s.as_str()))
        .filter(|s| target[s.len()..].starts_with(crate::names::SEPARATOR))
        .max_by_key(|s| s.len());
    if let Some(server) = exposed {
        let tool = &target[server.len() + crate::names::SEPARATOR.len()..];
        return usage(format!(
            "`{target}` is the name MCP clients see; in the shell write `{server}.{tool}`: `mcpx {command} {server}.{tool}`"
        ));
    }
    unknown_server(config, target.split_once('.').map_or(target, |(s, _)| s))
}
