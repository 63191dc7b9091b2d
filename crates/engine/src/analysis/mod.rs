//! The analysis state machine, with Argo Rollouts' semantics: which metrics are due at `now`, how a finished
//! measurement updates its metric's counters, and how counters and limits become metric and run phases, the
//! summaries and the next wake-up. All state lives in `AnalysisRunStatus` (Argo's fields), so a restarted
//! daemon resumes from the status alone without losing or repeating a measurement.
//!
//! It must not evaluate conditions, substitute args, call providers or read a clock: measurements arrive with
//! their phase already assessed and `now` is always an argument.

mod announce;
mod plan;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{AnalysisPhase, AnalysisRunStatus, Measurement, MetricResult, RunSummary};

pub use announce::{Announcement, announcements};
pub use plan::{
    AnalysisPlan, DEFAULT_CONSECUTIVE_ERROR_LIMIT, DEFAULT_MEASUREMENT_RETENTION, LimitRule,
    MetricPlan, PlanError, Written, WrittenLimits, dry_run_flags, limit_rules,
};

/// Argo's `DefaultErrorRetryInterval`: after an Error the metric is measured again this soon, whatever its
/// interval.
pub const ERROR_RETRY_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

use crate::api::reasons::{METRIC_TERMINATED, RUN_TERMINATED};

/// What the run looks like after [`assess`].
#[derive(Debug, Clone, PartialEq)]
pub struct Assessment {
    pub phase: AnalysisPhase,
    pub message: Option<String>,
    /// When something is next due; `None` once the run is complete. It may lie in the past (an overdue
    /// measurement after a restart, an in-flight one without `resumeAt`): then measure right away.
    pub next_wakeup: Option<Timestamp>,
}

impl Assessment {
    pub fn is_complete(&self) -> bool {
        self.phase.is_completed()
    }
}

/// `record` was handed a metric index the plan does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the analysis has no metric number {0}")]
pub struct UnknownMetric(pub usize);

/// A run that can never be measured (its spec cannot be prepared, or it does not decode) ends Error at `now`
/// with `reason`, keeping the status it had: started when it first was, completed now. One rule for the
/// daemon and the rehearsal, rather than retrying forever.
pub fn cannot_run(
    status: Option<AnalysisRunStatus>,
    reason: String,
    now: Timestamp,
) -> AnalysisRunStatus {
    let mut status = status.unwrap_or_default();
    status.phase = Some(AnalysisPhase::Error);
    status.message = Some(reason);
    status.started_at.get_or_insert(Time(now));
    status.completed_at = Some(Time(now));
    status
}

/// A fresh status for a run starting at `now`: every metric Pending, the run Running.
pub fn start(plan: &AnalysisPlan, now: Timestamp) -> AnalysisRunStatus {
    let mut status = AnalysisRunStatus::default();
    assess(plan, &mut status, now, false);
    status
}

/// What one tick is to do, by metric (indexes into `plan.metrics`, in plan order).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Due {
    /// Take a measurement, or collect the one in flight (its provider is asked again).
    pub measure: Vec<usize>,
    /// Stop the measurement in flight: the run is terminating. Its provider stops the work (a Job is
    /// deleted) and [`terminated`] ends the measurement.
    pub terminate: Vec<usize>,
}

/// The metrics (indexes into `plan.metrics`) to measure at `now`. Nothing is due once the run is complete or
/// terminating; an in-flight measurement is due again at its `resumeAt`.
pub fn due(
    plan: &AnalysisPlan,
    status: &AnalysisRunStatus,
    now: Timestamp,
    terminate: bool,
) -> Vec<usize> {
    if status.phase.is_some_and(AnalysisPhase::is_completed) || terminating(plan, status, terminate)
    {
        return Vec::new();
    }
    let run_start = started(status, now);
    plan.metrics
        .iter()
        .enumerate()
        .filter(|(_, m)| next_due(m, status.result(&m.name), run_start).is_some_and(|at| at <= now))
        .map(|(i, _)| i)
        .collect()
}

/// The metrics (indexes into `plan.metrics`) whose measurement in flight is to be stopped at once: all of
/// them while the run is terminating (Argo resumes an in-flight measurement of a terminating run to terminate
/// it, whatever its `resumeAt`), none otherwise.
pub fn to_terminate(
    plan: &AnalysisPlan,
    status: &AnalysisRunStatus,
    terminate: bool,
) -> Vec<usize> {
    if status.phase.is_some_and(AnalysisPhase::is_completed)
        || !terminating(plan, status, terminate)
    {
        return Vec::new();
    }
    plan.metrics
        .iter()
        .enumerate()
        .filter(|(_, p)| in_flight(status.result(&p.name)).is_some())
        .map(|(i, _)| i)
        .collect()
}

/// The metric's measurement still running, if its last one is.
pub fn in_flight(result: Option<&MetricResult>) -> Option<&Measurement> {
    result
        .filter(|r| !r.phase.is_completed())
        .and_then(|r| r.measurements.last())
        .filter(|m| !m.phase.is_completed())
}

/// An in-flight measurement of a terminating run, once its provider was asked to stop it (`stopped`: how
/// that went). Argo's job provider ends it Inconclusive with "Metric Terminated" (Argo Rollouts #4602: a
/// Job cut short proved nothing); a provider that could not stop it ends it Error with why.
pub fn terminated(mut m: Measurement, stopped: Result<(), String>, now: Timestamp) -> Measurement {
    match stopped {
        Ok(()) => {
            m.phase = AnalysisPhase::Inconclusive;
            m.message = Some(METRIC_TERMINATED.to_string());
        }
        Err(reason) => {
            m.phase = AnalysisPhase::Error;
            m.message = Some(reason);
        }
    }
    m.finished_at = Some(Time(now));
    m
}

/// When something is next due by `status` alone (a run not started yet starts at `now`); `None` once the run
/// is complete. It may lie in the past: then it is due right away.
pub fn next_wakeup(
    plan: &AnalysisPlan,
    status: &AnalysisRunStatus,
    now: Timestamp,
) -> Option<Timestamp> {
    if status.phase.is_some_and(AnalysisPhase::is_completed) {
        return None;
    }
    let run_start = started(status, now);
    plan.metrics
        .iter()
        .filter_map(|m| next_due(m, status.result(&m.name), run_start))
        .min()
}

/// Stores one measurement of metric `metric`. A completed measurement updates the counters (an Error never
/// uses up `count`); one still Running (e.g. with `resumeAt`) is kept in flight and replaced by the `record`
/// that completes it. Missing
/// `startedAt`/`finishedAt` are filled with `now`. Only the last `retention` measurements are kept.
pub fn record(
    plan: &AnalysisPlan,
    status: &mut AnalysisRunStatus,
    metric: usize,
    mut m: Measurement,
    now: Timestamp,
) -> Result<(), UnknownMetric> {
    let p = plan.metrics.get(metric).ok_or(UnknownMetric(metric))?;
    let r = result_mut(status, p);
    if m.started_at.is_none() {
        m.started_at = Some(Time(now));
    }
    if m.phase.is_completed() {
        if m.finished_at.is_none() {
            m.finished_at = Some(Time(now));
        }
        count(r, m.phase);
    }
    // Completing an in-flight measurement replaces it rather than adding a second one.
    match r.measurements.last_mut() {
        Some(last) if !last.phase.is_completed() => *last = m,
        _ => {
            // Room is made before the push, so a full history keeps its buffer rather than doubling it: a
            // status is copied for every reconcile, tens of thousands at once in a busy daemon.
            let excess = (r.measurements.len() + 1).saturating_sub(p.kept());
            r.measurements.drain(..excess);
            r.measurements.push(m);
        }
    }
    let excess = r.measurements.len().saturating_sub(p.kept());
    r.measurements.drain(..excess);
    Ok(())
}

fn count(r: &mut MetricResult, phase: AnalysisPhase) {
    let counter = match phase {
        AnalysisPhase::Successful => &mut r.successful,
        AnalysisPhase::Failed => &mut r.failed,
        AnalysisPhase::Inconclusive => &mut r.inconclusive,
        AnalysisPhase::Error => &mut r.error,
        AnalysisPhase::Pending | AnalysisPhase::Running => return,
    };
    *counter = counter.saturating_add(1);
    if phase == AnalysisPhase::Error {
        r.consecutive_error = r.consecutive_error.saturating_add(1);
    } else {
        r.count = r.count.saturating_add(1);
        r.consecutive_error = 0;
    }
    if phase == AnalysisPhase::Successful {
        r.consecutive_success = r.consecutive_success.saturating_add(1);
    } else {
        r.consecutive_success = 0;
    }
}

/// Brings metric phases, the run phase and message, the summaries and `startedAt`/`completedAt` up to date
/// at `now`. `terminate` is `spec.terminate` (or the end of a backtest). Once a non-dry-run metric ends Failed,
/// Error or Inconclusive, the run terminates too: unfinished metrics end Successful.
pub fn assess(
    plan: &AnalysisPlan,
    status: &mut AnalysisRunStatus,
    now: Timestamp,
    terminate: bool,
) -> Assessment {
    let run_start = started(status, now);
    status.started_at.get_or_insert(Time(run_start));
    for p in &plan.metrics {
        let r = result_mut(status, p);
        r.dry_run = p.dry_run;
    }
    if let Some(phase) = status.phase.filter(|p| p.is_completed()) {
        return Assessment {
            phase,
            message: status.message.clone(),
            next_wakeup: None,
        };
    }

    // Two passes: a metric that ends badly in the first terminates the run, which ends the others in the second.
    // A measurement in flight is not ended here: its provider must stop it first (`to_terminate`), so its
    // metric stays Running and the run is due again at once.
    let mut stopping = false;
    for _ in 0..2 {
        stopping = terminating(plan, status, terminate);
        for p in &plan.metrics {
            let r = result_mut(status, p);
            if r.phase.is_completed() {
                continue;
            }
            let (phase, reason) = verdict(p, r, stopping);
            if phase != r.phase {
                r.message = match (&reason, p.dry_run) {
                    (Some(reason), true) => {
                        Some(format!("Metric assessed {phase} due to {reason}"))
                    }
                    _ => r.measurements.last().and_then(|m| m.message.clone()),
                };
                r.phase = phase;
            }
        }
    }

    let (phase, message) = run_phase(plan, status, terminate);
    status.run_summary = Some(summary(plan, status, false));
    status.dry_run_summary = Some(summary(plan, status, true));
    status.phase = Some(phase);
    status.message = message.clone();
    let next_wakeup = if phase.is_completed() {
        status.completed_at.get_or_insert(Time(now));
        None
    } else if stopping && !to_terminate(plan, status, terminate).is_empty() {
        Some(now)
    } else {
        next_wakeup(plan, status, run_start)
    };
    Assessment {
        phase,
        message,
        next_wakeup,
    }
}

/// The decision before measuring, the first half of every tick of the measuring loop: the status to build on
/// (a run without one starts at `now`), the metrics due at `now` and the in-flight measurements to stop. The
/// second half is [`record`] for each measurement taken or stopped, and [`assess`].
pub fn begin(
    plan: &AnalysisPlan,
    status: Option<AnalysisRunStatus>,
    now: Timestamp,
    terminate: bool,
) -> (AnalysisRunStatus, Due) {
    let mut status = status.unwrap_or_else(|| start(plan, now));
    status.started_at.get_or_insert(Time(now));
    let due = Due {
        measure: due(plan, &status, now, terminate),
        terminate: to_terminate(plan, &status, terminate),
    };
    (status, due)
}

/// One tick with synchronous measurements (simulations, tests): [`begin`], measure what is due with
/// `measure`, record it, assess. The daemon and the command line tick the same way with real providers
/// (`runner::tick`).
pub fn step(
    plan: &AnalysisPlan,
    status: &mut AnalysisRunStatus,
    now: Timestamp,
    terminate: bool,
    mut measure: impl FnMut(usize, &MetricPlan, Timestamp) -> Measurement,
) -> Assessment {
    let (mut next, due) = begin(plan, Some(std::mem::take(status)), now, terminate);
    for i in due.measure {
        if let Some(p) = plan.metrics.get(i) {
            let m = measure(i, p, now);
            // `i` came from `due`, so it is in range.
            let _ = record(plan, &mut next, i, m, now);
        }
    }
    // Nothing runs outside a synchronous measurement, so there is nothing to stop.
    for i in due.terminate {
        let flying = plan
            .metrics
            .get(i)
            .and_then(|p| in_flight(next.result(&p.name)))
            .cloned();
        if let Some(m) = flying {
            let _ = record(plan, &mut next, i, terminated(m, Ok(()), now), now);
        }
    }
    let assessment = assess(plan, &mut next, now, terminate);
    *status = next;
    assessment
}

/// The run is terminating when asked to, or when a non-dry-run metric has ended Failed, Error or Inconclusive.
fn terminating(plan: &AnalysisPlan, status: &AnalysisRunStatus, terminate: bool) -> bool {
    terminate
        || plan.metrics.iter().any(|p| {
            !p.dry_run
                && status.result(&p.name).is_some_and(|r| {
                    matches!(
                        r.phase,
                        AnalysisPhase::Failed | AnalysisPhase::Error | AnalysisPhase::Inconclusive
                    )
                })
        })
}

/// The phase a metric's counters and limits give it, and the reason when a limit decided it.
fn verdict(p: &MetricPlan, r: &MetricResult, terminating: bool) -> (AnalysisPhase, Option<String>) {
    let Some(last) = r.measurements.last() else {
        // Argo ends a metric that never measured Successful when the run stops before it started.
        let phase = if terminating {
            AnalysisPhase::Successful
        } else {
            AnalysisPhase::Pending
        };
        return (phase, None);
    };
    if !last.phase.is_completed() {
        return (AnalysisPhase::Running, None);
    }
    if let Some(tripped) = limit_tripped(p, r) {
        return tripped;
    }
    if p.consecutive_success_limit > 0 && r.consecutive_success >= p.consecutive_success_limit {
        return (AnalysisPhase::Successful, None);
    }
    if let Some(n) = p.count
        && i64::from(r.count) >= i64::from(n)
    {
        return count_reached(p, r, n);
    }
    if terminating {
        (AnalysisPhase::Successful, None)
    } else {
        (AnalysisPhase::Running, None)
    }
}

/// failureLimit, inconclusiveLimit and consecutiveErrorLimit, checked in Argo's order; when several trip at
/// once the later one wins, as in Argo.
fn limit_tripped(p: &MetricPlan, r: &MetricResult) -> Option<(AnalysisPhase, Option<String>)> {
    let mut tripped = None;
    if p.failure_limit >= 0 && r.failed > p.failure_limit {
        tripped = Some((
            AnalysisPhase::Failed,
            format!("failed ({}) > failureLimit ({})", r.failed, p.failure_limit),
        ));
    }
    if r.inconclusive > p.inconclusive_limit {
        tripped = Some((
            AnalysisPhase::Inconclusive,
            format!(
                "inconclusive ({}) > inconclusiveLimit ({})",
                r.inconclusive, p.inconclusive_limit
            ),
        ));
    }
    if r.consecutive_error > p.consecutive_error_limit {
        tripped = Some((
            AnalysisPhase::Error,
            format!(
                "consecutiveErrors ({}) > consecutiveErrorLimit ({})",
                r.consecutive_error, p.consecutive_error_limit
            ),
        ));
    }
    tripped.map(|(phase, reason)| (phase, Some(reason)))
}

/// Argo 1.8: reaching `count` succeeds, unless a consecutiveSuccessLimit was set and its streak not reached:
/// then the metric Failed when failureLimit is off (-1), Inconclusive when both limits were in play.
fn count_reached(p: &MetricPlan, r: &MetricResult, n: u32) -> (AnalysisPhase, Option<String>) {
    if p.consecutive_success_limit <= 0 {
        return (AnalysisPhase::Successful, None);
    }
    let phase = if p.failure_limit < 0 {
        AnalysisPhase::Failed
    } else {
        AnalysisPhase::Inconclusive
    };
    let reason = format!(
        "count ({n}) reached with consecutiveSuccess ({}) < consecutiveSuccessLimit ({})",
        r.consecutive_success, p.consecutive_success_limit
    );
    (phase, Some(reason))
}

/// Best to worst, as the run phase orders them.
fn severity(phase: AnalysisPhase) -> u8 {
    match phase {
        AnalysisPhase::Successful => 0,
        AnalysisPhase::Running => 1,
        AnalysisPhase::Pending => 2,
        AnalysisPhase::Inconclusive => 3,
        AnalysisPhase::Error => 4,
        AnalysisPhase::Failed => 5,
    }
}

/// The run is Running until every metric completed; then it takes the worst non-dry-run metric's phase and
/// message (dry-run metrics alone give Successful).
fn run_phase(
    plan: &AnalysisPlan,
    status: &AnalysisRunStatus,
    terminate: bool,
) -> (AnalysisPhase, Option<String>) {
    let mut everything_completed = true;
    let mut worst: Option<(AnalysisPhase, Option<String>)> = None;
    for p in &plan.metrics {
        let Some(r) = status.result(&p.name) else {
            everything_completed = false;
            continue;
        };
        if !r.phase.is_completed() {
            everything_completed = false;
            continue;
        }
        if p.dry_run {
            continue;
        }
        if worst
            .as_ref()
            .is_none_or(|(w, _)| severity(r.phase) > severity(*w))
        {
            let message = completed_reason(p, r).map(|reason| {
                let mut text =
                    format!("Metric \"{}\" assessed {} due to {reason}", p.name, r.phase);
                if let Some(detail) = r.message.as_deref().filter(|m| !m.is_empty()) {
                    text.push_str(&format!(": \"Error Message: {detail}\""));
                }
                text
            });
            worst = Some((r.phase, message));
        }
    }
    if !everything_completed {
        return (AnalysisPhase::Running, None);
    }
    let (phase, message) = worst.unwrap_or((AnalysisPhase::Successful, None));
    let message = message.or_else(|| terminate.then(|| RUN_TERMINATED.to_string()));
    (phase, message)
}

/// Why a completed metric ended as it did, recomputed from its counters (they no longer change).
fn completed_reason(p: &MetricPlan, r: &MetricResult) -> Option<String> {
    let (phase, reason) = limit_tripped(p, r).or_else(|| {
        p.count
            .filter(|n| i64::from(r.count) >= i64::from(*n))
            .map(|n| count_reached(p, r, n))
    })?;
    reason.filter(|_| phase == r.phase)
}

fn summary(plan: &AnalysisPlan, status: &AnalysisRunStatus, dry_run: bool) -> RunSummary {
    let mut s = RunSummary::default();
    for p in plan.metrics.iter().filter(|p| p.dry_run == dry_run) {
        s.count += 1;
        match status.result(&p.name).map(|r| r.phase) {
            Some(AnalysisPhase::Successful) => s.successful += 1,
            Some(AnalysisPhase::Failed) => s.failed += 1,
            Some(AnalysisPhase::Inconclusive) => s.inconclusive += 1,
            Some(AnalysisPhase::Error) => s.error += 1,
            _ => {}
        }
    }
    s
}

/// When metric `p` should next be measured: run start + initialDelay for the first measurement, the in-flight
/// one's `resumeAt`, 10 s after an Error, else the last `finishedAt` + interval. `None` when it is finished.
fn next_due(p: &MetricPlan, r: Option<&MetricResult>, run_start: Timestamp) -> Option<Timestamp> {
    let r = match r {
        Some(r) if r.phase.is_completed() => return None,
        Some(r) => r,
        None => return Some(plus(run_start, p.initial_delay)),
    };
    let Some(last) = r.measurements.last() else {
        return Some(plus(run_start, p.initial_delay));
    };
    let stamp = |t: &Option<Time>| t.as_ref().map(|t| t.0);
    if !last.phase.is_completed() {
        // No resumeAt means resume right away.
        return Some(stamp(&last.resume_at).unwrap_or(run_start));
    }
    if p.count.is_some_and(|n| i64::from(r.count) >= i64::from(n)) {
        return None;
    }
    let wait = if last.phase == AnalysisPhase::Error {
        ERROR_RETRY_INTERVAL
    } else {
        p.interval?
    };
    let finished = stamp(&last.finished_at)
        .or(stamp(&last.started_at))
        .unwrap_or(run_start);
    Some(plus(finished, wait))
}

fn plus(t: Timestamp, d: std::time::Duration) -> Timestamp {
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}

fn started(status: &AnalysisRunStatus, now: Timestamp) -> Timestamp {
    status.started_at.as_ref().map_or(now, |t| t.0)
}

/// The metric's result, created Pending (in plan order) if the status has none yet.
fn result_mut<'a>(status: &'a mut AnalysisRunStatus, p: &MetricPlan) -> &'a mut MetricResult {
    let results = status.metric_results.get_or_insert_with(Vec::new);
    let index = match results.iter().position(|r| r.name == p.name) {
        Some(i) => i,
        None => {
            results.push(MetricResult {
                name: p.name.clone(),
                phase: AnalysisPhase::Pending,
                measurements: Vec::new(),
                message: None,
                count: 0,
                successful: 0,
                failed: 0,
                inconclusive: 0,
                error: 0,
                consecutive_error: 0,
                consecutive_success: 0,
                dry_run: p.dry_run,
                metadata: None,
            });
            results.len() - 1
        }
    };
    &mut results[index]
}
