//! What `canaryd get rollout` and `canaryd get rollouts` show, as kubectl-argo-rollouts shows it
//! (`pkg/kubectl-argo-rollouts/info`, `cmd/get`, `cmd/list`): a view model built from the objects already read
//! (a Rollout, the ReplicaSets, pods and AnalysisRuns it owns) and `now`, and its text ([`text`]) or JSON (the
//! model serialized, described by `docs/schemas/get-rollout.schema.json`). Pure: it reads no cluster and no
//! clock. The phase, message, step, set weight and stable/canary hashes are the engine's; the per-object states
//! Argo's plugin works out for display (a ReplicaSet's health, a pod's state, the icons) are here.

mod objects;
#[cfg(test)]
mod tests;
pub mod text;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;

use crate::api::analysis::AnalysisPhase;
use crate::api::meta::Controlled;
use crate::api::{AnalysisRun, Rollout};
use crate::engine::rollout::basic_canary::MAX_WEIGHT;
use crate::engine::rollout::{REVISION_ANNOTATION, Rs, conditions, steps};

pub use objects::{pod_state, replica_set_health};

/// One Rollout and what it owns, as `get rollout` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutView {
    pub name: String,
    pub namespace: String,
    pub created_at: Option<Timestamp>,
    /// Argo's phase: Healthy, Progressing, Paused or Degraded.
    pub status: String,
    pub icon: &'static str,
    pub message: String,
    /// `Canary`, `BlueGreen` or `unknown`.
    pub strategy: String,
    /// The canary's step and weights; `None` for any other strategy.
    pub canary: Option<CanaryView>,
    /// The images of the ReplicaSets that have pods, each with the stable/canary tags of those running it.
    pub images: Vec<ImageView>,
    pub replicas: ReplicaCounts,
    /// Newest first.
    pub revisions: Vec<RevisionView>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CanaryView {
    /// `status.currentStepIndex` (a step past the last one when all are done); `None` without steps.
    pub step: Option<StepView>,
    /// The weight the steps ask for.
    pub set_weight: i32,
    /// The weight the canary has: the router's (`status.canary.weights`) when there is one, else its share of
    /// the available pods.
    pub actual_weight: i32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepView {
    pub index: usize,
    pub count: usize,
    /// The current step as Argo names it (`setWeight: 20`, `pause: 30s`); `None` once all are done.
    pub text: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageView {
    pub image: String,
    /// `canary`, `stable`, sorted.
    pub tags: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ReplicaCounts {
    pub desired: i32,
    pub current: i32,
    pub updated: i32,
    pub ready: i32,
    pub available: i32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionView {
    pub revision: i64,
    pub replica_sets: Vec<ReplicaSetView>,
    pub analysis_runs: Vec<AnalysisRunView>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSetView {
    pub name: String,
    pub created_at: Option<Timestamp>,
    /// Healthy, Progressing, ScaledDown or ReplicaFailure.
    pub status: String,
    pub icon: &'static str,
    pub stable: bool,
    pub canary: bool,
    pub replicas: i32,
    pub available: i32,
    /// `scale-down-deadline`: when a traffic-routed Rollout scales it to zero.
    pub scale_down_deadline: Option<String>,
    pub images: Vec<String>,
    pub pods: Vec<PodView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodView {
    pub name: String,
    pub created_at: Option<Timestamp>,
    /// kubectl's STATUS column: Running, Pending, ContainerCreating, CrashLoopBackOff, Terminating, ...
    pub status: String,
    pub icon: &'static str,
    /// Ready containers out of all: `1/1`.
    pub ready: String,
    pub restarts: i32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisRunView {
    pub name: String,
    pub created_at: Option<Timestamp>,
    /// The run's phase; empty before its first status.
    pub status: String,
    pub icon: &'static str,
    pub successful: i32,
    pub failed: i32,
    pub inconclusive: i32,
    pub error: i32,
    pub metrics: Vec<MetricView>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricView {
    pub name: String,
    pub phase: String,
    pub icon: &'static str,
    /// The measurements the run keeps, oldest first.
    pub measurements: Vec<MeasurementView>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MeasurementView {
    pub phase: String,
    pub icon: &'static str,
    pub value: Option<String>,
    pub started_at: Option<Timestamp>,
    /// The Job that took it, for a job metric.
    pub job: Option<String>,
}

/// One row of `get rollouts` (Argo's `cmd/list` columns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutRow {
    pub namespace: String,
    pub name: String,
    pub strategy: String,
    pub status: String,
    /// What the controller said last about the phase (Argo's message beside it), e.g. why it aborted.
    pub message: String,
    /// `i/n`, or `-`.
    pub step: String,
    /// The set weight, or `-` for a strategy without weights.
    pub set_weight: String,
    pub ready: i32,
    pub current: i32,
    pub desired: i32,
    pub updated: i32,
    pub available: i32,
}

/// The objects a Rollout's view is built from. Objects the Rollout does not control are left out, so callers
/// may pass everything they listed with the Rollout's selector.
pub struct Owned<'a> {
    pub replica_sets: &'a [ReplicaSet],
    pub pods: &'a [Pod],
    pub analysis_runs: &'a [AnalysisRun],
}

/// The view of `rollout` and what it owns (Argo's `NewRolloutInfo`).
pub fn rollout_view(rollout: &Rollout, owned: &Owned) -> RolloutView {
    let uid = rollout.metadata.uid.clone().unwrap_or_default();
    let status = rollout.status.clone().unwrap_or_default();
    let replica_sets = objects::replica_sets(rollout, &uid, owned);
    let mut analysis_runs: Vec<(i64, AnalysisRunView)> = owned
        .analysis_runs
        .iter()
        .filter(|run| run.metadata.controlled_by(&uid))
        .map(objects::analysis_run)
        .collect();
    // Argo's order within a revision: oldest first, then by name backwards.
    analysis_runs
        .sort_by(|(_, a), (_, b)| a.created_at.cmp(&b.created_at).then(b.name.cmp(&a.name)));
    let (phase, message) = conditions::shown_phase(rollout);
    RolloutView {
        name: rollout.metadata.name.clone().unwrap_or_default(),
        namespace: rollout.metadata.namespace.clone().unwrap_or_default(),
        created_at: rollout.metadata.creation_timestamp.as_ref().map(|t| t.0),
        icon: rollout_icon(&phase),
        status: phase,
        message,
        strategy: strategy(rollout).to_string(),
        canary: rollout
            .spec
            .canary()
            .map(|_| canary(rollout, &replica_sets)),
        images: objects::images(&replica_sets),
        replicas: ReplicaCounts {
            desired: rollout.spec.replicas.unwrap_or(1),
            current: status.replicas,
            updated: status.updated_replicas,
            ready: status.ready_replicas,
            available: status.available_replicas,
        },
        revisions: revisions(replica_sets, analysis_runs),
    }
}

/// Where a canary step stands in the Rollout's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum StepState {
    Done,
    Current,
    ToCome,
}

/// One canary step of the timeline: Argo's name for it, the weight the steps ask for while it is current
/// (the engine's `steps::set_weight`, as if not aborted), and where it stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TimelineStep {
    pub text: String,
    pub weight: i32,
    pub state: StepState,
}

/// Every canary step of `rollout` in order, with `status.currentStepIndex` marking the current one (every step
/// is done past the last one); empty without steps.
pub fn step_timeline(rollout: &Rollout) -> Vec<TimelineStep> {
    let steps = steps::steps(rollout);
    let status = rollout.status.clone().unwrap_or_default();
    let (_, index) = steps::current(steps, &status);
    let index = index.unwrap_or(0);
    steps
        .iter()
        .enumerate()
        .map(|(i, step)| TimelineStep {
            text: steps::describe(step),
            weight: steps::set_weight(steps, Some(i), false),
            state: match i.cmp(&index) {
                std::cmp::Ordering::Less => StepState::Done,
                std::cmp::Ordering::Equal => StepState::Current,
                std::cmp::Ordering::Greater => StepState::ToCome,
            },
        })
        .collect()
}

/// The row of `rollout` in `get rollouts` (Argo's `cmd/list` `newRolloutInfo`).
pub fn rollout_row(rollout: &Rollout) -> RolloutRow {
    let status = rollout.status.clone().unwrap_or_default();
    let canary = rollout.spec.canary().map(|_| {
        let steps = steps::steps(rollout);
        let step = step_counter(&status, steps.len())
            .map_or_else(|| "-".to_string(), |(i, n)| format!("{i}/{n}"));
        let (index, _) = steps::current(steps, &status);
        (
            step,
            steps::set_weight(steps, index, status.abort).to_string(),
        )
    });
    let (step, set_weight) = canary.unwrap_or_else(|| ("-".to_string(), "-".to_string()));
    let (phase, message) = conditions::shown_phase(rollout);
    RolloutRow {
        namespace: rollout.metadata.namespace.clone().unwrap_or_default(),
        name: rollout.metadata.name.clone().unwrap_or_default(),
        strategy: strategy(rollout).to_string(),
        status: phase,
        message,
        step,
        set_weight,
        ready: status.ready_replicas,
        current: status.replicas,
        desired: rollout.spec.replicas.unwrap_or(1),
        updated: status.updated_replicas,
        available: status.available_replicas,
    }
}

/// `status.currentStepIndex` out of the step count, as Argo counts it: only with steps and an index.
fn step_counter(status: &crate::api::rollout::RolloutStatus, count: usize) -> Option<(i32, usize)> {
    let index = status.current_step_index?;
    (count > 0).then_some((index, count))
}

fn strategy(rollout: &Rollout) -> &'static str {
    let strategy = rollout.spec.strategy.as_ref();
    if strategy.is_some_and(|s| s.canary.is_some()) {
        "Canary"
    } else if strategy.is_some_and(|s| s.blue_green.is_some()) {
        "BlueGreen"
    } else {
        "unknown"
    }
}

/// The step and the weights (Argo's `NewRolloutInfo`, canary half). The set weight is the engine's
/// `steps::set_weight` (Argo's `GetCurrentSetWeight`); the actual weight is the router's as the planner stored it,
/// or without a router the canary's share of the available pods.
fn canary(rollout: &Rollout, replica_sets: &[(Rs, ReplicaSetView)]) -> CanaryView {
    let status = rollout.status.clone().unwrap_or_default();
    let steps = steps::steps(rollout);
    let (current, index) = steps::current(steps, &status);
    let set_weight = steps::set_weight(steps, current, status.abort);
    let routed = rollout
        .spec
        .canary()
        .is_some_and(|c| c.traffic_routing.is_some());
    let actual_weight = if current.is_none() {
        MAX_WEIGHT
    } else if status.available_replicas <= 0 {
        0
    } else if routed {
        status
            .canary
            .weights
            .as_ref()
            .map_or(set_weight, |w| w.canary.weight)
    } else {
        let canary_available: i32 = replica_sets
            .iter()
            .filter(|(_, rs)| rs.canary)
            .map(|(_, rs)| rs.available)
            .sum();
        canary_available * MAX_WEIGHT / status.available_replicas
    };
    let step = step_counter(&status, steps.len()).map(|(_, count)| StepView {
        index: index.unwrap_or(0),
        count,
        text: current.map(|i| steps::describe(&steps[i])),
    });
    CanaryView {
        step,
        set_weight,
        actual_weight,
    }
}

/// The revisions, newest first, each with its ReplicaSets and AnalysisRuns (Argo's `Revisions`,
/// `ReplicaSetsByRevision`, `AnalysisRunsByRevision`).
fn revisions(
    replica_sets: Vec<(Rs, ReplicaSetView)>,
    analysis_runs: Vec<(i64, AnalysisRunView)>,
) -> Vec<RevisionView> {
    let mut numbers: Vec<i64> = replica_sets
        .iter()
        .map(|(rs, _)| rs.revision)
        .chain(analysis_runs.iter().map(|(revision, _)| *revision))
        .collect();
    numbers.sort_unstable_by(|a, b| b.cmp(a));
    numbers.dedup();
    numbers
        .into_iter()
        .map(|revision| RevisionView {
            revision,
            replica_sets: replica_sets
                .iter()
                .filter(|(rs, _)| rs.revision == revision)
                .map(|(_, view)| view.clone())
                .collect(),
            analysis_runs: analysis_runs
                .iter()
                .filter(|(r, _)| *r == revision)
                .map(|(_, view)| view.clone())
                .collect(),
        })
        .collect()
}

/// The revision an object of a Rollout is annotated with; 0 when it has none.
fn revision_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> i64 {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(REVISION_ANNOTATION))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// Argo's `rolloutIcon`.
fn rollout_icon(phase: &str) -> &'static str {
    match phase {
        "Progressing" => objects::ICON_PROGRESSING,
        "Error" | "InvalidSpec" => objects::ICON_WARNING,
        "Paused" => objects::ICON_PAUSED,
        "Healthy" => objects::ICON_OK,
        "Degraded" => objects::ICON_BAD,
        "Unknown" => objects::ICON_UNKNOWN,
        "ScaledDown" => objects::ICON_NEUTRAL,
        _ => " ",
    }
}

/// Argo's `analysisIcon`, for a run, a metric or a measurement.
fn analysis_icon(phase: Option<AnalysisPhase>) -> &'static str {
    match phase {
        Some(AnalysisPhase::Successful) => objects::ICON_OK,
        Some(AnalysisPhase::Inconclusive) => objects::ICON_UNKNOWN,
        Some(AnalysisPhase::Failed) => objects::ICON_BAD,
        Some(AnalysisPhase::Error) => objects::ICON_WARNING,
        Some(AnalysisPhase::Running) => objects::ICON_PROGRESSING,
        Some(AnalysisPhase::Pending) => objects::ICON_WAITING,
        None => " ",
    }
}
