//! The one way to an instance: [`Daemon::lease`] (for a caller) and
//! [`Daemon::lease_as`] (under a pool key the daemon chose: adoption, `min`, a
//! background start, a restart), both giving a [`Lease`] whose end releases what its
//! scope says; and [`Daemon::ask`], one request through a lease: the path of the
//! control API's `call`, `read` and `prompt` and of the MCP endpoint's forwarded
//! requests, which differ only in how they render a [`Failure`].

use std::sync::Arc;
use std::time::Duration;

use mcpx_proto::Message;

use crate::activity::Origin;
use crate::api::Caller;
use crate::config::ServerEntry;
use crate::daemon::Daemon;
use crate::instance::{CallContext, CallError, Instance};
use crate::pool::{Lease, Target, Wait};
use crate::scope::PoolKey;
use crate::target::Refusal;

/// Why a request got no answer from its server.
#[derive(Debug)]
pub enum Failure<E> {
    /// The entry cannot be started as it is configured (untrusted, a variable or
    /// secret unset, a malformed URL): [`crate::target::Targets::target`]'s refusal.
    Refused(Refusal),
    /// The caller's check refused the request.
    Checked(E),
    /// The server could not be started or reached, or the request failed
    /// (timeout, the server exited, a protocol error).
    Server(CallError),
}

/// What a check's refusal says, in one line, for the activity record.
pub trait Said {
    /// The refusal's message.
    fn said(&self) -> String;
}

impl Said for crate::api::ApiError {
    fn said(&self) -> String {
        self.message.clone()
    }
}

impl Said for Box<Message> {
    fn said(&self) -> String {
        mcpx_proto::response_result(self).err().map(|e| e.message).unwrap_or_default()
    }
}

/// A check of a request against its target, and its instance once leased.
pub type Check<'a, E> = dyn Fn(&Target, Option<&Instance>) -> Result<(), E> + Send + Sync + 'a;

/// One request for [`Daemon::ask`].
pub struct Ask<'a, E> {
    /// The server's entry, from the caller's configuration.
    pub entry: &'a ServerEntry,
    /// Whose pool the instance comes from.
    pub caller: &'a Caller,
    /// The request; its id is replaced by an upstream one on the way.
    pub request: Message,
    /// How long to wait for an instance and then for the answer; `None` waits on.
    pub timeout: Option<Duration>,
    /// Where the request's notifications and server requests go.
    pub context: Arc<CallContext>,
    /// Runs before the lease (without an instance) and again after it (with the
    /// instance), since a start lists the server; an error ends the request there.
    pub check: &'a Check<'a, E>,
    /// Told what the request waits on: a start, a free instance, then the server
    /// ([`Wait::Calling`]).
    pub report: &'a (dyn Fn(Wait) + Send + Sync),
    /// The answer as the MCP endpoint relays it ([`Instance::forward`]: the caller's
    /// id put back, a modern server's result made plain), else as the server sent it.
    pub forward: bool,
    /// Who sent it and how, for the activity record.
    pub origin: Origin,
}

/// The methods a caller's request is recorded for ([`crate::activity`]).
pub(crate) const RECORDED: [&str; 4] = ["tools/call", "prompts/get", "resources/read", "completion/complete"];

impl Daemon {
    /// An instance of `entry` for `caller`, from the caller's pool (the entry's scope
    /// makes the key), started when there is none; `wait` bounds the wait for it and
    /// `report` hears what it waits on.
    ///
    /// Errors: [`Failure::Refused`] when the entry cannot be started as configured;
    /// [`Failure::Server`] when the start failed, the server is in a backoff or
    /// `crash-loop`, or `wait` passed.
    pub async fn lease<E>(
        &self,
        entry: &ServerEntry,
        caller: &Caller,
        wait: Option<Duration>,
        report: &(dyn Fn(Wait) + Send + Sync),
    ) -> Result<Lease, Failure<E>> {
        let (target, key) = self.targets.for_caller(entry, caller).map_err(Failure::Refused)?;
        self.pool.acquire(&target, &key, wait, report).await.map_err(Failure::Server)
    }

    /// An instance of `target` under `key`: [`Daemon::lease`] with the target and key
    /// already resolved, or chosen by the daemon rather than a caller's scope
    /// (adoption, `min`, a background start, a restart).
    ///
    /// Errors: as [`Daemon::lease`]'s [`Failure::Server`].
    pub async fn lease_as(
        &self,
        target: &Arc<Target>,
        key: &PoolKey,
        wait: Option<Duration>,
    ) -> Result<Lease, CallError> {
        self.pool.acquire(target, key, wait, &|_| {}).await
    }

    /// Sends `ask.request` to an instance leased for `ask.caller` and returns the
    /// answer; the lease ends with the request (a `call`-scoped instance is stopped
    /// before this returns).
    ///
    /// Errors: [`Failure`]: the entry refused, the check's refusal, or the server's
    /// failure. A JSON-RPC error from the server is an answer, not a failure.
    pub async fn ask<E: Said>(&self, mut ask: Ask<'_, E>) -> Result<Message, Failure<E>> {
        let method = ask.request.method().unwrap_or_default().to_owned();
        if !RECORDED.contains(&method.as_str()) {
            return self.ask_unrecorded(ask, &mut None).await;
        }
        let started = std::time::Instant::now();
        let started_ms = crate::schema::now_ms();
        let (entry, origin, context) = (ask.entry, ask.origin.clone(), ask.context.clone());
        let (name, bytes_in) = (named(&ask.request), ask.request.as_str().len() as u64);
        let arguments = self.activity.keeps_arguments().then(|| arguments_of(&ask.request));
        // The span goes on to the server in the request's `_meta`.
        let mut span = None;
        if let Some(traces) = &self.telemetry.traces {
            let (begun, request) = traces.begin(ask.request);
            (span, ask.request) = (Some(begun), request);
        }
        let mut leased = None;
        let answer = self.ask_unrecorded(ask, &mut leased).await;
        let (outcome, code, error, bytes_out) = match &answer {
            Ok(response) => {
                let (outcome, code) = answered(response);
                (outcome, code, None, response.as_str().len() as u64)
            }
            Err(Failure::Refused(refusal)) => ("refused", None, Some(refusal.to_string()), 0),
            Err(Failure::Checked(e)) => ("refused", None, Some(e.said()), 0),
            Err(Failure::Server(e)) => ("failed", None, Some(e.to_string()), 0),
        };
        let result = match (&arguments, &answer) {
            (Some(_), Ok(response)) => mcpx_proto::response_result(response).ok().map(|r| r.get().to_owned()),
            _ => None,
        };
        let record = Record { entry, origin: &origin };
        let heard = context.heard.take_requests();
        let call = crate::activity::Entry {
            started_ms,
            duration_us: started.elapsed().as_micros() as u64,
            pid: leased.as_ref().and_then(|(pid, _)| *pid),
            key: leased.as_ref().map(|(_, key)| key.clone()),
            outcome: outcome.to_owned(),
            code,
            error,
            bytes_in,
            bytes_out,
            notifications: context.heard.notifications(),
            arguments,
            result,
            ..record.entry(&method, &name)
        };
        for asked in heard {
            let (outcome, code, said) = match &asked.answer {
                Some(response) => {
                    let (outcome, code) = answered(response);
                    (outcome, code, answer_said(response))
                }
                None => ("failed", None, None),
            };
            let request = crate::activity::Entry {
                started_ms: asked.started_ms,
                duration_us: asked.duration_us,
                pid: call.pid,
                key: call.key.clone(),
                outcome: outcome.to_owned(),
                code,
                error: asked.answer.is_none().then(|| "the client did not answer in time".to_owned()),
                bytes_out: asked.answer.as_ref().map_or(0, |a| a.as_str().len() as u64),
                answered: said,
                ..record.entry(&asked.method, &name)
            };
            let at = std::time::UNIX_EPOCH + Duration::from_millis(asked.started_ms);
            let child = span.as_ref().zip(self.telemetry.traces.as_ref()).map(|(span, t)| t.child(span, at));
            self.record(&record, request, child);
        }
        self.record(&record, call, span);
        answer
    }

    /// Records a request of `origin` to `entry`'s server that was refused before it
    /// reached [`Daemon::ask`] (a tool the policy hides, a server the caller cannot
    /// use): `method` naming `name`, and why.
    pub fn record_refused(&self, entry: &ServerEntry, origin: &Origin, method: &str, name: &str, why: String) {
        if RECORDED.contains(&method) {
            self.record_event(Record { entry, origin }, method, name, "refused", why);
        }
    }

    /// Records a pin event of `entry`'s server: the definition of `kind` `name`
    /// `verb` (`held`, `approved`, `rejected`) by `origin`.
    pub fn record_pin(&self, entry: &ServerEntry, origin: &Origin, verb: &str, kind: crate::pins::Kind, name: &str) {
        let why = match verb {
            "held" => format!("the {} changed since it was pinned, or is new", kind.as_str()),
            verb => format!("the {}'s new definition was {verb}", kind.as_str()),
        };
        self.record_event(Record { entry, origin }, &format!("pin/{verb}"), name, verb, why);
    }

    /// Records an action the dashboard took on `entry`'s server (`docs/ui.md`): method
    /// `ui/<verb>` (`ui/restart`, `ui/stop`, `ui/refresh`, `ui/trust`, `ui/review`, `ui/login`, `ui/logout`), named by the server, ended
    /// `outcome` (`ok`, `failed`), with `said` (what it did, or why it failed).
    pub fn record_action(&self, entry: &ServerEntry, origin: &Origin, verb: &str, outcome: &str, said: String) {
        self.record_event(Record { entry, origin }, &format!("ui/{verb}"), &entry.name, outcome, said);
    }

    /// Records an entry that took no time: `method` naming `name` ended `outcome`, for
    /// the reason `why`.
    fn record_event(&self, record: Record<'_>, method: &str, name: &str, outcome: &str, why: String) {
        let entry = crate::activity::Entry {
            started_ms: crate::schema::now_ms(),
            outcome: outcome.to_owned(),
            error: Some(why),
            ..record.entry(method, name)
        };
        let span = match self.telemetry.traces.as_ref() {
            Some(traces) if RECORDED.contains(&method) => Some(traces.unsent()),
            _ => None,
        };
        self.record(&record, entry, span);
    }

    /// Counts `entry` in the metrics, ends its `span` when the export is on, and queues
    /// it for the activity record (with `record`'s templates when it keeps arguments).
    fn record(
        &self,
        record: &Record<'_>,
        entry: crate::activity::Entry,
        span: Option<crate::telemetry::traces::Started>,
    ) {
        self.telemetry.observe(&entry);
        if let Some((traces, span)) = self.telemetry.traces.as_ref().zip(span) {
            let transport = match record.entry.transport {
                crate::config::TransportSpec::Stdio { .. } => "pipe",
                crate::config::TransportSpec::Remote { .. } => "tcp",
            };
            traces.end(span, &entry, transport, record.origin.protocol.as_deref());
        }
        if !self.activity.on() {
            return;
        }
        let keeps = entry.arguments.is_some() || entry.result.is_some();
        let templates =
            if keeps { record.entry.templates().into_iter().map(str::to_owned).collect() } else { Vec::new() };
        self.activity.record(crate::activity::Pending { entry, templates });
    }

    /// [`Daemon::ask`] without its record; `leased` gets the instance's pid and pool
    /// key once one is leased.
    async fn ask_unrecorded<E>(
        &self,
        ask: Ask<'_, E>,
        leased: &mut Option<(Option<u32>, String)>,
    ) -> Result<Message, Failure<E>> {
        let (target, key) = self.targets.for_caller(ask.entry, ask.caller).map_err(Failure::Refused)?;
        (ask.check)(&target, None).map_err(Failure::Checked)?;
        let lease = self.pool.acquire(&target, &key, ask.timeout, ask.report).await.map_err(Failure::Server)?;
        if let Err(e) = (ask.check)(&lease.target, Some(&lease.instance)) {
            lease.finish().await;
            return Err(Failure::Checked(e));
        }
        (ask.report)(Wait::Calling);
        let instance = lease.instance.clone();
        *leased = Some((instance.info.pid(), instance.identity.key.clone()));
        let answer = if ask.forward {
            instance.forward(ask.request, ask.timeout, ask.context).await
        } else {
            instance.request_for(ask.request, ask.timeout, ask.context).await
        };
        if answer.is_ok() {
            instance.count_served();
        }
        lease.finish().await;
        answer.map_err(Failure::Server)
    }
}

/// The server entry and origin of the entries of one request.
struct Record<'a> {
    entry: &'a ServerEntry,
    origin: &'a Origin,
}

impl Record<'_> {
    /// An entry of `method` naming `name`, the rest zero, to be filled in.
    fn entry(&self, method: &str, name: &str) -> crate::activity::Entry {
        // The id is given by the record's writer.
        crate::activity::Entry {
            path: self.origin.path.clone(),
            client: self.origin.client.clone(),
            server: self.entry.name.clone(),
            method: method.to_owned(),
            name: name.to_owned(),
            ..crate::activity::Entry::default()
        }
    }
}

/// What a request sends as its arguments (JSON text): `params.arguments` when it has
/// them (a tool call, a prompt), else all of `params` (a read's URI, a completion).
fn arguments_of(request: &Message) -> String {
    #[derive(serde::Deserialize)]
    struct Request<'a> {
        #[serde(borrow)]
        params: Option<&'a serde_json::value::RawValue>,
    }
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        #[serde(borrow)]
        arguments: Option<&'a serde_json::value::RawValue>,
    }
    let Ok(Request { params: Some(params) }) = serde_json::from_str::<Request<'_>>(request.as_str()) else {
        return "null".to_owned();
    };
    match serde_json::from_str::<Params<'_>>(params.get()) {
        Ok(Params { arguments: Some(arguments) }) => arguments.get().to_owned(),
        _ => params.get().to_owned(),
    }
}

/// How a caller answered a server's request: an elicitation's `action`, a sampling's
/// `model`.
fn answer_said(response: &Message) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Said {
        action: Option<String>,
        model: Option<String>,
    }
    let result = mcpx_proto::response_result(response).ok()?;
    let said = serde_json::from_str::<Said>(result.get()).ok()?;
    said.action.or(said.model)
}

/// The tool or prompt a request names (`params.name`), the URI it reads
/// (`params.uri`), or what a completion refers to (`params.ref.name` or `.uri`).
fn named(request: &Message) -> String {
    #[derive(serde::Deserialize)]
    struct Request {
        params: Option<Params>,
    }
    #[derive(serde::Deserialize)]
    struct Params {
        name: Option<String>,
        uri: Option<String>,
        #[serde(rename = "ref")]
        reference: Option<Reference>,
    }
    #[derive(serde::Deserialize)]
    struct Reference {
        name: Option<String>,
        uri: Option<String>,
    }
    let Ok(Request { params: Some(p) }) = serde_json::from_str::<Request>(request.as_str()) else {
        return String::new();
    };
    let reference = p.reference.and_then(|r| r.name.or(r.uri));
    p.name.or(p.uri).or(reference).unwrap_or_default()
}

/// How an answer ended: `ok`, `is-error` (a result with `isError: true`) or
/// `rpc-error` with its code.
fn answered(response: &Message) -> (&'static str, Option<i64>) {
    #[derive(serde::Deserialize)]
    struct Outcome {
        #[serde(rename = "isError", default)]
        is_error: bool,
    }
    // Most answers say neither: no need to read them.
    let text = response.as_str();
    if !text.contains("\"isError\"") && !text.contains("\"error\"") {
        return ("ok", None);
    }
    match mcpx_proto::response_result(response) {
        Ok(result) if serde_json::from_str::<Outcome>(result.get()).is_ok_and(|o| o.is_error) => ("is-error", None),
        Ok(_) => ("ok", None),
        Err(e) => ("rpc-error", Some(e.code)),
    }
}
