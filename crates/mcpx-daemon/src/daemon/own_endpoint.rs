//! Recognising a configured remote server that is this daemon's own MCP endpoint, which
//! the daemon must never proxy to itself.

use crate::config::{ServerEntry, TransportSpec};

/// Whether `entry` is a remote server at `own` (`http://<address>/mcp`), this daemon's
/// endpoint: the same port, a loopback host or the same one, and a path of `/mcp` or
/// below it. An entry whose URL has a `${...}` is not judged.
pub(super) fn points_at(entry: &ServerEntry, own: &str) -> bool {
    let TransportSpec::Remote { url, .. } = &entry.transport else {
        return false;
    };
    let (Ok(theirs), Ok(own)) = (reqwest::Url::parse(url), reqwest::Url::parse(own)) else {
        return false;
    };
    let loopback = |u: &reqwest::Url| {
        let host = u.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
        host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback() || ip.is_unspecified())
    };
    let same_host = theirs.host_str() == own.host_str() || (loopback(&theirs) && loopback(&own));
    let path = theirs.path().trim_end_matches('/');
    !url.contains("${")
        && theirs.scheme() == "http"
        && theirs.port_or_known_default() == own.port_or_known_default()
        && same_host
        && (path == "/mcp" || path.starts_with("/mcp/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RemoteKind;

    fn remote(url: &str) -> ServerEntry {
        let transport = TransportSpec::Remote { url: url.into(), headers: Default::default(), kind: RemoteKind::Http };
        crate::testing::entry("self", transport)
    }

    #[test]
    fn an_entry_for_this_daemons_own_mcp_endpoint_is_recognised() {
        let own = "http://127.0.0.1:18765/mcp";
        for url in ["http://127.0.0.1:18765/mcp", "http://localhost:18765/mcp/", "http://[::1]:18765/mcp/fake"] {
            assert!(points_at(&remote(url), own), "{url}");
        }
        for url in [
            "http://127.0.0.1:18766/mcp",
            "https://127.0.0.1:18765/mcp",
            "http://example.com:18765/mcp",
            "http://127.0.0.1:18765/other",
            "http://127.0.0.1:${PORT}/mcp",
        ] {
            assert!(!points_at(&remote(url), own), "{url}");
        }
    }
}
