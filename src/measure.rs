//! Taking one measurement: from a metric whose args are resolved, build the provider request, ask the
//! provider, evaluate the conditions, and return Argo's `Measurement`. Shared by `canaryd analyze`, `demo`
//! and the daemon so all three measure identically. Owns no scheduling and no counters (`engine/analysis`).

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::compare::{COMPARE_PLUGIN, CompareSpec, DistributionCompare, ErrorRateCompare};
use crate::api::{AnalysisPhase, Measurement, Metric, PrometheusMetric, PrometheusRangeQuery};
use crate::engine::compare;
use crate::engine::condition::{Condition, measurement_phase};
use crate::engine::judge::Verdict;
use crate::engine::value::MetricValue;
use crate::providers::gate::Gate;
use crate::providers::{
    HttpClients, Prometheus, PrometheusRequest, ProviderError, ProviderResult, Web, WebRequest,
};

/// When and with what one measurement is taken.
#[derive(Debug, Clone, Copy)]
pub struct MeasureAt<'a> {
    /// The (possibly virtual) time of the measurement.
    pub now: Timestamp,
    /// A backtest's virtual time: queries are evaluated then.
    pub eval_time: Option<Timestamp>,
    /// Values that must not appear in what is returned.
    pub secrets: &'a [String],
    /// Where `{{window}}` opens (see `engine::compare::window_start`).
    pub window_start: Timestamp,
    /// The metadata of the metric's result so far: `canaryd/compare` keeps its error-rate history there.
    pub previous_metadata: Option<&'a BTreeMap<String, String>>,
}

/// A metric ready to be measured: its conditions compiled once.
#[derive(Debug, Clone)]
pub struct MeasurableMetric {
    pub metric: Metric,
    success: Option<Condition>,
    failure: Option<Condition>,
    /// `canaryd/compare`'s configuration, decoded once.
    compare: Option<CompareSpec>,
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
        let compare = metric
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
            compare,
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
const METRIC_METADATA: &[&str] = &["ResolvedPrometheusQuery", compare::LOOKS_KEY];

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

    /// Takes one measurement of `m`.
    pub async fn measure(&self, m: &MeasurableMetric, at: MeasureAt<'_>) -> Outcome {
        let fetched = match &m.compare {
            // Boxed: four concurrent queries make a large future, which every other metric would carry.
            Some(spec) => Box::pin(self.compare(spec, at)).await,
            None => self.fetch(&m.metric, at).await.map(|r| (r, None)),
        };
        match fetched {
            Err(e) => Outcome {
                phase: AnalysisPhase::Error,
                value: None,
                message: Some(e.to_string()),
                metadata: BTreeMap::new(),
                metric_metadata: BTreeMap::new(),
            },
            Ok((result, verdict)) => {
                let value = result.value.render();
                let no_conditions = m.success.is_none() && m.failure.is_none();
                let phase = match verdict {
                    // canaryd/compare without conditions: the verdict decides.
                    Some(v) if no_conditions => Ok(compare::verdict_phase(v)),
                    _ => measurement_phase(m.success.as_ref(), m.failure.as_ref(), &result.value),
                };
                let (phase, message) = match phase {
                    Ok(phase) => (phase, None),
                    Err(e) => (AnalysisPhase::Error, Some(e.to_string())),
                };
                let (metric_metadata, metadata) = result
                    .metadata
                    .into_iter()
                    .partition(|(k, _)| METRIC_METADATA.contains(&k.as_str()));
                Outcome {
                    phase,
                    value: Some(crate::scrub::text(value, at.secrets)),
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
        at: MeasureAt<'_>,
    ) -> Result<ProviderResult, ProviderError> {
        let provider = &metric.provider;
        if let Some(prom) = &provider.prometheus {
            self.prometheus_query(prom, at).await
        } else if let Some(web) = &provider.web {
            let req = WebRequest::from_metric(web)?.with_secret_values(at.secrets.iter().cloned());
            let started = crate::time::monotonic();
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

    async fn prometheus_query(
        &self,
        prom: &PrometheusMetric,
        at: MeasureAt<'_>,
    ) -> Result<ProviderResult, ProviderError> {
        let req = PrometheusRequest::from_metric(
            prom,
            self.default_prometheus.as_deref(),
            at.now,
            at.eval_time,
        )?
        .with_secret_values(at.secrets.iter().cloned());
        match &self.gate {
            Some(gate) => gate.query(&self.prometheus, &req, at.now.as_second()).await,
            None => self.prometheus.query(&req).await,
        }
    }

    /// `canaryd/compare`: the queries of both sides over the window, judged together. Returns the judgement
    /// as a JSON `result` and the verdict (which decides when the metric has no conditions).
    async fn compare(
        &self,
        spec: &CompareSpec,
        at: MeasureAt<'_>,
    ) -> Result<(ProviderResult, Option<Verdict>), ProviderError> {
        let until = at.eval_time.unwrap_or(at.now);
        let window = compare::window(at.window_start, until);
        let query = |text: &str, range: Option<PrometheusRangeQuery>| PrometheusMetric {
            address: spec.address.clone(),
            query: Some(text.replace("{{window}}", &window)),
            timeout: spec.timeout,
            range_query: range,
            ..Default::default()
        };
        let mut metadata = BTreeMap::from([("window".to_string(), window.clone())]);
        let (value, verdict) = match (&spec.error_rate, &spec.distribution) {
            (Some(e), None) => {
                self.compare_error_rate(e, &query, at, &mut metadata)
                    .await?
            }
            (None, Some(d)) => self.compare_distribution(d, &query, at, until).await?,
            _ => {
                return Err(ProviderError::Invalid(format!(
                    "plugin {COMPARE_PLUGIN}: set exactly one of errorRate and distribution"
                )));
            }
        };
        Ok((
            ProviderResult {
                value: MetricValue::Json(value),
                metadata,
            },
            Some(verdict),
        ))
    }

    async fn compare_error_rate(
        &self,
        e: &ErrorRateCompare,
        query: &(dyn Fn(&str, Option<PrometheusRangeQuery>) -> PrometheusMetric + Sync),
        at: MeasureAt<'_>,
        metadata: &mut BTreeMap<String, String>,
    ) -> Result<(serde_json::Value, Verdict), ProviderError> {
        let params = compare::error_rate_params(e);
        let invalid = |e: String| ProviderError::Invalid(format!("plugin {COMPARE_PLUGIN}: {e}"));
        let history = compare::looks_from(at.previous_metadata).map_err(invalid)?;
        let [ce, cr, be, br] = [
            &e.canary.errors,
            &e.canary.requests,
            &e.baseline.errors,
            &e.baseline.requests,
        ]
        .map(|q| query(q, None));
        let (ce, cr, be, br) = tokio::join!(
            self.prometheus_query(&ce, at),
            self.prometheus_query(&cr, at),
            self.prometheus_query(&be, at),
            self.prometheus_query(&br, at)
        );
        let counts = [
            compare::count("canary.errors", &ce?.value),
            compare::count("canary.requests", &cr?.value),
            compare::count("baseline.errors", &be?.value),
            compare::count("baseline.requests", &br?.value),
        ];
        let mut numbers = [None; 4];
        for (slot, c) in numbers.iter_mut().zip(counts) {
            *slot = c.map_err(|e| invalid(e.to_string()))?;
        }
        let (result, verdict, looks) = compare::error_rate_look(&params, numbers, history)
            .map_err(|e| invalid(e.to_string()))?;
        metadata.insert(compare::LOOKS_KEY.to_string(), compare::looks_to(&looks));
        Ok((result, verdict))
    }

    async fn compare_distribution(
        &self,
        d: &DistributionCompare,
        query: &(dyn Fn(&str, Option<PrometheusRangeQuery>) -> PrometheusMetric + Sync),
        at: MeasureAt<'_>,
        until: Timestamp,
    ) -> Result<(serde_json::Value, Verdict), ProviderError> {
        let invalid = |e: String| ProviderError::Invalid(format!("plugin {COMPARE_PLUGIN}: {e}"));
        let params = compare::distribution_params(d).map_err(invalid)?;
        // The range is absolute here: `now()` in the expressions is the measurement's (virtual) time.
        let seconds = until.duration_since(at.window_start).as_secs().max(1);
        let range = PrometheusRangeQuery {
            start: Some(format!("now() - duration(\"{seconds}s\")")),
            end: Some("now()".to_string()),
            step: Some(
                d.step
                    .clone()
                    .unwrap_or_else(|| compare::DEFAULT_DISTRIBUTION_STEP.to_string()),
            ),
        };
        let (canary, baseline) = (
            query(&d.canary, Some(range.clone())),
            query(&d.baseline, Some(range)),
        );
        let (canary, baseline) = tokio::join!(
            self.prometheus_query(&canary, at),
            self.prometheus_query(&baseline, at)
        );
        let samples = |v: &MetricValue| match v {
            MetricValue::Numbers(ns) => ns.clone(),
            MetricValue::Number(n) => vec![*n],
            _ => Vec::new(),
        };
        compare::distribution_judgement(
            &samples(&canary?.value),
            &samples(&baseline?.value),
            &params,
        )
        .map_err(|e| invalid(e.to_string()))
    }
}
