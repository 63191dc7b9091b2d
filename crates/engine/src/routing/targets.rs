//! The router objects a Rollout's traffic routing names, in the order Argo brings them to a weight
//! (Istio's DestinationRule before its VirtualServices, then NGINX's canary Ingresses, ALB's Ingresses, SMI's TrafficSplit,
//! Traefik's TraefikService, then the Gateway API's HTTPRoutes), each with the builder that re-weights it. One list for every driver: the daemon's edge
//! (`routers/`) reads and writes these objects through the API server, a rehearsal in memory.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::Value;

use super::managed_routes::StepRoute;
use super::{Desired, Routing, RoutingError, alb, gateway, istio, nginx, smi, traefik};
use crate::api::reasons::rollout as reasons;
use crate::api::traffic_routing::{
    AlbTrafficRouting, GatewayApiTrafficRouting, IstioDestinationRule, IstioVirtualService,
    NginxTrafficRouting, SmiTrafficRouting,
};
use crate::rollout::Event;

/// A router object a Rollout names, as one reconcile read it before acting on anything: `object` is `None`
/// when it does not exist, and shared with where it was read from (the daemon's watch caches), since the
/// plans only read it. A driver lists only what it read (a rehearsal, the objects among its files).
#[derive(Debug, Clone, PartialEq)]
pub struct RouterObject {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub object: Option<Arc<Value>>,
}

/// Why a reconcile stopped at its routers, as the reconcile loop and its drivers need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteFailure {
    /// What went wrong, naming the object: for the log and, when announced, the Event's message.
    pub message: String,
    /// Argo records a `TrafficRoutingError` Event when a weight cannot be set (its `SetWeight`: a
    /// VirtualService, canary Ingress or HTTPRoute, or the configuration), not when the pod hashes cannot be
    /// moved (its `UpdateHash`: the DestinationRule), whose error only fails the reconcile.
    pub announced: bool,
    /// The object is held back ([`RoutingError::Held`]), not unfit: a rehearsal waits it out.
    pub held: bool,
    /// The reason and message of the router's own Warning Event, recorded before the `TrafficRoutingError`
    /// (Traefik's `TraefikServiceUpdateError` when its update is refused).
    pub router_warning: Option<(&'static str, String)>,
}

impl RouteFailure {
    /// The failure to bring an object of `kind` (`None`: the configuration) to the route; `held` when it
    /// was held back rather than refused.
    pub fn new(kind: Option<&str>, held: bool, message: String) -> RouteFailure {
        RouteFailure {
            message,
            announced: kind != Some("DestinationRule"),
            held,
            router_warning: None,
        }
    }
}

/// A router object as its builder left it ([`Target::build`]), and what of it moved.
#[derive(Debug, Clone, PartialEq)]
pub struct Built {
    pub object: Value,
    pub moved: Moved,
}

/// What one write moved of its object, for the Events Argo records of it, each from its own write: the
/// managed routes removed (Argo's RemoveManagedRoutes), the step's header or mirror route set or removed
/// (SetHeaderRoute, SetMirrorRoute), the weights or, for a DestinationRule, the subsets (SetWeight,
/// UpdateHash). Only a VirtualService and an ALB Ingress move routes; every other write moves its weights.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Moved {
    pub routes_removed: bool,
    pub route_set: bool,
    pub weights: bool,
}

impl Moved {
    /// A write of the weights (or subsets) alone.
    pub const WEIGHTS: Moved = Moved {
        routes_removed: false,
        route_set: false,
        weights: true,
    };
}

/// One router object to bring to the weight.
#[derive(Debug, Clone, Copy)]
pub enum Target<'r> {
    /// Istio's subset mode: the DestinationRule whose subsets select the pod hashes.
    DestinationRule {
        namespace: &'r str,
        config: &'r IstioDestinationRule,
    },
    VirtualService {
        namespace: &'r str,
        name: &'r str,
        config: &'r IstioVirtualService,
        destination_rule: Option<&'r IstioDestinationRule>,
    },
    /// The canary Ingress made from the stable Ingress `stable` (read, never written).
    CanaryIngress {
        namespace: &'r str,
        stable: &'r str,
        config: &'r NginxTrafficRouting,
    },
    HttpRoute {
        namespace: &'r str,
        name: &'r str,
        config: &'r GatewayApiTrafficRouting,
    },
    /// SMI's TrafficSplit, created and controlled by the Rollout (`smi::traffic_split`).
    TrafficSplit {
        namespace: &'r str,
        name: &'r str,
        config: &'r SmiTrafficRouting,
    },
    /// Traefik's weighted TraefikService (`traefik::traefik_service`).
    TraefikService { namespace: &'r str, name: &'r str },
    /// An Ingress of ALB's, its action annotation re-weighted and its header routes set (`alb::ingress`).
    AlbIngress {
        namespace: &'r str,
        name: &'r str,
        config: &'r AlbTrafficRouting,
    },
}

impl<'r> Target<'r> {
    /// The object's kind, as the API server names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Target::DestinationRule { .. } => "DestinationRule",
            Target::VirtualService { .. } => "VirtualService",
            Target::CanaryIngress { .. } | Target::AlbIngress { .. } => "Ingress",
            Target::HttpRoute { .. } => "HTTPRoute",
            Target::TrafficSplit { .. } => smi::KIND,
            Target::TraefikService { .. } => traefik::KIND,
        }
    }

    pub fn namespace(&self) -> &'r str {
        match self {
            Target::DestinationRule { namespace, .. }
            | Target::VirtualService { namespace, .. }
            | Target::CanaryIngress { namespace, .. }
            | Target::HttpRoute { namespace, .. }
            | Target::TrafficSplit { namespace, .. }
            | Target::TraefikService { namespace, .. }
            | Target::AlbIngress { namespace, .. } => namespace,
        }
    }

    /// The object read before anything is acted on (Argo's getRolloutReferencedResources): the one written,
    /// but for NGINX the stable Ingress the canary one is made from.
    pub fn read_name(&self) -> &'r str {
        match self {
            Target::DestinationRule { config, .. } => &config.name,
            Target::VirtualService { name, .. }
            | Target::HttpRoute { name, .. }
            | Target::TrafficSplit { name, .. }
            | Target::TraefikService { name, .. }
            | Target::AlbIngress { name, .. } => name,
            Target::CanaryIngress { stable, .. } => stable,
        }
    }

    /// Whether the object is one Argo reads and checks before acting (its getRolloutReferencedResources):
    /// all but the TrafficSplit, which the Rollout creates, and the TraefikService, which Argo's Traefik router
    /// first reads when it sets a weight.
    pub fn referenced(&self) -> bool {
        !matches!(
            self,
            Target::TrafficSplit { .. } | Target::TraefikService { .. }
        )
    }

    /// What `read` holds of the object [`Target::read_name`] names; `None` when it was not read.
    pub fn read_in<'o>(&self, read: &'o [RouterObject]) -> Option<&'o RouterObject> {
        read.iter().find(|o| {
            o.kind == self.kind() && o.namespace == self.namespace() && o.name == self.read_name()
        })
    }

    /// The object written; for the canary Ingress `<rollout>-<stable>-canary`.
    pub fn name(&self, d: &Desired) -> String {
        match self {
            Target::DestinationRule { config, .. } => config.name.clone(),
            Target::VirtualService { name, .. }
            | Target::HttpRoute { name, .. }
            | Target::TrafficSplit { name, .. }
            | Target::TraefikService { name, .. }
            | Target::AlbIngress { name, .. } => name.to_string(),
            Target::CanaryIngress { stable, .. } => {
                nginx::canary_ingress_name(d.rollout_name(), stable)
            }
        }
    }

    /// Whether this object may move now: Istio's DestinationRule in subset-only mode waits until every
    /// ReplicaSet that is to receive traffic is fully available ([`istio::destination_rule_delay`]; the canary
    /// is not waited for while an aborted Rollout rolls back). An `Err` says why it waits; the other objects
    /// never do. `replica_sets`: those the Rollout owns.
    pub fn held(&self, d: &Desired, replica_sets: &[ReplicaSet]) -> Result<(), RoutingError> {
        match self {
            Target::DestinationRule { .. } => {
                let aborted = d.rollout.status.as_ref().is_some_and(|s| s.abort);
                istio::destination_rule_delay(d, replica_sets, aborted)
            }
            Target::VirtualService { .. }
            | Target::HttpRoute { .. }
            | Target::CanaryIngress { .. }
            | Target::TrafficSplit { .. }
            | Target::TraefikService { .. }
            | Target::AlbIngress { .. } => Ok(()),
        }
    }

    /// Whether [`Target::build`] can bring `current` to `d`: its error if not, without making the object
    /// where the builder can tell apart (a VirtualService's).
    pub fn check(&self, current: &Value, d: &Desired) -> Result<(), RoutingError> {
        match self {
            Target::VirtualService {
                config,
                destination_rule,
                ..
            } => istio::check_virtual_service(current, config, *destination_rule, d),
            _ => self.build(current, d).map(drop),
        }
    }

    /// The object `current` (as read) at the desired weight and hashes, for an update that keeps its
    /// resourceVersion; `Ok(None)` when it already says so. The canary Ingress is made from two objects
    /// (`nginx::canary_ingress`) and the TrafficSplit is created or patched (`smi::traffic_split`): neither
    /// is built here.
    pub fn build(&self, current: &Value, d: &Desired) -> Result<Option<Built>, RoutingError> {
        let weights = match self {
            Target::VirtualService {
                config,
                destination_rule,
                ..
            } => return istio::virtual_service(current, config, *destination_rule, d),
            Target::DestinationRule { config, .. } => istio::destination_rule(current, config, d),
            Target::HttpRoute { config, .. } => gateway::http_route(current, config, d),
            Target::TraefikService { .. } => traefik::traefik_service(current, d),
            Target::AlbIngress { config, .. } => return alb::ingress(current, config, d),
            Target::CanaryIngress { .. } => Err(RoutingError::Mismatch(
                "the canary Ingress is made from its stable Ingress".to_string(),
            )),
            Target::TrafficSplit { .. } => Err(RoutingError::Mismatch(
                "the TrafficSplit is created or patched, not updated".to_string(),
            )),
        };
        Ok(weights?.map(|object| Built {
            object,
            moved: Moved::WEIGHTS,
        }))
    }

    /// The Events Argo's router records on the Rollout once it has written this object at `d` (`created`: the
    /// canary Ingress or TrafficSplit was made rather than patched), in Argo's order, for what the write
    /// `moved`: Istio's RemoveManagedRoutes, SetHeaderRoute, SetMirrorRoute, UpdateHash and SetWeight, NGINX's
    /// `SetWeight`, ALB's `PatchingALBIngress` (of its RemoveManagedRoutes, SetHeaderRoute and SetWeight),
    /// SMI's `TrafficSplitCreated`. None for an HTTPRoute (Argo's Gateway API plugin records none), a patched
    /// TrafficSplit and a TraefikService (Argo's Traefik router records only a failed update).
    pub fn written(&self, d: &Desired, created: bool, moved: Moved) -> Vec<Event> {
        let event = |reason: &str, message: String| Event {
            reason: reason.to_string(),
            message,
            warning: false,
            after_write: None,
        };
        let mut out = Vec::new();
        if let Target::VirtualService { name, .. } = self {
            let told = |what: String| {
                event(
                    reasons::UPDATED_VIRTUAL_SERVICE,
                    format!("VirtualService `{name}` {what}"),
                )
            };
            if moved.routes_removed {
                out.push(told("removed all managed routes.".to_string()));
            }
            match (&d.managed.set, moved.route_set) {
                (Some(StepRoute::Header(h)), true) => {
                    out.push(told(format!("set headerRoute '{}'", h.name)));
                }
                (Some(StepRoute::Mirror(m)), true) => {
                    out.push(told(format!("set mirrorRoute '{}'", m.name)));
                }
                _ => {}
            }
        }
        if let Target::AlbIngress { name, .. } = self {
            let told = |what: String| {
                event(
                    reasons::PATCHING_ALB_INGRESS,
                    format!("Updating Ingress `{name}` {what}"),
                )
            };
            if moved.routes_removed {
                out.push(told("removing managed routes".to_string()));
            }
            // Argo formats the whole step with `%d` (Go's struct syntax with a pointer's address); canaryd
            // names the route.
            if let (Some(StepRoute::Header(h)), true) = (&d.managed.set, moved.route_set) {
                out.push(told(format!("to headerRoute '{}'", h.name)));
            }
        }
        if !moved.weights {
            return out;
        }
        let (reason, message) = match self {
            Target::DestinationRule { config, .. } => (
                reasons::UPDATED_DESTINATION_RULE,
                format!(
                    "DestinationRule {} subset updated ({}: {}, {}: {})",
                    config.name,
                    config.canary_subset_name,
                    d.canary_hash,
                    config.stable_subset_name,
                    d.stable_hash
                ),
            ),
            Target::VirtualService { name, .. } => (
                reasons::UPDATED_VIRTUAL_SERVICE,
                format!(
                    "VirtualService `{name}` set to desiredWeight '{}'",
                    d.canary_weight
                ),
            ),
            Target::CanaryIngress { .. } if created => (
                reasons::CREATING_CANARY_INGRESS,
                format!(
                    "Creating canary ingress `{}` with weight `{}`",
                    self.name(d),
                    d.canary_weight
                ),
            ),
            Target::AlbIngress { name, .. } => (
                reasons::PATCHING_ALB_INGRESS,
                format!(
                    "Updating Ingress `{name}` to desiredWeight '{}'",
                    d.canary_weight
                ),
            ),
            Target::CanaryIngress { .. } => (
                reasons::PATCHING_CANARY_INGRESS,
                format!(
                    "Updating Ingress `{}` to desiredWeight '{}'",
                    self.name(d),
                    d.canary_weight
                ),
            ),
            Target::TrafficSplit { name, .. } if created => (
                reasons::TRAFFIC_SPLIT_CREATED,
                format!("TrafficSplit `{name}` created"),
            ),
            Target::HttpRoute { .. }
            | Target::TrafficSplit { .. }
            | Target::TraefikService { .. } => return out,
        };
        out.push(event(reason, message));
        out
    }
}

/// Every object `routing` names, in the order Argo writes them.
pub fn targets<'r>(routing: &'r Routing, d: &Desired<'r>) -> Vec<Target<'r>> {
    let namespace = d.rollout_namespace();
    let mut out = Vec::new();
    if let Some(config) = &routing.istio {
        // Argo moves the DestinationRule's hashes (UpdateHash) before the weights (SetWeight).
        if let Some(dr) = &config.destination_rule {
            out.push(Target::DestinationRule {
                namespace,
                config: dr,
            });
        }
        for vs in istio::virtual_services(config) {
            let (vs_namespace, name) = istio::namespace_and_name(&vs.name, namespace);
            out.push(Target::VirtualService {
                namespace: vs_namespace,
                name,
                config: vs,
                destination_rule: config.destination_rule.as_ref(),
            });
        }
    }
    if let Some(config) = &routing.nginx {
        for stable in nginx::stable_ingresses(config) {
            out.push(Target::CanaryIngress {
                namespace,
                stable,
                config,
            });
        }
    }
    if let Some(config) = &routing.alb {
        for name in alb::ingresses(config) {
            out.push(Target::AlbIngress {
                namespace,
                name,
                config,
            });
        }
    }
    if let Some(config) = &routing.smi {
        out.push(Target::TrafficSplit {
            namespace,
            name: smi::traffic_split_name(config, d),
            config,
        });
    }
    if let Some(config) = &routing.traefik {
        out.push(Target::TraefikService {
            namespace,
            name: &config.weighted_traefik_service_name,
        });
    }
    if let Some(config) = &routing.gateway_api {
        let route_namespace = gateway::namespace(config, d);
        for name in gateway::http_routes(config) {
            out.push(Target::HttpRoute {
                namespace: route_namespace,
                name,
                config,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Rollout;
    use serde_json::json;

    #[test]
    fn every_named_object_comes_in_argos_order_with_its_namespace() {
        let rollout: Rollout = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "prod", "uid": "u"},
            "spec": {"strategy": {"canary": {"trafficRouting": {
                "istio": {
                    "virtualServices": [{"name": "a"}, {"name": "b.mesh"}],
                    "destinationRule": {"name": "dr", "canarySubsetName": "c", "stableSubsetName": "s"}
                },
                "nginx": {"stableIngresses": ["i1", "i2"]},
                "alb": {"ingresses": ["a1", "a2"], "servicePort": 80},
                "traefik": {"weightedTraefikServiceName": "t"},
                "plugins": {"argoproj-labs/gatewayAPI": {"httpRoute": "h", "namespace": "gw"}}
            }}}}
        }))
        .unwrap();
        let routing = super::super::routing(&rollout).unwrap().unwrap();
        let d = Desired::new(&rollout, &routing, 10, "new", "old");
        let listed: Vec<(&str, &str, String)> = targets(&routing, &d)
            .iter()
            .map(|t| (t.kind(), t.namespace(), t.name(&d)))
            .collect();
        assert_eq!(
            listed,
            vec![
                ("DestinationRule", "prod", "dr".to_string()),
                ("VirtualService", "prod", "a".to_string()),
                ("VirtualService", "mesh", "b".to_string()),
                ("Ingress", "prod", "web-i1-canary".to_string()),
                ("Ingress", "prod", "web-i2-canary".to_string()),
                ("Ingress", "prod", "a1".to_string()),
                ("Ingress", "prod", "a2".to_string()),
                ("TraefikService", "prod", "t".to_string()),
                ("HTTPRoute", "gw", "h".to_string()),
            ]
        );
    }
}
