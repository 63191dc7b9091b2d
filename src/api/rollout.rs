//! The parts of Argo's `Rollout` that reference analysis: canary steps (`setWeight`, `pause`, `analysis`) and
//! background analysis. Everything else a user wrote (the pod template, other strategies, traffic routing) is
//! kept in `rest` maps and serialized back untouched, so canaryd never drops a field it does not understand.

use std::collections::BTreeMap;

use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::analysis::AnalysisTemplateRef;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<RolloutStrategy>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// Rollout status is Argo's; canaryd reads and patches single fields, and keeps the rest as written.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct RolloutStatus {
    #[serde(flatten)]
    pub fields: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStrategy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<CanaryStrategy>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CanaryStrategy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<CanaryStep>>,
    /// Background analysis, running alongside the steps from `startingStep`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<RolloutAnalysisBackground>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CanaryStep {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_weight: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<RolloutPause>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<RolloutAnalysis>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutPause {
    /// A Go duration string or a number of seconds; absent means "until promoted".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutAnalysis {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub templates: Option<Vec<AnalysisTemplateRef>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<RolloutAnalysisArg>>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutAnalysisBackground {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub templates: Option<Vec<AnalysisTemplateRef>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<RolloutAnalysisArg>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_step: Option<i32>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// A Rollout's arg: a literal or a reference into the pod template / status (`valueFrom.podTemplateHashValue`,
/// `valueFrom.fieldRef`), kept as written.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutAnalysisArg {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<Value>,
}
