//! The served daemon: the control API's router over [`crate::control`]'s handlers
//! (request bodies, error bodies, streaming call answers), merged with the MCP
//! endpoint's routes, and [`run`], which serves it until the daemon is told to stop;
//! and [`run_tcp`], which serves `/mcp` on TCP to strangers, with a cap on
//! connections and a deadline for each request's headers.
//!
//! `run` takes the listener and the shutdown signal as parameters, so tests inject
//! both.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::value::RawValue;
use tokio::net::{TcpListener, UnixListener};

use crate::api::pins::{PinsRequest, ReviewRequest};
use crate::api::{
    Answer, ApiError, AuthRequest, CallRequest, CallerRequest, ErrorKind, ListRequest, PromptRequest, ReadRequest,
    RefreshRequest, RestartRequest, SearchRequest, StopRequest, TypesRequest, UpgradeRequest,
};
use crate::control;
use crate::daemon::{Daemon, Exit};
use crate::mcp::{Endpoint, TcpGuard, tcp_routes};
use crate::repoll::Repoll;
use crate::stream::channel_body;

/// The largest control API request body, in bytes (1 GiB).
pub const MAX_REQUEST_BODY: usize = 1 << 30;

/// How long in-flight requests may take to finish when the daemon stops or upgrades.
pub const DRAIN: Duration = Duration::from_secs(10);

/// How long a TCP client has to send a request's headers, from the moment the
/// connection is accepted or its previous answer ended (so an idle kept-alive
/// connection is closed after this long too): 10 seconds.
pub const TCP_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The most TCP connections open at once for a descriptor limit of `nofile` (the
/// daemon's soft `RLIMIT_NOFILE`): a quarter of it, between 16 and 512, so the control
/// socket, the supervisors and the servers' pipes always have descriptors left.
pub fn tcp_connection_cap(nofile: u64) -> usize {
    usize::try_from((nofile / 4).clamp(16, 512)).unwrap_or(512)
}

/// The control API's routes (`docs/api.md`), with the MCP endpoint's `/mcp` routes of
/// `mcp` merged in.
pub fn router(daemon: Arc<Daemon>, mcp: Arc<Endpoint>) -> Router {
    Router::new()
        .route("/v1/health", get(|State(d): S| async move { Json(control::health(&d)) }))
        .route(
            "/v1/upgrade",
            post(|State(d): S, Body(r): Body<UpgradeRequest>| async move { control::upgrade(&d, &r).await.map(Json) }),
        )
        .route("/v1/status", get(|State(d): S| async move { Json(control::status(&d)) }))
        .route("/v1/ui", post(|State(d): S, Body(r): Body<CallerRequest>| async move { crate::ui::open(&d, &r).map(Json) }))
        .route("/v1/ls", post(|State(d): S, Body(r): Body<CallerRequest>| async move { control::ls(&d, &r).await.map(Json) }))
        .route(
            "/v1/commands",
            post(|State(d): S, Body(r): Body<CallerRequest>| async move { control::commands::commands(&d, &r).map(Json) }),
        )
        .route("/v1/search", post(|State(d): S, Body(r): Body<SearchRequest>| async move { control::search(&d, &r).await.map(Json) }))
        .route(
            "/v1/tools",
            post(|State(d): S, Body(r): Body<ListRequest>| async move { control::tools(&d, &r).await.map(raw_json) }),
        )
        .route(
            "/v1/types",
            post(|State(d): S, Body(r): Body<TypesRequest>| async move { control::types::types(&d, &r).await.map(Json) }),
        )
        .route(
            "/v1/activity",
            post(|State(d): S, Body(r): Body<crate::api::activity::ActivityRequest>| async move {
                // The database is read (or emptied) on the blocking pool, off the runtime.
                let read = tokio::task::spawn_blocking(move || control::activity::activity(&d, &r)).await;
                read.unwrap_or_else(|e| Err(crate::api::ApiError::new(crate::api::ErrorKind::Daemon, e.to_string())))
                    .map(Json)
            }),
        )
        .route("/v1/pins", post(|State(d): S, Body(r): Body<PinsRequest>| async move { control::pins::pins(&d, &r).await.map(Json) }))
        .route(
            "/v1/pins/review",
            post(|State(d): S, Body(r): Body<ReviewRequest>| async move { control::pins::review(&d, &r).await.map(Json) }),
        )
        .route(
            "/v1/resources",
            post(|State(d): S, Body(r): Body<ListRequest>| async move { control::resources(&d, &r).await.map(raw_json) }),
        )
        .route("/v1/read", post(|State(d): S, Body(r): Body<ReadRequest>| async move { control::read(&d, &r).await.map(raw_json) }))
        .route(
            "/v1/prompts",
            post(|State(d): S, Body(r): Body<ListRequest>| async move { control::prompts(&d, &r).await.map(raw_json) }),
        )
        .route(
            "/v1/prompt",
            post(|State(d): S, Body(r): Body<PromptRequest>| async move { control::prompt(&d, &r).await.map(raw_json) }),
        )
        .route(
            "/v1/call",
            post(|State(d): S, Body(r): Body<CallRequest>| async move {
                if r.stream {
                    Ok(crate::streamed_call::call_stream(d, r))
                } else {
                    control::call(&d, &r, None, None, None).await.map(raw_json)
                }
            }),
        )
        .route(
            "/v1/call/answer",
            post(|State(d): S, body: Result<Json<Answer>, JsonRejection>| async move {
                let Json(answer) =
                    body.map_err(|e| ApiError::new(ErrorKind::Usage, format!("bad answer body: {}", e.body_text())))?;
                control::answer(&d, &answer).map(Json)
            }),
        )
        .route(
            "/v1/restart",
            post(|State(d): S, Body(r): Body<RestartRequest>| async move { control::restart(&d, &r).await.map(Json) }),
        )
        .route(
            "/v1/refresh",
            post(|State(d): S, Body(r): Body<RefreshRequest>| async move { control::refresh(&d, &r).await.map(Json) }),
        )
        .route(
            "/v1/auth/login",
            post(|State(d): S, Body(r): Body<AuthRequest>| async move {
                (
                    [(axum::http::header::CONTENT_TYPE, "application/x-ndjson")],
                    channel_body(control::login::login_lines(d, r)),
                )
            }),
        )
        .route(
            "/v1/auth/status",
            post(|State(d): S, Body(r): Body<AuthRequest>| async move { control::logins::status(&d, &r).map(Json) }),
        )
        .route(
            "/v1/auth/logout",
            post(|State(d): S, Body(r): Body<AuthRequest>| async move { control::logins::logout(&d, &r).await.map(Json) }),
        )
        .route("/v1/code/runtime", get(|| async { Json(crate::code_runtime::answer()) }))
        .route("/v1/stop", post(|State(d): S, Body(r): Body<StopRequest>| async move { Json(control::stop(&d, &r).await) }))
        .merge(crate::mcp::routes().with_state::<Arc<Daemon>>(mcp.clone()))
        // `mcpx serve`'s upgraded link: on the control socket only.
        .merge(crate::mcp::framed::routes().with_state::<Arc<Daemon>>(mcp))
        // Tool arguments may be as large as a server accepts (`maxMessageBytes`, 64 MiB
        // by default); the HTTP layer's own 2 MB default would refuse them.
        .layer(axum::extract::DefaultBodyLimit::max(MAX_REQUEST_BODY))
        .with_state(daemon)
}

/// Serves the control API and `mcp`'s routes on `listener`, over kept-alive
/// connections, until `shutdown` completes or a `stop` or `upgrade` request arrives;
/// then stops accepting, drains every connection (`serve_control`: what was read is
/// answered, idle ones close; up to [`DRAIN`]; the MCP sessions' open-ended streams end
/// as the exit is requested), stops the daemon's own children and detaches
/// from the supervisors (which keep their servers for the next daemon). Returns how
/// the daemon was asked to exit ([`Exit::Stop`] after `shutdown`).
///
/// Errors: none today; the `io::Result` leaves room for listener failures, which are
/// logged and retried.
pub async fn run(
    listener: UnixListener,
    daemon: Arc<Daemon>,
    mcp: Arc<Endpoint>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<Exit> {
    // Connections are kept alive; the drain (`serve_control`) answers what each has read
    // with `Connection: close` and closes the idle ones, never one still to be read.
    let app = router(daemon.clone(), mcp.clone());
    let (draining_tx, draining) = tokio::sync::watch::channel(false);
    let mut conns = tokio::task::JoinSet::new();
    let stop = async {
        tokio::select! {
            () = shutdown => {}
            () = daemon.exit_requested() => {}
        }
    };
    tokio::pin!(stop);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                // `Repoll`: the connection wakes itself when its handler reads the
                // body, and that wake is only waste.
                Ok((stream, _)) => {
                    conns.spawn(Repoll::new(serve_control(stream, app.clone(), draining.clone())));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            () = &mut stop => break,
        }
    }
    let _ = draining_tx.send(true);
    // Not accepting any more; clients that connect now wait in the backlog (an upgrade
    // keeps the socket open) or are refused (a stop closes it).
    drop(listener);
    let drained = tokio::time::timeout(DRAIN, async {
        while conns.join_next().await.is_some() {}
        // `mcpx serve`'s links finish what they read, then close.
        mcp.links.drained().await;
    })
    .await;
    if drained.is_err() {
        tracing::warn!("requests still running after {}s were cut off", DRAIN.as_secs());
        conns.abort_all();
    }
    daemon.pool.stop_all(false).await;
    Ok(daemon.exit())
}

/// Serves one control connection, kept alive, until it closes; once `draining` turns
/// true, drains it (`docs/api.md`, "Keep-alive and the drain"): a request it has read
/// is answered, with `Connection: close`, and then it closes; an idle one closes at
/// once, so a client that sent its next request on it finds it closed unread and sends
/// it again on a new connection. A connection that has not had its first request yet
/// was accepted before the stop: it is served that one first.
async fn serve_control(stream: tokio::net::UnixStream, app: Router, mut draining: tokio::sync::watch::Receiver<bool>) {
    // Whether a request has come on it (set at each, read once by the drain).
    let (requested_tx, mut requested) = tokio::sync::watch::channel(false);
    let inner = hyper_util::service::TowerToHyperService::new(app);
    let closing = draining.clone();
    let service = hyper::service::service_fn(move |req| {
        requested_tx.send_if_modified(|r| !std::mem::replace(r, true));
        let answer = hyper::service::Service::call(&inner, req);
        let closing = closing.clone();
        async move {
            let mut res = answer.await?;
            // An answer that goes out during the drain says the connection ends with it
            // (an upgrade's 101 is left as it is: that connection leaves HTTP).
            if *closing.borrow() && res.status() != axum::http::StatusCode::SWITCHING_PROTOCOLS {
                let close = axum::http::HeaderValue::from_static("close");
                res.headers_mut().insert(axum::http::header::CONNECTION, close);
            }
            Ok::<_, std::convert::Infallible>(res)
        }
    });
    let io = hyper_util::rt::TokioIo::new(stream);
    let conn = hyper::server::conn::http1::Builder::new().serve_connection(io, service).with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = draining.wait_for(|d| *d) => {}
    }
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = requested.wait_for(|r| *r) => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// Serves `/mcp` on TCP on `listener` behind `guard` ([`tcp_routes`]), forever: at
/// most `max_connections` at once (past that, new connections wait in the listen
/// backlog, using no descriptor of the daemon), each closed when a request's headers
/// take longer than [`TCP_HEADER_TIMEOUT`]. Keep-alive is on, and `TCP_NODELAY` is
/// set: without it, the last write of an SSE answer waits for the client's delayed
/// ACK (about 40 ms per call on a kept-alive connection).
pub async fn run_tcp(listener: TcpListener, mcp: Arc<Endpoint>, guard: TcpGuard, max_connections: usize) {
    let app = tcp_routes(guard).with_state(mcp);
    let slots = Arc::new(tokio::sync::Semaphore::new(max_connections));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else { return };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "accepting a TCP connection to /mcp failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::warn!(error = %e, "cannot set TCP_NODELAY on a /mcp connection");
        }
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        // No `Repoll` here: on a kept-alive connection the yield that a self-wake costs
        // lets the next request arrive before the connection is polled again, and
        // 16 connections served more calls per second without it.
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(TCP_HEADER_TIMEOUT)
                .serve_connection(io, service)
                .await;
            drop(slot);
        });
    }
}

type S = State<Arc<Daemon>>;

/// A JSON body that is already serialized (kept byte-faithful).
fn raw_json(raw: Box<RawValue>) -> Response {
    let body: Box<str> = raw.into();
    ([(axum::http::header::CONTENT_TYPE, "application/json")], String::from(body)).into_response()
}

/// A route's JSON request body (its type is the route's: [`crate::api`]); a
/// malformed one is a `usage` error with the API's error body, like every other error.
struct Body<T>(T);

impl<St: Send + Sync, T: serde::de::DeserializeOwned> axum::extract::FromRequest<St> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &St) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(r)) => Ok(Body(r)),
            Err(e) => Err(ApiError::new(ErrorKind::Usage, format!("bad request body: {}", e.body_text()))),
        }
    }
}
