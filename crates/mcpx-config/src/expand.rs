//! `${VAR}` templates and the expanded (secret-bearing) transport specs.
//!
//! Template rules, applied to `command`, `args`, `env` values, `cwd`, `url` and header values:
//! - `${NAME}` is replaced by the daemon's environment variable `NAME` (names are ASCII letters,
//!   digits and `_`, not starting with a digit); unset is an error.
//! - `${NAME:-default}` is replaced by `NAME` if it is set (even if empty), else by the literal
//!   `default` (which cannot contain `}`), as in Claude Code.
//! - `${env:NAME}` (VS Code spelling) is the same as `${NAME}`.
//! - `${secret:NAME}` is replaced by the secret `NAME` of mcpx's secret store
//!   (`mcpx secret set NAME`), read at expansion, so a secret set while the daemon
//!   runs is seen at the next start; unset is an error. VS Code's `${input:ID}` reads
//!   the same store under `ID`. Names are letters, digits, `_`, `-` and `.`; a
//!   secret has no default.
//! - `$${` is a literal `${`, so `$${VAR}` stays `${VAR}`. Any other `$` is literal (`$HOME`
//!   without braces is not expanded).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::PathBuf;

use mcpx_platform::fs::Dir;
use mcpx_platform::secrets::{SecretStore, SecretValue};

use super::error::ConfigError;
use super::spec::{RemoteKind, TransportSpec};

/// Where `${secret:NAME}` and `${input:ID}` values come from when an entry is
/// expanded.
pub trait Secrets {
    /// The value of secret `name`, `None` when it is not set.
    ///
    /// Errors: the store cannot be read; the message names its file and what to do,
    /// never a value.
    fn secret(&self, name: &str) -> Result<Option<SecretValue>, String>;
}

/// The secret store recorded in a state directory, opened afresh at each lookup (one
/// or two small file reads), so a secret `mcpx secret set` writes while the daemon
/// runs is seen at the next start, and an entry without secrets reads nothing.
#[derive(Debug, Clone, Copy)]
pub struct StoreIn<'a>(pub &'a Dir);

impl Secrets for StoreIn<'_> {
    fn secret(&self, name: &str) -> Result<Option<SecretValue>, String> {
        SecretStore::open(self.0).and_then(|store| store.get(name)).map_err(|e| e.to_string())
    }
}

/// A fixed set of secrets (name → value), for tests and programmatic callers.
impl Secrets for BTreeMap<String, String> {
    fn secret(&self, name: &str) -> Result<Option<SecretValue>, String> {
        Ok(self.get(name).cloned().map(SecretValue::new))
    }
}

/// One piece of a parsed template.
#[derive(Debug, PartialEq, Eq)]
enum Segment<'a> {
    Literal(&'a str),
    Var {
        name: &'a str,
        default: Option<&'a str>,
    },
    /// `${secret:NAME}`, or VS Code's `${input:ID}` (`input`).
    Secret {
        name: &'a str,
        input: bool,
    },
}

/// Parses a template; the error is a message for [`ConfigError::InvalidValue`] that quotes only
/// the offending `${...}` reference, never the whole value.
fn parse(template: &str) -> Result<Vec<Segment<'_>>, String> {
    let mut segments = Vec::new();
    let mut rest = template;
    while let Some(pos) = rest.find('$') {
        let after = &rest[pos + 1..];
        if let Some(tail) = after.strip_prefix("${") {
            // `$${` → literal `${`.
            segments.push(Segment::Literal(&rest[..pos + 1]));
            segments.push(Segment::Literal("{"));
            rest = tail;
        } else if let Some(body_start) = after.strip_prefix('{') {
            segments.push(Segment::Literal(&rest[..pos]));
            let Some(end) = body_start.find('}') else {
                return Err("unterminated `${` (close it with `}`, or write `$${` for a literal `${`)".to_owned());
            };
            let body = &body_start[..end];
            segments.push(parse_reference(body)?);
            rest = &body_start[end + 1..];
        } else {
            segments.push(Segment::Literal(&rest[..pos + 1]));
            rest = after;
        }
    }
    segments.push(Segment::Literal(rest));
    segments.retain(|s| *s != Segment::Literal(""));
    Ok(segments)
}

fn parse_reference(body: &str) -> Result<Segment<'_>, String> {
    let (name, default) = match body.split_once(":-") {
        Some((name, default)) => (name, Some(default)),
        None => (body, None),
    };
    let name = match name.split_once(':') {
        Some(("env", var)) => var,
        Some((kind @ ("secret" | "input"), secret)) => {
            if default.is_some() {
                return Err(format!(
                    "`${{{body}}}`: a secret has no default (write `${{{kind}:{secret}}}` and set it with `mcpx secret set {secret}`)"
                ));
            }
            mcpx_platform::secrets::check_name(secret).map_err(|e| format!("`${{{body}}}`: {e}"))?;
            if secret.starts_with(mcpx_platform::secrets::LOGIN_PREFIX) {
                return Err(format!(
                    "`${{{body}}}` names a login to a remote server (`{}…` names are the logins `mcpx auth login` keeps), which mcpx never hands to a server; give the entry a secret of its own (`mcpx secret set NAME`)",
                    mcpx_platform::secrets::LOGIN_PREFIX
                ));
            }
            return Ok(Segment::Secret { name: secret, input: kind == "input" });
        }
        Some(_) => {
            return Err(format!(
                "`${{{body}}}` is not a supported variable reference (use `${{VAR}}` or `${{VAR:-default}}`, or write `$${{` for a literal `${{`)"
            ));
        }
        None if name == "workspaceFolder" || name == "workspaceFolderBasename" => {
            return Err(format!(
                "`${{{body}}}` names a project's folder, and this file belongs to no project (write the path instead, or move the entry into the project's own file)"
            ));
        }
        None => name,
    };
    if !is_var_name(name) {
        return Err(format!(
            "`${{{body}}}` is not a valid variable reference: names are letters, digits and `_` (write `$${{` for a literal `${{`)"
        ));
    }
    Ok(Segment::Var { name, default })
}

fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Checks a template's syntax at load time.
pub(super) fn check(template: &str) -> Result<(), String> {
    parse(template).map(|_| ())
}

/// The variables and secrets a template refers to, as `mcpx trust` names them: `NAME`
/// for `${NAME}`, `${NAME:-default}` and `${env:NAME}`, `secret:NAME` and `input:ID` for
/// the secret store's. A template that does not parse refers to nothing.
pub(super) fn references(template: &str) -> Vec<String> {
    let segments = parse(template).unwrap_or_default();
    segments
        .into_iter()
        .filter_map(|segment| match segment {
            Segment::Literal(_) => None,
            Segment::Var { name, .. } => Some(name.to_owned()),
            Segment::Secret { name, input: false } => Some(format!("secret:{name}")),
            Segment::Secret { name, input: true } => Some(format!("input:{name}")),
        })
        .collect()
}

/// What a template's references stand for: the value each `${VAR}` (or its default),
/// `${secret:NAME}` and `${input:ID}` expands to, those that are set. The activity
/// record replaces them by `[secret]`. A template that does not parse stands for nothing.
pub fn referenced_values(template: &str, env: &HashMap<String, String>, secrets: &dyn Secrets) -> Vec<String> {
    let segments = parse(template).unwrap_or_default();
    segments
        .into_iter()
        .filter_map(|segment| match segment {
            Segment::Literal(_) => None,
            Segment::Var { name, default } => env.get(name).cloned().or(default.map(str::to_owned)),
            Segment::Secret { name, .. } => secrets.secret(name).ok().flatten().map(|value| value.expose().to_owned()),
        })
        .collect()
}

/// Expands a template checked by [`check`]. Errors name only the variable (or secret)
/// and the server, never a value.
pub(super) fn expand(
    template: &str,
    env: &HashMap<String, String>,
    secrets: &dyn Secrets,
    server: &str,
) -> Result<String, ConfigError> {
    let segments = parse(template).map_err(|_| ConfigError::UnsetVariable {
        // Unreachable for entries built by the parser, which checks every template.
        variable: template.to_owned(),
        server: server.to_owned(),
    })?;
    let mut out = String::with_capacity(template.len());
    for segment in segments {
        match segment {
            Segment::Literal(s) => out.push_str(s),
            Segment::Var { name, default } => match (env.get(name), default) {
                (Some(value), _) => out.push_str(value),
                (None, Some(default)) => out.push_str(default),
                (None, None) => {
                    return Err(ConfigError::UnsetVariable { variable: name.to_owned(), server: server.to_owned() });
                }
            },
            Segment::Secret { name, input } => match secrets.secret(name) {
                Ok(Some(value)) => out.push_str(value.expose()),
                Ok(None) => {
                    let (name, server) = (name.to_owned(), server.to_owned());
                    return Err(ConfigError::UnsetSecret { name, server, input, description: None });
                }
                Err(message) => return Err(ConfigError::SecretStore { server: server.to_owned(), message }),
            },
        }
    }
    Ok(out)
}

/// A server's transport after `${VAR}` expansion: what the daemon actually spawns or connects
/// to. Values may contain secrets; the `Debug` output shows the unexpanded templates instead.
#[derive(Clone, Debug)]
pub enum ExpandedTransport {
    /// Spawn a local process and speak MCP over its stdin/stdout.
    Stdio(ExpandedStdio),
    /// Connect to a remote MCP server over HTTP.
    Remote(ExpandedRemote),
}

/// An expanded stdio server: the program, its arguments, extra environment and working
/// directory. `Debug` prints the templates as written in the config file, never expanded values.
#[derive(Clone)]
pub struct ExpandedStdio {
    /// The program as written after expansion (a bare name to look up on `PATH`, or a path);
    /// see [`resolve_command`](super::resolve_command).
    pub command: String,
    /// Arguments after the program name.
    pub args: Vec<String>,
    /// Environment variables to set for the process, on top of the daemon's environment.
    pub env: BTreeMap<String, String>,
    /// Working directory; a relative `cwd` in the file is resolved against the directory of the
    /// config file. `None` when the entry has no `cwd`.
    pub cwd: Option<PathBuf>,
    template: TransportSpec,
}

impl ExpandedStdio {
    /// Builds a spec from literal, non-secret values (for tests and programmatic servers); its
    /// `Debug` output shows these values.
    pub fn literal(command: String, args: Vec<String>, env: BTreeMap<String, String>, cwd: Option<PathBuf>) -> Self {
        let template = TransportSpec::Stdio {
            command: command.clone(),
            args: args.clone(),
            env: env.clone(),
            cwd: cwd.as_ref().map(|p| p.display().to_string()),
        };
        Self { command, args, env, cwd, template }
    }
}

impl fmt::Debug for ExpandedStdio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.template {
            TransportSpec::Stdio { command, args, env, cwd } => f
                .debug_struct("ExpandedStdio")
                .field("command", command)
                .field("args", args)
                .field("env", env)
                .field("cwd", cwd)
                .finish(),
            TransportSpec::Remote { .. } => f.write_str("ExpandedStdio { <redacted> }"),
        }
    }
}

/// An expanded remote server: URL, extra request headers and HTTP flavour. `Debug` prints the
/// templates as written in the config file, never expanded values.
#[derive(Clone)]
pub struct ExpandedRemote {
    /// The server's endpoint URL after expansion.
    pub url: String,
    /// Extra HTTP headers (name → value) sent with every request.
    pub headers: BTreeMap<String, String>,
    /// Streamable HTTP or legacy SSE.
    pub kind: RemoteKind,
    template: TransportSpec,
}

impl ExpandedRemote {
    /// Builds a spec from literal, non-secret values (for tests and programmatic servers); its
    /// `Debug` output shows these values.
    pub fn literal(url: String, headers: BTreeMap<String, String>, kind: RemoteKind) -> Self {
        let template = TransportSpec::Remote { url: url.clone(), headers: headers.clone(), kind };
        Self { url, headers, kind, template }
    }
}

impl fmt::Debug for ExpandedRemote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.template {
            TransportSpec::Remote { url, headers, kind } => f
                .debug_struct("ExpandedRemote")
                .field("url", url)
                .field("headers", headers)
                .field("kind", kind)
                .finish(),
            TransportSpec::Stdio { .. } => f.write_str("ExpandedRemote { <redacted> }"),
        }
    }
}

/// Expands every template of `spec`; `base_dir` resolves a relative `cwd`.
pub(super) fn expand_transport(
    spec: &TransportSpec,
    env: &HashMap<String, String>,
    secrets: &dyn Secrets,
    server: &str,
    base_dir: Option<&std::path::Path>,
) -> Result<ExpandedTransport, ConfigError> {
    match spec {
        TransportSpec::Stdio { command, args, env: vars, cwd } => {
            let command = expand(command, env, secrets, server)?;
            let args = args.iter().map(|a| expand(a, env, secrets, server)).collect::<Result<Vec<_>, _>>()?;
            let vars = vars
                .iter()
                .map(|(k, v)| Ok((k.clone(), expand(v, env, secrets, server)?)))
                .collect::<Result<BTreeMap<_, _>, ConfigError>>()?;
            let cwd = match cwd {
                Some(c) => {
                    let path = PathBuf::from(expand(c, env, secrets, server)?);
                    Some(match base_dir {
                        Some(base) if path.is_relative() => base.join(path),
                        _ => path,
                    })
                }
                None => None,
            };
            Ok(ExpandedTransport::Stdio(ExpandedStdio { command, args, env: vars, cwd, template: spec.clone() }))
        }
        TransportSpec::Remote { url, headers, kind } => {
            let url = expand(url, env, secrets, server)?;
            let headers = headers
                .iter()
                .map(|(k, v)| Ok((k.clone(), expand(v, env, secrets, server)?)))
                .collect::<Result<BTreeMap<_, _>, ConfigError>>()?;
            Ok(ExpandedTransport::Remote(ExpandedRemote { url, headers, kind: *kind, template: spec.clone() }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> HashMap<String, String> {
        [("A".to_owned(), "1".to_owned()), ("EMPTY".to_owned(), String::new())].into_iter().collect()
    }

    #[test]
    fn expansion_rules() {
        let e = env();
        assert_eq!(expand("x${A}y", &e, &BTreeMap::new(), "s").unwrap(), "x1y");
        assert_eq!(expand("${env:A}", &e, &BTreeMap::new(), "s").unwrap(), "1");
        assert_eq!(expand("${B:-dflt}", &e, &BTreeMap::new(), "s").unwrap(), "dflt");
        assert_eq!(expand("${EMPTY:-dflt}", &e, &BTreeMap::new(), "s").unwrap(), "");
        assert_eq!(expand("$${A}", &e, &BTreeMap::new(), "s").unwrap(), "${A}");
        // Leftmost match: `$` then `$${` → `$${A}`.
        assert_eq!(expand("$$${A}", &e, &BTreeMap::new(), "s").unwrap(), "$${A}");
        assert_eq!(expand("$HOME $ $1 $", &e, &BTreeMap::new(), "s").unwrap(), "$HOME $ $1 $");
        assert_eq!(expand("", &e, &BTreeMap::new(), "s").unwrap(), "");
    }

    #[test]
    fn secrets_and_inputs_read_the_store() {
        let store: BTreeMap<String, String> = [("K".to_owned(), "v".to_owned())].into_iter().collect();
        assert_eq!(expand("a${secret:K}b${input:K}", &env(), &store, "s").unwrap(), "avbv");
        let unset = expand("${secret:NOPE}", &env(), &store, "srv").unwrap_err().to_string();
        assert_eq!(unset, "server `srv`: secret `NOPE` is not set: run `mcpx secret set NOPE`");
        let input = expand("${input:api-key}", &env(), &store, "srv").unwrap_err().to_string();
        assert!(
            input.contains("VS Code input `api-key`") && input.contains("run `mcpx secret set api-key`"),
            "{input}"
        );
        // An environment variable of the same name is not a secret.
        assert!(expand("${secret:A}", &env(), &store, "s").is_err());
    }

    #[test]
    fn bad_templates() {
        assert!(check("${A").unwrap_err().contains("unterminated"));
        assert!(check("${}").unwrap_err().contains("not a valid variable reference"));
        assert!(check("${1A}").is_err());
        assert!(check("${input:api-key}").is_ok() && check("${secret:A.b_c-1}").is_ok());
        assert!(check("${secret:a b}").unwrap_err().contains("not a valid secret name"));
        assert!(check("${secret:}").unwrap_err().contains("not a valid secret name"));
        for login in ["${secret:oauth-9594c76830ce8f80}", "${input:oauth-x}"] {
            assert!(check(login).unwrap_err().contains("names a login"), "{login}");
        }
        assert!(check("${secret:K:-x}").unwrap_err().contains("a secret has no default"));
        assert!(check("${workspaceFolder}").unwrap_err().contains("belongs to no project"));
        assert!(check("$${not closed").is_ok());
    }
}
