//! The checks of the objects a Rollout names, made on what one reconcile read of them before anything is acted
//! on (Argo's `getRolloutReferencedResources` and `ValidateRolloutReferencedResources`): its stable and canary
//! Services, or a blue-green one's active and preview Services (in that order, as Argo reads them) exist, select only labels its pod template carries, and are
//! managed by no other Rollout; its router objects exist and fit its configuration (the routes it names are
//! there), as the router's own builder finds when it re-weights them. Each error is Argo's `field.Invalid` on
//! the field that names the object; the planner turns the first into InvalidSpec, and looks again in 20 s so
//! it clears when the object is fixed.

use k8s_openapi::api::core::v1::Service;

use super::MANAGED_BY_ANNOTATION;
use super::hash::HASH_LABEL;
use crate::api::Rollout;
use crate::api::traffic_routing::GATEWAY_API_PLUGIN;
use crate::routing::{self, Desired, RouterObject, Routing, Target, alb, nginx};
use crate::template::Finding;

/// Argo's getRolloutValidationErrors past the spec, from what the Services (`services`), the analysis
/// templates (`templates`) and the router objects (`routers`) checks found, each in its own order: reading
/// the objects stops at the first one missing (getRolloutReferencedResources: Services, templates, then
/// router objects), so every not-found comes before what ValidateRolloutReferencedResources then finds in
/// those read (in the same order of kinds). Argo's not-found messages (the lister's NotFound, and
/// getReferencedAnalysisTemplatesFromRef's) each end in ` not found`.
pub fn in_argo_order(
    services: Vec<Finding>,
    templates: Vec<Finding>,
    routers: Vec<Finding>,
) -> Vec<Finding> {
    let (missing, read): (Vec<Finding>, Vec<Finding>) = [services, templates, routers]
        .into_iter()
        .flatten()
        .partition(|f| f.message.ends_with(" not found"));
    missing.into_iter().chain(read).collect()
}

/// The Services a Rollout's strategy names, in the order Argo reads them (getRolloutReferencedResources):
/// a blue-green one's active then preview, a canary's stable then canary; each with its field path.
pub fn named_services(rollout: &Rollout) -> [(&'static str, Option<&str>); 2] {
    if let Some(blue_green) = rollout.spec.blue_green() {
        return [
            (
                "spec.strategy.blueGreen.activeService",
                Some(blue_green.active_service.as_str()),
            ),
            (
                "spec.strategy.blueGreen.previewService",
                blue_green.preview_service.as_deref(),
            ),
        ];
    }
    let canary = rollout.spec.canary();
    [
        (
            "spec.strategy.canary.stableService",
            canary.and_then(|c| c.stable_service.as_deref()),
        ),
        (
            "spec.strategy.canary.canaryService",
            canary.and_then(|c| c.canary_service.as_deref()),
        ),
    ]
}

/// The Services `rollout` names ([`named_services`]), checked against `services` (those read).
pub fn services(rollout: &Rollout, services: &[Service]) -> Vec<Finding> {
    let mut out = Vec::new();
    for (path, name) in named_services(rollout) {
        let Some(name) = name.filter(|n| !n.is_empty()) else {
            continue;
        };
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
                .map(|message| Finding::invalid(path, &value, message)),
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

/// The router objects `rollout` names, in Argo's order, checked against `read`: one not read is not checked,
/// one read as missing is the API server's NotFound, one read is handed to its builder (at weight 0), whose
/// error says what does not fit.
pub fn routers(rollout: &Rollout, read: &[RouterObject]) -> Vec<Finding> {
    let Ok(Some(routing)) = routing::routing(rollout) else {
        return Vec::new();
    };
    let status = rollout.status.as_ref();
    let canary_hash = status.map_or("", |s| s.current_pod_hash.as_str());
    let stable_hash = status.map_or("", |s| s.stable_rs.as_str());
    let d = Desired::new(rollout, &routing, 0, canary_hash, stable_hash);
    let mut out = Vec::new();
    for target in routing::targets(&routing, &d) {
        let Some(found) = target.read_in(read) else {
            continue;
        };
        let (path, resource) = named_at(&target, &routing);
        let name = target.read_name();
        let fit = match found.object.as_deref() {
            None => Err(format!("{resource} {name:?} not found")),
            Some(object) => fits(&target, object, &d),
        };
        if let Err(message) = fit {
            out.push(Finding::invalid(path, &format!("{name:?}"), message));
        }
    }
    out
}

/// Whether the builder of `target` can bring `object` to a weight.
fn fits(target: &Target<'_>, object: &serde_json::Value, d: &Desired<'_>) -> Result<(), String> {
    match target {
        Target::CanaryIngress { stable, config, .. } => {
            let ingress = serde_json::from_value(object.clone())
                .map_err(|e| format!("cannot decode the Ingress: {e}"))?;
            nginx::canary_ingress(&ingress, stable, None, config, d).map(drop)
        }
        Target::AlbIngress { config, .. } => return alb::validate(object, config, d),
        _ => target.check(object, d),
    }
    .map_err(|e| e.to_string())
}

/// The field of the Rollout that names `target`'s object, and the API server's resource for it (the words of
/// its NotFound), as Argo reports them.
fn named_at(target: &Target<'_>, routing: &Routing) -> (String, &'static str) {
    let at = "spec.strategy.canary.trafficRouting";
    match target {
        Target::DestinationRule { .. } => (
            format!("{at}.istio.destinationRule.name"),
            "destinationrules.networking.istio.io",
        ),
        Target::VirtualService { .. } => {
            let one = routing
                .istio
                .as_ref()
                .is_some_and(|i| i.virtual_service.is_some());
            let field = if one {
                "virtualService"
            } else {
                "virtualServices"
            };
            (
                format!("{at}.istio.{field}.name"),
                "virtualservices.networking.istio.io",
            )
        }
        Target::CanaryIngress { config, .. } => {
            let one = config
                .stable_ingress
                .as_deref()
                .is_some_and(|s| !s.is_empty());
            let field = if one {
                "stableIngress"
            } else {
                "stableIngresses"
            };
            (format!("{at}.nginx.{field}"), "ingress.networking.k8s.io")
        }
        Target::HttpRoute { .. } => (
            format!("{at}.plugins.{GATEWAY_API_PLUGIN}"),
            "httproutes.gateway.networking.k8s.io",
        ),
        Target::TrafficSplit { .. } => (
            format!("{at}.smi.trafficSplitName"),
            "trafficsplits.split.smi-spec.io",
        ),
        Target::AlbIngress { config, .. } => {
            let field = if config.ingresses.is_empty() {
                "ingress"
            } else {
                "ingresses"
            };
            (format!("{at}.alb.{field}"), "ingress.networking.k8s.io")
        }
        Target::TraefikService { .. } => (
            format!("{at}.traefik.weightedTraefikServiceName"),
            "traefikservices.traefik.io",
        ),
    }
}
