//! Remote servers (`url` entries): the MCP streamable HTTP transport (MCP 2025-11-25,
//! Transports, "Streamable HTTP") and the legacy HTTP+SSE transport (MCP 2024-11-05,
//! Transports, "HTTP with SSE"), behind the same `Link` as a stdio server.
//!
//! One link is one MCP session. Each outbound message is one POST; its answer (JSON,
//! or an SSE stream carrying progress, server requests and finally the response) is
//! turned into `Inbound` items as it arrives, so the instance routes ids, progress,
//! cancellation and server-to-client requests exactly as for a stdio server.
//!
//! - The `Mcp-Session-Id` the server assigns at `initialize` is sent on every later
//!   request, with `MCP-Protocol-Version` once negotiated ("Session Management",
//!   "Protocol Version Header").
//! - A 404 for the session means the server forgot it: the link repeats the original
//!   `initialize` (and `notifications/initialized`) without the instance noticing, and
//!   retries the request once.
//! - An SSE answer that ends before its response is resumed with a GET carrying
//!   `Last-Event-ID`, after the `retry` delay the stream asked for ("Resumability and
//!   Redelivery").
//! - The optional GET stream for server-initiated messages is opened after
//!   `notifications/initialized`; a 405 means the server offers none.
//! - A server that answers the `initialize` POST with 400, 404 or 405 is an old
//!   HTTP+SSE server ("Backwards Compatibility"): the link opens the SSE stream, waits
//!   for its `endpoint` event and carries on with that transport. `transport: "sse"`
//!   goes there directly.
//! - Redirects are followed only within the URL's origin (scheme, host and port), at
//!   most [`MAX_REDIRECTS`] of them: the entry's `headers` (an `X-Api-Key`...) are
//!   sent with every request, and reqwest strips only the standard credentials
//!   (`Authorization`, `Cookie`) when a redirect leaves the origin. A redirect to
//!   another origin fails the request, naming where it pointed.
//! - The session is kept in the state directory (`remote/<fingerprint>-<key hash>.json`,
//!   0600), so a later daemon re-uses it without a new `initialize`. Stopping the
//!   instance (`Outbound::Terminate`) sends `DELETE` and forgets the file; dropping the
//!   link (the daemon exits) does neither.
//! - Every session's fate is logged: kept ([`LinkInfo::handover`], said by the pool as
//!   the daemon leaves it), re-used by the next daemon, initialized again when the server
//!   forgot it, or ended (`DELETE`; an HTTP+SSE session, which no later daemon can take
//!   up, ends with its daemon).

mod legacy;
mod modern;
mod session;
mod store;
mod streamable;
mod wording;

pub use store::{KeptRemote, kept_remotes};

use std::sync::{Arc, Mutex};

use mcpx_platform::fs::Dir;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use self::session::{CONNECT_TIMEOUT, Remote, RemoteState};
use self::store::SessionFile;
use crate::config::RemoteKind;
use crate::sync::lock;
use crate::transport::launch::{BoxFuture, Launch, Launcher, RemoteEndpoint};
use crate::transport::link::{ExitInfo, HANDOVER_KEPT, Inbound, Link, LinkInfo, Outbound, TransportError};

/// The most redirects one request follows (all within its origin), as reqwest's
/// default policy allows.
pub const MAX_REDIRECTS: usize = 10;

/// Starts remote instances: one HTTP client (connection pool) for the daemon.
#[derive(Debug, Clone)]
pub struct RemoteLauncher {
    http: reqwest::Client,
    /// `<state>/remote`, where sessions are kept for the next daemon.
    sessions: Dir,
    /// The state directory, whose secret store keeps the logins.
    state: Dir,
}

impl Launcher for RemoteLauncher {
    fn launch(&self, launch: Launch) -> BoxFuture<'static, Result<Link, TransportError>> {
        let this = self.clone();
        Box::pin(async move { this.open(launch.into_remote("remote")?) })
    }
}

impl RemoteLauncher {
    /// A launcher keeping sessions in `sessions` (`<state>/remote`) and reading logins
    /// from the secret store of `state`.
    ///
    /// Errors: the TLS backend cannot load the system's root certificates.
    pub fn new(sessions: Dir, state: Dir) -> Result<RemoteLauncher, TransportError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("mcpx/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::custom(|attempt| {
                match redirect_refusal(attempt.previous(), attempt.url()) {
                    Some(refusal) => attempt.error(refusal),
                    None => attempt.follow(),
                }
            }))
            .build()
            .map_err(|e| TransportError::Setup(wording::chain(&e)))?;
        Ok(RemoteLauncher { http, sessions, state })
    }

    /// Opens the link of one instance. Nothing is sent until the instance's first
    /// message (`initialize`); a session a previous daemon kept for this instance is
    /// taken up instead, and returned in [`Link::resumed`].
    ///
    /// Errors: the URL or a header is malformed (named, its value never shown).
    fn open(&self, spec: RemoteEndpoint) -> Result<Link, TransportError> {
        let (url, headers) =
            spec.parts().map_err(|message| TransportError::Start { command: spec.written_url.clone(), message })?;
        let store = (spec.kind == RemoteKind::Http).then(|| (self.sessions.clone(), store::file_name(&spec.identity)));
        let stored = store.as_ref().and_then(|(dir, name)| SessionFile::load(dir, name, &spec.written_url));
        let epoch = stored.as_ref().map_or(1, |s| s.epoch.saturating_add(1));
        let (out_tx, out_rx) = mpsc::channel(64);
        let (in_tx, in_rx) = mpsc::channel(256);
        let info = Arc::new(LinkInfo::remote(spec.written_url.clone()));
        let resumed = stored.as_ref().map(|s| s.session.clone());
        if stored.is_some() {
            *lock(&info.handover) = Some(HANDOVER_KEPT);
            tracing::info!(server = %spec.identity.server, url = %spec.written_url, "re-using the MCP session a previous daemon kept");
        }
        let remote = Arc::new(Remote {
            http: self.http.clone(),
            url,
            headers,
            identity: spec.identity.clone(),
            kind: spec.kind,
            written_url: spec.written_url.clone(),
            max: spec.max_message_bytes,
            inbound: in_tx,
            info: info.clone(),
            state_dir: self.state.clone(),
            oauth: spec.oauth.clone(),
            store,
            epoch,
            state: Mutex::new(RemoteState {
                id: stored.as_ref().map(|s| s.session_id.clone()),
                protocol: stored.as_ref().map(|s| s.protocol_version.clone()),
                initialize: stored.as_ref().map(|s| s.initialize.clone()),
                session: stored.map(|s| s.session),
                legacy: None,
                login: None,
            }),
            connect: tokio::sync::Mutex::new(()),
            background: Mutex::new(Vec::new()),
        });
        if resumed.is_some() {
            drop(remote.clone().start_listening());
        }
        tokio::spawn(run(remote, out_rx));
        Ok(Link { tx: out_tx, rx: in_rx, info, epoch, resumed, era: None })
    }
}

/// Why a redirect to `to`, after the URLs requested so far (`previous`, the first
/// being the request's own), is not followed; `None` to follow it. Only redirects
/// within the first URL's origin are, [`MAX_REDIRECTS`] at most.
fn redirect_refusal(previous: &[reqwest::Url], to: &reqwest::Url) -> Option<String> {
    let same_origin = previous.first().is_none_or(|first| first.origin() == to.origin());
    if !same_origin {
        return Some(format!(
            "the server redirected to another origin, {to}; mcpx follows redirects only within the `url`'s scheme, host and port, so that the entry's `headers` go nowhere else: if the server moved, put its new address in the entry's `url`"
        ));
    }
    (previous.len() > MAX_REDIRECTS)
        .then(|| format!("the server redirected more than {MAX_REDIRECTS} times; check the entry's `url`"))
}

/// Serves the instance's outbound messages until it stops or drops the link.
async fn run(remote: Arc<Remote>, mut out: mpsc::Receiver<Outbound>) {
    let mut tasks = JoinSet::new();
    let mut modern = modern::Posts::default();
    loop {
        tokio::select! {
            item = out.recv() => match item {
                // `initialized` goes before anything after it: the server may only
                // then offer some tools, and say so on the GET stream.
                Some(Outbound::Message(m)) if m.method() == Some("notifications/initialized") => {
                    remote.clone().send(m, Vec::new()).await;
                }
                Some(Outbound::Message(m)) if modern.cancel(&m) => {}
                Some(Outbound::Message(m)) => {
                    let id = modern::routing(&m).and(m.id().map(str::to_owned));
                    modern.started(id, tasks.spawn(remote.clone().send(m, Vec::new())));
                }
                Some(Outbound::Headed(m, headers)) => {
                    let id = modern::routing(&m).and(m.id().map(str::to_owned));
                    modern.started(id, tasks.spawn(remote.clone().send(m, headers)));
                }
                Some(Outbound::StoreSession(json)) => {
                    lock(&remote.state).session = Some(json);
                    remote.save();
                }
                // A modern remote server has no session to keep: nothing to store.
                Some(Outbound::StoreEra(_)) => {}
                Some(Outbound::Restart) => {
                    tracing::warn!(server = %remote.identity.server, "a remote instance cannot be restarted in place; stop it instead");
                }
                Some(Outbound::Terminate) => {
                    tasks.abort_all();
                    remote.abort_background();
                    remote.end_session().await;
                    let _ = remote.inbound.send(Inbound::Exited(ExitInfo::ENDED)).await;
                    return;
                }
                // The daemon is going away: the session stays for the next one.
                None => break,
            },
            Some(done) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                modern.ended(done.map_or_else(|e| e.id(), |(id, ())| id));
            }
        }
    }
    remote.abort_background();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> reqwest::Url {
        reqwest::Url::parse(text).unwrap()
    }

    #[test]
    fn redirects_are_followed_only_within_the_origin() {
        let start = [url("https://api.example.com/mcp")];
        assert_eq!(redirect_refusal(&start, &url("https://api.example.com/v2/mcp?x=1")), None);
        assert_eq!(redirect_refusal(&start, &url("https://api.example.com:443/mcp")), None);
        for elsewhere in
            ["https://evil.example.net/mcp", "http://api.example.com/mcp", "https://api.example.com:8443/mcp"]
        {
            let refusal = redirect_refusal(&start, &url(elsewhere)).unwrap();
            assert!(refusal.starts_with(&format!("the server redirected to another origin, {elsewhere}")), "{refusal}");
        }
        let chain: Vec<reqwest::Url> =
            (0..=MAX_REDIRECTS).map(|i| url(&format!("https://api.example.com/{i}"))).collect();
        let refusal = redirect_refusal(&chain, &url("https://api.example.com/last")).unwrap();
        assert_eq!(refusal, "the server redirected more than 10 times; check the entry's `url`");
    }
}
