//! Wire types for Argo CD's `ApplicationSet` (`argoproj.io/v1alpha1`) and for Argo CD cluster Secrets
//! (`argocd.argoproj.io/secret-type: cluster`): the generators, template metadata and RollingSync strategy
//! that `validate` and `plan` read. Everything else a user wrote (other generators, the Application spec,
//! status) is kept in `rest` maps and serialized back untouched. Shapes only: no validation, no defaults.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube_derive::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The label that makes a Secret an Argo CD cluster.
pub const CLUSTER_SECRET_LABEL: &str = "argocd.argoproj.io/secret-type";

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "argoproj.io",
    version = "v1alpha1",
    kind = "ApplicationSet",
    namespaced,
    schema = "disabled",
    status = "ApplicationSetStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSetSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generators: Option<Vec<Generator>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<ApplicationTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub go_template: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub go_template_options: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_patch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<Strategy>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// Status is Argo CD's; canaryd only reads files, so it is kept as written.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ApplicationSetStatus {
    #[serde(flatten)]
    pub fields: BTreeMap<String, Value>,
}

/// One generator. Matrix and merge children have the same shape (Argo's nested generators). Generators
/// canaryd does not evaluate (git, scmProvider, pullRequest, clusterDecisionResource, plugin) stay in `rest`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Generator {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list: Option<ListGenerator>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<ClusterGenerator>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<MatrixGenerator>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeGenerator>,
    /// A post-selector on the generated parameters (Argo's `selector`, a label selector over params).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<Value>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ListGenerator {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elements: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elements_yaml: Option<String>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterGenerator {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flat_list: Option<bool>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_expressions: Option<Vec<MatchExpression>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MatrixGenerator {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generators: Option<Vec<Generator>>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MergeGenerator {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generators: Option<Vec<Generator>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_keys: Option<Vec<String>>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// The Application template: its metadata decides names and the labels RollingSync steps select on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<Value>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMetadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Strategy {
    /// `AllAtOnce` (the default) or `RollingSync`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_sync: Option<RollingSync>,
    /// `AllAtOnce` (the default) or `Reverse`, case-insensitive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_order: Option<String>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RollingSync {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<RollingSyncStep>>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RollingSyncStep {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_expressions: Option<Vec<MatchExpression>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_update: Option<IntOrString>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MatchExpression {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub operator: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

/// An Argo CD cluster Secret (`data.name`, `data.server`, `data.project`; labels and annotations are what
/// the cluster generator selects on and exposes). `data` is base64 on the wire, `stringData` plain text.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSecret {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<BTreeMap<String, ByteString>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string_data: Option<BTreeMap<String, String>>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

impl ClusterSecret {
    /// A field of the Secret's data as text; `stringData` wins, as the API server merges it over `data`.
    pub fn field(&self, key: &str) -> Option<String> {
        if let Some(v) = self.string_data.as_ref().and_then(|d| d.get(key)) {
            return Some(v.clone());
        }
        let bytes = self.data.as_ref()?.get(key)?;
        String::from_utf8(bytes.0.clone()).ok()
    }

    pub fn is_cluster(&self) -> bool {
        self.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(CLUSTER_SECRET_LABEL))
            .is_some_and(|v| v == "cluster")
    }
}
