//! The seam every metric source implements ([`MetricProvider`]): check its part of a metric's `provider`,
//! take one measurement (finished, or still running with a time to look again), stop one still running.
//! Providers return typed values; conditions, phases and counters are the engine's (`measure.rs` applies
//! them).

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use jiff::Timestamp;

use super::{ProviderError, ProviderResult};
use crate::api::Metric;
use crate::engine::judge::Verdict;
use crate::engine::template::Finding;

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

/// What a provider found.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub result: ProviderResult,
    /// A provider that judges by itself (`canaryd/compare`): its verdict, which decides a metric without
    /// conditions.
    pub verdict: Option<Verdict>,
}

/// Where one measurement stands when [`MetricProvider::measure`] returns.
#[derive(Debug)]
pub enum Progress {
    Finished(Result<Answer, ProviderError>),
    /// Still running (a Job, say): measure again at `resume_at` to collect it.
    Running {
        resume_at: Timestamp,
    },
}

/// A metric source canaryd runs.
pub trait MetricProvider: Send + Sync + std::fmt::Debug {
    /// The name a metric's `provider` gives it: `prometheus`, `web`, `canaryd/compare`.
    fn name(&self) -> &'static str;

    /// Checks this provider's part of `metric.provider`, found at `path`, before any measurement: the one
    /// place its rules live.
    fn validate(&self, metric: &Metric, path: &str, findings: &mut Vec<Finding>);

    /// Takes one measurement of `metric` (args already substituted).
    fn measure<'a>(&'a self, metric: &'a Metric, at: MeasureAt<'a>) -> BoxFuture<'a, Progress>;

    /// Stops a measurement still running; providers that answer at once have nothing to stop.
    fn terminate<'a>(&'a self, _metric: &'a Metric) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}
