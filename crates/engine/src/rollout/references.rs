//! The checks of the objects a Rollout names, made on what one reconcile read of them before anything is acted
//! on (Argo's `getRolloutReferencedResources` and `ValidateRolloutReferencedResources`): its stable and canary
//! Services (in that order, as Argo reads them) exist, select only labels its pod template carries, and are
//! managed by no other Rollout. Each error is Argo's `field.Invalid` on the field that names the object; the
//! planner turns the first into InvalidSpec, and looks again in 20 s so it clears when the object is fixed.

use k8s_openapi::api::core::v1::Service;

use super::MANAGED_BY_ANNOTATION;
use super::hash::HASH_LABEL;
use crate::api::Rollout;
use crate::template::Finding;

/// The Services `rollout` names, stable before canary, checked against `services` (those read).
pub fn services(rollout: &Rollout, services: &[Service]) -> Vec<Finding> {
    let Some(canary) = rollout.spec.canary() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (field, name) in [
        ("stableService", &canary.stable_service),
        ("canaryService", &canary.canary_service),
    ] {
        let Some(name) = name.as_deref().filter(|n| !n.is_empty()) else {
            continue;
        };
        let path = format!("spec.strategy.canary.{field}");
        let value = format!("{name:?}");
        let found = services
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(name));
        let Some(service) = found else {
            // The lister's NotFound, as Argo passes it on.
            out.push(Finding::invalid(
                path,
                &value,
                format!("service {name:?} not found"),
            ));
            continue;
        };
        out.extend(
            unmatched_labels(rollout, service)
                .map(|key| format!("Service {name:?} has unmatch label {key:?} in rollout"))
                .chain(
                    managed_elsewhere(rollout, service)
                        .then(|| format!("Service {name:?} is managed by another Rollout")),
                )
                .map(|message| Finding::invalid(path.clone(), &value, message)),
        );
    }
    out
}

/// Argo's ValidateService: the keys of the Service's selector (but the pod-template hash, which the Rollout
/// sets) whose value the pod template's labels do not carry, in key order.
fn unmatched_labels<'s>(rollout: &Rollout, service: &'s Service) -> impl Iterator<Item = &'s str> {
    let labels = rollout
        .spec
        .template
        .as_ref()
        .and_then(|t| t.pointer("/metadata/labels"));
    service
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .into_iter()
        .flatten()
        .filter(|(key, _)| key.as_str() != HASH_LABEL)
        .filter(move |(key, value)| {
            labels
                .and_then(|l| l.get(key.as_str()))
                .and_then(|v| v.as_str())
                != Some(value.as_str())
        })
        .map(|(key, _)| key.as_str())
}

/// Whether another Rollout's name is in the Service's managed-by annotation.
fn managed_elsewhere(rollout: &Rollout, service: &Service) -> bool {
    let owner = service
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(MANAGED_BY_ANNOTATION));
    owner.is_some_and(|o| Some(o.as_str()) != rollout.metadata.name.as_deref())
}
