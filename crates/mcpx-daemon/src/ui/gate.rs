//! Who may use the dashboard (`docs/ui.md`, "Who gets in"): a browser of the user's
//! that opened the link `mcpx ui` printed. The link's one-time code (single use,
//! [`CODE_TTL`]) is exchanged for a session cookie (`HttpOnly`, `SameSite=Strict`);
//! every request must name the dashboard's own `Host` (DNS rebinding), come from its
//! own origin when it says where it comes from (`Origin`, `Sec-Fetch-Site`), and,
//! but for the exchange and the static assets, carry the cookie. The connection's
//! uid is checked before any of this (`mcpx_platform::tcp_peer_uid`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};

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
}

impl Refusal {
    /// The HTTP status of the refusal.
    pub fn status(self) -> axum::http::StatusCode {
        match self {
            Refusal::Host => axum::http::StatusCode::MISDIRECTED_REQUEST,
            Refusal::CrossSite | Refusal::BadCode => axum::http::StatusCode::FORBIDDEN,
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
    sessions: Mutex<HashMap<String, Instant>>,
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
        let session = random_hex().map_err(|_| Refusal::BadCode)?;
        let mut sessions = lock(&self.sessions);
        sessions.retain(|_, at| at.elapsed() <= SESSION_TTL);
        sessions.insert(session.clone(), Instant::now());
        Ok(session)
    }

    /// The `Set-Cookie` value that carries `session`.
    pub fn cookie(session: &str) -> String {
        format!("{COOKIE}={session}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}", SESSION_TTL.as_secs())
    }

    /// Whether a request with `headers` may be answered: its `Host` and origin, and,
    /// when `session` is asked for, its cookie.
    ///
    /// Errors: the first [`Refusal`] that applies.
    pub fn admit(&self, headers: &HeaderMap, session: bool) -> Result<(), Refusal> {
        let ours = |host: &str| ["127.0.0.1", "localhost"].iter().any(|name| host == format!("{name}:{}", self.port));
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
        if !ours(host) {
            return Err(Refusal::Host);
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or_default();
            if !origin.strip_prefix("http://").is_some_and(ours) {
                return Err(Refusal::CrossSite);
            }
        }
        // Fetch Metadata: a navigation the user made is `none`; the page's own
        // requests are `same-origin`.
        if let Some(site) = headers.get("sec-fetch-site") {
            if !matches!(site.to_str().unwrap_or_default(), "same-origin" | "none") {
                return Err(Refusal::CrossSite);
            }
        }
        if session && !self.has_session(headers) {
            return Err(Refusal::NoSession);
        }
        Ok(())
    }

    /// Whether `headers` carry the cookie of a live session.
    fn has_session(&self, headers: &HeaderMap) -> bool {
        let sessions = lock(&self.sessions);
        let cookies = headers.get_all(header::COOKIE).into_iter().filter_map(|v| v.to_str().ok());
        let mut named =
            cookies.flat_map(|v| v.split(';')).filter_map(|c| c.trim().strip_prefix(COOKIE)?.strip_prefix('='));
        named.any(|id| sessions.get(id).is_some_and(|at| at.elapsed() <= SESSION_TTL))
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
        assert_eq!(gate.admit(&headers(&[("host", "127.0.0.1:4000"), ("cookie", &cookie)]), true), Ok(()));
        assert_eq!(gate.admit(&headers(&[("host", "localhost:4000"), ("cookie", &cookie)]), true), Ok(()));
        let wrong = format!("{COOKIE}=x{session}");
        assert_eq!(
            gate.admit(&headers(&[("host", "127.0.0.1:4000"), ("cookie", &wrong)]), true),
            Err(Refusal::NoSession)
        );
        assert_eq!(gate.admit(&headers(&[("host", "127.0.0.1:4000")]), true), Err(Refusal::NoSession));
        assert_eq!(gate.admit(&headers(&[("host", "127.0.0.1:4000")]), false), Ok(()));
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
            assert_eq!(gate.admit(&headers(&pairs), true), Err(refusal), "{pairs:?}");
        }
        let own = [("host", "127.0.0.1:4000"), ("origin", "http://127.0.0.1:4000"), ("sec-fetch-site", "same-origin")];
        assert_eq!(gate.admit(&headers(&[own[0], own[1], own[2], ("cookie", &cookie)]), true), Ok(()));
    }
}
