//! The Rollout status as Argo writes it (`pkg/apis/rollouts/v1alpha1` RolloutStatus): Argo's field names and
//! types (`observedGeneration` is a string, `stableRS` and `currentPodHash` are pod-template hashes), and Go's
//! `omitempty`: a zero number, false or empty string is left out, as Argo leaves it out. Fields canaryd does
//! not own (alb, ...) stay in `rest` and are written back as they were.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};
use serde_json::Value;

fn is_zero(n: &i32) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    #[serde(default, skip_serializing_if = "is_false")]
    pub abort: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pause_conditions: Vec<PauseCondition>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub controller_pause: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted_at: Option<Time>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_pod_hash: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_step_hash: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub updated_replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ready_replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub available_replicas: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_step_index: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub observed_generation: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<RolloutCondition>,
    /// Argo always writes this object, even empty.
    #[serde(default)]
    pub canary: CanaryStatus,
    /// Argo always writes this object, even empty; kept absent when it was absent, so a canary's status
    /// written by canaryd stays as it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blue_green: Option<super::BlueGreenStatus>,
    #[serde(rename = "HPAReplicas", default, skip_serializing_if = "is_zero")]
    pub hpa_replicas: i32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub selector: String,
    #[serde(rename = "stableRS", default, skip_serializing_if = "String::is_empty")]
    pub stable_rs: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted_at: Option<Time>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub promote_full: bool,
    /// Healthy, Progressing, Paused or Degraded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub workload_observed_generation: String,
    /// The timing of the current rollout attempt (Argo's RolloutDurationStatus).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<RolloutDurationStatus>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// When the current rollout attempt started and ended, how it ended, and the time it spent waiting for a
/// person (Argo's RolloutDurationStatus).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutDurationStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manual_pause_started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_manual_pause_duration_seconds: Option<i64>,
    /// Nil while the attempt is in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// Promoted, FastPromoted, Aborted, Superseded, RolledBack or FastRolledBack; may be known before
    /// `finishedAt` (a rollback is classified while it progresses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_status: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PauseCondition {
    /// CanaryPauseStep, InconclusiveAnalysisRun, InconclusiveExperiment or BlueGreenPause.
    pub reason: String,
    pub start_time: Time,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutCondition {
    /// Progressing, Available, Paused, Healthy, Completed, InvalidSpec or ReplicaFailure.
    #[serde(rename = "type")]
    pub type_: String,
    /// "True", "False" or "Unknown".
    pub status: String,
    pub reason: String,
    pub message: String,
    pub last_update_time: Time,
    pub last_transition_time: Time,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CanaryStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_step_analysis_run_status: Option<RolloutAnalysisRunStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_background_analysis_run_status: Option<RolloutAnalysisRunStatus>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_experiment: String,
    /// The weights last applied to the traffic routers; absent without traffic routing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<TrafficWeights>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stable_ping_pong: String,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutAnalysisRunStatus {
    pub name: String,
    /// The run's phase; empty while the run has not been picked up yet.
    #[serde(default)]
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// `status.canary.weights`, with the field names and omissions of Argo's Go struct.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TrafficWeights {
    #[serde(default)]
    pub canary: WeightDestination,
    #[serde(default)]
    pub stable: WeightDestination,
    /// Experiment destinations; canaryd runs no experiments and writes none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional: Option<Value>,
    /// Set by routers that verify a weight (ALB); canaryd's routers do not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct WeightDestination {
    #[serde(default)]
    pub weight: i32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod_template_hash: String,
}
