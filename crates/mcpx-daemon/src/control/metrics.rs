//! `GET /metrics`: every Prometheus metric of the daemon ([`render`];
//! `docs/telemetry.md`): the request counters ([`crate::telemetry::metrics`]) and what
//! the daemon holds, read at the scrape.

use std::sync::atomic::Ordering::Relaxed;

use prometheus::{Encoder, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder};

use crate::daemon::Daemon;

/// Every metric of `d`, in the text exposition format 0.0.4.
pub fn render(d: &Daemon) -> String {
    let mut families = d.telemetry.metrics.gather();
    families.extend(now(d).gather());
    let mut text = Vec::new();
    // Encoding families the registry built cannot fail.
    let _ = TextEncoder::new().encode(&families, &mut text);
    String::from_utf8(text).unwrap_or_default()
}

/// What the daemon holds now, as gauges and counters read at the scrape.
fn now(d: &Daemon) -> Registry {
    let registry = Registry::new();
    let gauges = |name: &str, help: &str, labels: &[&str]| {
        let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("a valid metric");
        registry.register(Box::new(g.clone())).expect("registered once");
        g
    };
    let counters = |name: &str, help: &str, labels: &[&str]| {
        let c = IntCounterVec::new(Opts::new(name, help), labels).expect("a valid metric");
        registry.register(Box::new(c.clone())).expect("registered once");
        c
    };
    let gauge = |name: &str, help: &str, value: u64| {
        let g = IntGauge::new(name, help).expect("a valid metric");
        g.set(i64::try_from(value).unwrap_or(i64::MAX));
        registry.register(Box::new(g)).expect("registered once");
    };
    let counter = |name: &str, help: &str, value: u64| {
        counters(name, help, &[]).with_label_values::<&str>(&[]).inc_by(value);
    };

    gauges("mcpx_build_info", "The daemon's version; always 1", &["version"])
        .with_label_values(&[env!("CARGO_PKG_VERSION")])
        .set(1);
    let instances = gauges("mcpx_instances", "Server instances, by server and state", &["server", "state"]);
    let in_flight =
        gauges("mcpx_calls_in_flight", "Requests sent to a server's instances and not yet answered", &["server"]);
    let dropped_bytes = counters(
        "mcpx_dropped_bytes_total",
        "Bytes of server output dropped (lines past the size limit), over the server's live instances",
        &["server"],
    );
    let dropped_notes = counters(
        "mcpx_dropped_notifications_total",
        "Notifications dropped for a slow caller, over the server's live instances",
        &["server"],
    );
    for i in d.pool.instances() {
        let server = i.identity.server.as_str();
        instances.with_label_values(&[server, i.state().as_str()]).inc();
        in_flight.with_label_values(&[server]).add(i64::try_from(i.in_flight()).unwrap_or(i64::MAX));
        dropped_bytes.with_label_values(&[server]).inc_by(i.info.dropped());
        dropped_notes.with_label_values(&[server]).inc_by(i.dropped_notifications());
    }
    for (server, _, _) in d.pool.failures() {
        instances.with_label_values(&[server.as_str(), "error"]).inc();
    }
    let crashes =
        counters("mcpx_server_crashes_total", "Crashes and failed starts of a server's instances", &["server"]);
    let loops = counters("mcpx_crash_loops_total", "Times a server went into crash-loop", &["server"]);
    let restarts = counters(
        "mcpx_restarts_total",
        "Starts of a server's instance in place of an earlier one of the same pool key that ended",
        &["server"],
    );
    for (server, counts) in d.pool.crashes() {
        crashes.with_label_values(&[server.as_str()]).inc_by(counts.crashes);
        loops.with_label_values(&[server.as_str()]).inc_by(counts.crash_loops);
        restarts.with_label_values(&[server.as_str()]).inc_by(counts.restarts);
    }
    counter(
        "mcpx_daemon_dropped_notifications_total",
        "Notifications the daemon dropped for a slow MCP client stream",
        d.dropped_notifications().load(Relaxed),
    );
    gauge(
        "mcpx_activity_queue_depth",
        "Activity entries waiting for the record's writer",
        d.activity.queued.load(Relaxed),
    );
    counter(
        "mcpx_activity_lost_total",
        "Activity entries lost: dropped by the full queue, or not written",
        d.activity.dropped.load(Relaxed) + d.activity.failed.load(Relaxed),
    );
    if let Some(traces) = &d.telemetry.traces {
        gauge("mcpx_spans_queue_depth", "Spans waiting for the OTLP exporter", traces.queued() as u64);
        counter("mcpx_spans_exported_total", "Spans the OTLP collector took", traces.exported.load(Relaxed));
        counter(
            "mcpx_spans_dropped_total",
            "Spans lost: dropped by the full queue, or in an export that failed",
            traces.dropped.load(Relaxed),
        );
    }
    registry
}
