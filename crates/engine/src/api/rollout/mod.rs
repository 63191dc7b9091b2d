//! Wire types for Argo's `Rollout` (`argoproj.io/v1alpha1`): the whole canary strategy with Argo's field
//! names, the blue-green one (`blue_green`), and (in `status`) the status Argo writes. Parts canaryd does not run (experiments,
//! header/mirror routes, step plugins, workloadRef) are kept as raw JSON so they are named in errors and
//! written back untouched; `trafficRouting` has the types of `api::traffic_routing`; every struct also keeps fields it does not know in `rest`, so a Rollout
//! round-trips without loss. Shapes only: defaults, validation and meaning live in `engine/rollout`.

mod blue_green;
mod status;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube_derive::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::analysis::{AnalysisTemplateRef, DryRun, MeasurementRetention};
pub use blue_green::*;
pub use status::*;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "argoproj.io",
    version = "v1alpha1",
    kind = "Rollout",
    namespaced,
    schema = "disabled",
    status = "RolloutStatus",
    shortname = "ro",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.HPAReplicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn = r#"{"name":"Desired","type":"integer","jsonPath":".spec.replicas","description":"Number of desired pods"}"#,
    printcolumn = r#"{"name":"Current","type":"integer","jsonPath":".status.replicas","description":"Total number of non-terminated pods targeted by this rollout"}"#,
    printcolumn = r#"{"name":"Up-to-date","type":"integer","jsonPath":".status.updatedReplicas","description":"Total number of non-terminated pods targeted by this rollout that have the desired template spec"}"#,
    printcolumn = r#"{"name":"Available","type":"integer","jsonPath":".status.availableReplicas","description":"Total number of available pods (ready for at least minReadySeconds) targeted by this rollout"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp","description":"Time since resource was created"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSpec {
    /// Argo's default is 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// The pod template, kept as written: its exact JSON is what ReplicaSets are compared and hashed by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_ref: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_ready_seconds: Option<i32>,
    /// Argo's default is 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// Argo's default is 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline_abort: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_window: Option<RollbackWindow>,
    /// How many finished AnalysisRuns of older revisions are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<AnalysisRunStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<RolloutStrategy>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// `spec.rollbackWindow`: going back to one of the last `revisions` ReplicaSets skips the steps.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RollbackWindow {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revisions: Option<i32>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// `spec.analysis`: how many finished AnalysisRuns are kept (Argo's default is 5 each).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisRunStrategy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successful_run_history_limit: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsuccessful_run_history_limit: Option<i32>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// Labels and annotations put on the pods of the canary or the stable ReplicaSet only while it is one
/// (`canaryMetadata`, `stableMetadata`). Serialized in Go's field order, as Argo records it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplateMetadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// `antiAffinity` of either strategy: which scheduling rule keeps the new ReplicaSet's pods off the nodes of
/// the stable one's. A valid one sets exactly one of the two.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AntiAffinity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_during_scheduling_ignored_during_execution: Option<PreferredAntiAffinity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_during_scheduling_ignored_during_execution: Option<RequiredAntiAffinity>,
}

/// Argo's ReplicaProgressThreshold: how many of the canary's pods a step waits for, as a percentage of them
/// (`type: Percent`) or a count of pods (any other type, as Argo reads it: `Pods`); a negative `value` is the
/// default, all of them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ReplicaProgressThreshold {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub value: i32,
}

/// The preferred rule's weight (1 to 100; Go's zero value when missing).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct PreferredAntiAffinity {
    #[serde(default)]
    pub weight: i32,
}

/// The required rule: an empty object in Argo.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct RequiredAntiAffinity {}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStrategy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<CanaryStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blue_green: Option<BlueGreenStrategy>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CanaryStrategy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary_service: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_service: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<CanaryStep>>,
    /// Background analysis, running alongside the steps from `startingStep`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<RolloutAnalysisBackground>,
    /// Argo's default is 25%.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// Argo's default is 25%.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_delay_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_delay_revision_limit: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_scale_down_delay_seconds: Option<i32>,
    /// The routers to drive; those canaryd does not drive stay representable so they can be named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic_routing: Option<super::traffic_routing::TrafficRouting>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic_stable_scale: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary_metadata: Option<PodTemplateMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_metadata: Option<PodTemplateMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anti_affinity: Option<AntiAffinity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ping_pong: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_pods_per_replica_set: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_progress_threshold: Option<ReplicaProgressThreshold>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// One canary step. A valid step sets exactly one action; the ones canaryd does not run stay raw JSON.
/// Fields are in the order of Argo's Go struct (as are those of the types below), so the steps serialize to
/// the bytes Argo hashes into `status.currentStepHash` and a Rollout started by Argo keeps its step.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CanaryStep {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_weight: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<RolloutPause>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experiment: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<RolloutAnalysis>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_canary_scale: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_header_route: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_mirror_route: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<Value>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutPause {
    /// A Go duration string or a number of seconds; absent means "until promoted".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<IntOrString>,
}

impl RolloutSpec {
    /// The canary strategy, when the Rollout has one.
    pub fn canary(&self) -> Option<&CanaryStrategy> {
        self.strategy.as_ref().and_then(|s| s.canary.as_ref())
    }

    /// The blue-green strategy, when the Rollout has one.
    pub fn blue_green(&self) -> Option<&BlueGreenStrategy> {
        self.strategy.as_ref().and_then(|s| s.blue_green.as_ref())
    }

    /// Every analysis the Rollout's strategy names: a canary's ([`CanaryStrategy::analyses`]) or a
    /// blue-green one's pre- then post-promotion analysis.
    pub fn analyses(&self) -> Vec<NamedAnalysis<'_>> {
        let canary = self.canary().into_iter().flat_map(|c| c.analyses());
        let blue_green = self.blue_green().into_iter().flat_map(|b| {
            [
                ("prePromotionAnalysis", &b.pre_promotion_analysis),
                ("postPromotionAnalysis", &b.post_promotion_analysis),
            ]
            .into_iter()
            .filter_map(|(field, a)| {
                a.as_ref().map(|analysis| NamedAnalysis {
                    step: None,
                    promotion: Some(field),
                    analysis,
                })
            })
        });
        canary.chain(blue_green).collect()
    }

    /// The templates those analyses reference, in the same order.
    pub fn analysis_templates(&self) -> Vec<&AnalysisTemplateRef> {
        let analyses = self.analyses();
        analyses
            .iter()
            .flat_map(|a| a.analysis.templates.iter().flatten())
            .collect()
    }
}

/// One analysis a strategy names: a canary step's or its background one, or a blue-green promotion's.
#[derive(Debug, Clone, Copy)]
pub struct NamedAnalysis<'a> {
    /// The step's index, `None` for the background analysis.
    pub step: Option<usize>,
    /// A blue-green analysis's field (`prePromotionAnalysis`, `postPromotionAnalysis`).
    pub promotion: Option<&'static str>,
    pub analysis: &'a RolloutAnalysis,
}

impl NamedAnalysis<'_> {
    /// Its field path in the Rollout.
    pub fn path(&self) -> String {
        match (self.promotion, self.step) {
            (Some(field), _) => format!("spec.strategy.blueGreen.{field}"),
            (None, Some(i)) => format!("spec.strategy.canary.steps[{i}].analysis"),
            (None, None) => "spec.strategy.canary.analysis".to_string(),
        }
    }
}

impl CanaryStrategy {
    /// Every analysis the strategy names, the steps' in order, then the background analysis: the one walk of
    /// a Rollout's analyses (its checks, the templates the daemon reads, what a rehearsal needs).
    pub fn analyses(&self) -> impl Iterator<Item = NamedAnalysis<'_>> {
        let steps = self.steps.iter().flatten().enumerate();
        steps
            .filter_map(|(i, s)| {
                s.analysis.as_ref().map(|analysis| NamedAnalysis {
                    step: Some(i),
                    promotion: None,
                    analysis,
                })
            })
            .chain(self.analysis.as_ref().map(|b| NamedAnalysis {
                step: None,
                promotion: None,
                analysis: &b.analysis,
            }))
    }
}

/// The annotation naming the Rollout that manages a Service or DestinationRule (Argo's
/// `argo-rollouts.argoproj.io/managed-by-rollouts`).
pub const MANAGED_BY_ANNOTATION: &str = "argo-rollouts.argoproj.io/managed-by-rollouts";

/// The fields Argo's Rollout CRD (v1alpha1) declares at `spec`, `spec.strategy` and `spec.strategy.canary`:
/// what a field written there that canaryd's types keep aside (`rest`) is compared with for "did you mean".
pub const SPEC_FIELDS: &[&str] = &[
    "analysis",
    "minReadySeconds",
    "paused",
    "progressDeadlineAbort",
    "progressDeadlineSeconds",
    "replicas",
    "restartAt",
    "revisionHistoryLimit",
    "rollbackWindow",
    "selector",
    "strategy",
    "template",
    "workloadRef",
];
pub const STRATEGY_FIELDS: &[&str] = &["blueGreen", "canary"];
pub const CANARY_FIELDS: &[&str] = &[
    "abortScaleDownDelaySeconds",
    "analysis",
    "antiAffinity",
    "canaryMetadata",
    "canaryService",
    "dynamicStableScale",
    "maxSurge",
    "maxUnavailable",
    "minPodsPerReplicaSet",
    "pingPong",
    "replicaProgressThreshold",
    "scaleDownDelayRevisionLimit",
    "scaleDownDelaySeconds",
    "stableMetadata",
    "stableService",
    "steps",
    "trafficRouting",
];

/// A step's analysis (`steps[].analysis`); background analysis adds `startingStep`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutAnalysis {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub templates: Option<Vec<AnalysisTemplateRef>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<RolloutAnalysisArg>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<Vec<DryRun>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measurement_retention: Option<Vec<MeasurementRetention>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis_run_metadata: Option<AnalysisRunMetadata>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutAnalysisBackground {
    #[serde(flatten)]
    pub analysis: RolloutAnalysis,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_step: Option<i32>,
}

/// Labels and annotations added to the AnalysisRuns created for this analysis.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisRunMetadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// A Rollout's arg: a literal, or a value the Rollout supplies when it creates the run.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutAnalysisArg {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<RolloutArgValueFrom>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutArgValueFrom {
    /// `Stable` or `Latest`: the pod-template hash of the stable or the new ReplicaSet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_hash_value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_ref: Option<super::analysis::FieldRef>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}
