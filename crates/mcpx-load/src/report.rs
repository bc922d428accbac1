//! The report of one run: latency percentiles, calls per second and CPU time per call,
//! as JSON (stdout) and as one line for a person (stderr).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

/// What one run measured. Times in microseconds, rates per second.
#[derive(Debug, Serialize)]
pub struct Report {
    /// `stdio` or `http`.
    pub mode: &'static str,
    /// The URL (and socket) or the command line the callers drove.
    pub target: String,
    /// Concurrent callers.
    pub callers: usize,
    /// Calls completed in the measured phase.
    pub calls: u64,
    /// Answers checked over the whole run (set-up, warm-up and measured phase): every one
    /// had the right id and, for a call, the caller's own message as its only text.
    pub checked: u64,
    /// Calls completed in the warm-up.
    pub warmup_calls: u64,
    /// Connections opened again because the server closed one (HTTP only).
    pub reconnects: u64,
    /// Length of the measured phase, seconds.
    pub seconds: f64,
    /// `calls / seconds`.
    pub calls_per_s: f64,
    /// Per-call latency over the measured calls: from just before the request is written
    /// until its answer has been read and checked.
    pub latency_us: Latency,
    /// CPU time (user + system) per measured call of each named process, of the callers'
    /// own child processes (`callers`, stdio only) and of mcpx-load itself (`self`).
    pub cpu_us_per_call: BTreeMap<String, f64>,
}

/// Latency percentiles, microseconds.
#[derive(Debug, Serialize, PartialEq)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Mean.
    pub mean: f64,
    /// Highest.
    pub max: f64,
}

impl Latency {
    /// Percentiles (nearest rank) of `samples`, nanoseconds; sorts them. All zero when
    /// there are none.
    pub fn of(samples: &mut [u64]) -> Latency {
        samples.sort_unstable();
        let us = |ns: u64| round1(ns as f64 / 1000.0);
        let sum: u128 = samples.iter().map(|&s| u128::from(s)).sum();
        let mean = if samples.is_empty() { 0.0 } else { round1(sum as f64 / samples.len() as f64 / 1000.0) };
        Latency {
            p50: us(nearest_rank(samples, 50.0)),
            p90: us(nearest_rank(samples, 90.0)),
            p99: us(nearest_rank(samples, 99.0)),
            mean,
            max: us(samples.last().copied().unwrap_or(0)),
        }
    }
}

/// The `q`th percentile (0 < q ≤ 100) of sorted `xs` by the nearest-rank method: the
/// smallest value with at least q% of the values at or below it; 0 for no values.
pub fn nearest_rank(xs: &[u64], q: f64) -> u64 {
    if xs.is_empty() {
        return 0;
    }
    let rank = (q / 100.0 * xs.len() as f64).ceil() as usize;
    xs[rank.clamp(1, xs.len()) - 1]
}

/// CPU time per call in microseconds, one decimal.
pub fn per_call_us(cpu: Duration, calls: u64) -> f64 {
    if calls == 0 { 0.0 } else { round1(cpu.as_secs_f64() * 1e6 / calls as f64) }
}

/// `x` rounded to one decimal.
pub fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

impl Report {
    /// The one line for a person: rate, latency and CPU per call.
    pub fn human(&self) -> String {
        let cpu: Vec<String> = self.cpu_us_per_call.iter().map(|(name, us)| format!("{name} {us:.0} µs")).collect();
        format!(
            "mcpx-load: {} {} with {} caller{}: {} calls in {:.2} s, {:.0} calls/s; latency p50 {:.0} µs, p99 {:.0} µs; CPU per call: {}",
            self.mode,
            self.target,
            self.callers,
            if self.callers == 1 { "" } else { "s" },
            self.calls,
            self.seconds,
            self.calls_per_s,
            self.latency_us.p50,
            self.latency_us.p99,
            cpu.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let xs: Vec<u64> = (1..=100).collect();
        assert_eq!(nearest_rank(&xs, 50.0), 50);
        assert_eq!(nearest_rank(&xs, 99.0), 99);
        assert_eq!(nearest_rank(&xs, 100.0), 100);
        assert_eq!(nearest_rank(&[5], 1.0), 5);
        assert_eq!(nearest_rank(&[1, 2, 3], 50.0), 2);
        assert_eq!(nearest_rank(&[], 50.0), 0);
    }

    #[test]
    fn latency_in_microseconds() {
        let mut ns = vec![3_000, 1_000, 2_000, 100_000];
        assert_eq!(Latency::of(&mut ns), Latency { p50: 2.0, p90: 100.0, p99: 100.0, mean: 26.5, max: 100.0 });
        assert_eq!(Latency::of(&mut []), Latency { p50: 0.0, p90: 0.0, p99: 0.0, mean: 0.0, max: 0.0 });
    }

    #[test]
    fn cpu_per_call() {
        assert_eq!(per_call_us(Duration::from_millis(30), 1000), 30.0);
        assert_eq!(per_call_us(Duration::from_millis(30), 0), 0.0);
    }
}
