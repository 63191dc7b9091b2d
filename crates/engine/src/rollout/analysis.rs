//! The AnalysisRuns a Rollout creates: their names (`<rollout>-<hash>-<revision>[-<step>|-pre|-post]`), Argo's labels
//! and annotations, and their spec, merged from the referenced templates by `engine::compose` with the
//! Rollout's args (literals, `podTemplateHashValue`, `fieldRef`) filled in. Also the template-dependent
//! checks of a Rollout (missing templates, unsupplied args, step metrics that never end), shared by the
//! planner and `canaryd validate`. Pure: templates come through a lookup closure.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use super::hash::HASH_LABEL;
use crate::api::rollout::RolloutAnalysis;
use crate::api::{AnalysisRun, AnalysisRunSpec, AnalysisTemplateSpec, Argument, Metric, Rollout};
use crate::compose::{Lookup, RunSpec};
use crate::suggest::closest;
use crate::template::{Finding, Severity};

pub const TYPE_LABEL: &str = "rollout-type";
pub const STEP_INDEX_LABEL: &str = "step-index";
pub const REVISION_ANNOTATION: &str = "rollout.argoproj.io/revision";

/// Which analysis of the Rollout a run belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    Step(usize),
    Background,
    /// A blue-green Rollout's analyses before and after the active Service's switch.
    PrePromotion,
    PostPromotion,
}

/// What a run's identity and args are computed from.
#[derive(Debug, Clone, Copy)]
pub struct RunContext<'a> {
    pub rollout: &'a Rollout,
    pub revision: &'a str,
    pub new_hash: &'a str,
    pub stable_hash: &'a str,
    pub instance_id: Option<&'a str>,
}

/// The merged templates of an analysis, as one spec (nested templates resolved by `compose`).
fn merged(analysis: &RolloutAnalysis, lookup: &Lookup<'_>) -> Result<RunSpec, String> {
    let root = AnalysisTemplateSpec {
        templates: analysis.templates.clone(),
        ..Default::default()
    };
    RunSpec::from_template(&root, lookup).map_err(|e| e.to_string())
}

/// A metric Argo would run until terminated: an interval and no count.
fn runs_indefinitely(metric: &Metric) -> bool {
    let interval = metric.interval.as_deref().is_some_and(|i| !i.is_empty());
    let no_count = match &metric.count {
        None => true,
        Some(IntOrString::Int(n)) => *n == 0,
        Some(IntOrString::String(s)) => s == "0",
    };
    interval && no_count
}

/// What a template the lookup does not find is.
#[derive(Debug, Clone, Copy)]
pub enum Missing<'a> {
    /// Argo's error: the planner and rehearse have nothing else to run.
    Error,
    /// `validate`'s warning: it may be in the cluster. `given` holds the (cluster-scoped, name) of the
    /// templates among the files, the nearest of which is suggested for a misspelling.
    Warning { given: &'a [(bool, &'a str)] },
}

/// The findings about the templates a Rollout's analyses name (a canary's steps and background, a blue-green
/// one's promotions), walked once ([`RolloutSpec::analyses`](crate::api::rollout::RolloutSpec::analyses)); a
/// template not found is as `missing` says.
pub fn template_findings(
    rollout: &Rollout,
    lookup: &Lookup<'_>,
    missing: Missing<'_>,
) -> Vec<Finding> {
    rollout
        .spec
        .analyses()
        .into_iter()
        .flat_map(|a| {
            let step = a.step.is_some();
            check_templates(a.analysis, &a.path(), step, missing, lookup)
        })
        .collect()
}

/// The problems of one analysis that need its templates: templates not found (as `missing` says), template
/// args the Rollout leaves without a value, and, for a step, metrics that would never end.
pub fn check_templates(
    analysis: &RolloutAnalysis,
    path: &str,
    step: bool,
    missing: Missing<'_>,
    lookup: &Lookup<'_>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut found_all = true;
    for (i, reference) in analysis.templates.iter().flatten().enumerate() {
        if lookup(reference).is_none() {
            found_all = false;
            let name = reference.template_name.as_deref().unwrap_or_default();
            let kind = if reference.cluster_scope == Some(true) {
                "ClusterAnalysisTemplate"
            } else {
                "AnalysisTemplate"
            };
            out.push(match missing {
                Missing::Warning { given } => {
                    let scope = reference.cluster_scope == Some(true);
                    let same_kind = given.iter().filter(|(c, _)| *c == scope).map(|(_, n)| *n);
                    let hint = closest(name, same_kind)
                        .map(|n| format!(" (did you mean {n:?}?)"))
                        .unwrap_or_default();
                    Finding::warning(
                        format!("{path}.templates[{i}]"),
                        format!(
                            "{kind} {name:?} is not among the given files{hint}; it must exist in the cluster"
                        ),
                    )
                }
                // Argo's getReferencedAnalysisTemplatesFromRef, on the list's field.
                Missing::Error => Finding::invalid(
                    format!("{path}.templates"),
                    &format!("{name:?}"),
                    format!("{kind} '{name}' not found"),
                ),
            });
        }
    }
    if !found_all {
        return out;
    }
    let spec = match merged(analysis, lookup) {
        Ok(s) => s,
        Err(e) => {
            out.push(Finding {
                severity: Severity::Error,
                path: format!("{path}.templates"),
                message: e,
            });
            return out;
        }
    };
    let supplied = analysis.args.as_deref().unwrap_or_default();
    for arg in &spec.args {
        let has_default = arg.value.is_some() || arg.value_from.is_some();
        if !has_default && !supplied.iter().any(|a| a.name == arg.name) {
            out.push(Finding {
                severity: Severity::Error,
                path: format!("{path}.args"),
                message: format!(
                    "args.{} was not resolved: the templates require it",
                    arg.name
                ),
            });
        }
    }
    if step {
        for metric in spec.metrics.iter().filter(|m| runs_indefinitely(m)) {
            out.push(Finding {
                severity: Severity::Error,
                path: format!("{path}.templates"),
                message: format!(
                    "metric {:?} runs indefinitely (an interval and no count): a step analysis must end",
                    metric.name
                ),
            });
        }
    }
    out
}

/// A `fieldRef` path's value in the Rollout: `metadata.name`, `metadata.labels['app']`, or any path to a
/// scalar (`spec.template.spec.containers[0].image`).
pub fn field_value(rollout: &Rollout, path: &str) -> Result<String, String> {
    let meta = &rollout.metadata;
    let quoted = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|r| r.strip_suffix("']"))
            .map(str::to_string)
    };
    if let Some(key) = quoted("metadata.labels['") {
        return Ok(meta
            .labels
            .as_ref()
            .and_then(|l| l.get(&key))
            .cloned()
            .unwrap_or_default());
    }
    if let Some(key) = quoted("metadata.annotations['") {
        return Ok(meta
            .annotations
            .as_ref()
            .and_then(|l| l.get(&key))
            .cloned()
            .unwrap_or_default());
    }
    let whole = serde_json::to_value(rollout).map_err(|e| e.to_string())?;
    let mut at = &whole;
    for section in path.split(['.', '[', ']']).filter(|s| !s.is_empty()) {
        at = match at {
            Value::Array(items) => {
                let i: usize = section
                    .parse()
                    .map_err(|_| format!("invalid index '{section}'"))?;
                items
                    .get(i)
                    .ok_or_else(|| format!("index {i} out of range"))?
            }
            Value::Object(map) => map
                .get(section)
                .ok_or_else(|| format!("invalid path {path} in rollout"))?,
            _ => return Err(format!("invalid path {path} in rollout")),
        };
    }
    match at {
        Value::String(s) => Ok(s.clone()),
        Value::Null | Value::Array(_) | Value::Object(_) => Err(format!(
            "path {path} in rollout must terminate in a primitive value"
        )),
        other => Ok(other.to_string()),
    }
}

/// The args the Rollout passes, each resolved to a value as Argo does when it creates the run.
fn rollout_args(analysis: &RolloutAnalysis, cx: &RunContext<'_>) -> Result<Vec<Argument>, String> {
    let mut out = Vec::new();
    for arg in analysis.args.iter().flatten() {
        let mut value = arg.value.clone().unwrap_or_default();
        if let Some(from) = &arg.value_from {
            if let Some(which) = &from.pod_template_hash_value {
                value = match which.as_str() {
                    "Stable" => cx.stable_hash.to_string(),
                    _ => cx.new_hash.to_string(),
                };
            } else if let Some(field) = &from.field_ref {
                value = field_value(cx.rollout, &field.field_path)
                    .map_err(|e| format!("arg {:?}: {e}", arg.name))?;
            }
        }
        out.push(Argument {
            name: arg.name.clone(),
            value: Some(value),
            value_from: None,
        });
    }
    Ok(out)
}

/// The run's name: Argo's, so the kubectl plugin and dashboards find it.
pub fn run_name(rollout: &str, hash: &str, revision: &str, kind: RunKind) -> String {
    match kind {
        RunKind::Step(i) => format!("{rollout}-{hash}-{revision}-{i}"),
        RunKind::Background => format!("{rollout}-{hash}-{revision}"),
        RunKind::PrePromotion => format!("{rollout}-{hash}-{revision}-pre"),
        RunKind::PostPromotion => format!("{rollout}-{hash}-{revision}-post"),
    }
}

/// The AnalysisRun Argo would create for `analysis`.
pub fn build_run(
    analysis: &RolloutAnalysis,
    kind: RunKind,
    cx: &RunContext<'_>,
    lookup: &Lookup<'_>,
) -> Result<AnalysisRun, String> {
    let spec = merged(analysis, lookup)?;
    let mut args = spec.args.clone();
    for given in rollout_args(analysis, cx)? {
        if let Some(arg) = args.iter_mut().find(|a| a.name == given.name) {
            arg.value = given.value;
            arg.value_from = None;
        }
    }
    if let Some(unresolved) = args
        .iter()
        .find(|a| a.value.is_none() && a.value_from.is_none())
    {
        return Err(format!("args.{} was not resolved", unresolved.name));
    }
    let mut labels = BTreeMap::from([(HASH_LABEL.to_string(), cx.new_hash.to_string())]);
    match kind {
        RunKind::Step(i) => {
            labels.insert(TYPE_LABEL.into(), "Step".into());
            labels.insert(STEP_INDEX_LABEL.into(), i.to_string());
        }
        RunKind::Background => {
            labels.insert(TYPE_LABEL.into(), "Background".into());
        }
        RunKind::PrePromotion => {
            labels.insert(TYPE_LABEL.into(), "PrePromotion".into());
        }
        RunKind::PostPromotion => {
            labels.insert(TYPE_LABEL.into(), "PostPromotion".into());
        }
    }
    if let Some(id) = cx.instance_id {
        labels.insert(crate::api::INSTANCE_LABEL.into(), id.to_string());
    }
    let metadata = analysis.analysis_run_metadata.as_ref();
    labels.extend(metadata.and_then(|m| m.labels.clone()).unwrap_or_default());
    let selector = cx
        .rollout
        .spec
        .selector
        .as_ref()
        .and_then(|s| s.match_labels.clone());
    labels.extend(selector.unwrap_or_default());
    let mut annotations =
        BTreeMap::from([(REVISION_ANNOTATION.to_string(), cx.revision.to_string())]);
    annotations.extend(
        metadata
            .and_then(|m| m.annotations.clone())
            .unwrap_or_default(),
    );

    let mut dry_run = analysis.dry_run.clone().unwrap_or_default();
    dry_run.extend(spec.dry_run);
    let mut retention = analysis.measurement_retention.clone().unwrap_or_default();
    retention.extend(spec.measurement_retention);
    let name = cx.rollout.metadata.name.clone().unwrap_or_default();
    Ok(AnalysisRun {
        metadata: ObjectMeta {
            name: Some(run_name(&name, cx.new_hash, cx.revision, kind)),
            namespace: cx.rollout.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![owner_reference(cx.rollout)]),
            ..Default::default()
        },
        spec: AnalysisRunSpec {
            metrics: spec.metrics,
            args: (!args.is_empty()).then_some(args),
            dry_run: (!dry_run.is_empty()).then_some(dry_run),
            measurement_retention: (!retention.is_empty()).then_some(retention),
            ..Default::default()
        },
        status: None,
    })
}

/// The controller reference every object the Rollout creates carries.
pub fn owner_reference(rollout: &Rollout) -> OwnerReference {
    OwnerReference {
        api_version: crate::api::API_VERSION.to_string(),
        kind: "Rollout".to_string(),
        name: rollout.metadata.name.clone().unwrap_or_default(),
        uid: rollout.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}
