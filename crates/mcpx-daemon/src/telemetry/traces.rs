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
//! Spans are queued ([`QUEUE`]) and exported by a task of their own in batches: a dead
//! or slow collector costs a call nothing; what the full queue or a failed export
//! loses is counted ([`Traces::dropped`]) and shows in `status`.

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
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::activity::Entry;
use crate::sync::lock;
use mcpx_proto::jsonrpc::Message;

/// Spans waiting for the exporter, at most; more are dropped (and counted).
pub const QUEUE: usize = 16384;

/// Spans sent in one export, at most.
const BATCH: usize = 2048;

/// How long the exporter rests after a failed export, spans dropped meanwhile.
const REST: Duration = Duration::from_secs(1);

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
    queue: tokio::sync::mpsc::Sender<SpanData>,
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
    /// own context there instead (only `_meta` is rewritten, spliced into its text).
    pub fn begin(&self, request: Message) -> (Started, Message) {
        let id = request.id().map(str::to_owned);
        let mut started = None;
        let carrying = meta_spliced(&request, |meta| {
            let span = self.started(parent_of(meta), id.clone());
            for (key, value) in carried(&span.context) {
                meta.insert(key.to_owned(), Value::String(value));
            }
            started = Some(span);
            true
        });
        let started = started.unwrap_or_else(|| self.started(None, id));
        (started, carrying.unwrap_or(request))
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
        let mut data = span_data(span, entry, transport, self.scope.clone());
        if let Some(protocol) = protocol {
            data.attributes.push(KeyValue::new("mcp.protocol.version", protocol.to_owned()));
        }
        if self.queue.try_send(data).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// `request` with the trace context of its transport (the `traceparent` and
/// `tracestate` HTTP headers of `/mcp`) in `params._meta`, unless it carries its own
/// there: MCP's context is independent of its transport's, and wins (semantic
/// conventions for MCP, "Context propagation").
pub fn with_transport_parent(request: Message, traceparent: &str, tracestate: Option<&str>) -> Message {
    let spliced = meta_spliced(&request, |meta| {
        if meta.contains_key("traceparent") {
            return false;
        }
        meta.insert("traceparent".into(), Value::String(traceparent.to_owned()));
        if let Some(state) = tracestate {
            meta.insert("tracestate".into(), Value::String(state.to_owned()));
        }
        true
    });
    spliced.unwrap_or(request)
}

/// `request` with its `params._meta` (an empty one when it has none) as `edit` leaves
/// it, when `edit` says to change it; the rest of its text as it was, so a large
/// argument is neither parsed into a tree nor written again. `None` (the request as it
/// is) when `params` or `_meta` is not an object, or a key is given twice.
fn meta_spliced(request: &Message, edit: impl FnOnce(&mut Map<String, Value>) -> bool) -> Option<Message> {
    #[derive(Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        params: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    struct Params<'a> {
        #[serde(borrow, rename = "_meta")]
        meta: Option<&'a RawValue>,
    }
    let text = request.as_str();
    let params = serde_json::from_str::<Envelope<'_>>(text).ok()?.params?.get();
    if !params.starts_with('{') {
        return None;
    }
    let meta = serde_json::from_str::<Params<'_>>(params).ok()?.meta.map(RawValue::get);
    // Where a borrowed part of `text` starts in it.
    let at = |part: &str| part.as_ptr() as usize - text.as_ptr() as usize;
    let (range, mut map) = match meta {
        Some(meta) => (at(meta)..at(meta) + meta.len(), serde_json::from_str(meta).ok()?),
        None => (at(params) + 1..at(params) + 1, Map::new()),
    };
    if !edit(&mut map) {
        return None;
    }
    let mut new = serde_json::to_string(&map).ok()?;
    if meta.is_none() {
        let empty = params[1..].trim_start().starts_with('}');
        new = format!("\"_meta\":{new}{}", if empty { "" } else { "," });
    }
    let mut spliced = String::with_capacity(text.len() + new.len());
    spliced.push_str(&text[..range.start]);
    spliced.push_str(&new);
    spliced.push_str(&text[range.end..]);
    Message::parse(spliced).ok()
}

/// The remote parent a `_meta` carries (`traceparent`, `tracestate`), when valid.
fn parent_of(meta: &Map<String, Value>) -> Option<SpanContext> {
    let fields: HashMap<String, String> = ["traceparent", "tracestate"]
        .into_iter()
        .filter_map(|k| Some((k.to_owned(), meta.get(k)?.as_str()?.to_owned())))
        .collect();
    fields.contains_key("traceparent").then_some(())?;
    let context = TraceContextPropagator::new().extract(&fields);
    let parent = context.span().span_context().clone();
    parent.is_valid().then_some(parent)
}

/// The `traceparent` (and `tracestate`, when it has one) that carry `context` (W3C
/// Trace Context, "traceparent Header": version 00, trace id, parent id, flags, in
/// lowercase hex).
fn carried(context: &SpanContext) -> Vec<(&'static str, String)> {
    let traceparent = format!(
        "00-{:032x}-{:016x}-{:02x}",
        u128::from_be_bytes(context.trace_id().to_bytes()),
        u64::from_be_bytes(context.span_id().to_bytes()),
        context.trace_flags().to_u8()
    );
    let state = context.trace_state().header();
    let mut fields = vec![("traceparent", traceparent)];
    if !state.is_empty() {
        fields.push(("tracestate", state));
    }
    fields
}

/// The span of `entry`, begun as `span`.
fn span_data(span: Started, entry: &Entry, transport: &'static str, scope: InstrumentationScope) -> SpanData {
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
        KeyValue::new("mcpx.server", entry.server.clone()),
        KeyValue::new("mcpx.path", entry.path.clone()),
        KeyValue::new("mcpx.client", entry.client.clone()),
    ]);
    if let Some(key) = &entry.key {
        attributes.push(KeyValue::new("mcpx.pool.key", key.clone()));
    }
    if let Some(pid) = entry.pid {
        attributes.push(KeyValue::new("mcpx.instance.pid", i64::from(pid)));
    }
    let status = match &error_type {
        Some(_) => Status::Error { description: entry.error.clone().unwrap_or_default().into() },
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
    dropped: Arc<AtomicU64>,
    exported: Arc<AtomicU64>,
    last_error: Arc<Mutex<Option<String>>>,
    resting: Arc<AtomicBool>,
}

impl Exporting {
    /// Exports what comes, a batch at a time, until the daemon drops the queue.
    async fn run(self, mut spans: tokio::sync::mpsc::Receiver<SpanData>) {
        let mut batch = Vec::with_capacity(BATCH);
        while spans.recv_many(&mut batch, BATCH).await > 0 {
            if batch.len() < BATCH {
                tokio::time::sleep(GATHER).await;
                while batch.len() < BATCH {
                    let Ok(span) = spans.try_recv() else { break };
                    batch.push(span);
                }
            }
            let n = batch.len() as u64;
            match self.exporter.export(std::mem::take(&mut batch)).await {
                Ok(()) => {
                    self.exported.fetch_add(n, Ordering::Relaxed);
                    *lock(&self.last_error) = None;
                }
                Err(e) => {
                    self.dropped.fetch_add(n, Ordering::Relaxed);
                    let said = format!("exporting {n} spans failed: {e}");
                    tracing::debug!("{said}");
                    *lock(&self.last_error) = Some(said);
                    // A dead collector costs one attempt a second: meanwhile spans are
                    // dropped where they end (counted), and what was queued goes too.
                    self.resting.store(true, Ordering::Relaxed);
                    tokio::time::sleep(REST).await;
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

    fn spliced(text: &str) -> Option<String> {
        let request = Message::parse(text.to_owned()).unwrap();
        meta_spliced(&request, |meta| {
            meta.insert("traceparent".into(), Value::String("00-t-s-01".into()));
            true
        })
        .map(Message::into_string)
    }

    #[test]
    fn only_meta_is_rewritten_and_the_rest_of_the_request_stays_as_sent() {
        let tp = r#""traceparent":"00-t-s-01""#;
        let cases = [
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a": [1, 2.50]}}}"#,
                format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"_meta":{{{tp}}},"name":"x","arguments":{{"a": [1, 2.50]}}}}}}"#
                ),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params": { }}"#,
                format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params": {{"_meta":{{{tp}}} }}}}"#),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":7,"traceparent":"old"}}}"#,
                format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"x","_meta":{{"progressToken":7,{tp}}}}}}}"#
                ),
            ),
        ];
        for (request, expected) in cases {
            assert_eq!(spliced(request).as_deref(), Some(expected.as_str()), "{request}");
            let parsed: Value = serde_json::from_str(&expected).unwrap();
            assert_eq!(parsed["params"]["_meta"]["traceparent"], "00-t-s-01");
        }
        // What cannot carry a `_meta` is left as it is.
        for request in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}"#,
        ] {
            assert_eq!(spliced(request), None, "{request}");
        }
    }

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
}
