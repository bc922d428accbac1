//! OpenTelemetry traces (`docs/telemetry.md`): one span per recorded request, as the
//! semantic conventions for MCP name and describe it (OpenTelemetry semantic
//! conventions, "Model Context Protocol", Spans, "Client": kind `CLIENT`, named
//! `{mcp.method.name} {target}`), exported over OTLP/HTTP with protobuf bodies.
//!
//! A request's W3C `traceparent` (in `params._meta`, or in the HTTP headers of `/mcp`,
//! which the endpoint copies there) is the span's parent; the request goes on to the
//! server with the span's own context in `params._meta` ("Context propagation": keys
//! unprefixed, as SEP-414 says), so the server's span is the span's child.
//!
//! Spans are queued ([`QUEUE`]) as the few fields they are made of, and built and
//! exported by a thread of their own in batches: a dead or slow collector costs a
//! call nothing. After a failed export the exporter rests, one second and then twice
//! as long after each further failure, up to half a minute; meanwhile a span that
//! ends is counted dropped where it ends and never built. What the full queue or a
//! failed export loses is counted ([`Traces::dropped`]) and shows in `status`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceState};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SpanData, SpanExporter};
use serde::Deserialize;

use crate::activity::Entry;
use crate::sync::lock;
use mcpx_proto::jsonrpc::Message;

/// Spans waiting for the exporter, at most; more are dropped (and counted).
pub const QUEUE: usize = 16384;

/// Spans sent in one export, at most.
const BATCH: usize = 2048;

/// How long the exporter rests after a failed export, spans dropped meanwhile; twice
/// as long after each further failure, up to [`MAX_REST`].
const REST: Duration = Duration::from_secs(1);

/// The longest rest: a collector that comes back is used again within this time.
const MAX_REST: Duration = Duration::from_secs(30);

/// How long the exporter gathers spans before it sends them.
const GATHER: Duration = Duration::from_millis(500);

/// Where and as what spans are exported: the `otel` block and the `OTEL_*` variables
/// resolved ([`super::Telemetry::open`]).
#[derive(Debug, Clone)]
pub struct Export {
    /// The OTLP/HTTP traces URL (`…/v1/traces`).
    pub url: String,
    /// Sent with every export.
    pub headers: HashMap<String, String>,
    /// How long one export may take (`OTEL_EXPORTER_OTLP_TIMEOUT`, 10 s by default).
    pub timeout: Duration,
    /// The spans' `service.name`.
    pub service_name: String,
}

/// A span begun: its context, its parent, and when it began.
#[derive(Debug, Clone)]
pub struct Started {
    context: SpanContext,
    parent: Option<SpanContext>,
    start: SystemTime,
    request_id: Option<String>,
}

/// The export of spans: a queue to the exporter task, and what it lost.
#[derive(Debug)]
pub struct Traces {
    queue: tokio::sync::mpsc::Sender<Ended>,
    scope: InstrumentationScope,
    ids: RandomIdGenerator,
    /// Where spans go.
    pub export: Export,
    /// Spans lost: dropped by the full queue, or in an export that failed.
    pub dropped: Arc<AtomicU64>,
    /// Spans the collector took.
    pub exported: Arc<AtomicU64>,
    /// Why the last export failed, if it did.
    pub last_error: Arc<Mutex<Option<String>>>,
    /// Set while the exporter rests after a failed export: spans ended meanwhile are
    /// counted dropped where they end, never built.
    resting: Arc<AtomicBool>,
}

impl Traces {
    /// The export to `export`, on a thread of its own (with a runtime of its own: a
    /// daemon busy with calls does not starve it, nor it the calls).
    ///
    /// Errors: the exporter cannot be built (a URL or header it does not take), or its
    /// thread cannot be started.
    pub fn start(export: Export) -> Result<Traces, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("the span exporter's runtime: {e}"))?;
        // The exporter's HTTP client is made in the runtime it runs in.
        let mut exporter = {
            let _entered = runtime.enter();
            opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(export.url.clone())
                .with_timeout(export.timeout)
                .with_headers(export.headers.clone())
                .build()
                .map_err(|e| format!("the OTLP exporter to {}: {e}", export.url))?
        };
        exporter.set_resource(
            &opentelemetry_sdk::Resource::builder_empty().with_service_name(export.service_name.clone()).build(),
        );
        let (queue, spans) = tokio::sync::mpsc::channel(QUEUE);
        let traces = Traces {
            queue,
            scope: InstrumentationScope::builder("mcpx").with_version(env!("CARGO_PKG_VERSION")).build(),
            ids: RandomIdGenerator::default(),
            export,
            dropped: Arc::default(),
            exported: Arc::default(),
            last_error: Arc::default(),
            resting: Arc::default(),
        };
        let exporting = Exporting {
            exporter,
            scope: traces.scope.clone(),
            dropped: traces.dropped.clone(),
            exported: traces.exported.clone(),
            last_error: traces.last_error.clone(),
            resting: traces.resting.clone(),
        };
        std::thread::Builder::new()
            .name("mcpx-otel".into())
            .spawn(move || runtime.block_on(exporting.run(spans)))
            .map_err(|e| format!("the span exporter's thread: {e}"))?;
        Ok(traces)
    }

    /// Spans waiting for the exporter.
    pub fn queued(&self) -> usize {
        self.queue.max_capacity() - self.queue.capacity()
    }

    /// Begins the span of `request`: its parent is the `traceparent` (and `tracestate`)
    /// of its `params._meta`, when valid; the request is given back carrying the span's
    /// own context there instead (only `_meta` is rewritten).
    pub fn begin(&self, request: Message) -> (Started, Message) {
        let parent = request.meta().and_then(|meta| parent_of(&Carried::of(meta)?));
        let span = self.started(parent, request.id().map(str::to_owned));
        let (traceparent, tracestate) = carried(&span.context);
        let mut members = vec![("traceparent", traceparent.as_str())];
        members.extend(tracestate.as_deref().map(|state| ("tracestate", state)));
        let request = request.with_meta(&members);
        (span, request)
    }

    /// Begins a span under `parent` (a server's request made during a call).
    pub fn child(&self, parent: &Started, start: SystemTime) -> Started {
        Started { start, ..self.started(Some(parent.context.clone()), None) }
    }

    /// Begins a span without a request to carry it (one refused before it was sent).
    pub fn unsent(&self) -> Started {
        self.started(None, None)
    }

    /// A span under `parent` (a new trace without one), begun now.
    fn started(&self, parent: Option<SpanContext>, request_id: Option<String>) -> Started {
        let trace_id = parent.as_ref().map_or_else(|| self.ids.new_trace_id(), SpanContext::trace_id);
        // The parent's sampling decision holds; a new trace is sampled.
        let flags = parent.as_ref().map_or(TraceFlags::SAMPLED, SpanContext::trace_flags);
        let state = parent.as_ref().map_or_else(TraceState::default, |p| p.trace_state().clone());
        let context = SpanContext::new(trace_id, self.ids.new_span_id(), flags, false, state);
        Started { context, parent, start: SystemTime::now(), request_id }
    }

    /// Ends `span` as `entry` says (the request it recorded) and queues it, unless its
    /// trace is not sampled; `transport` is how the server is reached (`pipe` for a
    /// stdio server, `tcp` for a remote one), `protocol` the MCP revision of the
    /// caller's session, when it has one.
    pub fn end(&self, span: Started, entry: &Entry, transport: &'static str, protocol: Option<&str>) {
        if !span.context.is_sampled() {
            return;
        }
        if self.resting.load(Ordering::Relaxed) || self.queue.capacity() == 0 {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // Only what the span is made of is copied here; the exporter builds it.
        let ended = Ended {
            span,
            entry: Entry {
                duration_us: entry.duration_us,
                path: entry.path.clone(),
                client: entry.client.clone(),
                server: entry.server.clone(),
                pid: entry.pid,
                key: entry.key.clone(),
                method: entry.method.clone(),
                name: entry.name.clone(),
                outcome: entry.outcome.clone(),
                code: entry.code,
                error: entry.error.clone(),
                ..Entry::default()
            },
            transport,
            protocol: protocol.map(str::to_owned),
        };
        if self.queue.try_send(ended).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A span ended and queued for the exporter, which builds it ([`span_data`]).
#[derive(Debug)]
struct Ended {
    span: Started,
    /// The fields of the request's activity entry the span is made of.
    entry: Entry,
    transport: &'static str,
    protocol: Option<String>,
}

/// `request` with the trace context of its transport (the `traceparent` and
/// `tracestate` HTTP headers of `/mcp`) in `params._meta`, unless it carries its own
/// there: MCP's context is independent of its transport's, and wins (semantic
/// conventions for MCP, "Context propagation").
pub fn with_transport_parent(request: Message, traceparent: &str, tracestate: Option<&str>) -> Message {
    if request.meta().and_then(Carried::of).is_some_and(|c| c.traceparent.is_some()) {
        return request;
    }
    let json = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let (traceparent, tracestate) = (json(traceparent), tracestate.map(json));
    let mut members = vec![("traceparent", traceparent.as_str())];
    members.extend(tracestate.as_deref().map(|state| ("tracestate", state)));
    request.with_meta(&members)
}

/// The W3C trace context members of a `_meta` (W3C Trace Context, "traceparent
/// Header" and "tracestate Header", carried as strings).
#[derive(Deserialize)]
struct Carried<'a> {
    #[serde(borrow, default)]
    traceparent: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tracestate: Option<Cow<'a, str>>,
}

impl<'a> Carried<'a> {
    /// Those of the `_meta` text `meta`; `None` when it is not an object or they are
    /// not strings.
    fn of(meta: &'a str) -> Option<Carried<'a>> {
        serde_json::from_str(meta).ok()
    }
}

/// The remote parent `carried` names, when valid.
fn parent_of(carried: &Carried<'_>) -> Option<SpanContext> {
    let traceparent = carried.traceparent.as_deref()?;
    let mut fields = HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
    if let Some(state) = carried.tracestate.as_deref() {
        fields.insert("tracestate".to_owned(), state.to_owned());
    }
    let context = TraceContextPropagator::new().extract(&fields);
    let parent = context.span().span_context().clone();
    parent.is_valid().then_some(parent)
}

/// The `traceparent` (and `tracestate`, when it has one) that carry `context`, as
/// JSON strings (W3C Trace Context, "traceparent Header": version 00, trace id,
/// parent id, flags, in lowercase hex).
fn carried(context: &SpanContext) -> (String, Option<String>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut traceparent = String::with_capacity(57);
    traceparent.push_str("\"00-");
    let mut hex = |bytes: &[u8], then: &str| {
        for b in bytes {
            traceparent.push(char::from(HEX[usize::from(b >> 4)]));
            traceparent.push(char::from(HEX[usize::from(b & 15)]));
        }
        traceparent.push_str(then);
    };
    hex(&context.trace_id().to_bytes(), "-");
    hex(&context.span_id().to_bytes(), "-");
    hex(&[context.trace_flags().to_u8()], "\"");
    let state = context.trace_state().header();
    (traceparent, (!state.is_empty()).then(|| serde_json::to_string(&state).unwrap_or_default()))
}

/// The span `ended` is, from `scope`.
fn span_data(ended: Ended, scope: InstrumentationScope) -> SpanData {
    let Ended { span, entry, transport, protocol } = ended;
    let method = entry.method.as_str();
    let mut attributes = vec![KeyValue::new("mcp.method.name", entry.method.clone())];
    let name = match method {
        "tools/call" => {
            attributes.push(KeyValue::new("gen_ai.tool.name", entry.name.clone()));
            attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
            format!("{method} {}", entry.name)
        }
        "prompts/get" => {
            attributes.push(KeyValue::new("gen_ai.prompt.name", entry.name.clone()));
            format!("{method} {}", entry.name)
        }
        "resources/read" => {
            attributes.push(KeyValue::new("mcp.resource.uri", entry.name.clone()));
            method.to_owned()
        }
        _ => method.to_owned(),
    };
    if let Some(id) = span.request_id {
        // The id as the server saw it (JSON text: a string keeps its quotes off).
        attributes.push(KeyValue::new("jsonrpc.request.id", id.trim_matches('"').to_owned()));
    }
    attributes.push(KeyValue::new("network.transport", transport));
    if let Some(protocol) = protocol {
        attributes.push(KeyValue::new("mcp.protocol.version", protocol));
    }
    let error_type = match (entry.outcome.as_str(), entry.code) {
        ("ok", _) | ("accept" | "decline" | "cancel", _) => None,
        ("rpc-error", Some(code)) => {
            attributes.push(KeyValue::new("rpc.response.status_code", code.to_string()));
            Some(code.to_string())
        }
        ("is-error", _) => Some("tool_error".to_owned()),
        (outcome, _) => Some(outcome.to_owned()),
    };
    attributes.extend([
        KeyValue::new("mcpx.server", entry.server),
        KeyValue::new("mcpx.path", entry.path),
        KeyValue::new("mcpx.client", entry.client),
    ]);
    if let Some(key) = entry.key {
        attributes.push(KeyValue::new("mcpx.pool.key", key));
    }
    if let Some(pid) = entry.pid {
        attributes.push(KeyValue::new("mcpx.instance.pid", i64::from(pid)));
    }
    let status = match &error_type {
        Some(_) => Status::Error { description: entry.error.unwrap_or_default().into() },
        None => Status::Unset,
    };
    if let Some(error_type) = error_type {
        attributes.push(KeyValue::new("error.type", error_type));
    }
    let (parent_span_id, parent_span_is_remote) = match &span.parent {
        Some(parent) => (parent.span_id(), parent.is_remote()),
        None => (SpanId::INVALID, false),
    };
    SpanData {
        span_context: span.context,
        parent_span_id,
        parent_span_is_remote,
        span_kind: SpanKind::Client,
        name: name.into(),
        start_time: span.start,
        end_time: span.start + Duration::from_micros(entry.duration_us),
        attributes,
        dropped_attributes_count: 0,
        events: Default::default(),
        links: Default::default(),
        status,
        instrumentation_scope: scope,
    }
}

/// The exporter task's side.
struct Exporting {
    exporter: opentelemetry_otlp::SpanExporter,
    scope: InstrumentationScope,
    dropped: Arc<AtomicU64>,
    exported: Arc<AtomicU64>,
    last_error: Arc<Mutex<Option<String>>>,
    resting: Arc<AtomicBool>,
}

impl Exporting {
    /// Exports what comes, a batch at a time, until the daemon drops the queue.
    async fn run(self, mut spans: tokio::sync::mpsc::Receiver<Ended>) {
        let mut batch = Vec::with_capacity(BATCH);
        let mut rest = REST;
        while spans.recv_many(&mut batch, BATCH).await > 0 {
            if batch.len() < BATCH {
                tokio::time::sleep(GATHER).await;
                while batch.len() < BATCH {
                    let Ok(span) = spans.try_recv() else { break };
                    batch.push(span);
                }
            }
            let n = batch.len() as u64;
            let built = batch.drain(..).map(|ended| span_data(ended, self.scope.clone())).collect();
            match self.exporter.export(built).await {
                Ok(()) => {
                    self.exported.fetch_add(n, Ordering::Relaxed);
                    *lock(&self.last_error) = None;
                    rest = REST;
                }
                Err(e) => {
                    self.dropped.fetch_add(n, Ordering::Relaxed);
                    let said = format!("exporting {n} spans failed: {e}");
                    tracing::debug!("{said}");
                    *lock(&self.last_error) = Some(said);
                    // While the exporter rests, spans are dropped where they end
                    // (counted), and what was queued goes too.
                    self.resting.store(true, Ordering::Relaxed);
                    tokio::time::sleep(rest).await;
                    rest = (rest * 2).min(MAX_REST);
                    let mut queued = 0;
                    while spans.try_recv().is_ok() {
                        queued += 1;
                    }
                    self.dropped.fetch_add(queued, Ordering::Relaxed);
                    self.resting.store(false, Ordering::Relaxed);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn a_span_continues_its_callers_trace_and_carries_its_own_context() {
        let traces = Traces {
            queue: tokio::sync::mpsc::channel(1).0,
            scope: InstrumentationScope::builder("t").build(),
            ids: RandomIdGenerator::default(),
            export: Export {
                url: String::new(),
                headers: HashMap::new(),
                timeout: Duration::ZERO,
                service_name: "t".into(),
            },
            dropped: Arc::default(),
            exported: Arc::default(),
            last_error: Arc::default(),
            resting: Arc::default(),
        };
        let request = r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00","tracestate":"k=v"}}}"#;
        let (span, sent) = traces.begin(Message::parse(request.to_owned()).unwrap());
        let parent = span.parent.as_ref().unwrap();
        assert_eq!(
            format!("{:032x}", u128::from_be_bytes(parent.trace_id().to_bytes())),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert!(!span.context.is_sampled(), "the caller's decision holds");
        let sent: Value = serde_json::from_str(sent.as_str()).unwrap();
        let carried = sent["params"]["_meta"]["traceparent"].as_str().unwrap();
        let own = format!("{:016x}", u64::from_be_bytes(span.context.span_id().to_bytes()));
        assert_eq!(carried, format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{own}-00"));
        assert_eq!(sent["params"]["_meta"]["tracestate"], "k=v");
        // A malformed one starts a trace of its own.
        let bad = request.replace("00-4bf9", "zz-4bf9");
        let (span, _) = traces.begin(Message::parse(bad).unwrap());
        assert!(span.parent.is_none() && span.context.is_sampled());
    }

    #[test]
    fn the_transports_context_goes_into_meta_unless_the_request_carries_its_own() {
        let (tp, other) = ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-1-2-01");
        let bare = Message::parse(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#).unwrap();
        let sent: Value = serde_json::from_str(with_transport_parent(bare, tp, Some("k=v")).as_str()).unwrap();
        assert_eq!(sent["params"]["_meta"], serde_json::json!({"traceparent": tp, "tracestate": "k=v"}));
        let own = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"_meta":{{"traceparent":"{tp}"}}}}}}"#
        );
        let sent = with_transport_parent(Message::parse(own.clone()).unwrap(), other, None);
        assert_eq!(sent.as_str(), own);
    }
}
