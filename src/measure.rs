//! Taking one measurement: ask the provider a metric (args resolved) names, evaluate the conditions on its
//! answer, and return Argo's `Measurement`. Shared by `canaryd analyze`, `demo` and the daemon so all three
//! measure identically. Owns no scheduling and no counters (`engine/analysis`), and no provider's I/O
//! (`providers/`).

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::compare::{COMPARE_PLUGIN, CompareSpec};
use crate::api::{AnalysisPhase, Measurement, Metric};
use crate::engine::compare;
use crate::engine::condition::{Condition, measurement_phase};
use crate::providers::provider::{Answer, Progress};

pub use crate::providers::provider::MeasureAt;
pub use crate::providers::registry::Providers;

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
        // A `canaryd/compare` configuration that cannot be read stops the run before its first measurement.
        metric
            .provider
            .plugin
            .as_ref()
            .and_then(|p| p.get(COMPARE_PLUGIN))
            .map(|spec| serde_json::from_value::<CompareSpec>(spec.clone()))
            .transpose()
            .map_err(|e| {
                format!(
                    "metric {:?}: provider.plugin.{COMPARE_PLUGIN}: {e}",
                    metric.name
                )
            })?;
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
    /// A measurement still running: when to look again.
    pub resume_at: Option<Timestamp>,
}

impl Outcome {
    pub fn into_measurement(self, started: Timestamp, finished: Timestamp) -> Measurement {
        Measurement {
            phase: self.phase,
            message: self.message,
            started_at: Some(Time(started)),
            // One still running has not finished.
            finished_at: self.phase.is_completed().then_some(Time(finished)),
            value: self.value,
            metadata: (!self.metadata.is_empty()).then_some(self.metadata),
            resume_at: self.resume_at.map(Time),
        }
    }
}

/// Metadata keys that describe the metric rather than one measurement.
const METRIC_METADATA: &[&str] = &["ResolvedPrometheusQuery", compare::LOOKS_KEY];

/// Takes one measurement of `m` with the provider it names (or collects the one in flight), and judges the
/// answer by its conditions. A resumed measurement keeps the metadata it was started with.
pub async fn measure(providers: &Providers, m: &MeasurableMetric, at: MeasureAt<'_>) -> Outcome {
    let progress = match providers.of(&m.metric) {
        Ok(provider) => provider.measure(&m.metric, at).await,
        Err(e) => Progress::Finished(Err(e)),
    };
    let mut outcome = judge(m, progress, at.secrets);
    if let Some(kept) = at.in_flight().and_then(|f| f.metadata.clone()) {
        let added = std::mem::replace(&mut outcome.metadata, kept);
        outcome.metadata.extend(added);
    }
    outcome
}

/// Stops the measurement in flight of `m` (the run is terminating) and ends it as Argo does.
pub async fn terminate(
    providers: &Providers,
    m: &MeasurableMetric,
    at: MeasureAt<'_>,
    finished: Timestamp,
) -> Option<Measurement> {
    let flying = at.in_flight()?.clone();
    let stopped = match providers.of(&m.metric) {
        Ok(provider) => provider.terminate(&m.metric, at).await,
        Err(e) => Err(e),
    };
    let stopped = stopped.map_err(|e| crate::scrub::text(e.to_string(), at.secrets));
    Some(crate::engine::analysis::terminated(
        flying, stopped, finished,
    ))
}

fn outcome(phase: AnalysisPhase, message: Option<String>) -> Outcome {
    Outcome {
        phase,
        value: None,
        message,
        metadata: BTreeMap::new(),
        metric_metadata: BTreeMap::new(),
        resume_at: None,
    }
}

fn judge(m: &MeasurableMetric, progress: Progress, secrets: &[String]) -> Outcome {
    let answer = match progress {
        Progress::Finished(answer) => answer,
        Progress::Running {
            resume_at,
            metadata,
        } => {
            return Outcome {
                metadata,
                resume_at: Some(resume_at),
                ..outcome(AnalysisPhase::Running, None)
            };
        }
        Progress::Ended { phase, message } => {
            return outcome(phase, message.map(|t| crate::scrub::text(t, secrets)));
        }
    };
    match answer {
        Err(e) => outcome(
            AnalysisPhase::Error,
            Some(crate::scrub::text(e.to_string(), secrets)),
        ),
        Ok(Answer { result, verdict }) => {
            let value = result.value.render();
            let no_conditions = m.success.is_none() && m.failure.is_none();
            let phase = match &verdict {
                // canaryd/compare without conditions: the verdict decides.
                Some(j) if no_conditions => Ok(compare::judged_phase(j, None)),
                _ => measurement_phase(m.success.as_ref(), m.failure.as_ref(), &result.value).map(
                    |p| match &verdict {
                        Some(j) => compare::judged_phase(j, Some(p)),
                        None => p,
                    },
                ),
            };
            let (phase, message) = match phase {
                Ok(phase) => (phase, verdict.and_then(|j| j.sparse)),
                Err(e) => (AnalysisPhase::Error, Some(e.to_string())),
            };
            let (metric_metadata, metadata) = result
                .metadata
                .into_iter()
                .partition(|(k, _)| METRIC_METADATA.contains(&k.as_str()));
            Outcome {
                phase,
                value: Some(crate::scrub::text(value, secrets)),
                message,
                metadata,
                metric_metadata,
                resume_at: None,
            }
        }
    }
}
