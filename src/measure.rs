//! Taking one measurement: from a metric whose args are resolved, build the provider request, ask the
//! provider, evaluate the conditions, and return Argo's `Measurement`. Shared by `canaryd analyze`, `demo`
//! and the daemon so all three measure identically. Owns no scheduling and no counters (`engine/analysis`).

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{AnalysisPhase, Measurement, Metric};
use crate::engine::condition::{Condition, measurement_phase};
use crate::providers::gate::Gate;
use crate::providers::{
    HttpClients, Prometheus, PrometheusRequest, ProviderError, ProviderResult, Web, WebRequest,
};

/// A metric ready to be measured: its conditions compiled once.
#[derive(Debug, Clone)]
pub struct MeasurableMetric {
    pub metric: Metric,
    success: Option<Condition>,
    failure: Option<Condition>,
}

impl MeasurableMetric {
    /// Compiles the metric's conditions; the error names the field.
    pub fn new(metric: Metric) -> Result<MeasurableMetric, String> {
        let compile = |field: &str, text: &Option<String>| {
            text.as_deref()
                .map(Condition::compile)
                .transpose()
                .map_err(|e| format!("metric {:?}: {field}: {e}", metric.name))
        };
        let success = compile("successCondition", &metric.success_condition)?;
        let failure = compile("failureCondition", &metric.failure_condition)?;
        Ok(MeasurableMetric {
            metric,
            success,
            failure,
        })
    }
}

/// What one measurement found, before it gets its timestamps.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub phase: AnalysisPhase,
    pub value: Option<String>,
    pub message: Option<String>,
    /// Kept on the measurement (e.g. Prometheus `warnings`).
    pub metadata: BTreeMap<String, String>,
    /// Kept on the metric result (e.g. `ResolvedPrometheusQuery`).
    pub metric_metadata: BTreeMap<String, String>,
}

impl Outcome {
    pub fn into_measurement(self, started: Timestamp, finished: Timestamp) -> Measurement {
        Measurement {
            phase: self.phase,
            message: self.message,
            started_at: Some(Time(started)),
            finished_at: Some(Time(finished)),
            value: self.value,
            metadata: (!self.metadata.is_empty()).then_some(self.metadata),
            resume_at: None,
        }
    }
}

/// Metadata keys that describe the metric rather than one measurement.
const METRIC_METADATA: &[&str] = &["ResolvedPrometheusQuery"];

/// The providers canaryd runs, with their pooled HTTP clients. Build once, share.
#[derive(Debug, Clone)]
pub struct Providers {
    prometheus: Prometheus,
    web: Web,
    default_prometheus: Option<String>,
    /// The daemon's singleflight and per-address limits; `None` sends every query as asked.
    gate: Option<std::sync::Arc<Gate>>,
}

impl Providers {
    /// `default_prometheus` is used for metrics whose template names no address.
    pub fn new(default_prometheus: Option<String>) -> Providers {
        let http = HttpClients::new();
        Providers {
            prometheus: Prometheus::new(http.clone()),
            web: Web::new(http),
            default_prometheus,
            gate: None,
        }
    }

    /// The same providers with Prometheus queries shared and limited through `gate` (the daemon: many runs
    /// asking the same question). `now` rounded down to the second is the sharing window.
    pub fn with_gate(mut self, gate: std::sync::Arc<Gate>) -> Providers {
        self.gate = Some(gate);
        self
    }

    /// Measures `m` at `now`. `eval_time` is the virtual time of a backtest (queries are evaluated then).
    /// `secrets` are values that must not appear in what is returned.
    pub async fn measure(
        &self,
        m: &MeasurableMetric,
        now: Timestamp,
        eval_time: Option<Timestamp>,
        secrets: &[String],
    ) -> Outcome {
        match self.fetch(&m.metric, now, eval_time, secrets).await {
            Err(e) => Outcome {
                phase: AnalysisPhase::Error,
                value: None,
                message: Some(e.to_string()),
                metadata: BTreeMap::new(),
                metric_metadata: BTreeMap::new(),
            },
            Ok(result) => {
                let value = result.value.render();
                let (phase, message) = match measurement_phase(
                    m.success.as_ref(),
                    m.failure.as_ref(),
                    &result.value,
                ) {
                    Ok(phase) => (phase, None),
                    Err(e) => (AnalysisPhase::Error, Some(e.to_string())),
                };
                let (metric_metadata, metadata) = result
                    .metadata
                    .into_iter()
                    .partition(|(k, _)| METRIC_METADATA.contains(&k.as_str()));
                Outcome {
                    phase,
                    value: Some(hide(value, secrets)),
                    message,
                    metadata,
                    metric_metadata,
                }
            }
        }
    }

    async fn fetch(
        &self,
        metric: &Metric,
        now: Timestamp,
        eval_time: Option<Timestamp>,
        secrets: &[String],
    ) -> Result<ProviderResult, ProviderError> {
        let provider = &metric.provider;
        if let Some(prom) = &provider.prometheus {
            let req = PrometheusRequest::from_metric(
                prom,
                self.default_prometheus.as_deref(),
                now,
                eval_time,
            )?
            .with_secret_values(secrets.iter().cloned());
            match &self.gate {
                Some(gate) => gate.query(&self.prometheus, &req, now.as_second()).await,
                None => self.prometheus.query(&req).await,
            }
        } else if let Some(web) = &provider.web {
            let req = WebRequest::from_metric(web)?.with_secret_values(secrets.iter().cloned());
            let started = std::time::Instant::now();
            let answer = self.web.fetch(&req).await;
            if let Some(gate) = &self.gate {
                gate.observe("web", started.elapsed());
            }
            answer
        } else {
            let names = provider.configured();
            Err(ProviderError::Invalid(format!(
                "provider {} is not supported by canaryd",
                names.first().copied().unwrap_or("(none)")
            )))
        }
    }
}

fn hide(mut text: String, secrets: &[String]) -> String {
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        text = text.replace(s.as_str(), "*****");
    }
    text
}
