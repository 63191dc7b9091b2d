//! The Kubernetes checks Argo's `ValidateRolloutSpec` runs on a Rollout's selector and pod template, as far as
//! canaryd runs them: apimachinery's `ValidateLabelSelector` (each expression's operator and values), the
//! selector read as a selector (`LabelSelectorAsSelector`; when it cannot be, Argo says "invalid label selector"
//! and checks no template), then `ValidatePodTemplateSpecForReplicaSet`: the template's labels match the selector
//! (`matchExpressions` included), and the parts of `ValidatePodSpec` a mistyped Rollout trips over — containers
//! present, each named as a DNS-1123 label, once, with an image and valid container ports, init containers the
//! same, `restartPolicy` `Always` (its default) and no `activeDeadlineSeconds`. Kubernetes' messages, word for
//! word. The rest of `ValidatePodSpec` (volumes, probes, resources, security contexts, ...) is left to the API
//! server, which refuses the ReplicaSet: canaryd reports that as `ReplicaFailure` where Argo says `InvalidSpec`.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use serde_json::Value;

use crate::api::meta::requirement_holds;
use crate::template::Finding;

/// Where the template is, as Argo names it.
const TEMPLATE: &str = "spec.template";

/// apimachinery's `dns1123LabelErrMsg` with its examples, as `IsDNS1123Label` words a name that is not one.
const DNS1123_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', \
and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation \
is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// A value as apimachinery prints a `field.Invalid` one that is not a number, a bool or a string: its JSON.
fn json(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_string())
}

/// `selector` (absent: Argo's `labels.Nothing()`, which matches no labels) and `template` checked in Argo's
/// order, after the checks of `spec.selector` itself that `spec.rs` makes. A template that is not a pod
/// template at all is named as the planner would find it, creating the ReplicaSet.
pub fn check(selector: Option<&LabelSelector>, template: Option<&Value>, out: &mut Vec<Finding>) {
    if let Some(selector) = selector {
        let before = out.len();
        check_expressions(selector, out);
        if out.len() > before {
            out.push(Finding::invalid(
                "spec.selector",
                &json(selector),
                "invalid label selector",
            ));
            return;
        }
    }
    let template = match template.map(PodTemplateSpec::deserialize) {
        None => PodTemplateSpec::default(),
        Some(Ok(template)) => template,
        Some(Err(e)) => return out.push(Finding::error(TEMPLATE, e.to_string())),
    };
    let labels = template.metadata.as_ref().and_then(|m| m.labels.as_ref());
    let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
    // An empty selector is `labels.Everything()`, which ValidatePodTemplateSpecForReplicaSet does not check.
    let checked = selector.is_none_or(|s| !selects_everything(s));
    if checked && !selector.is_some_and(|s| selects(s, label)) {
        out.push(Finding::invalid(
            format!("{TEMPLATE}.metadata.labels"),
            &json(&labels),
            "`selector` does not match template `labels`",
        ));
    }
    let spec = template.spec.unwrap_or_default();
    check_containers(&spec, out);
    check_replica_set_pod(&spec, out);
}

/// Whether `selector` has neither labels nor expressions.
fn selects_everything(selector: &LabelSelector) -> bool {
    selector.match_labels.as_ref().is_none_or(|l| l.is_empty())
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(|e| e.is_empty())
}

/// apimachinery's `ValidateLabelSelectorRequirement` for each expression: `In`/`NotIn` need values,
/// `Exists`/`DoesNotExist` take none, and no other operator exists.
fn check_expressions(selector: &LabelSelector, out: &mut Vec<Finding>) {
    for (i, e) in selector.match_expressions.iter().flatten().enumerate() {
        let at = format!("spec.selector.matchExpressions[{i}]");
        let has_values = e.values.as_ref().is_some_and(|v| !v.is_empty());
        match e.operator.as_str() {
            "In" | "NotIn" if !has_values => out.push(Finding::required(
                format!("{at}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if has_values => out.push(Finding::forbidden(
                format!("{at}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => out.push(Finding::invalid(
                format!("{at}.operator"),
                &format!("{other:?}"),
                "not a valid selector operator",
            )),
        }
    }
}

/// Whether the labels `label` reads meet every `matchLabels` entry and every expression.
fn selects<'a>(selector: &LabelSelector, label: impl Fn(&str) -> Option<&'a str>) -> bool {
    let labels_hold = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(key, value)| label(key) == Some(value.as_str()));
    labels_hold
        && selector.match_expressions.iter().flatten().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            requirement_holds(&e.operator, values, label(&e.key)).unwrap_or(false)
        })
}

/// `validateContainers` then `validateInitContainers`: at least one container; names unique across both lists.
fn check_containers(spec: &PodSpec, out: &mut Vec<Finding>) {
    let path = format!("{TEMPLATE}.spec.containers");
    if spec.containers.is_empty() {
        out.push(Finding::required(&path, ""));
    }
    let mut names = BTreeSet::new();
    for (i, c) in spec.containers.iter().enumerate() {
        check_container(c, &format!("{path}[{i}]"), &mut names, out);
    }
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let at = format!("{TEMPLATE}.spec.initContainers[{i}]");
        check_container(c, &at, &mut names, out);
    }
}

/// `validateContainerCommon`'s name and image, the container's ports, and the name's uniqueness.
fn check_container(c: &Container, at: &str, names: &mut BTreeSet<String>, out: &mut Vec<Finding>) {
    let name = c.name.as_str();
    if name.is_empty() {
        out.push(Finding::required(format!("{at}.name"), ""));
    } else {
        for problem in dns1123_label(name) {
            out.push(Finding::invalid(
                format!("{at}.name"),
                &format!("{name:?}"),
                problem,
            ));
        }
    }
    if c.image.as_deref().is_none_or(str::is_empty) {
        out.push(Finding::required(format!("{at}.image"), ""));
    }
    for (j, port) in c.ports.iter().flatten().enumerate() {
        if !(1..=65535).contains(&port.container_port) {
            out.push(Finding::invalid(
                format!("{at}.ports[{j}].containerPort"),
                &port.container_port.to_string(),
                "must be between 1 and 65535, inclusive",
            ));
        }
    }
    if !names.insert(name.to_string()) {
        out.push(Finding::error(
            format!("{at}.name"),
            format!("Duplicate value: {name:?}"),
        ));
    }
}

/// apimachinery's `IsDNS1123Label`: what is wrong with `name` as a DNS-1123 label, if anything.
pub(crate) fn dns1123_label(name: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if name.len() > 63 {
        problems.push("must be no more than 63 characters".to_string());
    }
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = name.as_bytes();
    let well_formed = bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|b| alnum(b) || *b == b'-');
    if !well_formed {
        problems.push(DNS1123_LABEL.to_string());
    }
    problems
}

/// The rest of `ValidatePodTemplateSpecForReplicaSet`: a ReplicaSet's pods always restart (the policy defaults
/// to `Always`) and have no deadline.
fn check_replica_set_pod(spec: &PodSpec, out: &mut Vec<Finding>) {
    if let Some(policy) = spec.restart_policy.as_deref()
        && !matches!(policy, "" | "Always")
    {
        out.push(Finding::error(
            format!("{TEMPLATE}.spec.restartPolicy"),
            format!("Unsupported value: {policy:?}: supported values: \"Always\""),
        ));
    }
    if spec.active_deadline_seconds.is_some() {
        out.push(Finding::forbidden(
            format!("{TEMPLATE}.spec.activeDeadlineSeconds"),
            "activeDeadlineSeconds in ReplicaSet is not Supported",
        ));
    }
}
