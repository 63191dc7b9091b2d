//! NGINX Ingress (`trafficRouting.nginx`), as Argo Rollouts drives it: a canary Ingress
//! `<rollout>-<stableIngress>-canary` built from each stable Ingress (its rules that reach the stable Service,
//! pointed at the canary Service) carrying ingress-nginx's canary annotations, created once and then kept by
//! the minimal merge patch. The stable Ingress is only read, never changed. networking.k8s.io/v1 only.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{Ingress, IngressSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::{Desired, RoutingError, config};
use crate::api::Controlled;
use crate::api::traffic_routing::NginxTrafficRouting;
use crate::merge_patch;
use crate::rollout::analysis::owner_reference;

const DEFAULT_PREFIX: &str = "nginx.ingress.kubernetes.io";
const INGRESS_CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

/// Argo's ValidateRolloutNginxIngressesConfig, whose errors are `field.InternalError`s.
pub(super) fn check(nginx: &NginxTrafficRouting, field: &str) -> Result<(), RoutingError> {
    let single = nginx.stable_ingress.as_ref().is_some_and(|s| !s.is_empty());
    let multiple = nginx
        .stable_ingresses
        .as_ref()
        .is_some_and(|s| !s.is_empty());
    match (single, multiple) {
        (true, true) => Err(config(
            field,
            "Internal error: Either StableIngress or StableIngresses must be configured. Both are configured.",
        )),
        (false, false) => Err(config(
            field,
            "Internal error: Either StableIngress or StableIngresses must be configured. Neither are \
             configured.",
        )),
        _ => Ok(()),
    }
}

/// The stable Ingresses the configuration names, in order.
pub fn stable_ingresses(nginx: &NginxTrafficRouting) -> Vec<&str> {
    match (&nginx.stable_ingress, &nginx.stable_ingresses) {
        (Some(one), _) if !one.is_empty() => vec![one.as_str()],
        (_, Some(many)) => many.iter().map(String::as_str).collect(),
        _ => Vec::new(),
    }
}

/// `<rollout>-<stableIngress>-canary`, the prefix cut so the name fits Kubernetes' 253 characters.
pub fn canary_ingress_name(rollout: &str, stable_ingress: &str) -> String {
    const SUFFIX: &str = "-canary";
    let mut prefix = format!("{rollout}-{stable_ingress}");
    let mut cut = 253 - SUFFIX.len();
    while cut < prefix.len() && !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    prefix.truncate(cut);
    prefix + SUFFIX
}

/// What to do to the canary Ingress of one stable Ingress.
#[derive(Debug, Clone, PartialEq)]
pub enum CanaryIngress {
    Create(Box<Ingress>),
    /// A JSON merge patch (`application/merge-patch+json`) for the existing canary Ingress.
    Patch(Value),
    Unchanged,
}

/// The canary Ingress as Argo builds it from `stable` (named `stable_name` in the configuration).
pub fn desired_canary(
    stable: &Ingress,
    stable_name: &str,
    nginx: &NginxTrafficRouting,
    d: &Desired,
) -> Result<Ingress, RoutingError> {
    let prefix = nginx
        .annotation_prefix
        .as_deref()
        .filter(|p| !p.is_empty())
        .unwrap_or(DEFAULT_PREFIX);
    let stable_spec = stable.spec.clone().unwrap_or_default();
    let mut rules = Vec::new();
    for mut rule in stable_spec.rules.into_iter().flatten() {
        let mut reaches_stable = false;
        for path in rule.http.iter_mut().flat_map(|h| h.paths.iter_mut()) {
            if let Some(service) = path.backend.service.as_mut()
                && service.name == d.stable_service
            {
                service.name = d.canary_service.to_string();
                reaches_stable = true;
            }
        }
        if reaches_stable {
            rules.push(rule);
        }
    }
    if rules.is_empty() {
        return Err(RoutingError::Mismatch(format!(
            "ingress `{stable_name}` has no rules using service {} backend",
            d.stable_service
        )));
    }
    let mut annotations = BTreeMap::new();
    if let Some(class) = stable
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(INGRESS_CLASS_ANNOTATION))
    {
        annotations.insert(INGRESS_CLASS_ANNOTATION.to_string(), class.clone());
    }
    for (key, value) in nginx.additional_ingress_annotations.iter().flatten() {
        let key = if key.starts_with(prefix) {
            key.clone()
        } else {
            format!("{prefix}/{key}")
        };
        annotations.insert(key, value.clone());
    }
    for (key, value) in nginx.canary_ingress_annotations.iter().flatten() {
        annotations.insert(key.clone(), value.clone());
    }
    annotations.insert(format!("{prefix}/canary"), "true".to_string());
    annotations.insert(
        format!("{prefix}/canary-weight"),
        d.canary_weight.to_string(),
    );
    if let Some(total) = d.max_traffic_weight {
        annotations.insert(format!("{prefix}/canary-weight-total"), total.to_string());
    }
    Ok(Ingress {
        metadata: ObjectMeta {
            name: Some(canary_ingress_name(d.rollout_name(), stable_name)),
            namespace: stable.metadata.namespace.clone(),
            annotations: Some(annotations),
            owner_references: Some(vec![owner_reference(d.rollout)]),
            ..ObjectMeta::default()
        },
        spec: Some(IngressSpec {
            ingress_class_name: stable_spec.ingress_class_name,
            rules: Some(rules),
            tls: stable_spec.tls.filter(|t| !t.is_empty()),
            default_backend: None,
        }),
        status: None,
    })
}

/// Creates the canary Ingress of `stable`, or patches `existing` to it: annotations the canary Ingress has
/// and the desired one lacks are kept (other controllers add them), labels and spec become the desired ones.
/// Refuses a canary Ingress this Rollout does not control.
pub fn canary_ingress(
    stable: &Ingress,
    stable_name: &str,
    existing: Option<&Ingress>,
    nginx: &NginxTrafficRouting,
    d: &Desired,
) -> Result<CanaryIngress, RoutingError> {
    let mut desired = desired_canary(stable, stable_name, nginx, d)?;
    let Some(existing) = existing else {
        return Ok(CanaryIngress::Create(Box::new(desired)));
    };
    let uid = d.rollout.metadata.uid.as_deref().unwrap_or("");
    let controlled = existing.metadata.controlled_by(uid);
    let name = existing.metadata.name.clone().unwrap_or_default();
    if !controlled {
        return Err(RoutingError::Mismatch(format!(
            "canary ingress `{name}` controlled by different object"
        )));
    }
    let annotations = desired
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new);
    for (key, value) in existing.metadata.annotations.iter().flatten() {
        annotations
            .entry(key.clone())
            .or_insert_with(|| value.clone());
    }
    let compared = |i: &Ingress| {
        serde_json::json!({
            "metadata": {"annotations": i.metadata.annotations, "labels": i.metadata.labels},
            "spec": i.spec,
        })
    };
    let patch = merge_patch::diff(&compared(existing), &compared(&desired));
    Ok(if patch.as_object().is_none_or(|p| p.is_empty()) {
        CanaryIngress::Unchanged
    } else {
        CanaryIngress::Patch(patch)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_canary_ingress_name_is_cut_to_fit_253_characters() {
        assert_eq!(canary_ingress_name("web", "public"), "web-public-canary");
        let long = canary_ingress_name("web", &"i".repeat(300));
        assert_eq!(long.len(), 253);
        assert!(long.ends_with("i-canary"));
    }
}
