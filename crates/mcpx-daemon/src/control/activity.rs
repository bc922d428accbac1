//! `POST /v1/activity`: the activity record's entries (`mcpx activity`), or the record
//! emptied (`mcpx activity --clear`).

use crate::activity::{Entry, Filter};
use crate::api::activity::ActivityRequest;
use crate::api::{ApiError, ErrorKind};
use crate::daemon::Daemon;

/// `POST /v1/activity`: the entries `req`'s filters keep, newest first; with `clear`,
/// none, the record emptied.
///
/// Errors: the record cannot be read or written (`daemon`, saying why).
pub fn activity(d: &Daemon, req: &ActivityRequest) -> Result<Vec<Entry>, ApiError> {
    let failed = |e: String| ApiError::new(ErrorKind::Daemon, format!("the activity record: {e}"));
    if req.clear {
        d.activity.clear().map_err(failed)?;
        return Ok(Vec::new());
    }
    let filter = Filter {
        server: req.server.clone(),
        name: req.name.clone(),
        client: req.client.clone(),
        errors: req.errors,
        slower_than_us: req.slow_ms.map(|ms| ms.saturating_mul(1000)),
        since_ms: req.since_ms,
        until_ms: req.until_ms,
        after_id: req.after_id,
        id: req.id,
        limit: req.limit,
    };
    d.activity.list(&filter).map_err(failed)
}
