//! What to start: the launch description of one instance, of any kind, and the
//! [`Launcher`] trait that turns it into a [`Link`].

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use mcpx_proto::attach::Identity;
use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::link::{Link, TransportError};
use crate::config::{ExpandedOAuth, RemoteKind};

/// A boxed future, as the object-safe [`Launcher`] trait returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Starts server instances. One implementation per way of owning a server (as the
/// daemon's child, under a supervisor, over HTTP), and `Launchers`, which hands
/// each description to the one for its kind.
pub trait Launcher: Send + Sync + 'static {
    /// Starts the server `launch` describes and returns its link once the process
    /// runs (or the remote session is set up), before MCP `initialize`, which the
    /// instance does over the link.
    ///
    /// Errors: [`TransportError::Start`], naming the command or URL as written; also
    /// when `launch` is of a kind this launcher does not start.
    fn launch(&self, launch: Launch) -> BoxFuture<'static, Result<Link, TransportError>>;
}

/// How to start one instance, fully resolved: `${VAR}`s expanded, the program found
/// on PATH, the environment complete.
#[derive(Debug, Clone)]
pub enum Launch {
    /// A local process speaking MCP over stdio.
    Stdio(StdioSpec),
    /// A remote server over HTTP.
    Remote(RemoteEndpoint),
}

impl Launch {
    /// Who the instance is.
    pub fn identity(&self) -> &Identity {
        match self {
            Launch::Stdio(s) => &s.identity,
            Launch::Remote(r) => &r.identity,
        }
    }

    /// The same launch for the pool key `key`.
    pub fn with_key(mut self, key: &str) -> Launch {
        let identity = match &mut self {
            Launch::Stdio(s) => &mut s.identity,
            Launch::Remote(r) => &mut r.identity,
        };
        key.clone_into(&mut identity.key);
        self
    }

    /// The command or URL as written in the configuration, for messages.
    pub fn written(&self) -> &str {
        match self {
            Launch::Stdio(s) => &s.command,
            Launch::Remote(r) => &r.written_url,
        }
    }

    /// The stdio server to start, for the `launcher` that starts only those.
    ///
    /// Errors: [`TransportError::Start`] for a remote server.
    pub(super) fn into_stdio(self, launcher: &str) -> Result<StdioSpec, TransportError> {
        match self {
            Launch::Stdio(spec) => Ok(spec),
            other => Err(other.unsupported(launcher)),
        }
    }

    /// The remote server to reach, for the `launcher` that reaches only those.
    ///
    /// Errors: [`TransportError::Start`] for a stdio server.
    pub(super) fn into_remote(self, launcher: &str) -> Result<RemoteEndpoint, TransportError> {
        match self {
            Launch::Remote(endpoint) => Ok(endpoint),
            other => Err(other.unsupported(launcher)),
        }
    }

    fn unsupported(&self, launcher: &str) -> TransportError {
        TransportError::Start {
            command: self.written().to_owned(),
            message: format!("the {launcher} launcher cannot start this kind of server"),
        }
    }
}

/// What to run for one instance of a stdio server.
#[derive(Clone)]
pub struct StdioSpec {
    /// Who the instance is.
    pub identity: Identity,
    /// Run it under a supervisor (`supervised`, the default) or as the daemon's child.
    pub supervised: bool,
    /// The supervisor's unattached stdout buffer (`bufferBytes`), in bytes.
    pub buffer_bytes: u64,
    /// `orphanTimeout`; `None`: never.
    pub orphan_timeout: Option<Duration>,
    /// How long the start may take (`startTimeout`); `None`: no limit.
    pub start_timeout: Option<Duration>,
    /// The command as written in the configuration, for messages.
    pub command: String,
    /// The executable, resolved.
    pub program: PathBuf,
    /// Arguments.
    pub args: Vec<OsString>,
    /// The complete environment (the daemon's plus the entry's `env`).
    pub env: BTreeMap<OsString, OsString>,
    /// Working directory.
    pub cwd: Option<PathBuf>,
    /// The largest message accepted from the server, in bytes (`maxMessageBytes`).
    pub max_message_bytes: usize,
    /// The kernel confinement it starts under (`mcpx.sandbox`); `None`: unconfined.
    pub sandbox: Option<mcpx_platform::confine::Policy>,
}

impl fmt::Debug for StdioSpec {
    // The environment and arguments may hold expanded secrets: never print them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdioSpec")
            .field("server", &self.identity.server)
            .field("command", &self.command)
            .finish_non_exhaustive()
    }
}

/// What to connect to for one instance of a remote server, `${VAR}`s expanded.
#[derive(Clone)]
pub struct RemoteEndpoint {
    /// Who the instance is.
    pub identity: Identity,
    /// The endpoint, expanded.
    pub url: String,
    /// The endpoint as written in the configuration, for messages (the expanded one
    /// may hold a secret).
    pub written_url: String,
    /// Extra request headers, expanded (never printed).
    pub headers: BTreeMap<String, String>,
    /// Streamable HTTP (falling back to HTTP+SSE for old servers) or HTTP+SSE.
    pub kind: RemoteKind,
    /// The largest message accepted from the server, in bytes (`maxMessageBytes`).
    pub max_message_bytes: usize,
    /// The entry's `oauth` block, expanded (its `Debug` shows no secret): with the
    /// client credentials grant, the daemon gets its tokens with it.
    pub oauth: Option<ExpandedOAuth>,
}

impl fmt::Debug for RemoteEndpoint {
    // Header values and the expanded URL may hold secrets: never print them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteEndpoint")
            .field("server", &self.identity.server)
            .field("url", &self.written_url)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl RemoteEndpoint {
    /// Checks the URL and the headers, as a launch would use them.
    ///
    /// Errors: the URL is not an http(s) URL, or a header name or value is not valid
    /// HTTP; the message names the key, never a value.
    pub fn check(&self) -> Result<(), String> {
        self.parts().map(drop)
    }

    /// The endpoint and the request headers, checked (header values marked
    /// sensitive). Errors as [`RemoteEndpoint::check`].
    pub(super) fn parts(&self) -> Result<(Url, HeaderMap), String> {
        let url = Url::parse(&self.url).map_err(|e| format!("the `url` is not a valid URL ({e})"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("the `url` must start with http:// or https://, not {}://", url.scheme()));
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &self.headers {
            let n = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("`headers`: `{name}` is not a valid HTTP header name"))?;
            let mut v = HeaderValue::from_str(value)
                .map_err(|_| format!("`headers`: the value of `{name}` is not a valid HTTP header value"))?;
            v.set_sensitive(true);
            headers.insert(n, v);
        }
        Ok((url, headers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(url: &str, headers: &[(&str, &str)]) -> RemoteEndpoint {
        RemoteEndpoint {
            identity: Identity {
                server: "r".into(),
                fingerprint: "f".into(),
                cache_key: "f".into(),
                key: "global".into(),
                sharing: "shared".into(),
            },
            url: url.into(),
            written_url: "${URL}".into(),
            headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            kind: RemoteKind::Http,
            max_message_bytes: 1 << 20,
            oauth: None,
        }
    }

    #[test]
    fn endpoints_are_checked_without_showing_values() {
        assert!(endpoint("https://example.com/mcp", &[("Authorization", "Bearer x")]).check().is_ok());
        let e = endpoint("ftp://example.com", &[]).check().unwrap_err();
        assert_eq!(e, "the `url` must start with http:// or https://, not ftp://");
        assert!(endpoint("not a url", &[]).check().unwrap_err().starts_with("the `url` is not a valid URL"));
        let e = endpoint("http://h/", &[("X-Key", "s3cret\nvalue")]).check().unwrap_err();
        assert_eq!(e, "`headers`: the value of `X-Key` is not a valid HTTP header value");
        let e = endpoint("http://h/", &[("bad name", "v")]).check().unwrap_err();
        assert_eq!(e, "`headers`: `bad name` is not a valid HTTP header name");
        let shown = format!("{:?}", endpoint("http://user:s3cret@h/", &[("X-Key", "s3cret")]));
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    #[test]
    fn a_launch_takes_its_pool_key_and_goes_only_to_its_kind_of_launcher() {
        let launch = Launch::Remote(endpoint("http://h/", &[])).with_key("session:abc");
        assert_eq!(launch.identity().key, "session:abc");
        assert_eq!(launch.written(), "${URL}");
        let refused = launch.clone().into_stdio("direct").unwrap_err();
        assert_eq!(refused.to_string(), "cannot start `${URL}`: the direct launcher cannot start this kind of server");
        assert_eq!(launch.into_remote("remote").unwrap().identity.key, "session:abc");
    }
}
