//! Prometheus metrics (`GET /metrics`; `docs/telemetry.md`), in the text exposition
//! format 0.0.4, named as Prometheus's conventions say (the `mcpx_` prefix, the unit in
//! the name, `_total` on counters).
//!
//! The counts of requests are kept here as they are recorded ([`Metrics::observe`]);
//! what the daemon holds (instances, crashes, drops, queues) is read at each scrape
//! (`crate::control::metrics`).

use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

use crate::activity::Entry;

/// The buckets of `mcpx_call_duration_seconds`, in seconds: half a millisecond to a
/// minute.
const BUCKETS: [f64; 16] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// The request counters, kept as requests are recorded.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    calls: IntCounterVec,
    durations: HistogramVec,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Empty counters.
    pub fn new() -> Metrics {
        let calls = IntCounterVec::new(
            Opts::new(
                "mcpx_calls_total",
                "Requests callers sent servers through the daemon (and servers' requests to callers), by server, method, \
                 tool or prompt name (empty for a URI), and outcome",
            ),
            &["server", "method", "name", "outcome"],
        )
        .expect("a valid metric");
        let durations = HistogramVec::new(
            HistogramOpts::new("mcpx_call_duration_seconds", "How long requests took, by server and method")
                .buckets(BUCKETS.to_vec()),
            &["server", "method"],
        )
        .expect("a valid metric");
        let registry = Registry::new();
        registry.register(Box::new(calls.clone())).expect("registered once");
        registry.register(Box::new(durations.clone())).expect("registered once");
        Metrics { registry, calls, durations }
    }

    /// Counts the request `entry` recorded (a pin event or a dashboard's action is not a
    /// request, and is not counted).
    pub fn observe(&self, entry: &Entry) {
        if entry.method.starts_with("pin/") || entry.method.starts_with("ui/") {
            return;
        }
        // A URI is not a name to count by: there may be any number of them.
        let name = match entry.method.as_str() {
            "resources/read" | "completion/complete" => "",
            _ => entry.name.as_str(),
        };
        self.calls.with_label_values(&[&entry.server, &entry.method, name, &entry.outcome]).inc();
        self.durations.with_label_values(&[&entry.server, &entry.method]).observe(entry.duration_us as f64 / 1e6);
    }

    /// Per server: the requests counted, and those that did not end well (any outcome
    /// but `ok` and an elicitation's `accept`, `decline` or `cancel`).
    pub fn per_server(&self) -> std::collections::HashMap<String, (u64, u64)> {
        let mut counts = std::collections::HashMap::<String, (u64, u64)>::new();
        for metric in self.calls.collect().iter().flat_map(|f| f.get_metric()) {
            let label = |name: &str| metric.get_label().iter().find(|l| l.name() == name).map(|l| l.value());
            let (Some(server), Some(outcome)) = (label("server"), label("outcome")) else { continue };
            let n = metric.get_counter().get_value() as u64;
            let count = counts.entry(server.to_owned()).or_default();
            count.0 += n;
            if !matches!(outcome, "ok" | "accept" | "decline" | "cancel") {
                count.1 += n;
            }
        }
        counts
    }

    /// The request counters' families, for a scrape.
    pub fn gather(&self) -> Vec<MetricFamily> {
        self.registry.gather()
    }
}
