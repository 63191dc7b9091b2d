//! The `canaryd/compare` provider's I/O: the queries of both sides over the window, sent through the
//! Prometheus provider, and its configuration checks. What the answers mean (defaults, counts, looks, the
//! no-traffic rule, the verdict) is `engine/compare.rs`'s; the statistics are `engine/judge`'s.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use jiff::Timestamp;

use super::provider::{Answer, MeasureAt, MetricProvider, Progress};
use super::sources::PrometheusProvider;
use super::sources::check_promql;
use super::{ProviderError, ProviderResult};
use crate::api::compare::{COMPARE_PLUGIN, CompareSpec, DistributionCompare, ErrorRateCompare};
use crate::api::duration::parse_step;
use crate::api::{Metric, PrometheusMetric, PrometheusRangeQuery};
use crate::engine::compare::{self, Judgement};
use crate::engine::judge::Verdict;
use crate::engine::template::{Finding, check_url};
use crate::engine::value::MetricValue;

/// canaryd's own plugin: canary against baseline.
#[derive(Debug, Clone)]
pub struct Compare {
    prometheus: Arc<PrometheusProvider>,
}

impl Compare {
    pub fn new(prometheus: Arc<PrometheusProvider>) -> Compare {
        Compare { prometheus }
    }

    async fn prometheus_query(
        &self,
        prom: &PrometheusMetric,
        at: MeasureAt<'_>,
    ) -> Result<ProviderResult, ProviderError> {
        self.prometheus.query(prom, at).await
    }

    /// `canaryd/compare`: the queries of both sides over the window, judged together. Returns the judgement
    /// as a JSON `result` and the judgement (whose verdict decides when the metric has no conditions).
    async fn compare(
        &self,
        spec: &CompareSpec,
        at: MeasureAt<'_>,
    ) -> Result<(ProviderResult, Judgement), ProviderError> {
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
        let (value, judgement) = match (&spec.error_rate, &spec.distribution) {
            (Some(e), None) => {
                self.compare_error_rate(e, &query, at, &mut metadata)
                    .await?
            }
            (None, Some(d)) => {
                let (value, verdict) = self.compare_distribution(d, &query, at, until).await?;
                (value, Judgement::from(verdict))
            }
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
            judgement,
        ))
    }

    async fn compare_error_rate(
        &self,
        e: &ErrorRateCompare,
        query: &(dyn Fn(&str, Option<PrometheusRangeQuery>) -> PrometheusMetric + Sync),
        at: MeasureAt<'_>,
        metadata: &mut BTreeMap<String, String>,
    ) -> Result<(serde_json::Value, Judgement), ProviderError> {
        let params = compare::error_rate_params(e);
        let invalid = |e: String| ProviderError::Invalid(format!("plugin {COMPARE_PLUGIN}: {e}"));
        let history =
            compare::looks_from(at.result.and_then(|r| r.metadata.as_ref())).map_err(invalid)?;
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
        let (result, judgement, looks) = compare::error_rate_look(&params, numbers, history)
            .map_err(|e| invalid(e.to_string()))?;
        metadata.insert(compare::LOOKS_KEY.to_string(), compare::looks_to(&looks));
        Ok((result, judgement))
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

impl MetricProvider for Compare {
    fn name(&self) -> &'static str {
        COMPARE_PLUGIN
    }

    fn validate(&self, metric: &Metric, path: &str, findings: &mut Vec<Finding>) {
        if let Some(config) = metric
            .provider
            .plugin
            .as_ref()
            .and_then(|p| p.get(COMPARE_PLUGIN))
        {
            check(config, &format!("{path}.plugin.{COMPARE_PLUGIN}"), findings);
        }
    }

    fn measure<'a>(&'a self, metric: &'a Metric, at: MeasureAt<'a>) -> BoxFuture<'a, Progress> {
        Box::pin(async move {
            let spec = metric
                .provider
                .plugin
                .as_ref()
                .and_then(|p| p.get(COMPARE_PLUGIN))
                .map(|spec| serde_json::from_value::<CompareSpec>(spec.clone()));
            let answer = match spec {
                Some(Ok(spec)) => self.compare(&spec, at).await,
                Some(Err(e)) => Err(ProviderError::Invalid(format!(
                    "plugin {COMPARE_PLUGIN}: {e}"
                ))),
                None => Err(ProviderError::Invalid(format!(
                    "the metric has no plugin {COMPARE_PLUGIN}"
                ))),
            };
            Progress::Finished(answer.map(|(result, judgement)| Answer {
                result,
                verdict: Some(judgement),
            }))
        })
    }
}

/// Checks `canaryd/compare`'s configuration, found at `path`: its own shape and ranges.
pub fn check(config: &serde_json::Value, path: &str, findings: &mut Vec<Finding>) {
    let spec: CompareSpec = match crate::api::decode::decode(config) {
        Ok((spec, unknown)) => {
            for u in unknown {
                findings.push(Finding::error(format!("{path}.{}", u.path), u.message));
            }
            spec
        }
        Err(e) => {
            let at = if e.path.is_empty() {
                path.to_string()
            } else {
                format!("{path}.{}", e.path)
            };
            findings.push(Finding::error(at, e.message));
            return;
        }
    };
    if let Some(address) = spec.address.as_deref().filter(|a| !a.trim().is_empty()) {
        check_url(address, &format!("{path}.address"), findings);
    }
    let mut required = |field: &str, text: &str| {
        if text.trim().is_empty() {
            findings.push(Finding::error(format!("{path}.{field}"), "required"));
        } else {
            check_promql(text, &format!("{path}.{field}"), findings);
        }
    };
    let mut probabilities = Vec::new();
    let mut margins = Vec::new();
    match (&spec.error_rate, &spec.distribution) {
        (Some(e), None) => {
            required("errorRate.canary.errors", &e.canary.errors);
            required("errorRate.canary.requests", &e.canary.requests);
            required("errorRate.baseline.errors", &e.baseline.errors);
            required("errorRate.baseline.requests", &e.baseline.requests);
            probabilities.push(("errorRate.confidence", e.confidence));
            margins.push(("errorRate.maxRelativeIncrease", e.max_relative_increase));
            margins.push(("errorRate.maxAbsoluteIncrease", e.max_absolute_increase));
        }
        (None, Some(d)) => {
            required("distribution.canary", &d.canary);
            required("distribution.baseline", &d.baseline);
            probabilities.push(("distribution.confidence", d.confidence));
            margins.push(("distribution.maxRelativeShift", d.max_relative_shift));
            if let Some(step) = &d.step
                && let Err(e) = parse_step(step)
            {
                findings.push(Finding::error(
                    format!("{path}.distribution.step"),
                    e.to_string(),
                ));
            }
            if let Some(direction) = &d.direction
                && !matches!(direction.as_str(), "increase" | "decrease" | "either")
            {
                findings.push(Finding::error(
                    format!("{path}.distribution.direction"),
                    format!("{direction:?} is not one of increase, decrease, either"),
                ));
            }
        }
        _ => findings.push(Finding::error(
            path,
            "set exactly one of errorRate and distribution",
        )),
    }
    for (field, value) in probabilities {
        if let Some(c) = value
            && !(c > 0.0 && c < 1.0)
        {
            findings.push(Finding::error(
                format!("{path}.{field}"),
                format!("must be between 0 and 1, got {c}"),
            ));
        }
    }
    for (field, value) in margins {
        if let Some(m) = value
            && !(m >= 0.0 && m.is_finite())
        {
            findings.push(Finding::error(
                format!("{path}.{field}"),
                format!("must be 0 or more, got {m}"),
            ));
        }
    }
}
