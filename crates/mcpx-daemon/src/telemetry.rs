//! Telemetry for the tools people already run (`docs/telemetry.md`): Prometheus
//! metrics at `GET /metrics` ([`metrics`]), always; OpenTelemetry traces over
//! OTLP/HTTP ([`traces`]), when the `otel` block of the user config or the standard
//! `OTEL_*` variables of the daemon's environment ask for them. Both see what the
//! activity record sees: each recorded request ([`Telemetry::observe`]).

use std::collections::HashMap;
use std::time::Duration;

use mcpx_config::OtelSettings;

use crate::activity::Entry;

pub mod metrics;
pub mod traces;

/// The default OTLP/HTTP base URL (OTLP Exporter, "Endpoint URLs for OTLP/HTTP").
const DEFAULT_ENDPOINT: &str = "http://localhost:4318";

/// The metrics, and the traces' export when on.
#[derive(Debug, Default)]
pub struct Telemetry {
    /// The request counters of `GET /metrics`.
    pub metrics: metrics::Metrics,
    /// The export of spans, when on.
    pub traces: Option<traces::Traces>,
    /// Why the export is off or partly ignored (a setting it does not take), if so:
    /// shown in `status` and `doctor`.
    pub problem: Option<String>,
}

impl Telemetry {
    /// The telemetry `settings` and `env` (the daemon's environment) ask for; the
    /// export's task spawned on the current tokio runtime. Never fails: a setting that
    /// cannot be used leaves the export off, and [`Telemetry::problem`] says why.
    pub fn open(settings: &OtelSettings, env: &HashMap<String, String>) -> Telemetry {
        let mut telemetry = Telemetry::default();
        match export_of(settings, env) {
            Ok(None) => {}
            Ok(Some((export, ignored))) => {
                telemetry.problem = ignored;
                match traces::Traces::start(export) {
                    Ok(traces) => {
                        tracing::info!(url = %traces.export.url, "exporting spans over OTLP/HTTP");
                        telemetry.traces = Some(traces);
                    }
                    Err(e) => telemetry.problem = Some(e),
                }
            }
            Err(e) => telemetry.problem = Some(e),
        }
        if let Some(problem) = &telemetry.problem {
            tracing::warn!("telemetry: {problem}");
        }
        telemetry
    }

    /// Counts the request `entry` recorded.
    pub fn observe(&self, entry: &Entry) {
        self.metrics.observe(entry);
    }
}

/// Where spans go, and what of the settings was ignored: `None` when the export is
/// off (neither the `otel` block nor an `OTEL_EXPORTER_OTLP_*ENDPOINT` variable names a
/// collector, `enabled` is false, `OTEL_SDK_DISABLED` is true, or `OTEL_TRACES_EXPORTER`
/// is `none`). The `otel` block wins over the variables.
///
/// Errors: a variable the export needs has a value it cannot take.
fn export_of(
    settings: &OtelSettings,
    env: &HashMap<String, String>,
) -> Result<Option<(traces::Export, Option<String>)>, String> {
    let var = |name: &str| env.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
    let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
    if settings.enabled == Some(false) || (disabled && settings.enabled != Some(true)) {
        return Ok(None);
    }
    let traces_url = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").map(str::to_owned);
    let base = settings.endpoint.clone().or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT").map(str::to_owned));
    let url = match (&settings.endpoint, traces_url, base) {
        // The block's endpoint is a base URL, as OTEL_EXPORTER_OTLP_ENDPOINT.
        (Some(base), _, _) => traces_path(base),
        (None, Some(url), _) => url,
        (None, None, Some(base)) => traces_path(&base),
        (None, None, None) if settings.enabled == Some(true) => traces_path(DEFAULT_ENDPOINT),
        (None, None, None) => return Ok(None),
    };
    let mut headers = HashMap::new();
    for name in ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"] {
        for pair in var(name).unwrap_or_default().split(',').filter(|p| !p.trim().is_empty()) {
            let Some((key, value)) = pair.split_once('=') else {
                return Err(format!("{name}: `{pair}` is not key=value; spans are not exported"));
            };
            let value = percent_encoding::percent_decode_str(value.trim()).decode_utf8_lossy();
            headers.insert(key.trim().to_owned(), value.into_owned());
        }
    }
    headers.extend(settings.headers.iter().map(|(k, v)| (k.clone(), v.clone())));
    let timeout = match var("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT").or_else(|| var("OTEL_EXPORTER_OTLP_TIMEOUT")) {
        Some(ms) => Duration::from_millis(
            ms.parse().map_err(|_| format!("OTEL_EXPORTER_OTLP_TIMEOUT: `{ms}` is not milliseconds"))?,
        ),
        None => Duration::from_secs(10),
    };
    let protocol = var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"));
    let ignored = protocol
        .filter(|p| *p != "http/protobuf")
        .map(|p| format!("OTEL_EXPORTER_OTLP_PROTOCOL is `{p}`: mcpx exports over http/protobuf only, and does so"));
    let service_name = settings
        .service_name
        .clone()
        .or_else(|| var("OTEL_SERVICE_NAME").map(str::to_owned))
        .unwrap_or_else(|| "mcpx".to_owned());
    Ok(Some((traces::Export { url, headers, timeout, service_name }, ignored)))
}

/// `base` with OTLP/HTTP's path for traces appended.
fn traces_path(base: &str) -> String {
    format!("{}/v1/traces", base.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn the_block_and_the_variables_decide_where_spans_go() {
        let none = OtelSettings::default();
        assert!(export_of(&none, &env(&[])).unwrap().is_none(), "off unless asked");
        let (export, ignored) = export_of(
            &none,
            &env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/"), ("OTEL_SERVICE_NAME", "agents")]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (export.url.as_str(), export.service_name.as_str(), ignored),
            ("http://c:4318/v1/traces", "agents", None)
        );
        let traces =
            env(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t/x"), ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c")]);
        assert_eq!(export_of(&none, &traces).unwrap().unwrap().0.url, "http://t/x");
        let block = OtelSettings {
            endpoint: Some("http://b:1".into()),
            headers: [("api-key".to_owned(), "k".to_owned())].into(),
            ..OtelSettings::default()
        };
        let headers =
            env(&[("OTEL_EXPORTER_OTLP_HEADERS", "api-key=old,x-team=a%20b"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
        let (export, ignored) = export_of(&block, &headers).unwrap().unwrap();
        assert_eq!(export.url, "http://b:1/v1/traces");
        assert_eq!(export.headers.get("api-key").map(String::as_str), Some("k"), "the block wins");
        assert_eq!(export.headers.get("x-team").map(String::as_str), Some("a b"));
        assert!(ignored.unwrap().contains("http/protobuf only"));
        let off = OtelSettings { enabled: Some(false), ..block.clone() };
        assert!(export_of(&off, &env(&[])).unwrap().is_none());
        assert!(
            export_of(&none, &env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"), ("OTEL_SDK_DISABLED", "true")]))
                .unwrap()
                .is_none()
        );
        let on = OtelSettings { enabled: Some(true), ..OtelSettings::default() };
        assert_eq!(export_of(&on, &env(&[])).unwrap().unwrap().0.url, "http://localhost:4318/v1/traces");
        let bad = env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"), ("OTEL_EXPORTER_OTLP_HEADERS", "novalue")]);
        assert!(export_of(&none, &bad).unwrap_err().contains("not key=value"));
    }
}
