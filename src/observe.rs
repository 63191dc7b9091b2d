//! What the daemon shows about itself: its counters and histograms, the Prometheus text exposition format,
//! and the small HTTP server for `/metrics`, `/healthz` and `/readyz`. It owns no analysis state: the families
//! that describe Rollouts and AnalysisRuns are computed at scrape time from the objects the caller passes
//! (through [`Probe`]): [`rollouts`] and [`analysis_runs`]; [`reconciles`] counts per object as the daemon works.
//! Argo Rollouts' controller families keep Argo's names, labels and values, beside the `canaryd_*` ones. The
//! exposition is written off the async runtime and sent as it is written ([`exposition`]).

pub mod analysis_runs;
pub mod exposition;
pub mod reconciles;
pub mod rollout_durations;
pub mod rollouts;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame};
use hyper::{Request, Response, StatusCode};
use tokio::net::TcpListener;

use crate::api::{AnalysisRun, Rollout};
pub use exposition::Exposition;
use exposition::{family, sample};
pub use reconciles::{Kind, Reconciles};
pub use rollout_durations::RolloutDurations;

/// Upper bounds (seconds) of the query-duration histogram: from a local Prometheus to Argo's 30 s timeout.
pub const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// A cumulative histogram over fixed upper bounds ([`DURATION_BUCKETS`] unless made [`Histogram::with_bounds`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    bounds: &'static [f64],
    /// Count per bucket, not cumulative (summed when written).
    counts: Vec<u64>,
    count: u64,
    sum: f64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram::with_bounds(DURATION_BUCKETS)
    }
}

impl Histogram {
    /// An empty histogram with these upper bounds (ascending; `+Inf` is implied).
    pub fn with_bounds(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: vec![0; bounds.len()],
            count: 0,
            sum: 0.0,
        }
    }

    pub fn observe(&mut self, value: f64) {
        if let Some(i) = self.bounds.iter().position(|b| value <= *b)
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
    /// Argo's per-object families.
    pub reconciles: Reconciles,
    /// Argo's rollout duration histograms.
    pub rollout_durations: RolloutDurations,
    /// When the daemon started on its clock, in Unix seconds (`process_start_time_seconds`).
    started: f64,
}

/// What the daemon knows at scrape time beside its own counters.
pub struct Scraped<'a> {
    pub runs: &'a [Arc<AnalysisRun>],
    pub rollouts: &'a [Arc<Rollout>],
    /// The query histograms per provider.
    pub durations: &'a BTreeMap<&'static str, Histogram>,
}

impl Metrics {
    /// Counters starting now: `started` is this instant on the daemon's clock.
    pub fn starting_at(started: jiff::Timestamp) -> Metrics {
        Metrics {
            started: started.as_millisecond() as f64 / 1000.0,
            ..Metrics::default()
        }
    }

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

    /// The whole exposition.
    pub fn render(&self, scraped: &Scraped<'_>, out: &mut Exposition) {
        self.write_process(out);
        analysis_runs::write(out, scraped.runs);
        rollouts::write(out, scraped.rollouts);
        self.write_counters(out);
        self.reconciles.write(out);
        self.rollout_durations.write(out);
        write_durations(out, scraped.durations);
        self.write_notifications(out);
    }

    /// Argo Rollouts' `notification_send_success` and `notification_send_error` counters, with its labels.
    fn write_notifications(&self, out: &mut Exposition) {
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
    fn write_process(&self, out: &mut Exposition) {
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
        family(
            out,
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
        );
        sample(out, "process_start_time_seconds", &[], self.started);
        let Some(resident) = resident_memory_bytes() else {
            return;
        };
        family(
            out,
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
        );
        sample(out, "process_resident_memory_bytes", &[], resident);
        // Argo's dashboard charts the Go runtime's heap; canaryd is not Go, and serves its resident memory there.
        family(
            out,
            "go_memstats_heap_alloc_bytes",
            "gauge",
            "canaryd is not a Go program: its resident memory, as process_resident_memory_bytes, for dashboards made for Argo Rollouts.",
        );
        sample(out, "go_memstats_heap_alloc_bytes", &[], resident);
    }

    /// The counters: measurements by phase and provider, and reconcile errors by reason.
    fn write_counters(&self, out: &mut Exposition) {
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

/// The query-duration histograms, one per provider.
fn write_durations(out: &mut Exposition, durations: &BTreeMap<&'static str, Histogram>) {
    let name = "canaryd_provider_query_duration_seconds";
    family(
        out,
        name,
        "histogram",
        "Time taken by queries actually sent to a provider (shared answers count once).",
    );
    for (provider, h) in durations {
        write_histogram(out, name, &[("provider", provider)], h);
    }
}

/// One histogram's samples: cumulative buckets, sum and count, each with `labels`.
fn write_histogram(out: &mut Exposition, name: &str, labels: &[(&str, &str)], h: &Histogram) {
    let mut cumulative = 0;
    let bucket = format!("{name}_bucket");
    for (i, bound) in h.bounds.iter().enumerate() {
        cumulative += h.counts.get(i).copied().unwrap_or(0);
        let le = bound.to_string();
        let with_le: Vec<(&str, &str)> = labels
            .iter()
            .copied()
            .chain([("le", le.as_str())])
            .collect();
        sample(out, &bucket, &with_le, cumulative as f64);
    }
    let with_le: Vec<(&str, &str)> = labels.iter().copied().chain([("le", "+Inf")]).collect();
    sample(out, &bucket, &with_le, h.count as f64);
    sample(out, &format!("{name}_sum"), labels, h.sum);
    sample(out, &format!("{name}_count"), labels, h.count as f64);
}

/// The process's resident set (Linux's `VmRSS`); `None` where `/proc` does not say.
fn resident_memory_bytes() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024.0)
}

/// What the HTTP endpoints ask the daemon.
pub trait Probe: Send + Sync + 'static {
    /// Writes the `/metrics` body.
    fn write_metrics(&self, out: &mut Exposition);
    /// The `/metrics` body in one string.
    fn metrics(&self) -> String {
        let mut out = Exposition::collect();
        self.write_metrics(&mut out);
        out.finish()
    }
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
                async move { Ok::<_, Infallible>(answer(req.uri().path(), &probe)) }
            });
            // A client that hangs up mid-request is its own business.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Chunks of a `/metrics` body written ahead of the connection.
const METRICS_CHUNKS_AHEAD: usize = 4;

fn answer(path: &str, probe: &Arc<dyn Probe>) -> Response<BoxBody<Bytes, Infallible>> {
    let text =
        |status, body: &'static str| (status, "text/plain", Full::new(Bytes::from(body)).boxed());
    let (status, content_type, body) = match path {
        "/metrics" => (
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            metrics_body(probe.clone()),
        ),
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" if probe.ready() => text(StatusCode::OK, "ready\n"),
        "/readyz" => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: caches syncing or leadership unknown\n",
        ),
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, v);
    }
    response
}

/// The `/metrics` body, written by a blocking thread (so a scrape of tens of thousands of objects holds no
/// runtime thread) and sent in chunks as they are written (so it is never held whole).
fn metrics_body(probe: Arc<dyn Probe>) -> BoxBody<Bytes, Infallible> {
    let (chunks, written) = tokio::sync::mpsc::channel(METRICS_CHUNKS_AHEAD);
    tokio::task::spawn_blocking(move || {
        let mut out = Exposition::streaming(chunks);
        probe.write_metrics(&mut out);
        out.finish();
    });
    let frames = futures::stream::unfold(written, |mut written| async move {
        let chunk = written.recv().await?;
        Some((Ok(Frame::data(chunk)), written))
    });
    StreamBody::new(frames).boxed()
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
}
