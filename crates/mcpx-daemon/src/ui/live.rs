//! The live regions' event streams (HTML Living Standard, "Server-sent events"): a
//! page's `#live` fragment, rendered again every [`EVERY`] while the page is open
//! and sent as a `view` event when it changed. Nothing runs while no page is open:
//! the stream is the only thing that renders, and it ends with its connection.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

/// How often an open page's fragment is rendered again.
pub const EVERY: Duration = Duration::from_millis(250);

/// After this many renders with nothing new, a comment is sent: a page that was
/// closed is noticed at that write, and its stream ends (every 5 s).
const QUIET_RENDERS: u32 = 20;

/// The event stream of a live region whose fragment `render` renders.
pub fn events<F, Fut>(render: F) -> Response
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = String> + Send,
{
    let stream = futures_util::stream::unfold((render, None::<String>), |(mut render, last)| async move {
        let mut quiet = 0;
        loop {
            if last.is_some() {
                tokio::time::sleep(EVERY).await;
            }
            let html = render().await;
            if last.as_deref() != Some(html.as_str()) {
                let event = event("view", &html);
                return Some((Ok::<_, Infallible>(Bytes::from(event)), (render, Some(html))));
            }
            quiet += 1;
            if quiet >= QUIET_RENDERS {
                return Some((Ok(Bytes::from_static(b": still here\n\n")), (render, last)));
            }
        }
    });
    let headers = [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-store")];
    (headers, Body::from_stream(stream)).into_response()
}

/// An event named `name` carrying `data`: one `data:` line per line of it (a CR is
/// a line end in an event stream, so none is sent).
fn event(name: &str, data: &str) -> String {
    let mut out = String::with_capacity(data.len() + 64);
    out.push_str("event: ");
    out.push_str(name);
    out.push('\n');
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(&line.replace('\r', ""));
        out.push('\n');
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_of_the_fragment_is_a_data_line() {
        assert_eq!(
            event("view", "<p>a</p>\n<pre>b\r\nc</pre>"),
            "event: view\ndata: <p>a</p>\ndata: <pre>b\ndata: c</pre>\n\n"
        );
    }
}
