//! The one way to an instance: [`Daemon::lease`] (for a caller) and
//! [`Daemon::lease_as`] (under a pool key the daemon chose: adoption, `min`, a
//! background start, a restart), both giving a [`Lease`] whose end releases what its
//! scope says; and [`Daemon::ask`], one request through a lease: the path of the
//! control API's `call`, `read` and `prompt` and of the MCP endpoint's forwarded
//! requests, which differ only in how they render a [`Failure`].

use std::sync::Arc;
use std::time::Duration;

use mcpx_proto::Message;

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
    /// Who sent it, for the activity record ([`crate::activity::Entry::client`]).
    pub client: String,
}

/// The methods a caller's request is recorded for ([`crate::activity`]).
const RECORDED: [&str; 4] = ["tools/call", "prompts/get", "resources/read", "completion/complete"];

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
    pub async fn ask<E>(&self, ask: Ask<'_, E>) -> Result<Message, Failure<E>> {
        let method = ask.request.method().unwrap_or_default().to_owned();
        if !RECORDED.contains(&method.as_str()) {
            return self.ask_unrecorded(ask, &mut None).await;
        }
        let started = std::time::Instant::now();
        let started_ms = crate::schema::now_ms();
        let (server, client, path) =
            (ask.entry.name.clone(), ask.client.clone(), if ask.forward { "mcp" } else { "shell" });
        let (name, bytes_in) = (named(&ask.request), ask.request.as_str().len() as u64);
        let mut leased = None;
        let answer = self.ask_unrecorded(ask, &mut leased).await;
        let (outcome, code, error, bytes_out) = match &answer {
            Ok(response) => {
                let (outcome, code) = answered(response);
                (outcome, code, None, response.as_str().len() as u64)
            }
            Err(Failure::Refused(refusal)) => ("refused", None, Some(refusal.to_string()), 0),
            Err(Failure::Checked(_)) => ("refused", None, None, 0),
            Err(Failure::Server(e)) => ("failed", None, Some(e.to_string()), 0),
        };
        self.activity.record(crate::activity::Entry {
            id: self.activity.next_id(started_ms),
            started_ms,
            duration_us: started.elapsed().as_micros() as u64,
            path: path.to_owned(),
            client,
            server,
            pid: leased.as_ref().and_then(|(pid, _)| *pid),
            key: leased.map(|(_, key)| key),
            method,
            name,
            outcome: outcome.to_owned(),
            code,
            error,
            bytes_in,
            bytes_out,
        });
        answer
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
    match mcpx_proto::response_result(response) {
        Ok(result) if serde_json::from_str::<Outcome>(result.get()).is_ok_and(|o| o.is_error) => ("is-error", None),
        Ok(_) => ("ok", None),
        Err(e) => ("rpc-error", Some(e.code)),
    }
}
