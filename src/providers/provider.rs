//! The seam every metric source implements ([`MetricProvider`]): check its part of a metric's `provider`,
//! take one measurement (finished, or still running with a time to look again), stop one still running.
//! Providers return typed values; conditions, phases and counters are the engine's (`measure.rs` applies
//! them).

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use jiff::Timestamp;

use super::{ProviderError, ProviderResult};
use crate::api::{AnalysisPhase, Measurement, Metric, MetricResult};
use crate::engine::compare::Judgement;
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
    /// The metric's result so far: `canaryd/compare` keeps its error-rate history in its metadata, a Job is
    /// numbered by its counters, and its last measurement may be one in flight to collect or stop.
    pub result: Option<&'a MetricResult>,
    /// The run measured: what a provider that creates objects names and owns them by.
    pub run: &'a RunRef,
}

impl MeasureAt<'_> {
    /// The measurement this one resumes: the metric's last, still running.
    pub fn in_flight(&self) -> Option<&Measurement> {
        crate::engine::analysis::in_flight(self.result)
    }
}

/// The run a measurement belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRef {
    pub namespace: String,
    pub name: String,
    /// Names and labels what the run creates; the AnalysisRun's UID in the daemon.
    pub uid: String,
    /// Whether `uid` is an AnalysisRun on the API server, which then owns what the run creates (deleting the
    /// run deletes them). `canaryd analyze` has no such object.
    pub owned: bool,
}

impl RunRef {
    /// A run that exists only in this process (`canaryd analyze`): named `name`, in `namespace`, with an id
    /// of its own made from `now` and the process id, so two invocations never share a Job name.
    pub fn local(name: &str, namespace: &str, now: Timestamp) -> RunRef {
        let id = format!("{:x}-{:x}", now.as_nanosecond(), std::process::id());
        RunRef {
            namespace: namespace.to_string(),
            name: name.to_string(),
            uid: id,
            owned: false,
        }
    }
}

/// What a provider found.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub result: ProviderResult,
    /// A provider that judges by itself (`canaryd/compare`): its judgement, whose verdict decides a metric
    /// without conditions and whose sparse-traffic reason becomes the measurement's message.
    pub verdict: Option<Judgement>,
}

/// Where one measurement stands when [`MetricProvider::measure`] returns.
#[derive(Debug)]
pub enum Progress {
    Finished(Result<Answer, ProviderError>),
    /// Still running (a Job, say): measure again at `resume_at` to collect it. `metadata` is kept on the
    /// measurement (what to collect or stop).
    Running {
        resume_at: Timestamp,
        metadata: BTreeMap<String, String>,
    },
    /// A provider whose outcome is the phase itself (a Job: Complete or Failed), conditions aside.
    Ended {
        phase: AnalysisPhase,
        message: Option<String>,
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

    /// Stops the measurement in flight (`at.in_flight()`) of a terminating run; providers that answer at once
    /// have nothing to stop. The engine ends the measurement (`engine::analysis::terminated`).
    fn terminate<'a>(
        &'a self,
        _metric: &'a Metric,
        _at: MeasureAt<'a>,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async { Ok(()) })
    }

    /// Deletes what the measurements past the metric's retention left behind, keeping what the newest `keep`
    /// need (a Job per measurement: all but the newest `keep` Jobs). Called after every tick, whether or not it
    /// measured, so one that fails is tried again on the next; providers that create nothing have nothing to
    /// delete.
    fn garbage_collect<'a>(
        &'a self,
        _metric: &'a Metric,
        _at: MeasureAt<'a>,
        _keep: usize,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async { Ok(()) })
    }
}
