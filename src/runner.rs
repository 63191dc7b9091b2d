//! The measuring loop. One [`tick`]: observe the status, ask `engine/analysis` what is due at the clock's
//! `now` (stamped as a status stores it), measure it (concurrently, so a slow provider never delays another
//! metric), record, assess. The daemon's reconcile is one tick and a status write; [`run`] (`canaryd analyze`
//! and `canaryd demo`) ticks and sleeps until the next wake-up, so the command line runs an analysis exactly
//! as the daemon would. With a virtual clock this is a backtest.

use jiff::Timestamp;

use std::collections::BTreeMap;

use crate::api::{AnalysisRunStatus, Measurement, MetricResult, SecretKeyRef};
use crate::engine::analysis::{self, AnalysisPlan, Assessment, PlanError};
use crate::engine::compare;
use crate::engine::compose::{self, ComposeError, RunSpec};
use crate::measure::{MeasurableMetric, MeasureAt, Providers};
use crate::time::Clock;

/// Everything one run needs, resolved.
#[derive(Debug, Clone)]
pub struct PreparedRun {
    pub plan: AnalysisPlan,
    /// In plan order.
    pub metrics: Vec<MeasurableMetric>,
    /// Values that must never be shown.
    pub secrets: Vec<String>,
}

/// Why a run cannot be prepared; the message is for the run's author.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PrepareError {
    #[error(transparent)]
    Compose(#[from] ComposeError),
    #[error("{0}")]
    Condition(String),
    #[error(transparent)]
    Plan(#[from] PlanError),
}

impl PreparedRun {
    /// Resolves a run's args (`supplied` values win; `read_secret` reads `valueFrom.secretKeyRef`),
    /// substitutes them into every metric, compiles the conditions and builds the plan. `prometheus`
    /// overrides every Prometheus metric's address. The one preparation shared by the CLI and the daemon.
    pub fn prepare(
        spec: &RunSpec,
        supplied: &BTreeMap<String, String>,
        read_secret: &dyn Fn(&SecretKeyRef) -> Result<String, String>,
        prometheus: Option<&str>,
    ) -> Result<PreparedRun, PrepareError> {
        let values = compose::resolve_args(&spec.args, supplied, read_secret)?;
        let mut metrics = Vec::new();
        for metric in &spec.metrics {
            let mut resolved = compose::resolve_metric(metric, &values, &compare::keep_window)?;
            if let Some(address) = prometheus {
                override_address(&mut resolved, address);
            }
            metrics.push(MeasurableMetric::new(resolved).map_err(PrepareError::Condition)?);
        }
        let resolved: Vec<crate::api::Metric> = metrics.iter().map(|m| m.metric.clone()).collect();
        let plan = AnalysisPlan::from_spec(&resolved, &spec.dry_run, &spec.measurement_retention)?;
        Ok(PreparedRun {
            plan,
            metrics,
            secrets: values.secrets,
        })
    }
}

/// What the run reports as it goes.
pub enum Event<'a> {
    Measured {
        at: Timestamp,
        measurement: &'a Measurement,
        result: &'a MetricResult,
    },
    /// The clock moved (backtests show progress with it).
    Clock(Timestamp),
}

/// What one [`tick`] left.
#[derive(Debug)]
pub struct Ticked {
    pub status: AnalysisRunStatus,
    pub assessment: Assessment,
    /// The metrics (indexes into the plan) measured and recorded, in plan order.
    pub recorded: Vec<usize>,
    /// The instant the tick measured at (stamped).
    pub now: Timestamp,
}

/// One pass of the measuring loop on `status` (`None`: the run starts now). `terminate` is `spec.terminate`
/// (or the end of a backtest). Queries of a virtual clock are evaluated at its time.
pub async fn tick(
    run: &PreparedRun,
    providers: &Providers,
    status: Option<AnalysisRunStatus>,
    clock: &Clock,
    terminate: bool,
) -> Ticked {
    let now = clock.stamp();
    let (mut status, due) = analysis::begin(&run.plan, status, now, terminate);
    let eval_time = clock.is_virtual().then_some(now);
    let recorded = measure_due(run, providers, &mut status, &due, now, eval_time, &|| {
        clock.stamp()
    })
    .await;
    let assessment = analysis::assess(&run.plan, &mut status, clock.stamp(), terminate);
    Ticked {
        status,
        assessment,
        recorded,
        now,
    }
}

/// Measures the metrics `due` (indexes into the plan) concurrently, so a slow provider never delays another
/// metric, and records each outcome in plan order, so the status does not depend on which answer came first.
/// Measurements start at `now` and finish at `finished()`. Returns the indexes recorded.
async fn measure_due(
    run: &PreparedRun,
    providers: &Providers,
    status: &mut AnalysisRunStatus,
    due: &[usize],
    now: Timestamp,
    eval_time: Option<Timestamp>,
    finished: &(dyn Fn() -> Timestamp + Sync),
) -> Vec<usize> {
    let started = status.started_at.as_ref().map_or(now, |t| t.0);
    // Polled together on this task: no metric waits for another's answer, and a measurement due now does not
    // queue behind every other task of the process before its query is sent.
    let measurements = due.iter().filter_map(|&index| {
        let (metric, plan) = (run.metrics.get(index)?, run.plan.metrics.get(index)?);
        // Only the metadata: the measurements themselves are not the provider's business.
        let previous_metadata = status.result(&plan.name).and_then(|r| r.metadata.as_ref());
        let at = MeasureAt {
            now,
            eval_time,
            secrets: &run.secrets,
            window_start: compare::window_start(plan, started),
            previous_metadata,
        };
        Some(async move { (index, crate::measure::measure(providers, metric, at).await) })
    });
    let mut outcomes = futures::future::join_all(measurements).await;
    outcomes.sort_by_key(|(index, _)| *index);
    let mut recorded = Vec::new();
    for (index, outcome) in outcomes {
        let finished = finished();
        let metric_metadata = outcome.metric_metadata.clone();
        let measurement = outcome.into_measurement(now, finished);
        if analysis::record(&run.plan, status, index, measurement, finished).is_err() {
            continue;
        }
        let Some(name) = run.plan.metrics.get(index).map(|m| &m.name) else {
            continue;
        };
        if !metric_metadata.is_empty()
            && let Some(result) = status.result_mut(name)
        {
            result
                .metadata
                .get_or_insert_default()
                .extend(metric_metadata);
        }
        recorded.push(index);
    }
    recorded
}

/// A forced Prometheus address (`analyze --prometheus`) applies to every Prometheus a metric asks, directly
/// or through canaryd/compare.
fn override_address(metric: &mut crate::api::Metric, address: &str) {
    if let Some(prom) = metric.provider.prometheus.as_mut() {
        prom.address = Some(address.to_string());
    }
    let compare = metric
        .provider
        .plugin
        .as_mut()
        .and_then(|p| p.get_mut(crate::api::compare::COMPARE_PLUGIN));
    if let Some(serde_json::Value::Object(spec)) = compare {
        spec.insert(
            "address".to_string(),
            serde_json::Value::String(address.to_string()),
        );
    }
}

/// One second later, unless that is past the last instant a timestamp can hold (`--to 9999-12-31T...`).
fn after_a_second(t: Timestamp) -> Option<Timestamp> {
    t.checked_add(jiff::SignedDuration::from_secs(1)).ok()
}

/// Runs to completion. `end` (a backtest's `--to`) terminates the run when the clock passes it; a `true` on
/// `stop` (Ctrl-C) terminates it as `spec.terminate` would.
pub async fn run(
    run: &PreparedRun,
    providers: &Providers,
    clock: &Clock,
    end: Option<Timestamp>,
    mut stop: tokio::sync::watch::Receiver<bool>,
    on_event: &mut dyn FnMut(Event<'_>),
) -> (AnalysisRunStatus, Assessment) {
    let mut status = None;
    let mut terminate = false;
    loop {
        let now = clock.now();
        on_event(Event::Clock(now));
        // A window ending at the last representable instant ends there: there is no "just after" it.
        let past = |end: Timestamp| now > end || (now == end && after_a_second(end).is_none());
        if end.is_some_and(past) || *stop.borrow() {
            terminate = true;
        }
        let ticked = tick(run, providers, status.take(), clock, terminate).await;
        for index in &ticked.recorded {
            if let Some(result) = run
                .plan
                .metrics
                .get(*index)
                .and_then(|m| ticked.status.result(&m.name))
                && let Some(m) = result.measurements.last()
            {
                on_event(Event::Measured {
                    at: ticked.now,
                    measurement: m,
                    result,
                });
            }
        }
        let (assessment, next) = (ticked.assessment, ticked.status);
        if assessment.is_complete() {
            return (next, assessment);
        }
        status = Some(next);
        let wake = match assessment.next_wakeup {
            Some(t) if t > now => t,
            // Overdue or nothing scheduled: look again shortly rather than spin.
            _ => after_a_second(now).unwrap_or(now),
        };
        let wake = match end {
            // Past the backtest window: terminate just after its end.
            Some(end) if wake > end => after_a_second(end).unwrap_or(end),
            _ => wake,
        };
        tokio::select! {
            _ = clock.sleep_until(wake) => {}
            // A dropped sender disables this branch instead of waking the loop forever.
            Ok(()) = stop.changed() => {}
        }
    }
}
