//! The auth unit tests' fixtures: an in-process OAuth endpoint ([`Endpoint`], an axum
//! server on 127.0.0.1 that records every request it gets and answers each with what
//! the test's function returns), a state directory with the file secret store, and a
//! kept login.

// Test code, compiled outside `cfg(test)` for the daemon's tests (the `fixtures`
// feature): a failed fixture fails the test that made it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use mcpx_platform::fs::Dir;
use mcpx_platform::secrets::{SecretStore, Wanted};
use url::Url;

use super::tokens::Kept;
use mcpx_platform::sync::lock;

/// A private state directory whose secret store is the file (kept while the
/// `TempDir` lives).
pub fn file_state() -> (tempfile::TempDir, Dir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let state = Dir::open_private(dir.path(), false).unwrap();
    SecretStore::choose(&state, Wanted::File).unwrap();
    (dir, state)
}

/// A login at issuer `https://as` for `https://r/mcp` whose token endpoint is
/// `token_endpoint`: client `c` with secret `cs` (`client_secret_basic`), access token
/// `at-0`, refresh token `rt-0`, expired long ago.
pub fn kept(token_endpoint: &str) -> Kept {
    Kept {
        issuer: "https://as".into(),
        resource: "https://r/mcp".into(),
        token_endpoint: token_endpoint.into(),
        client_id: "c".into(),
        client_secret: Some("cs".into()),
        auth_method: "client_secret_basic".into(),
        grant: "authorization_code".into(),
        access_token: "at-0".into(),
        refresh_token: Some("rt-0".into()),
        expires_at: Some(1),
        scopes: vec!["read".into()],
        step_up: Vec::new(),
        login_id: None,
    }
}

/// A token answer (RFC 6749 §5.1) with access token `access`, an hour's life, and
/// `refresh` when given.
pub fn token_answer(access: &str, refresh: Option<&str>) -> (StatusCode, String) {
    let mut json = serde_json::json!({ "access_token": access, "token_type": "Bearer", "expires_in": 3600 });
    if let Some(refresh) = refresh {
        json["refresh_token"] = refresh.into();
    }
    (StatusCode::OK, json.to_string())
}

/// One request the endpoint got.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The request's method.
    pub method: String,
    /// Its `Mcp-Session-Id` header, if any.
    pub session: Option<String>,
    /// The request's path.
    pub path: String,
    /// Its `Authorization` header, if any.
    pub authorization: Option<String>,
    /// Its form fields, in order.
    pub form: Vec<(String, String)>,
}

impl Seen {
    /// The value of the form field `name`.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.form.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// What the endpoint answers a request with (a status, headers and a JSON body), from
/// its number (from 1) and the request.
pub type Answer = dyn Fn(usize, &Seen) -> (StatusCode, Vec<(&'static str, String)>, String) + Send + Sync;

/// A running endpoint; it stops when the test's runtime ends.
pub struct Endpoint {
    /// Its base URL (`http://127.0.0.1:<port>/`).
    pub url: Url,
    /// The requests it got, in order.
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl Endpoint {
    /// Serves `answer` on a free port of 127.0.0.1.
    pub async fn start(answer: impl Fn(usize, &Seen) -> (StatusCode, String) + Send + Sync + 'static) -> Endpoint {
        Endpoint::start_with(move |n, seen| {
            let (status, body) = answer(n, seen);
            (status, Vec::new(), body)
        })
        .await
    }

    /// Serves `answer`, whose replies carry headers too, on a free port of 127.0.0.1.
    pub async fn start_with(
        answer: impl Fn(usize, &Seen) -> (StatusCode, Vec<(&'static str, String)>, String) + Send + Sync + 'static,
    ) -> Endpoint {
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let answer: Arc<Answer> = Arc::new(answer);
        let record = seen.clone();
        let app = axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let (record, answer) = (record.clone(), answer.clone());
            async move {
                let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
                let form = url::form_urlencoded::parse(&body).into_owned().collect();
                let request = Seen {
                    method: method.to_string(),
                    session: header("mcp-session-id"),
                    path: uri.path().to_owned(),
                    authorization: header("authorization"),
                    form,
                };
                let n = {
                    let mut seen = lock(&record);
                    seen.push(request.clone());
                    seen.len()
                };
                let (status, extra, body) = answer(n, &request);
                let mut reply = HeaderMap::new();
                reply.insert("content-type", HeaderValue::from_static("application/json"));
                for (name, value) in extra {
                    reply.insert(name, HeaderValue::from_str(&value).unwrap());
                }
                (status, reply, body)
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = Url::parse(&format!("http://{}/", listener.local_addr().unwrap())).unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Endpoint { url, seen }
    }

    /// The requests so far.
    pub fn seen(&self) -> Vec<Seen> {
        lock(&self.seen).clone()
    }
}
