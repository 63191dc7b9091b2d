//! The demo's scenario: a built-in 30-minute history of request and error rates per track (baseline steady,
//! canary (or blue-green preview) fine or, in `degrading`, at 12% errors from minute 8), the shipped `success-rate.yaml` it is judged
//! by, and [`StandIn`], the metric provider that answers that template's queries from the scenario as a
//! Prometheus holding its series would. `demo` and `demo_rollout` both play it.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use jiff::{SignedDuration, Timestamp};

use crate::api::Metric;
use crate::engine::template::Finding;
use crate::engine::value::MetricValue;
use crate::providers::provider::{Answer, MeasureAt, MetricProvider, Progress};
use crate::providers::{ProviderError, ProviderResult};

/// The template the demo runs, as shipped.
pub(super) const SUCCESS_RATE: &str = include_str!("../../analysis-templates/success-rate.yaml");

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ScenarioName {
    /// The canary's errors jump from 0.8% to 12% at minute 8: the analysis fails and the rollout rolls back.
    Degrading,
    /// The canary stays at 0.8% errors: the analysis succeeds.
    Healthy,
}

/// The scenario: request and error rates per track, minute by minute, from a fixed start.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    pub name: ScenarioName,
    pub start: Timestamp,
}

/// Requests per second each track serves.
const RPS: f64 = 20.0;
/// Scenario length and sample spacing.
const MINUTES: i64 = 30;
const STEP_SECONDS: i64 = 15;
/// The analysis starts once the canary has two minutes of traffic (the template's rate window).
const ANALYSIS_OFFSET_MINUTES: i64 = 2;

impl Scenario {
    pub fn new(name: ScenarioName) -> Scenario {
        // A fixed past window, so the same series can be backfilled into a real Prometheus.
        let start = Timestamp::from_second(1_767_225_600).unwrap_or(Timestamp::UNIX_EPOCH); // 2026-01-01T00:00:00Z
        Scenario { name, start }
    }

    /// Fraction of a track's requests that fail at `seconds` into the scenario.
    fn error_fraction(&self, service: &str, seconds: f64) -> f64 {
        match (service, self.name) {
            ("checkout-canary" | "checkout-preview", ScenarioName::Degrading)
                if seconds >= 8.0 * 60.0 =>
            {
                0.12
            }
            ("checkout-canary" | "checkout-preview", _) => 0.008,
            _ => 0.01,
        }
    }

    /// Cumulative `http_requests_total` for (service, 5xx or not) at `seconds`, integrated exactly.
    fn counter(&self, service: &str, errors: bool, seconds: f64) -> f64 {
        let mut total = 0.0;
        let mut t = 0.0;
        while t < seconds {
            let dt = (seconds - t).min(1.0);
            let f = self.error_fraction(service, t);
            total += RPS * dt * if errors { f } else { 1.0 - f };
            t += dt;
        }
        total.round()
    }

    /// The new version's track (behind the canary Service, or the blue-green Rollout's preview Service) and
    /// the baseline's.
    pub const SERVICES: [&'static str; 3] =
        ["checkout-canary", "checkout-preview", "checkout-baseline"];

    /// The series as OpenMetrics text.
    pub fn openmetrics(&self) -> String {
        let mut out = String::from("# TYPE http_requests counter\n");
        for service in Self::SERVICES {
            for (code, errors) in [("200", false), ("500", true)] {
                for step in 0..=(MINUTES * 60 / STEP_SECONDS) {
                    let seconds = step * STEP_SECONDS;
                    let value = self.counter(service, errors, seconds as f64);
                    let ts = self.start.as_second() + seconds;
                    out.push_str(&format!(
                        "http_requests_total{{service=\"{service}\",namespace=\"shop\",code=\"{code}\"}} {value} {ts}\n"
                    ));
                }
            }
        }
        out.push_str("# EOF\n");
        out
    }

    /// What Prometheus would answer for one of the shipped templates' ratio queries at `at`: the share of
    /// a service's requests over the query's range that were (or were not) 5xx. `None` for any other query.
    fn answer(&self, query: &str, at: Timestamp) -> Option<f64> {
        let service = Self::SERVICES
            .into_iter()
            .find(|s| query.contains(&format!("service=\"{s}\"")))?;
        let want_errors = if query.contains("code!~\"5..\"") {
            false
        } else if query.contains("code=~\"5..\"") {
            true
        } else {
            return None;
        };
        let window = query
            .split('[')
            .nth(1)
            .and_then(|rest| rest.split(']').next())
            .and_then(|w| crate::api::duration::parse_duration(w).ok())?;
        let end = at.duration_since(self.start).as_secs_f64();
        let start = (end - window.as_secs_f64()).max(0.0);
        let delta = |errors: bool| {
            self.counter(service, errors, end) - self.counter(service, errors, start)
        };
        let all = delta(true) + delta(false);
        Some(if all == 0.0 {
            f64::NAN
        } else {
            delta(want_errors) / all
        })
    }

    pub fn analysis_window(&self) -> (Timestamp, Timestamp) {
        let from = self.start + SignedDuration::from_mins(ANALYSIS_OFFSET_MINUTES);
        (from, self.start + SignedDuration::from_mins(MINUTES))
    }
}

/// The scenario in place of Prometheus: it answers the success-rate template's queries at the (virtual)
/// time asked, as a Prometheus holding the scenario's series would.
#[derive(Debug)]
pub(super) struct StandIn(pub(super) Scenario);

impl MetricProvider for StandIn {
    fn name(&self) -> &'static str {
        "prometheus"
    }

    /// The template is checked by the real providers' rules before it runs here.
    fn validate(&self, _metric: &Metric, _path: &str, _findings: &mut Vec<Finding>) {}

    fn measure<'a>(&'a self, metric: &'a Metric, at: MeasureAt<'a>) -> BoxFuture<'a, Progress> {
        let query = metric
            .provider
            .prometheus
            .as_ref()
            .and_then(|p| p.query.as_deref())
            .map(str::trim)
            .unwrap_or_default();
        let answer = match self.0.answer(query, at.eval_time.unwrap_or(at.now)) {
            Some(v) => Ok(Answer {
                result: ProviderResult {
                    value: MetricValue::Numbers(vec![v]),
                    metadata: BTreeMap::from([(
                        "ResolvedPrometheusQuery".to_string(),
                        query.to_string(),
                    )]),
                },
                verdict: None,
            }),
            None => Err(ProviderError::Invalid(
                "the demo's stand-in only answers the scenario's success/error-rate queries"
                    .to_string(),
            )),
        };
        Box::pin(async move { Progress::Finished(answer) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stand_in_answers_the_ratio_prometheus_would_compute() {
        let s = Scenario::new(ScenarioName::Degrading);
        let q = |code: &str| {
            format!(
                "sum(rate(x{{service=\"checkout-canary\",code{code}}}[2m])) / sum(rate(x{{service=\"checkout-canary\"}}[2m]))"
            )
        };
        let at = |minute: i64| s.start + SignedDuration::from_mins(minute);
        let ok = s.answer(&q("!~\"5..\""), at(5)).unwrap();
        assert!((ok - 0.992).abs() < 0.001, "{ok}");
        let bad = s.answer(&q("=~\"5..\""), at(12)).unwrap();
        assert!((bad - 0.12).abs() < 0.001, "{bad}");
        assert!(s.answer("up", at(5)).is_none());
        assert!(
            s.answer(&q("!~\"5..\""), s.start).unwrap().is_nan(),
            "no traffic yet is 0/0"
        );
    }

    #[test]
    fn the_openmetrics_series_are_cumulative_and_end_with_eof() {
        let text = Scenario::new(ScenarioName::Healthy).openmetrics();
        assert!(text.ends_with("# EOF\n"));
        let canary_ok: Vec<f64> = text
            .lines()
            .filter(|l| l.contains("checkout-canary") && l.contains("code=\"200\""))
            .filter_map(|l| l.split(' ').nth(1)?.parse().ok())
            .collect();
        assert_eq!(canary_ok.len(), 121);
        assert!(
            canary_ok.windows(2).all(|w| w[1] >= w[0]),
            "counters never go down"
        );
    }
}
