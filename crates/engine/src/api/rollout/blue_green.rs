//! Wire types of Argo's blue-green strategy (`spec.strategy.blueGreen`, Argo's BlueGreenStrategy) and the
//! part of the status it writes (`status.blueGreen`, Argo's BlueGreenStatus), with Argo's field names; fields
//! canaryd does not know stay in `rest`. Shapes only: defaults and meaning live in `engine/rollout/bluegreen`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{AntiAffinity, PodTemplateMetadata, RolloutAnalysis, RolloutAnalysisRunStatus};

fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BlueGreenStrategy {
    /// The Service that takes production traffic: switched to the new pods on promotion.
    #[serde(default)]
    pub active_service: String,
    /// The Service that selects the new pods before promotion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview_service: Option<String>,
    /// How many pods the new ReplicaSet runs before promotion (all of them when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview_replica_count: Option<i32>,
    /// Argo's default is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_promotion_enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_promotion_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Argo's default is 30.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_delay_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_delay_revision_limit: Option<i32>,
    /// Argo's default is 30; 0 leaves the preview up after an abort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_scale_down_delay_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_promotion_analysis: Option<RolloutAnalysis>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_promotion_analysis: Option<RolloutAnalysis>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anti_affinity: Option<AntiAffinity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview_metadata: Option<PodTemplateMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_metadata: Option<PodTemplateMetadata>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// `status.blueGreen`, with Go's omissions.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BlueGreenStatus {
    /// The pod-template hash the preview Service selects.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub preview_selector: String,
    /// The pod-template hash the active Service selects.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub active_selector: String,
    /// Set once the preview pods reached previewReplicaCount and the pause and pre-promotion analysis ended.
    #[serde(default, skip_serializing_if = "is_false")]
    pub scale_up_preview_check_point: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_promotion_analysis_run_status: Option<RolloutAnalysisRunStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_promotion_analysis_run_status: Option<RolloutAnalysisRunStatus>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}
