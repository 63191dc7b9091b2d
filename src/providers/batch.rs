//! Range-batched Prometheus queries for backtests (`analyze --from/--to`, `rehearse`): a metric measured
//! every `interval` on a virtual clock asks the same query at start, start + interval, ... So the first
//! measurement is an instant query (which also says whether the query is a scalar or a vector), followed by
//! a range query whose steps fall on the next measurement times; those measurements are answered from it.
//! An instant answer of several series is followed by none: each of its steps would be asked anyway.
//! A time off that grid (after an Error's 10-second retry, or a second run of the same query) is an instant
//! query that starts a new batch.
//!
//! The values are those instant queries would give: Prometheus evaluates a range query at each step exactly
//! as an instant query at that time. Where the two could differ, the instant query is asked instead: a
//! step holding more than one series (a range answer is sorted by labels, an instant vector is in
//! evaluation order, and Argo keeps the server's order), any range query that fails, and a query with an
//! `@` (`@ start()` and `@ end()` mean the range's ends in a range query). Owns the batching
//! only; the requests, their errors and the parsing of instant answers are `prometheus.rs`'s.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;

use super::provider::{Answer, MeasureAt, MetricProvider, Progress};
use super::sources::PrometheusProvider;
use super::{PrometheusRequest, ProviderError, ProviderResult, QueryKind};
use crate::api::Metric;
use crate::api::duration::parse_duration;
use crate::engine::template::Finding;
use crate::engine::value::MetricValue;

/// Steps a range query asks for at most (Prometheus refuses more than 11,000 points per series).
const MAX_POINTS: i64 = 10_000;
/// Steps fetched ahead for a metric without a count (a background analysis).
const AHEAD: i64 = 360;
/// Batches kept per query: rehearsals played at once each measure the same query at their own times.
const KEPT: usize = 64;

/// The Prometheus provider with range batching for queries evaluated at a backtest's virtual time; any
/// other measurement goes to `inner` as asked.
#[derive(Debug)]
pub struct Batched {
    inner: Arc<PrometheusProvider>,
    /// No batch reaches past this (a backtest's `--to`).
    horizon: Option<Timestamp>,
    batches: Mutex<Vec<(PrometheusRequest, Vec<Batch>)>>,
}

/// One range query's answers, by step time in milliseconds.
#[derive(Debug)]
struct Batch {
    start: i64,
    end: i64,
    step: i64,
    scalar: bool,
    /// `None`: the range query failed, so every time on its grid is asked as an instant query.
    values: Option<HashMap<i64, Vec<f64>>>,
    metadata: BTreeMap<String, String>,
}

enum Lookup {
    Hit(ProviderResult),
    /// On a batch's grid, but only an instant query gives the exact answer.
    Ask,
    Miss,
}

impl Batch {
    fn lookup(&self, at: i64) -> Lookup {
        if at < self.start || at > self.end || (at - self.start) % self.step != 0 {
            return Lookup::Miss;
        }
        let Some(values) = &self.values else {
            return Lookup::Ask;
        };
        let found = values.get(&at).map(Vec::as_slice).unwrap_or_default();
        let value = match (self.scalar, found) {
            (true, [v]) => MetricValue::Number(*v),
            (false, [] | [_]) => MetricValue::Numbers(found.to_vec()),
            _ => return Lookup::Ask,
        };
        Lookup::Hit(ProviderResult {
            value,
            metadata: self.metadata.clone(),
        })
    }
}

fn millis(t: Timestamp) -> i64 {
    t.as_millisecond()
}

/// The metric's interval and how many measurements it takes (`None`: until stopped).
fn schedule(metric: &Metric) -> Option<(Duration, Option<i64>)> {
    let interval = parse_duration(metric.interval.as_deref()?).ok()?;
    if interval.as_millis() == 0 {
        return None;
    }
    let count = match &metric.count {
        None => None,
        Some(IntOrString::Int(n)) => Some(i64::from(*n)),
        Some(IntOrString::String(s)) => Some(s.trim().parse::<i64>().ok()?),
    };
    Some((interval, count))
}

impl Batched {
    pub fn new(inner: Arc<PrometheusProvider>, horizon: Option<Timestamp>) -> Batched {
        Batched {
            inner,
            horizon,
            batches: Mutex::new(Vec::new()),
        }
    }

    fn lookup(&self, key: &PrometheusRequest, at: i64) -> Lookup {
        let batches = self
            .batches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some((_, kept)) = batches.iter().find(|(k, _)| k == key) else {
            return Lookup::Miss;
        };
        kept.iter()
            .rev()
            .map(|b| b.lookup(at))
            .find(|l| !matches!(l, Lookup::Miss))
            .unwrap_or(Lookup::Miss)
    }

    fn keep(&self, key: PrometheusRequest, batch: Batch) {
        let mut batches = self
            .batches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match batches.iter_mut().find(|(k, _)| *k == key) {
            Some((_, kept)) => {
                if kept.len() >= KEPT {
                    kept.remove(0);
                }
                kept.push(batch);
            }
            None => batches.push((key, vec![batch])),
        }
    }

    /// The range query for the measurements after the one at `at`, or `None` when there is at most one.
    fn ahead(
        &self,
        req: &PrometheusRequest,
        metric: &Metric,
        at: Timestamp,
    ) -> Option<PrometheusRequest> {
        let (interval, count) = schedule(metric)?;
        let step = SignedDuration::try_from(interval).ok()?;
        let steps = match (count, self.horizon) {
            (Some(c), _) => c - 1,
            // Until stopped: up to the horizon when there is one.
            (None, Some(_)) => MAX_POINTS,
            (None, None) => AHEAD,
        }
        .clamp(0, MAX_POINTS);
        let start = at.checked_add(step).ok()?;
        let mut end = at
            .checked_add(step.checked_mul(i32::try_from(steps).ok()?)?)
            .ok()?;
        if let Some(h) = self.horizon {
            end = end.min(h);
        }
        // Only the times on the grid: the last step at or before `end`.
        let whole =
            (end.as_millisecond() - start.as_millisecond()).div_euclid(step.as_millis() as i64);
        if whole < 1 {
            return None;
        }
        let end = start
            .checked_add(step.checked_mul(i32::try_from(whole).ok()?)?)
            .ok()?;
        let mut range = req.clone();
        range.kind = QueryKind::Range {
            start,
            end,
            step: interval,
        };
        Some(range)
    }

    async fn measure_at(
        &self,
        metric: &Metric,
        at: MeasureAt<'_>,
        time: Timestamp,
    ) -> Result<ProviderResult, ProviderError> {
        let Some(prom) = &metric.provider.prometheus else {
            return Err(ProviderError::Invalid(
                "the metric has no prometheus provider".to_string(),
            ));
        };
        let req = PrometheusRequest::from_metric(
            prom,
            self.inner.default_address.as_deref(),
            at.now,
            Some(time),
        )?
        .with_secret_values(at.secrets.iter().cloned());
        let mut key = req.clone();
        key.kind = QueryKind::Instant { time: None };
        match self.lookup(&key, millis(time)) {
            Lookup::Hit(result) => return Ok(result),
            Lookup::Ask => return self.inner.prometheus.query(&req).await,
            Lookup::Miss => {}
        }
        let Some(range) = self.ahead(&req, metric, time) else {
            return self.inner.prometheus.query(&req).await;
        };
        let instant = self.inner.prometheus.query(&req).await;
        let scalar = match &instant {
            Ok(ProviderResult {
                value: MetricValue::Number(_),
                ..
            }) => true,
            // Several series: their steps would be asked anyway, so their range answer (steps times series
            // samples) is not fetched.
            Ok(ProviderResult {
                value: MetricValue::Numbers(found),
                ..
            }) if found.len() <= 1 => false,
            // Nothing says what the range answers mean: leave the next times to instant queries.
            _ => return instant,
        };
        let body = self.inner.prometheus.range_body(&range).await;
        let QueryKind::Range { start, end, step } = range.kind else {
            return instant;
        };
        let metadata = instant
            .as_ref()
            .map(|r| {
                let mut m = r.metadata.clone();
                // Warnings belong to the one evaluation that raised them.
                m.retain(|k, _| k == "ResolvedPrometheusQuery");
                m
            })
            .unwrap_or_default();
        self.keep(
            key,
            Batch {
                start: millis(start),
                end: millis(end),
                step: step.as_millis() as i64,
                scalar,
                values: body.ok().and_then(|b| by_time(&b)),
                metadata,
            },
        );
        instant
    }
}

impl MetricProvider for Batched {
    fn name(&self) -> &'static str {
        "prometheus"
    }

    fn validate(&self, metric: &Metric, path: &str, findings: &mut Vec<Finding>) {
        self.inner.validate(metric, path, findings);
    }

    fn measure<'a>(&'a self, metric: &'a Metric, at: MeasureAt<'a>) -> BoxFuture<'a, Progress> {
        // `@ start()` and `@ end()` are the evaluation time in an instant query but the range's ends in a range
        // query: a query with an `@` (a modifier, or one inside a label value) is always asked as an instant.
        let batchable = metric.provider.prometheus.as_ref().is_some_and(|p| {
            p.range_query.is_none() && !p.query.as_deref().unwrap_or_default().contains('@')
        });
        match at.eval_time {
            Some(time) if batchable => Box::pin(async move {
                let answer = self.measure_at(metric, at, time).await;
                Progress::Finished(answer.map(|result| Answer {
                    result,
                    verdict: None,
                }))
            }),
            _ => self.inner.measure(metric, at),
        }
    }
}

// A range answer read with each sample's time, which the instant reader (`parse_query_response`) drops.

#[derive(Deserialize)]
struct RangeEnvelope {
    data: Option<RangeData>,
}

#[derive(Deserialize)]
struct RangeData {
    #[serde(rename = "resultType")]
    result_type: Option<String>,
    result: Option<Vec<RangeSeries>>,
}

#[derive(Deserialize)]
struct RangeSeries {
    values: Option<Vec<(f64, String)>>,
    /// Native histograms have no number to give.
    histograms: Option<serde::de::IgnoredAny>,
}

/// Every step's values, one per series that has a sample then; `None` for anything but a matrix of numbers.
fn by_time(body: &[u8]) -> Option<HashMap<i64, Vec<f64>>> {
    let envelope: RangeEnvelope = serde_json::from_slice(body).ok()?;
    let data = envelope.data?;
    if data.result_type.as_deref() != Some("matrix") {
        return None;
    }
    let mut out: HashMap<i64, Vec<f64>> = HashMap::new();
    for series in data.result.unwrap_or_default() {
        if series.histograms.is_some() {
            return None;
        }
        for (t, v) in series.values.unwrap_or_default() {
            let value = super::prometheus::parse_sample(&v)?;
            out.entry((t * 1000.0).round() as i64)
                .or_default()
                .push(value);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_with_one_series_answers_and_one_with_two_is_asked() {
        let body = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"a":"1"},"values":[[60,"0.5"],[120,"NaN"]]},
            {"metric":{"a":"2"},"values":[[120,"1"]]}]}}"#;
        let batch = Batch {
            start: 60_000,
            end: 180_000,
            step: 60_000,
            scalar: false,
            values: by_time(body),
            metadata: BTreeMap::new(),
        };
        let value = |at| match batch.lookup(at) {
            Lookup::Hit(r) => Some(r.value),
            _ => None,
        };
        assert_eq!(value(60_000), Some(MetricValue::Numbers(vec![0.5])));
        assert!(
            matches!(batch.lookup(120_000), Lookup::Ask),
            "two series: order unknown"
        );
        assert_eq!(
            value(180_000),
            Some(MetricValue::Numbers(vec![])),
            "no sample is []"
        );
        assert!(matches!(batch.lookup(70_000), Lookup::Miss), "off the grid");
        assert!(
            matches!(batch.lookup(240_000), Lookup::Miss),
            "past the end"
        );
    }

    #[test]
    fn a_scalar_needs_exactly_one_value_and_a_failed_range_asks_every_time() {
        let batch = Batch {
            start: 0,
            end: 60_000,
            step: 60_000,
            scalar: true,
            values: by_time(br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[0,"+Inf"]]}]}}"#),
            metadata: BTreeMap::new(),
        };
        assert!(
            matches!(batch.lookup(0), Lookup::Hit(r) if r.value == MetricValue::Number(f64::INFINITY))
        );
        assert!(matches!(batch.lookup(60_000), Lookup::Ask));
        let failed = Batch {
            values: None,
            ..batch
        };
        assert!(matches!(failed.lookup(0), Lookup::Ask));
        assert!(by_time(b"not json").is_none());
    }
}
