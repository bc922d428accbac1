//! Who may use the dashboard (`docs/ui.md`, "Who gets in"): a browser of the user's
//! that opened the link `mcpx ui` printed. The link's one-time code (single use,
//! [`CODE_TTL`]) is exchanged for a session cookie (`HttpOnly`, `SameSite=Strict`);
//! every request must name the dashboard's own `Host` (DNS rebinding), come from its
//! own origin when it says where it comes from (`Origin`, `Sec-Fetch-Site`), and,
//! but for the exchange and the static assets, carry the cookie. A request that
//! changes something ([`Need::Action`]) must also name its origin, and carry the
//! session's CSRF token in `X-Mcpx-Csrf` (a header no other site's form or fetch can
//! set without the dashboard's consent). The connection's uid is checked before any
//! of this (`mcpx_platform::tcp_peer_uid`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};
use subtle::ConstantTimeEq;

use crate::sync::lock;

/// How long the link's code may be used, once.
pub const CODE_TTL: Duration = Duration::from_secs(60);

/// How long a session lasts (the daemon's restart ends it sooner: sessions are kept
/// in memory only).
pub const SESSION_TTL: Duration = Duration::from_secs(24 * 3600);

/// The session cookie's name.
pub const COOKIE: &str = "mcpx_ui";

/// Codes not yet used, at most; the oldest goes first.
const CODES: usize = 64;

/// Why a request is refused, each with its HTTP status and a line for the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `Host` is not the dashboard's own address.
    Host,
    /// `Origin` or `Sec-Fetch-Site` says another site sent it.
    CrossSite,
    /// No session cookie, or one the daemon does not know.
    NoSession,
    /// A code that is unknown, used, or older than [`CODE_TTL`].
    BadCode,
    /// A request that changes something without its origin or the session's CSRF token.
    NoToken,
}

/// What a request must show to be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Its host and origin only: the code's exchange, the static assets.
    Nothing,
    /// A session: every page and event stream.
    Session,
    /// A session, its own origin named, and the session's CSRF token: an action.
    Action,
}

/// The header that carries the CSRF token of an action.
pub const CSRF_HEADER: &str = "x-mcpx-csrf";

/// One signed-in browser.
#[derive(Debug)]
struct Session {
    since: Instant,
    /// The token its actions carry.
    csrf: String,
}

impl Refusal {
    /// The HTTP status of the refusal.
    pub fn status(self) -> axum::http::StatusCode {
        match self {
            Refusal::Host => axum::http::StatusCode::MISDIRECTED_REQUEST,
            Refusal::CrossSite | Refusal::BadCode | Refusal::NoToken => axum::http::StatusCode::FORBIDDEN,
            Refusal::NoSession => axum::http::StatusCode::UNAUTHORIZED,
        }
    }

    /// What the page says, and what to do.
    pub fn said(self) -> &'static str {
        match self {
            Refusal::Host => "This address is not the dashboard's. Open the link `mcpx ui` prints.",
            Refusal::CrossSite => "Another site sent this request, and the dashboard answers only its own pages.",
            Refusal::NoSession => "You are not signed in to this dashboard. Run `mcpx ui` and open the link it prints.",
            Refusal::BadCode => {
                "This link was used already, or is older than a minute. Run `mcpx ui` again for a new one."
            }
            Refusal::NoToken => "This change did not come from the dashboard's own page, so it was not made.",
        }
    }
}

/// What the daemon holds of the dashboard: its gate, once `mcpx ui` opened its
/// listener (`crate::ui::open`).
#[derive(Debug, Default)]
pub struct Opened(Mutex<Option<Arc<Gate>>>);

impl Opened {
    /// The listener's port, once open.
    pub fn port(&self) -> Option<u16> {
        lock(&self.0).as_ref().map(|g| g.port)
    }

    /// The gate of the open listener, or the one `open` opens now.
    ///
    /// Errors: `open`'s.
    pub fn get_or_open<E>(&self, open: impl FnOnce() -> Result<Arc<Gate>, E>) -> Result<Arc<Gate>, E> {
        let mut slot = lock(&self.0);
        if let Some(gate) = &*slot {
            return Ok(gate.clone());
        }
        let gate = open()?;
        *slot = Some(gate.clone());
        Ok(gate)
    }
}

/// The dashboard's codes and sessions, for the listener on `port`.
#[derive(Debug)]
pub struct Gate {
    /// The listener's port: `Host` and `Origin` must name it.
    pub port: u16,
    codes: Mutex<HashMap<String, Instant>>,
    sessions: Mutex<HashMap<String, Session>>,
    code_ttl: Duration,
}

impl Gate {
    /// The gate of the listener on `port`.
    pub fn new(port: u16) -> Gate {
        Gate { port, codes: Mutex::default(), sessions: Mutex::default(), code_ttl: code_ttl() }
    }

    /// A new one-time code (128 random bits, in hex).
    ///
    /// Errors: the OS's random source failed.
    pub fn mint(&self) -> std::io::Result<String> {
        let code = random_hex()?;
        let mut codes = lock(&self.codes);
        codes.retain(|_, at| at.elapsed() <= self.code_ttl);
        if codes.len() >= CODES {
            if let Some(oldest) = codes.iter().min_by_key(|(_, at)| **at).map(|(c, _)| c.clone()) {
                codes.remove(&oldest);
            }
        }
        codes.insert(code.clone(), Instant::now());
        Ok(code)
    }

    /// Uses `code` up: a new session's id when it was minted less than [`CODE_TTL`]
    /// ago and never used.
    ///
    /// Errors: [`Refusal::BadCode`]; an OS random source that fails is refused too.
    pub fn redeem(&self, code: &str) -> Result<String, Refusal> {
        let minted = lock(&self.codes).remove(code).ok_or(Refusal::BadCode)?;
        if minted.elapsed() > self.code_ttl {
            return Err(Refusal::BadCode);
        }
        let (session, csrf) = (random_hex(), random_hex());
        let (Ok(session), Ok(csrf)) = (session, csrf) else { return Err(Refusal::BadCode) };
        let mut sessions = lock(&self.sessions);
        sessions.retain(|_, s| s.since.elapsed() <= SESSION_TTL);
        sessions.insert(session.clone(), Session { since: Instant::now(), csrf });
        Ok(session)
    }

    /// The `Set-Cookie` value that carries `session`.
    pub fn cookie(session: &str) -> String {
        format!("{COOKIE}={session}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}", SESSION_TTL.as_secs())
    }

    /// Whether a request with `headers` may be answered: its `Host` and origin, and
    /// what else it `need`s.
    ///
    /// Errors: the first [`Refusal`] that applies.
    pub fn admit(&self, headers: &HeaderMap, need: Need) -> Result<(), Refusal> {
        let ours = |host: &str| ["127.0.0.1", "localhost"].iter().any(|name| host == format!("{name}:{}", self.port));
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
        if !ours(host) {
            return Err(Refusal::Host);
        }
        let origin = headers.get(header::ORIGIN).map(|o| o.to_str().unwrap_or_default());
        if origin.is_some_and(|o| !o.strip_prefix("http://").is_some_and(ours)) {
            return Err(Refusal::CrossSite);
        }
        // Fetch Metadata: a navigation the user made is `none`; the page's own
        // requests are `same-origin`.
        if let Some(site) = headers.get("sec-fetch-site") {
            if !matches!(site.to_str().unwrap_or_default(), "same-origin" | "none") {
                return Err(Refusal::CrossSite);
            }
        }
        if need == Need::Nothing {
            return Ok(());
        }
        let csrf = self.csrf(headers).ok_or(Refusal::NoSession)?;
        if need == Need::Action {
            let sent = headers.get(CSRF_HEADER).map(|v| v.as_bytes()).unwrap_or_default();
            if origin.is_none() || !bool::from(sent.ct_eq(csrf.as_bytes())) {
                return Err(Refusal::NoToken);
            }
        }
        Ok(())
    }

    /// The CSRF token of the live session whose cookie `headers` carry.
    pub fn csrf(&self, headers: &HeaderMap) -> Option<String> {
        let sessions = lock(&self.sessions);
        let cookies = headers.get_all(header::COOKIE).into_iter().filter_map(|v| v.to_str().ok());
        let mut named =
            cookies.flat_map(|v| v.split(';')).filter_map(|c| c.trim().strip_prefix(COOKIE)?.strip_prefix('='));
        named.find_map(|id| sessions.get(id).filter(|s| s.since.elapsed() <= SESSION_TTL).map(|s| s.csrf.clone()))
    }
}

/// 128 random bits in lowercase hex.
fn random_hex() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    mcpx_platform::random_bytes(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// [`CODE_TTL`], or with the `test-hooks` feature `MCPX_TEST_UI_CODE_TTL_MS`.
fn code_ttl() -> Duration {
    #[cfg(feature = "test-hooks")]
    if let Some(ms) = std::env::var("MCPX_TEST_UI_CODE_TTL_MS").ok().and_then(|v| v.parse().ok()) {
        return Duration::from_millis(ms);
    }
    CODE_TTL
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn a_code_is_good_once_and_its_session_admits() {
        let gate = Gate::new(4000);
        let code = gate.mint().unwrap();
        let session = gate.redeem(&code).unwrap();
        assert_eq!(gate.redeem(&code), Err(Refusal::BadCode), "a code is good once");
        assert_eq!(gate.redeem("nonsense"), Err(Refusal::BadCode));
        let cookie = format!("a=b; {COOKIE}={session}");
        assert_eq!(gate.admit(&headers(&[("host", "127.0.0.1:4000"), ("cookie", &cookie)]), Need::Session), Ok(()));
        assert_eq!(gate.admit(&headers(&[("host", "localhost:4000"), ("cookie", &cookie)]), Need::Session), Ok(()));
        let wrong = format!("{COOKIE}=x{session}");
        assert_eq!(
            gate.admit(&headers(&[("host", "127.0.0.1:4000"), ("cookie", &wrong)]), Need::Session),
            Err(Refusal::NoSession)
        );
        assert_eq!(gate.admit(&headers(&[("host", "127.0.0.1:4000")]), Need::Session), Err(Refusal::NoSession));
        assert_eq!(gate.admit(&headers(&[("host", "127.0.0.1:4000")]), Need::Nothing), Ok(()));
    }

    #[test]
    fn another_host_or_site_is_refused_whatever_it_carries() {
        let gate = Gate::new(4000);
        let session = gate.redeem(&gate.mint().unwrap()).unwrap();
        let cookie = format!("{COOKIE}={session}");
        let refused = [
            (vec![("host", "evil.example:4000")], Refusal::Host),
            (vec![("host", "127.0.0.1:4001")], Refusal::Host),
            (vec![("host", "127.0.0.1")], Refusal::Host),
            (vec![], Refusal::Host),
            (vec![("host", "127.0.0.1:4000"), ("origin", "http://evil.example")], Refusal::CrossSite),
            (vec![("host", "127.0.0.1:4000"), ("origin", "http://127.0.0.1:4001")], Refusal::CrossSite),
            (vec![("host", "127.0.0.1:4000"), ("origin", "null")], Refusal::CrossSite),
            (vec![("host", "127.0.0.1:4000"), ("sec-fetch-site", "cross-site")], Refusal::CrossSite),
            (vec![("host", "127.0.0.1:4000"), ("sec-fetch-site", "same-site")], Refusal::CrossSite),
        ];
        for (mut pairs, refusal) in refused {
            pairs.push(("cookie", &cookie));
            assert_eq!(gate.admit(&headers(&pairs), Need::Session), Err(refusal), "{pairs:?}");
        }
        let own = [("host", "127.0.0.1:4000"), ("origin", "http://127.0.0.1:4000"), ("sec-fetch-site", "same-origin")];
        assert_eq!(gate.admit(&headers(&[own[0], own[1], own[2], ("cookie", &cookie)]), Need::Session), Ok(()));
    }

    #[test]
    fn an_action_needs_its_origin_and_the_sessions_token() {
        let gate = Gate::new(4000);
        let session = gate.redeem(&gate.mint().unwrap()).unwrap();
        let cookie = format!("{COOKIE}={session}");
        let mut base = headers(&[("host", "127.0.0.1:4000"), ("cookie", &cookie)]);
        let csrf = gate.csrf(&base).unwrap();
        assert_eq!(gate.admit(&base, Need::Action), Err(Refusal::NoToken), "no origin, no token");
        base.insert("origin", "http://127.0.0.1:4000".parse().unwrap());
        assert_eq!(gate.admit(&base, Need::Action), Err(Refusal::NoToken), "no token");
        base.insert(CSRF_HEADER, format!("{csrf}0").parse().unwrap());
        assert_eq!(gate.admit(&base, Need::Action), Err(Refusal::NoToken), "a wrong token");
        base.insert(CSRF_HEADER, csrf.parse().unwrap());
        assert_eq!(gate.admit(&base, Need::Action), Ok(()));
        // The token of another session is no good.
        let other = gate.redeem(&gate.mint().unwrap()).unwrap();
        let other = headers(&[("host", "127.0.0.1:4000"), ("cookie", &format!("{COOKIE}={other}"))]);
        assert_ne!(gate.csrf(&other).unwrap(), csrf);
        base.remove("origin");
        assert_eq!(gate.admit(&base, Need::Action), Err(Refusal::NoToken), "the token without an origin");
    }
}
