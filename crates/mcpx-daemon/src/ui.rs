//! The dashboard (`mcpx ui`; `docs/ui.md`): the daemon's state, live, in the user's
//! browser. It is served on a loopback TCP listener of its own, opened the first time
//! `POST /v1/ui` asks (never at start), apart from the opt-in `/mcp` endpoint.
//!
//! Who gets in: a connection whose client socket another uid owns is closed before a
//! byte is read (`mcpx_platform::tcp_peer_uid`; on macOS, where it is not known,
//! every connection is refused); then every request passes the [`gate`]: the dashboard's
//! own `Host` and origin, and a session cookie got by a one-time code. Every answer
//! carries a `Content-Security-Policy` that allows the dashboard's own script and
//! style and nothing else: no inline script, nothing from elsewhere.

pub mod actions;
pub mod gate;
pub mod live;
pub mod pages;
pub mod view;

use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use crate::api::activity::ActivityRequest;
use crate::api::{ApiError, CallerRequest, ErrorKind, UiAnswer};
use crate::daemon::Daemon;
use gate::{Gate, Need, Refusal};
use pages::Nav;

/// The policy every answer carries: the dashboard's own script, style and images
/// (and a tool result's images, from their own data), its own event streams and
/// requests, forms posted to itself, and no framing.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                       connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// How long a connection may take to send a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections served at once, at most; more wait in the listen backlog.
const CONNECTIONS: usize = 64;

/// Entries the activity page shows, at most.
const ACTIVITY_ROWS: usize = 200;

/// `POST /v1/ui`: opens the dashboard's listener unless it is open, and a new
/// one-time link into it: `{"url": "http://127.0.0.1:<port>/enter?code=<code>",
/// "port"}`. The code is good once, for [`gate::CODE_TTL`]. The caller's
/// configuration is resolved first, so the files it reads are among those the
/// dashboard shows (a project's, when `mcpx ui` runs in it).
///
/// Errors: the listener cannot be bound, or the OS's random source fails (`daemon`).
pub fn open(d: &Arc<Daemon>, req: &CallerRequest) -> Result<UiAnswer, ApiError> {
    if let Err(e) = d.resolve_for(&req.caller) {
        // Shown on the overview, under its file.
        tracing::debug!("the dashboard's caller's configuration: {}", e.message);
    }
    let internal = |what: &str, e: std::io::Error| ApiError::new(ErrorKind::Daemon, format!("{what}: {e}"));
    let gate = d.ui.get_or_open(|| {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
            .map_err(|e| internal("the dashboard's listener on 127.0.0.1 cannot be bound", e))?;
        listener.set_nonblocking(true).map_err(|e| internal("the dashboard's listener", e))?;
        let port = listener.local_addr().map_err(|e| internal("the dashboard's listener", e))?.port();
        let listener =
            tokio::net::TcpListener::from_std(listener).map_err(|e| internal("the dashboard's listener", e))?;
        let gate = Arc::new(Gate::new(port));
        tokio::spawn(serve(listener, Arc::downgrade(d), gate.clone()));
        tracing::info!(port, "the dashboard listens on 127.0.0.1");
        Ok::<_, ApiError>(gate)
    })?;
    let code = gate.mint().map_err(|e| internal("a code for the dashboard", e))?;
    Ok(UiAnswer { url: format!("http://127.0.0.1:{}/enter?code={code}", gate.port), port: gate.port })
}

/// What the handlers share.
#[derive(Clone)]
struct Shared {
    daemon: Weak<Daemon>,
    gate: Arc<Gate>,
}

impl Shared {
    /// The daemon, unless it is going away.
    fn daemon(&self) -> Result<Arc<Daemon>, StatusCode> {
        self.daemon.upgrade().ok_or(StatusCode::SERVICE_UNAVAILABLE)
    }
}

/// Serves the dashboard on `listener` for as long as the daemon lives: each
/// connection only once its client is found to be the daemon's own user.
async fn serve(listener: tokio::net::TcpListener, daemon: Weak<Daemon>, gate: Arc<Gate>) {
    let app = router(Shared { daemon: daemon.clone(), gate });
    let me = nix::unistd::geteuid().as_raw();
    let slots = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS));
    while daemon.strong_count() > 0 {
        let Ok(slot) = slots.clone().acquire_owned().await else { return };
        let (stream, client) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "accepting a dashboard connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let app = app.clone();
        tokio::spawn(async move {
            let Ok(server) = stream.local_addr() else { return };
            let owner = tokio::task::spawn_blocking(move || mcpx_platform::tcp_peer_uid(server, client)).await;
            match owner {
                Ok(Ok(Some(uid))) if uid == me => {}
                Ok(Ok(Some(uid))) => {
                    tracing::warn!(uid, %client, "refused a dashboard connection of another user");
                    return;
                }
                other => {
                    tracing::warn!(%client, ?other, "refused a dashboard connection whose owner cannot be found");
                    return;
                }
            }
            let _ = stream.set_nodelay(true);
            let service = hyper_util::service::TowerToHyperService::new(app);
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(io, service)
                .await;
            drop(slot);
        });
    }
}

/// The dashboard's routes, every one behind [`admit`].
fn router(shared: Shared) -> Router {
    Router::new()
        .route("/", get(overview))
        .route("/live/overview", get(overview_live))
        .route("/servers/{name}", get(server))
        .route("/live/servers/{name}", get(server_live))
        .route("/activity", get(activity))
        .route("/trust", get(trust))
        .route("/live/trust", get(trust_live))
        .route("/live/activity", get(activity_live))
        .route("/enter", get(enter))
        .route("/actions/call", axum::routing::post(call))
        .route("/actions/answer", axum::routing::post(answer))
        .route("/actions/login", axum::routing::post(login))
        .route("/actions/{verb}", axum::routing::post(action))
        .route("/servers/{name}/tools/{tool}", get(tool))
        .route("/assets/app.js", get(|| async { asset("text/javascript; charset=utf-8", include_str!("ui/app.js")) }))
        .route("/assets/app.css", get(|| async { asset("text/css; charset=utf-8", include_str!("ui/app.css")) }))
        .fallback(|| async {
            (StatusCode::NOT_FOUND, Html(pages::notice("Not found", "There is no such page.").into_string()))
        })
        .layer(axum::middleware::from_fn_with_state(shared.clone(), admit))
        .with_state(shared)
}

/// Refuses what the [`Gate`] refuses (every path but `/enter` and the assets needs the
/// session; every method but `GET`, and every action, the CSRF token), and puts the
/// security headers on every answer.
async fn admit(State(s): State<Shared>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let need = if path == "/enter" || path.starts_with("/assets/") {
        Need::Nothing
    } else if request.method() != axum::http::Method::GET || path.starts_with("/actions/") {
        Need::Action
    } else {
        Need::Session
    };
    let mut response = match s.gate.admit(request.headers(), need) {
        Ok(()) => next.run(request).await,
        Err(refusal) => refused(refusal),
    };
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::HeaderName::from_static("cross-origin-opener-policy"), "same-origin"),
        (header::HeaderName::from_static("cross-origin-resource-policy"), "same-origin"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    response
}

/// The page of a refusal.
fn refused(refusal: Refusal) -> Response {
    (refusal.status(), Html(pages::notice("Not allowed", refusal.said()).into_string())).into_response()
}

/// A static asset, embedded in the binary.
fn asset(kind: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

/// `GET /enter?code=`: the one-time code for a session cookie.
async fn enter(State(s): State<Shared>, Query(q): Query<std::collections::HashMap<String, String>>) -> Response {
    let Some(code) = q.get("code") else { return refused(Refusal::BadCode) };
    match s.gate.redeem(code) {
        Ok(session) => {
            let cookie = Gate::cookie(&session);
            ([(header::SET_COOKIE, cookie)], Html(pages::entered().into_string())).into_response()
        }
        Err(refusal) => refused(refusal),
    }
}

async fn overview(State(s): State<Shared>, headers: HeaderMap) -> Result<Html<String>, StatusCode> {
    let d = s.daemon()?;
    let fragment = pages::overview(&view::overview(&d).await);
    let csrf = s.gate.csrf(&headers).unwrap_or_default();
    Ok(Html(pages::page("Overview", Nav::Overview, &csrf, maud::html! {}, "/live/overview", fragment).into_string()))
}

async fn overview_live(State(s): State<Shared>) -> Result<Response, StatusCode> {
    let d = s.daemon()?;
    Ok(live::events(move || {
        let d = d.clone();
        async move { pages::overview(&view::overview(&d).await).into_string() }
    }))
}

async fn server(State(s): State<Shared>, Path(name): Path<String>, headers: HeaderMap) -> Result<Response, StatusCode> {
    let d = s.daemon()?;
    let Some(page) = view::server(&d, &name).await else {
        let said = format!("No configuration file the daemon knows defines a server named {}.", pages::shown(&name));
        return Ok((StatusCode::NOT_FOUND, Html(pages::notice("No such server", &said).into_string())).into_response());
    };
    let live = format!("/live{}", pages::server_href(&name));
    let (title, csrf) = (pages::shown(&name), s.gate.csrf(&headers).unwrap_or_default());
    let html = pages::page(&title, Nav::Server, &csrf, pages::server_before(), &live, pages::server(&page));
    Ok(Html(html.into_string()).into_response())
}

async fn server_live(State(s): State<Shared>, Path(name): Path<String>) -> Result<Response, StatusCode> {
    let d = s.daemon()?;
    Ok(live::events(move || {
        let (d, name) = (d.clone(), name.clone());
        async move {
            match view::server(&d, &name).await {
                Some(page) => pages::server(&page).into_string(),
                None => maud::html! { p.error { "This server is no longer configured." } }.into_string(),
            }
        }
    }))
}

/// `POST /actions/<verb>` (JSON `{"server", "file"}`): [`actions::act`]; its answer as
/// JSON, or the error's (`{"error": {"kind", "message"}}`, with its status).
async fn action(
    State(s): State<Shared>,
    Path(verb): Path<String>,
    axum::Json(act): axum::Json<actions::Act>,
) -> Result<Response, StatusCode> {
    let d = s.daemon()?;
    Ok(match actions::act(&d, &verb, &act).await {
        Ok(answer) => axum::Json(answer).into_response(),
        Err(e) => e.into_response(),
    })
}

/// The page that tries a tool ([`pages::tool`]).
async fn tool(
    State(s): State<Shared>,
    Path((name, tool)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, StatusCode> {
    let d = s.daemon()?;
    let Some(page) = view::tool(&d, &name, &tool).await else {
        let said = format!("{} has no tool {} listed.", pages::shown(&name), pages::shown(&tool));
        return Ok((StatusCode::NOT_FOUND, Html(pages::notice("No such tool", &said).into_string())).into_response());
    };
    let csrf = s.gate.csrf(&headers).unwrap_or_default();
    let title = format!("{}.{}", pages::shown(&name), pages::shown(&tool));
    Ok(Html(pages::page(&title, Nav::Server, &csrf, maud::html! {}, "", pages::tool(&page)).into_string())
        .into_response())
}

/// The body of `POST /actions/call`: the tool, the file that defines its server, and
/// the arguments the form made.
#[derive(Debug, Deserialize)]
struct Call {
    server: String,
    tool: String,
    file: std::path::PathBuf,
    arguments: Box<serde_json::value::RawValue>,
}

/// `POST /actions/call`: the call, streamed as `POST /v1/call` with `stream` streams it
/// (progress and log notifications, the server's `elicitation/create` for the page to
/// answer, then the result); the page going away, or cancelling, cancels it upstream.
async fn call(State(s): State<Shared>, axum::Json(call): axum::Json<Call>) -> Result<Response, StatusCode> {
    let d = s.daemon()?;
    tracing::info!(server = %call.server, tool = %call.tool, "the dashboard's call");
    let req = crate::api::CallRequest {
        caller: view::caller_for(&d, &call.file),
        server: Some(call.server),
        tool: Some(call.tool),
        arguments: Some(call.arguments),
        stream: true,
        answers: vec!["elicitation/create".to_owned()],
        via: Some("ui".to_owned()),
        client: Some("dashboard (mcpx ui)".to_owned()),
        ..crate::api::CallRequest::default()
    };
    Ok(crate::streamed_call::call_stream(d, req))
}

/// `POST /actions/answer`: the page's answer to a server's request during its call, as
/// `POST /v1/call/answer` takes it.
async fn answer(
    State(s): State<Shared>,
    axum::Json(answer): axum::Json<crate::api::Answer>,
) -> Result<Response, StatusCode> {
    let d = s.daemon()?;
    Ok(match crate::control::answer(&d, &answer) {
        Ok(done) => axum::Json(done).into_response(),
        Err(e) => e.into_response(),
    })
}

/// The body of `POST /actions/login`: the server, its file, and whether to log in
/// with a code (RFC 8628) instead of the browser.
#[derive(Debug, Deserialize)]
struct Login {
    #[serde(flatten)]
    act: actions::Act,
    #[serde(default)]
    device: bool,
}

/// `POST /actions/login`: [`actions::login`], its lines as `application/x-ndjson`.
async fn login(State(s): State<Shared>, axum::Json(login): axum::Json<Login>) -> Result<Response, StatusCode> {
    let d = s.daemon()?;
    Ok(match actions::login(&d, &login.act, login.device) {
        Ok(lines) => {
            let body = crate::stream::channel_body(lines);
            ([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response()
        }
        Err(e) => e.into_response(),
    })
}

/// The trust page's file (`?file=`).
#[derive(Debug, Deserialize)]
struct TrustQuery {
    file: std::path::PathBuf,
}

async fn trust(
    State(s): State<Shared>,
    Query(q): Query<TrustQuery>,
    headers: HeaderMap,
) -> Result<Html<String>, StatusCode> {
    let d = s.daemon()?;
    let fragment = pages::trust(&view::trust(&d, &q.file));
    let live = format!("/live{}", pages::trust_href(&q.file));
    let csrf = s.gate.csrf(&headers).unwrap_or_default();
    Ok(Html(pages::page("Trust a project file", Nav::Overview, &csrf, maud::html! {}, &live, fragment).into_string()))
}

async fn trust_live(State(s): State<Shared>, Query(q): Query<TrustQuery>) -> Result<Response, StatusCode> {
    let d = s.daemon()?;
    Ok(live::events(move || {
        let (d, file) = (d.clone(), q.file.clone());
        async move { pages::trust(&view::trust(&d, &file)).into_string() }
    }))
}

/// The activity page's filters, as its form sends them.
#[derive(Debug, Default, Deserialize)]
struct Filters {
    server: Option<String>,
    name: Option<String>,
    client: Option<String>,
    errors: Option<String>,
}

impl Filters {
    fn request(self) -> ActivityRequest {
        let given = |v: Option<String>| v.filter(|v| !v.trim().is_empty());
        ActivityRequest {
            server: given(self.server),
            name: given(self.name),
            client: given(self.client),
            errors: self.errors.is_some_and(|v| !v.is_empty()),
            limit: ACTIVITY_ROWS,
            ..ActivityRequest::default()
        }
    }
}

async fn activity(State(s): State<Shared>, request: Request) -> Result<Html<String>, StatusCode> {
    let d = s.daemon()?;
    let query = request.uri().query().unwrap_or_default().to_owned();
    let Query(filters) = Query::<Filters>::try_from_uri(request.uri()).unwrap_or(Query(Filters::default()));
    let req = filters.request();
    let before = pages::activity_before(&req);
    let fragment = pages::activity(&view::activity(&d, &req));
    let live = if query.is_empty() { "/live/activity".to_owned() } else { format!("/live/activity?{query}") };
    let csrf = s.gate.csrf(request.headers()).unwrap_or_default();
    Ok(Html(pages::page("Activity", Nav::Activity, &csrf, before, &live, fragment).into_string()))
}

async fn activity_live(State(s): State<Shared>, Query(filters): Query<Filters>) -> Result<Response, StatusCode> {
    let d = s.daemon()?;
    let req = filters.request();
    Ok(live::events(move || {
        let (d, req) = (d.clone(), req.clone());
        async move { pages::activity(&view::activity(&d, &req)).into_string() }
    }))
}
