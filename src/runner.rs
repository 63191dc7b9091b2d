//! Runs one analysis from start to verdict on a [`Clock`]: asks `engine/analysis` what is due, measures it
//! (concurrently, so a slow provider never delays another metric), records, assesses, sleeps until the next
//! wake-up. With a virtual clock this is a backtest. Used by `canaryd analyze` and `canaryd demo`; the
//! daemon drives the same engine functions one reconcile at a time instead.

use std::sync::Arc;

use jiff::Timestamp;

use crate::api::{AnalysisRunStatus, Measurement, MetricResult};
use crate::engine::analysis::{self, AnalysisPlan, Assessment};
use crate::engine::compare;
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
    let providers = Arc::new(providers.clone());
    let mut status = analysis::start(&run.plan, clock.now());
    let mut terminate = false;
    loop {
        let now = clock.now();
        on_event(Event::Clock(now));
        if end.is_some_and(|end| now > end) || *stop.borrow() {
            terminate = true;
        }
        let due = analysis::due(&run.plan, &status, now, terminate);
        let eval_time = clock.is_virtual().then_some(now);
        let mut tasks = tokio::task::JoinSet::new();
        let started = status.started_at.as_ref().map_or(now, |t| t.0);
        for index in due {
            let (providers, secrets) = (providers.clone(), run.secrets.clone());
            let (Some(metric), Some(plan)) =
                (run.metrics.get(index).cloned(), run.plan.metrics.get(index))
            else {
                continue;
            };
            let window_start = compare::window_start(plan, started);
            let previous = status
                .metric_results
                .iter()
                .flatten()
                .find(|r| r.name == plan.name)
                .cloned();
            tasks.spawn(async move {
                let at = MeasureAt {
                    now,
                    eval_time,
                    secrets: &secrets,
                    window_start,
                    previous: previous.as_ref(),
                };
                (index, providers.measure(&metric, at).await)
            });
        }
        let mut outcomes = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            // A measurement task cannot panic on outside input; if one did, skipping it only delays the metric.
            if let Ok(outcome) = joined {
                outcomes.push(outcome);
            }
        }
        // Record in plan order so the status does not depend on which answer came first.
        outcomes.sort_by_key(|(index, _)| *index);
        for (index, outcome) in outcomes {
            let finished = clock.now();
            let metric_metadata = outcome.metric_metadata.clone();
            let measurement = outcome.into_measurement(now, finished);
            if analysis::record(&run.plan, &mut status, index, measurement, finished).is_err() {
                continue;
            }
            let name = &run.plan.metrics[index].name;
            if let Some(result) = status
                .metric_results
                .iter_mut()
                .flatten()
                .find(|r| &r.name == name)
            {
                if !metric_metadata.is_empty() {
                    result
                        .metadata
                        .get_or_insert_default()
                        .extend(metric_metadata);
                }
                if let Some(m) = result.measurements.last() {
                    on_event(Event::Measured {
                        at: now,
                        measurement: m,
                        result,
                    });
                }
            }
        }
        let assessment = analysis::assess(&run.plan, &mut status, clock.now(), terminate);
        if assessment.is_complete() {
            return (status, assessment);
        }
        let wake = match assessment.next_wakeup {
            Some(t) if t > now => t,
            // Overdue or nothing scheduled: look again shortly rather than spin.
            _ => now + jiff::SignedDuration::from_secs(1),
        };
        let wake = match end {
            Some(end) if wake > end => {
                // Past the backtest window: terminate just after its end.
                end + jiff::SignedDuration::from_secs(1)
            }
            _ => wake,
        };
        tokio::select! {
            _ = clock.sleep_until(wake) => {}
            // A dropped sender disables this branch instead of waking the loop forever.
            Ok(()) = stop.changed() => {}
        }
    }
}
