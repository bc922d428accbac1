//! Reading OAuth metadata documents for discovery ([`super::discovery`]) over an HTTP
//! client: small JSON documents, a 4xx meaning "not here".

use reqwest::Url;
use reqwest::header::ACCEPT;

use super::discovery::{BoxFuture, DiscoveryError, Fetch};

/// How long one metadata request may take, start to end.
const METADATA_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// The largest metadata document read, in bytes: metadata is a few KiB.
const MAX_METADATA_BYTES: usize = 1 << 20;

/// [`Fetch`] over an HTTP client (the daemon's, or the CLI's for a login).
pub struct HttpFetch<'a> {
    /// The client.
    pub http: &'a reqwest::Client,
}

impl Fetch for HttpFetch<'_> {
    fn get_json<'a>(&'a self, url: &'a Url) -> BoxFuture<'a, Result<Option<serde_json::Value>, DiscoveryError>> {
        Box::pin(async move {
            let fail = |message: String| DiscoveryError::Fetch { url: url.to_string(), message };
            let answer = self
                .http
                .get(url.clone())
                .header(ACCEPT, "application/json")
                // The revision whose discovery this is (MCP 2025-11-25, Authorization,
                // "Authorization Server Metadata Discovery").
                .header("mcp-protocol-version", "2025-11-25")
                .timeout(METADATA_TIMEOUT)
                .send()
                .await
                .map_err(|e| fail(chain(&e)))?;
            let status = answer.status();
            if status.is_client_error() {
                return Ok(None);
            }
            if !status.is_success() {
                return Err(fail(format!("HTTP {status}")));
            }
            if answer.content_length().is_some_and(|n| n > MAX_METADATA_BYTES as u64) {
                return Err(fail(format!("the document is over {MAX_METADATA_BYTES} bytes")));
            }
            let body = answer.bytes().await.map_err(|e| fail(chain(&e)))?;
            if body.len() > MAX_METADATA_BYTES {
                return Err(fail(format!("the document is over {MAX_METADATA_BYTES} bytes")));
            }
            let json: serde_json::Value =
                serde_json::from_slice(&body).map_err(|e| fail(format!("the answer is not JSON ({e})")))?;
            if !json.is_object() {
                return Err(fail("the answer is not a JSON object".to_owned()));
            }
            Ok(Some(json))
        })
    }
}

/// An error and its causes, `: `-separated (reqwest's own text omits the cause).
pub(super) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let causes = std::iter::successors(Some(e), |e| e.source()).map(ToString::to_string);
    causes.collect::<Vec<_>>().join(": ")
}
