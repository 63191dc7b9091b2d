//! The measuring loop. One [`tick`]: observe the status, ask `engine/analysis` what is due at the clock's
//! `now` (stamped as a status stores it), measure it (concurrently, so a slow provider never delays another
//! metric), record, assess. The daemon's reconcile is one tick and a status write; [`run`] (`canaryd analyze`
//! and `canaryd demo`) ticks and sleeps until the next wake-up, so the command line runs an analysis exactly
//! as the daemon would. With a virtual clock this is a backtest.

use jiff::Timestamp;

use std::collections::BTreeMap;

use crate::api::{AnalysisPhase, AnalysisRunStatus, Measurement, MetricResult, SecretKeyRef};
use crate::engine::analysis::{self, AnalysisPlan, Assessment, PlanError};
use crate::engine::compare;
use crate::engine::compose::{self, ComposeError, RunSpec};
use crate::engine::template::{ProviderRules, Severity};
use crate::measure::{MeasurableMetric, MeasureAt, Providers};
use crate::providers::provider::RunRef;
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
    /// A provider's own check of the metric (after args were substituted) failed.
    #[error("Analysis spec invalid: metric {metric:?}: {path}: {message}")]
    Provider {
        metric: String,
        path: String,
        message: String,
    },
}

impl PreparedRun {
    /// Resolves a run's args (`supplied` values win; `read_secret` reads `valueFrom.secretKeyRef`),
    /// substitutes them into every metric, runs the providers' checks (`rules`) on what results, compiles the
    /// conditions and builds the plan. `prometheus` overrides every Prometheus metric's address. The one
    /// preparation shared by the CLI and the daemon.
    pub fn prepare(
        spec: &RunSpec,
        supplied: &BTreeMap<String, String>,
        read_secret: &dyn Fn(&SecretKeyRef) -> Result<String, String>,
        prometheus: Option<&str>,
        rules: &dyn ProviderRules,
    ) -> Result<PreparedRun, PrepareError> {
        let values = compose::resolve_args(&spec.args, supplied, read_secret)?;
        let mut metrics = Vec::new();
        for metric in &spec.metrics {
            let mut resolved = compose::resolve_metric(metric, &values, &compare::keep_window)?;
            if let Some(address) = prometheus {
                override_address(&mut resolved, address);
            }
            let mut findings = Vec::new();
            rules.check(&resolved, "provider", &mut findings);
            if let Some(f) = findings.into_iter().find(|f| f.severity == Severity::Error) {
                // Secret values may have been substituted into what the message quotes.
                return Err(PrepareError::Provider {
                    metric: resolved.name.clone(),
                    path: f.path,
                    message: crate::scrub::text(f.message, &values.secrets),
                });
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

impl Ticked {
    /// Each metric of `run` this tick recorded a measurement of (its index into the plan, its name), with its
    /// result and that measurement, in plan order: what every driver reports after a tick.
    pub fn measured<'t>(
        &'t self,
        run: &'t PreparedRun,
    ) -> impl Iterator<Item = (usize, &'t str, &'t MetricResult, &'t Measurement)> + 't {
        self.recorded.iter().filter_map(|&index| {
            let name = run.plan.metrics.get(index)?.name.as_str();
            let result = self.status.result(name)?;
            Some((index, name, result, result.measurements.last()?))
        })
    }
}

/// One pass of the measuring loop on `status` (`None`: the run starts now) of the run `who`. `terminate` is
/// `spec.terminate` (or the end of a backtest): measurements in flight are stopped. Queries of a virtual clock
/// are evaluated at its time.
pub async fn tick(
    run: &PreparedRun,
    who: &RunRef,
    providers: &Providers,
    status: Option<AnalysisRunStatus>,
    clock: &Clock,
    terminate: bool,
) -> Ticked {
    let now = clock.stamp();
    let (mut status, due) = analysis::begin(&run.plan, status, now, terminate);
    let eval_time = clock.is_virtual().then_some(now);
    let finished = || clock.stamp();
    let at = Due {
        who,
        now,
        eval_time,
        finished: &finished,
    };
    let mut recorded = measure_due(run, providers, &mut status, &due.measure, &at).await;
    recorded.extend(terminate_due(run, providers, &mut status, &due.terminate, &at).await);
    recorded.sort_unstable();
    collect_garbage(run, providers, &status, &at).await;
    let assessment = analysis::assess(&run.plan, &mut status, clock.stamp(), terminate);
    Ticked {
        status,
        assessment,
        recorded,
        now,
    }
}

/// When and for whom one tick measures.
struct Due<'a> {
    who: &'a RunRef,
    /// When measurements start.
    now: Timestamp,
    eval_time: Option<Timestamp>,
    /// When a measurement finishes.
    finished: &'a (dyn Fn() -> Timestamp + Sync),
}

impl Due<'_> {
    fn at<'a>(
        &'a self,
        run: &'a PreparedRun,
        status: &'a AnalysisRunStatus,
        index: usize,
    ) -> Option<MeasureAt<'a>> {
        let plan = run.plan.metrics.get(index)?;
        let started = status.started_at.as_ref().map_or(self.now, |t| t.0);
        Some(MeasureAt {
            now: self.now,
            eval_time: self.eval_time,
            secrets: &run.secrets,
            window_start: compare::window_start(plan, started),
            result: status.result(&plan.name),
            run: self.who,
        })
    }
}

/// Measures the metrics `due` (indexes into the plan) concurrently, so a slow provider never delays another
/// metric, and records each outcome in plan order, so the status does not depend on which answer came first.
/// Measurements start at `now` (one resumed keeps its start) and finish at `finished()`. Returns the indexes
/// recorded.
async fn measure_due(
    run: &PreparedRun,
    providers: &Providers,
    status: &mut AnalysisRunStatus,
    due: &[usize],
    tick: &Due<'_>,
) -> Vec<usize> {
    // Polled together on this task: no metric waits for another's answer, and a measurement due now does not
    // queue behind every other task of the process before its query is sent.
    let shared: &AnalysisRunStatus = status;
    let measurements = due.iter().filter_map(|&index| {
        let (metric, at) = (run.metrics.get(index)?, tick.at(run, shared, index)?);
        let started = at
            .in_flight()
            .and_then(|m| m.started_at.as_ref())
            .map_or(tick.now, |t| t.0);
        Some(async move {
            (
                index,
                started,
                crate::measure::measure(providers, metric, at).await,
            )
        })
    });
    let mut outcomes = futures::future::join_all(measurements).await;
    outcomes.sort_by_key(|(index, _, _)| *index);
    let mut recorded = Vec::new();
    for (index, started, outcome) in outcomes {
        let finished = (tick.finished)();
        let metric_metadata = outcome.metric_metadata.clone();
        let measurement = outcome.into_measurement(started, finished);
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

/// Stops the measurements in flight of metrics `due` (the run is terminating) concurrently, and records each
/// as it ended, in plan order. Returns the indexes recorded.
async fn terminate_due(
    run: &PreparedRun,
    providers: &Providers,
    status: &mut AnalysisRunStatus,
    due: &[usize],
    tick: &Due<'_>,
) -> Vec<usize> {
    let shared: &AnalysisRunStatus = status;
    let stops = due.iter().filter_map(|&index| {
        let (metric, at) = (run.metrics.get(index)?, tick.at(run, shared, index)?);
        Some(async move {
            let ended = crate::measure::terminate(providers, metric, at, (tick.finished)()).await;
            (index, ended)
        })
    });
    let mut ended = futures::future::join_all(stops).await;
    ended.sort_by_key(|(index, _)| *index);
    let mut recorded = Vec::new();
    for (index, measurement) in ended {
        let Some(measurement) = measurement else {
            continue;
        };
        let finished = (tick.finished)();
        if analysis::record(&run.plan, status, index, measurement, finished).is_ok() {
            recorded.push(index);
        }
    }
    recorded
}

/// Deletes what measurements past each metric's retention left behind (a job metric's older Jobs), as
/// Argo's garbage collection does after trimming them. Every tick sweeps, so a delete that fails (logged) is
/// tried again on the next; it never touches the status.
async fn collect_garbage(
    run: &PreparedRun,
    providers: &Providers,
    status: &AnalysisRunStatus,
    tick: &Due<'_>,
) {
    let sweeps = run
        .metrics
        .iter()
        .enumerate()
        .filter_map(|(index, metric)| {
            let (plan, at) = (run.plan.metrics.get(index)?, tick.at(run, status, index)?);
            let provider = providers.of(&metric.metric).ok()?;
            Some(async move {
                let swept = provider
                    .garbage_collect(&metric.metric, at, plan.kept())
                    .await;
                (&plan.name, swept)
            })
        });
    for (metric, swept) in futures::future::join_all(sweeps).await {
        if let Err(e) = swept {
            let error = crate::scrub::text(e.to_string(), &run.secrets);
            tracing::warn!(
                run = %format!("{}/{}", tick.who.namespace, tick.who.name),
                metric = %metric,
                %error,
                "Cannot delete what measurements past the retention left; trying again on the next tick"
            );
        }
    }
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

/// One step of one run, wherever it lives (the daemon's API server, a rehearsal's memory): a run whose spec
/// could not be prepared ends Error with the reason ([`analysis::cannot_run`]); any other is [`tick`]ed,
/// terminated as `terminate` says. The step the daemon's reconcile and the rehearsal share; [`run`] ticks a
/// prepared run to completion for `analyze` and `demo`.
pub async fn step(
    prepared: Result<&PreparedRun, &PrepareError>,
    who: &RunRef,
    providers: &Providers,
    status: Option<AnalysisRunStatus>,
    clock: &Clock,
    terminate: bool,
) -> Ticked {
    match prepared {
        Ok(run) => tick(run, who, providers, status, clock, terminate).await,
        Err(e) => {
            let now = clock.stamp();
            let status = analysis::cannot_run(status, e.to_string(), now);
            Ticked {
                assessment: Assessment {
                    phase: AnalysisPhase::Error,
                    message: status.message.clone(),
                    next_wakeup: None,
                },
                status,
                recorded: Vec::new(),
                now,
            }
        }
    }
}

/// Runs to completion. `end` (a backtest's `--to`) terminates the run when the clock passes it; a `true` on
/// `stop` (Ctrl-C) terminates it as `spec.terminate` would.
pub async fn run(
    run: &PreparedRun,
    who: &RunRef,
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
        let ticked = tick(run, who, providers, status.take(), clock, terminate).await;
        for (_, _, result, measurement) in ticked.measured(run) {
            on_event(Event::Measured {
                at: ticked.now,
                measurement,
                result,
            });
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
