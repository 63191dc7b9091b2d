//! What the daemon shows about itself: its counters and histograms, the Prometheus text exposition format,
//! and the small HTTP server for `/metrics`, `/healthz` and `/readyz`. It owns no analysis state: gauges that
//! describe runs are computed by the caller (through [`Probe`]) at scrape time.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use tokio::net::TcpListener;

/// Upper bounds (seconds) of the query-duration histogram: from a local Prometheus to Argo's 30 s timeout.
pub const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// A cumulative histogram over [`DURATION_BUCKETS`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    /// Count per bucket, not cumulative (summed when written).
    counts: Vec<u64>,
    count: u64,
    sum: f64,
}

impl Histogram {
    pub fn observe(&mut self, value: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; DURATION_BUCKETS.len()];
        }
        if let Some(i) = DURATION_BUCKETS.iter().position(|b| value <= *b)
            && let Some(c) = self.counts.get_mut(i)
        {
            *c += 1;
        }
        self.count += 1;
        self.sum += value;
    }

    pub fn count(&self) -> u64 {
        self.count
    }
}

/// The daemon's own counters. Cheap to update from any task.
#[derive(Debug, Default)]
pub struct Metrics {
    measurements: Mutex<BTreeMap<(String, String), u64>>,
    reconcile_errors: Mutex<BTreeMap<String, u64>>,
    /// Notifications sent (true) and not (false), by namespace, name, Event type and reason.
    notifications: Mutex<BTreeMap<(bool, [String; 4]), u64>>,
    leader: AtomicBool,
}

impl Metrics {
    pub fn measured(&self, phase: &str, provider: &str) {
        let mut m = self
            .measurements
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *m.entry((phase.to_string(), provider.to_string()))
            .or_default() += 1;
    }

    pub fn reconcile_error(&self, reason: &str) {
        let mut m = self
            .reconcile_errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *m.entry(reason.to_string()).or_default() += 1;
    }

    /// Counts one notification of an Event (`type_` and `reason`) about `namespace/name`, sent or not.
    pub fn notification_sent(
        &self,
        ok: bool,
        namespace: &str,
        name: &str,
        type_: &str,
        reason: &str,
    ) {
        let labels = [namespace, name, type_, reason].map(str::to_string);
        let mut m = self
            .notifications
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *m.entry((ok, labels)).or_default() += 1;
    }

    pub fn set_leader(&self, leader: bool) {
        self.leader.store(leader, Ordering::Relaxed);
    }

    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::Relaxed)
    }

    /// The whole exposition: `runs` is the number of runs per phase, `durations` the query histograms per
    /// provider.
    pub fn render(
        &self,
        runs: &BTreeMap<String, u64>,
        durations: &BTreeMap<&'static str, Histogram>,
    ) -> String {
        let mut out = String::new();
        self.write_process(&mut out);
        write_runs(&mut out, runs);
        self.write_counters(&mut out);
        write_durations(&mut out, durations);
        self.write_notifications(&mut out);
        out
    }

    /// Argo Rollouts' `notification_send_success` and `notification_send_error` counters, with its labels.
    fn write_notifications(&self, out: &mut String) {
        let counted = self
            .notifications
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for (ok, name, help) in [
            (
                true,
                "notification_send_success",
                "Notifications sent, by the Event that fired them.",
            ),
            (
                false,
                "notification_send_error",
                "Notifications that could not be sent, by the Event that fired them.",
            ),
        ] {
            family(out, name, "counter", help);
            for ((_, [namespace, object, type_, reason]), n) in
                counted.iter().filter(|((o, _), _)| *o == ok)
            {
                let labels = [
                    ("namespace", namespace.as_str()),
                    ("name", object),
                    ("type", type_),
                    ("reason", reason),
                ];
                sample(out, name, &labels, *n as f64);
            }
        }
    }

    /// The process's own families: its version and whether it holds the leader Lease.
    fn write_process(&self, out: &mut String) {
        family(
            out,
            "canaryd_build_info",
            "gauge",
            "canaryd's version; always 1.",
        );
        sample(
            out,
            "canaryd_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))],
            1.0,
        );
        family(
            out,
            "canaryd_leader",
            "gauge",
            "1 while this process holds the leader Lease and reconciles.",
        );
        sample(
            out,
            "canaryd_leader",
            &[],
            if self.is_leader() { 1.0 } else { 0.0 },
        );
    }

    /// The counters: measurements by phase and provider, and reconcile errors by reason.
    fn write_counters(&self, out: &mut String) {
        family(
            out,
            "canaryd_measurements_total",
            "counter",
            "Measurements recorded in AnalysisRun status, by measurement phase and provider.",
        );
        let measurements = self
            .measurements
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for ((phase, provider), n) in &measurements {
            sample(
                out,
                "canaryd_measurements_total",
                &[("phase", phase), ("provider", provider)],
                *n as f64,
            );
        }
        family(
            out,
            "canaryd_reconcile_errors_total",
            "counter",
            "Reconciles that failed and were retried, by reason.",
        );
        let errors = self
            .reconcile_errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for (reason, n) in &errors {
            sample(
                out,
                "canaryd_reconcile_errors_total",
                &[("reason", reason)],
                *n as f64,
            );
        }
    }
}

/// The runs gauge: the number of runs per phase.
fn write_runs(out: &mut String, runs: &BTreeMap<String, u64>) {
    family(
        out,
        "canaryd_analysis_runs",
        "gauge",
        "AnalysisRuns this process watches, by phase.",
    );
    for (phase, n) in runs {
        sample(out, "canaryd_analysis_runs", &[("phase", phase)], *n as f64);
    }
}

/// The query-duration histograms, one per provider: cumulative buckets, sum and count.
fn write_durations(out: &mut String, durations: &BTreeMap<&'static str, Histogram>) {
    let name = "canaryd_provider_query_duration_seconds";
    family(
        out,
        name,
        "histogram",
        "Time taken by queries actually sent to a provider (shared answers count once).",
    );
    for (provider, h) in durations {
        let mut cumulative = 0;
        for (i, bound) in DURATION_BUCKETS.iter().enumerate() {
            cumulative += h.counts.get(i).copied().unwrap_or(0);
            sample(
                out,
                &format!("{name}_bucket"),
                &[("provider", provider), ("le", &bound.to_string())],
                cumulative as f64,
            );
        }
        sample(
            out,
            &format!("{name}_bucket"),
            &[("provider", provider), ("le", "+Inf")],
            h.count as f64,
        );
        sample(
            out,
            &format!("{name}_sum"),
            &[("provider", provider)],
            h.sum,
        );
        sample(
            out,
            &format!("{name}_count"),
            &[("provider", provider)],
            h.count as f64,
        );
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: f64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let v = v
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            let _ = write!(out, "{k}=\"{v}\"");
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// What the HTTP endpoints ask the daemon.
pub trait Probe: Send + Sync + 'static {
    /// The `/metrics` body.
    fn metrics(&self) -> String;
    /// `/readyz`: caches synced and leadership known.
    fn ready(&self) -> bool;
}

/// Serves `/metrics`, `/healthz` and `/readyz` on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, probe: Arc<dyn Probe>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let probe = probe.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let probe = probe.clone();
                async move { Ok::<_, Infallible>(answer(req.uri().path(), probe.as_ref())) }
            });
            // A client that hangs up mid-request is its own business.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

fn answer(path: &str, probe: &dyn Probe) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match path {
        "/metrics" => (
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            probe.metrics(),
        ),
        "/healthz" => (StatusCode::OK, "text/plain", "ok\n".to_string()),
        "/readyz" if probe.ready() => (StatusCode::OK, "text/plain", "ready\n".to_string()),
        "/readyz" => (
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            "not ready: caches syncing or leadership unknown\n".to_string(),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found\n".to_string(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, v);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_counts_each_value_in_its_first_bucket() {
        let mut h = Histogram::default();
        h.observe(0.003);
        h.observe(0.2);
        h.observe(100.0);
        assert_eq!(h.count(), 3);
        assert_eq!(h.counts.first(), Some(&1));
        assert_eq!(h.counts.get(5), Some(&1));
        assert_eq!(h.counts.iter().sum::<u64>(), 2);
    }

    #[test]
    fn label_values_are_escaped() {
        let mut out = String::new();
        sample(&mut out, "m", &[("reason", "a\"b\\c\nd")], 1.0);
        assert_eq!(out, "m{reason=\"a\\\"b\\\\c\\nd\"} 1\n");
    }
}
