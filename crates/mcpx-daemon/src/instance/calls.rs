//! The requests in flight on one instance: the one map from upstream request ids to
//! waiting callers, which responses, progress, cancellation and server requests all
//! go through (ARCHITECTURE.md, the `pending` invariant).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mcpx_proto::{Message, UpstreamId};
use tokio::sync::oneshot;

use super::context::CallContext;
use super::error::CallError;
use crate::notices::NoticeSender;
use crate::sync::lock;

/// Where a request's response, or the reason it got none, goes.
pub(super) type Reply = oneshot::Sender<Result<Message, CallError>>;

/// A request waiting for its response.
#[derive(Debug)]
pub(super) struct Pending {
    /// The waiting caller.
    pub(super) reply: Reply,
    /// Who asked, and where what the server sends about the request goes.
    pub(super) ctx: Arc<CallContext>,
    /// The caller's own progress token (JSON text), when it asked for progress.
    pub(super) progress: Option<String>,
    /// The log level the request carried upstream (an index into
    /// [`super::LOG_LEVELS`]; a modern server only logs at or above it, and nothing
    /// for a request that carried none).
    pub(super) level: Option<usize>,
}

/// The requests in flight, by the `seq` of their upstream id. Only ids of this
/// instance's epoch are found: a reply to an earlier daemon's request is not.
#[derive(Debug)]
pub(super) struct Calls {
    epoch: u32,
    map: Mutex<HashMap<u32, Pending>>,
}

impl Calls {
    /// No calls yet, for upstream ids of `epoch`.
    pub(super) fn new(epoch: u32) -> Calls {
        Calls { epoch, map: Mutex::new(HashMap::new()) }
    }

    /// Records a request sent with upstream id (`epoch`, `seq`).
    pub(super) fn insert(&self, seq: u32, pending: Pending) {
        lock(&self.map).insert(seq, pending);
    }

    /// Removes the request `seq` (it timed out, was cancelled, or was not sent).
    pub(super) fn remove(&self, seq: u32) -> Option<Pending> {
        lock(&self.map).remove(&seq)
    }

    /// Removes the request whose upstream id is `id` (raw JSON); `None` for an id of
    /// another epoch, not an upstream id, or no longer waiting.
    pub(super) fn take(&self, id: &str) -> Option<Pending> {
        self.ours(id).and_then(|seq| self.remove(seq))
    }

    /// Answers the only request in flight with `error`, the text of a JSON-RPC error
    /// object, under its upstream id; `false` with none or several in flight.
    pub(super) fn fail_sole(&self, error: &str) -> bool {
        let mut map = lock(&self.map);
        let seq = match map.keys().collect::<Vec<_>>().as_slice() {
            [seq] => **seq,
            _ => return false,
        };
        let Some(pending) = map.remove(&seq) else { return false };
        let upstream = UpstreamId { epoch: self.epoch, seq }.to_json();
        let answer = Message::parse(format!(r#"{{"jsonrpc":"2.0","id":{upstream},"error":{error}}}"#)).map_err(|e| {
            CallError::Protocol(format!("the server's error could not be relayed ({e}); report it to its maintainers"))
        });
        let _ = pending.reply.send(answer);
        true
    }

    /// Removes every request, to fail them all.
    pub(super) fn drain(&self) -> Vec<Pending> {
        lock(&self.map).drain().map(|(_, p)| p).collect()
    }

    /// Where a `notifications/progress` with token `token` (raw JSON, an upstream id)
    /// goes: the notify channel of the request it names and that request's own
    /// token, when the request asked for progress.
    pub(super) fn progress_target(&self, token: &str) -> Option<(NoticeSender, String)> {
        let seq = self.ours(token)?;
        let map = lock(&self.map);
        let p = map.get(&seq)?;
        let target = (p.ctx.notify.clone()?, p.progress.clone()?);
        p.ctx.heard.note();
        Some(target)
    }

    /// The callers of the requests in flight, one per request.
    pub(super) fn callers(&self) -> Vec<Arc<CallContext>> {
        lock(&self.map).values().map(|p| p.ctx.clone()).collect()
    }

    /// The callers of the requests in flight that carried a log level, with it: every
    /// one, or only the request whose upstream id is `id` (raw JSON).
    pub(super) fn logging(&self, id: Option<&str>) -> Vec<(Arc<CallContext>, usize)> {
        let map = lock(&self.map);
        let with_level = |p: &Pending| p.level.map(|l| (p.ctx.clone(), l));
        match id {
            Some(id) => self.ours(id).and_then(|seq| map.get(&seq)).and_then(with_level).into_iter().collect(),
            None => map.values().filter_map(with_level).collect(),
        }
    }

    /// The caller of the request in flight whose upstream id is `id` (raw JSON).
    pub(super) fn caller_of(&self, id: &str) -> Option<Arc<CallContext>> {
        let seq = self.ours(id)?;
        lock(&self.map).get(&seq).map(|p| p.ctx.clone())
    }

    /// The labels of the callers in flight, sorted, each once, empty ones left out.
    pub(super) fn labels(&self) -> Vec<String> {
        let mut labels: Vec<String> =
            lock(&self.map).values().map(|p| p.ctx.label.clone()).filter(|l| !l.is_empty()).collect();
        labels.sort();
        labels.dedup();
        labels
    }

    fn ours(&self, id: &str) -> Option<u32> {
        UpstreamId::from_json(id).filter(|u| u.epoch == self.epoch).map(|u| u.seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(label: &str, progress: Option<&str>) -> (Pending, crate::notices::NoticeReceiver) {
        let (notify, rx) = crate::notices::channel(Arc::default());
        let ctx = Arc::new(CallContext { label: label.into(), notify: Some(notify), ..CallContext::default() });
        (Pending { reply: oneshot::channel().0, ctx, progress: progress.map(str::to_owned), level: None }, rx)
    }

    #[test]
    fn only_ids_of_this_epoch_are_found() {
        let calls = Calls::new(7);
        calls.insert(3, pending("a", None).0);
        assert!(calls.take(&UpstreamId { epoch: 6, seq: 3 }.to_json()).is_none(), "an earlier daemon's id");
        assert!(calls.take("3").is_none(), "not an upstream id");
        assert!(calls.take("\"30064771075\"").is_none(), "a string, not the number sent");
        assert!(calls.take(&UpstreamId { epoch: 7, seq: 3 }.to_json()).is_some());
        assert!(calls.take(&UpstreamId { epoch: 7, seq: 3 }.to_json()).is_none(), "a duplicate");
    }

    #[test]
    fn progress_goes_to_the_request_it_names_with_the_callers_token() {
        let calls = Calls::new(1);
        calls.insert(1, pending("a", Some("\"tok-a\"")).0);
        calls.insert(2, pending("b", None).0);
        let (_, token) = calls.progress_target(&UpstreamId { epoch: 1, seq: 1 }.to_json()).unwrap();
        assert_eq!(token, "\"tok-a\"");
        assert!(calls.progress_target(&UpstreamId { epoch: 1, seq: 2 }.to_json()).is_none(), "b asked for none");
        calls.remove(2);
        assert_eq!(calls.callers().len(), 1);
    }

    #[test]
    fn labels_are_sorted_once_each() {
        let calls = Calls::new(1);
        for (seq, label) in [(1, "pid:9"), (2, "session:a"), (3, "pid:9"), (4, "")] {
            calls.insert(seq, pending(label, None).0);
        }
        assert_eq!(calls.labels(), ["pid:9", "session:a"]);
        assert_eq!(calls.callers().len(), 4);
        assert_eq!(calls.drain().len(), 4);
        assert!(calls.labels().is_empty());
    }
}
