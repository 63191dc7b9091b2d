//! Wire types for Argo Rollouts' analysis kinds (`argoproj.io/v1alpha1`): AnalysisTemplate,
//! ClusterAnalysisTemplate and AnalysisRun, with Argo's field names. Every field the user may write is an
//! `Option`, so what was written is serialized back exactly and what was left out stays out; defaults are
//! applied by `engine/`, never here. This module owns shapes, not meaning: no validation, no I/O.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::schema::preserve_unknown_object;

/// The spec shared by AnalysisTemplate and ClusterAnalysisTemplate.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "argoproj.io",
    version = "v1alpha1",
    kind = "AnalysisTemplate",
    namespaced,
    shortname = "at",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp","description":"Time since resource was created"}"#,
    doc = "A reusable set of metrics that an AnalysisRun or a Rollout step measures."
)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisTemplateSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Vec<Metric>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<Argument>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<Vec<DryRun>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measurement_retention: Option<Vec<MeasurementRetention>>,
    /// Nested templates whose metrics and args are merged into this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub templates: Option<Vec<AnalysisTemplateRef>>,
}

/// Cluster-scoped twin of AnalysisTemplate: the same spec, readable from every namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "argoproj.io",
    version = "v1alpha1",
    kind = "ClusterAnalysisTemplate",
    shortname = "cat",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp","description":"Time since resource was created"}"#,
    doc = "A cluster-scoped AnalysisTemplate."
)]
#[serde(transparent)]
pub struct ClusterAnalysisTemplateSpec(pub AnalysisTemplateSpec);

/// A reference from one template to another (`spec.templates[]`), or from a Rollout step to a template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisTemplateRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_scope: Option<bool>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Metric {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_delay: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_condition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_condition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_limit: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inconclusive_limit: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive_error_limit: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive_success_limit: Option<IntOrString>,
    #[serde(default)]
    pub provider: MetricProvider,
}

/// Exactly one of these is set on a valid metric. Providers canaryd does not run are kept free-form so they
/// parse, round-trip, and can be named in the error.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricProvider {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<PrometheusMetric>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web: Option<WebMetric>,
    /// Argo's plugin providers; canaryd's own live under `canaryd/<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub plugin: Option<BTreeMap<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub datadog: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub new_relic: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub wavefront: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub kayenta: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobMetric>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub cloud_watch: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub graphite: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub influxdb: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub skywalking: Option<Value>,
}

impl MetricProvider {
    /// The Argo names of the provider keys that are set, in declaration order.
    pub fn configured(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        let mut add = |set: bool, name: &'static str| {
            if set {
                names.push(name)
            }
        };
        add(self.prometheus.is_some(), "prometheus");
        add(self.web.is_some(), "web");
        add(self.plugin.is_some(), "plugin");
        add(self.datadog.is_some(), "datadog");
        add(self.new_relic.is_some(), "newRelic");
        add(self.wavefront.is_some(), "wavefront");
        add(self.kayenta.is_some(), "kayenta");
        add(self.job.is_some(), "job");
        add(self.cloud_watch.is_some(), "cloudWatch");
        add(self.graphite.is_some(), "graphite");
        add(self.influxdb.is_some(), "influxdb");
        add(self.skywalking.is_some(), "skywalking");
        names
    }
}

/// Argo's `job` provider: a Kubernetes Job per measurement, its spec sent as written.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobMetric {
    /// Copied onto the Job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JobMetadata>,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub spec: Value,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobMetadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusMetric {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<PrometheusAuth>,
    /// Seconds; Argo's default is 30.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Vec<WebMetricHeader>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_query: Option<PrometheusRangeQuery>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusAuth {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigv4: Option<Sigv4Config>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth2: Option<OAuth2Config>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basic_auth: Option<BasicAuth>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Sigv4Config {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_arn: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OAuth2Config {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BasicAuth {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusRangeQuery {
    /// An expression such as `now() - duration("5m")`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// A Go duration, e.g. `1m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebMetricHeader {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub value: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebMetric {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Vec<WebMetricHeader>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub json_body: Option<Value>,
    /// Argo's default is 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<PrometheusAuth>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Argument {
    #[serde(default)]
    pub name: String,
    /// Argo's docs write unquoted numbers here (`value: 9090`); they are read as their text.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "scalar_as_string"
    )]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<ValueFrom>,
}

fn scalar_as_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v @ (Value::Number(_) | Value::Bool(_))) => Ok(Some(v.to_string())),
        Some(other) => Err(serde::de::Error::custom(format!(
            "invalid type: {other}, expected a string"
        ))),
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValueFrom {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<SecretKeyRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_ref: Option<FieldRef>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub key: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FieldRef {
    #[serde(default)]
    pub field_path: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DryRun {
    /// A regular expression matched against metric names (`.*` for all).
    #[serde(default)]
    pub metric_name: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MeasurementRetention {
    /// A regular expression matched against metric names.
    #[serde(default)]
    pub metric_name: String,
    #[serde(default)]
    pub limit: i32,
}

/// Deletes completed runs after a while (`spec.ttlStrategy`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TtlStrategy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds_after_completion: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds_after_failure: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds_after_success: Option<i32>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "argoproj.io",
    version = "v1alpha1",
    kind = "AnalysisRun",
    namespaced,
    shortname = "ar",
    status = "AnalysisRunStatus",
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.phase","description":"AnalysisRun status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp","description":"Time since resource was created"}"#,
    doc = "One execution of a set of metrics; its status records every measurement."
)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisRunSpec {
    #[serde(default)]
    pub metrics: Vec<Metric>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<Argument>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminate: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<Vec<DryRun>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measurement_retention: Option<Vec<MeasurementRetention>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_strategy: Option<TtlStrategy>,
}

/// Argo's phase names, for measurements, metrics and runs.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema, PartialOrd, Ord,
)]
pub enum AnalysisPhase {
    Pending,
    Running,
    Successful,
    Failed,
    Error,
    Inconclusive,
}

impl AnalysisPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            AnalysisPhase::Pending => "Pending",
            AnalysisPhase::Running => "Running",
            AnalysisPhase::Successful => "Successful",
            AnalysisPhase::Failed => "Failed",
            AnalysisPhase::Error => "Error",
            AnalysisPhase::Inconclusive => "Inconclusive",
        }
    }

    /// Successful, Failed, Error and Inconclusive end a metric or a run.
    pub fn is_completed(self) -> bool {
        !matches!(self, AnalysisPhase::Pending | AnalysisPhase::Running)
    }
}

impl std::fmt::Display for AnalysisPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisRunStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<AnalysisPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_results: Option<Vec<MetricResult>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_summary: Option<RunSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run_summary: Option<RunSummary>,
}

impl AnalysisRunStatus {
    /// The result of the metric named `name`, if the status has one yet.
    pub fn result(&self, name: &str) -> Option<&MetricResult> {
        self.metric_results
            .as_ref()?
            .iter()
            .find(|r| r.name == name)
    }

    pub fn result_mut(&mut self, name: &str) -> Option<&mut MetricResult> {
        self.metric_results
            .as_mut()?
            .iter_mut()
            .find(|r| r.name == name)
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    #[serde(default)]
    pub count: i32,
    #[serde(default)]
    pub successful: i32,
    #[serde(default)]
    pub failed: i32,
    #[serde(default)]
    pub inconclusive: i32,
    #[serde(default)]
    pub error: i32,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricResult {
    pub name: String,
    pub phase: AnalysisPhase,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measurements: Vec<Measurement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default)]
    pub count: i32,
    #[serde(default)]
    pub successful: i32,
    #[serde(default)]
    pub failed: i32,
    #[serde(default)]
    pub inconclusive: i32,
    #[serde(default)]
    pub error: i32,
    #[serde(default)]
    pub consecutive_error: i32,
    #[serde(default)]
    pub consecutive_success: i32,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Measurement {
    pub phase: AnalysisPhase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// The provider's result, rendered as text (`[0.99]`, `0.5`, `{"ok":true}`), as Argo stores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_at: Option<Time>,
}
