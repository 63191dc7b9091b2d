//! The traffic routers in memory, for the in-memory cluster (`engine::rollout::memory`) that `rehearse` and `demo`
//! play a Rollout on: the router objects found among the files (an Istio VirtualService or DestinationRule, a
//! Gateway API HTTPRoute) are brought to each route by the same targets and builders the daemon's routers write
//! through the API server (`crate::routers`), and held back by the same rule, so the weights a rehearsal shows
//! are those the daemon would write, when it would write them; a router whose object is not among the files
//! shows the canary and stable shares the builders are given. Owns the reading of the written objects'
//! weights, never how weights are computed.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use k8s_openapi::api::apps::v1::ReplicaSet;

use crate::api::Rollout;
use crate::rollout::{Event, Route};
use crate::routing::smi::{self, SmiApiVersion, TrafficSplitWrite};
use crate::routing::{
    self, Desired, Moved, RouteFailure, RouterObject, Routing, RoutingError, Target, alb,
};

/// One router object and its destinations' weights, as written at a step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouterWeights {
    /// `VirtualService/checkout`, `Ingress/checkout-canary-ingress`, `HTTPRoute/web`.
    pub object: String,
    /// (destination, weight) in the object's order.
    pub weights: Vec<(String, i64)>,
}

impl std::fmt::Display for RouterWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: Vec<String> = self
            .weights
            .iter()
            .map(|(d, w)| format!("{d} {w}"))
            .collect();
        write!(f, "{}: {}", self.object, shown.join(", "))
    }
}

/// The Rollout's routers and the objects of theirs found among the files, kept as last written. The default
/// routes nothing.
#[derive(Debug, Clone, Default)]
pub struct Routers {
    routing: Option<Routing>,
    /// Router objects ([`ROUTER_KINDS`]) from the files, each with where it was read (`FILE:LINE`).
    objects: Vec<(String, Value)>,
    /// What each router shows since the last route.
    shown: Vec<RouterWeights>,
}

fn named<'a>(
    objects: &'a mut [(String, Value)],
    kind: &str,
    name: &str,
) -> Option<&'a mut (String, Value)> {
    objects.iter_mut().find(|(_, o)| is(o, kind, name))
}

/// Whether `object` is the `kind` named `name`.
fn is(object: &Value, kind: &str, name: &str) -> bool {
    object.get("kind").and_then(Value::as_str) == Some(kind)
        && object.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
}

/// The kinds of the router objects a Rollout names that a rehearsal takes from its files: the VirtualServices,
/// HTTPRoutes and TraefikServices the routers re-weight, the DestinationRule whose subsets they point at the
/// pods, the stable Ingress NGINX's canary Ingress is made from. The planner checks those Argo reads before
/// acting ([`Target::referenced`]).
pub const ROUTER_KINDS: &[&str] = &[
    "VirtualService",
    "DestinationRule",
    "HTTPRoute",
    "Ingress",
    "TraefikService",
];

/// Whether the document `object` is of one of [`ROUTER_KINDS`].
pub fn is_router_object(object: &Value) -> bool {
    object
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| ROUTER_KINDS.contains(&k))
}

impl Routers {
    /// `objects`: documents of the files that a router may re-weight (others are ignored), each with where it
    /// was read (`FILE:LINE`), which an error names.
    pub fn new(rollout: &Rollout, objects: Vec<(String, Value)>) -> Result<Routers, RoutingError> {
        Ok(Routers {
            routing: routing::routing(rollout)?,
            objects: objects
                .into_iter()
                .filter(|(_, o)| is_router_object(o))
                .collect(),
            shown: Vec::new(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.routing.is_none()
    }

    /// The router objects `rollout` names that are among the files, as the planner checks them before acting
    /// (one not among the files is not checked: it may be in the cluster).
    pub fn read(&self, rollout: &Rollout) -> Vec<RouterObject> {
        let Some(routing) = &self.routing else {
            return Vec::new();
        };
        let d = Desired::new(rollout, routing, 0, "", "");
        routing::targets(routing, &d)
            .into_iter()
            .filter(Target::referenced)
            .filter_map(|target| {
                let (kind, name) = (target.kind(), target.read_name());
                let (_, object) = self.objects.iter().find(|(_, o)| is(o, kind, name))?;
                Some(RouterObject {
                    kind,
                    namespace: target.namespace().to_string(),
                    name: name.to_string(),
                    object: Some(Arc::new(object.clone())),
                })
            })
            .collect()
    }

    /// What each router shows since the last route.
    pub fn shown(&self) -> &[RouterWeights] {
        &self.shown
    }

    /// Brings the routers to `route`, as the daemon's would be, given the ReplicaSets the Rollout owns. An
    /// object that does not fit the configuration is a failure naming its file, line and object, in Argo's
    /// words; one held back (the DestinationRule until the ReplicaSets are available) a failure that waits.
    pub fn apply(
        &mut self,
        rollout: &Rollout,
        route: &Route,
        replica_sets: &[ReplicaSet],
    ) -> Result<Vec<Event>, RouteFailure> {
        let Some(routing) = &self.routing else {
            return Ok(Vec::new());
        };
        let d = Desired::new(
            rollout,
            routing,
            route.weight,
            &route.canary_hash,
            &route.stable_hash,
        )
        .with_managed(&route.managed);
        let shares = || {
            vec![
                (d.canary_service.to_string(), i64::from(d.canary_weight)),
                (d.stable_service.to_string(), d.stable_weight(0)),
            ]
        };
        let mut out = Vec::new();
        let mut announced = Vec::new();
        let namespace = rollout.metadata.namespace.as_deref().unwrap_or_default();
        for target in routing::targets(routing, &d) {
            let (kind, name) = (target.kind(), target.name(&d));
            target.held(&d, replica_sets).map_err(|e| {
                let held = matches!(e, RoutingError::Held(_));
                RouteFailure::new(Some(kind), held, format!("{kind} {namespace}/{name}: {e}"))
            })?;
            let weights = match target {
                Target::CanaryIngress { .. } => {
                    vec![("canary-weight".to_string(), i64::from(d.canary_weight))]
                }
                Target::TrafficSplit { config, .. } => {
                    let existing = named(&mut self.objects, kind, &name);
                    let current = existing.as_ref().map(|(_, o)| o);
                    let version = SmiApiVersion::default();
                    let write = smi::traffic_split(current, config, version, &d).map_err(|e| {
                        RouteFailure::new(
                            Some(kind),
                            false,
                            format!("{kind} {namespace}/{name}: {e}"),
                        )
                    })?;
                    match (write, existing) {
                        (TrafficSplitWrite::Create(object), _) => {
                            self.objects
                                .push(("created by the Rollout".to_string(), object));
                            announced.extend(target.written(&d, true, Moved::WEIGHTS));
                        }
                        (TrafficSplitWrite::Patch(patch), Some((_, object))) => {
                            crate::merge_patch::apply(object, &patch);
                        }
                        _ => {}
                    }
                    let written = named(&mut self.objects, kind, &name).map(|(_, o)| o.clone());
                    written
                        .map_or_else(Vec::new, |o| entry_weights(&o, "/spec/backends", "service"))
                }
                Target::DestinationRule { .. }
                | Target::VirtualService { .. }
                | Target::HttpRoute { .. }
                | Target::TraefikService { .. }
                | Target::AlbIngress { .. } => match named(&mut self.objects, kind, &name) {
                    Some((origin, current)) => {
                        let built = target.build(current, &d).map_err(|e| {
                            let message = format!("{origin}: {kind} {namespace}/{name}: {e}");
                            RouteFailure::new(Some(kind), false, message)
                        })?;
                        if let Some(built) = built {
                            *current = built.object;
                            announced.extend(target.written(&d, false, built.moved));
                        }
                        match target {
                            // The actions' target groups: each header route's, then the weighted one's.
                            Target::AlbIngress { config, .. } => alb::forwards(current, config, &d),
                            _ => destination_weights(current),
                        }
                    }
                    None => shares(),
                },
            };
            // Subsets select pod hashes; the weights are the VirtualService's.
            if matches!(target, Target::DestinationRule { .. }) {
                continue;
            }
            out.push(RouterWeights {
                object: format!("{}/{name}", target.kind()),
                weights,
            });
        }
        self.shown = out;
        Ok(announced)
    }
}

/// The weights of the entries of the list at `pointer` in `object` (a TrafficSplit's backends, a
/// TraefikService's weighted services), each named by its `name_key` (a v1alpha1 quantity read as its number).
fn entry_weights(object: &Value, pointer: &str, name_key: &str) -> Vec<(String, i64)> {
    let entries = object.pointer(pointer).and_then(Value::as_array);
    entries
        .into_iter()
        .flatten()
        .map(|b| {
            let service = b.get(name_key).and_then(Value::as_str).unwrap_or("");
            let weight = match b.get("weight") {
                Some(Value::String(s)) => s.parse().unwrap_or(0),
                Some(w) => w.as_i64().unwrap_or(0),
                None => 0,
            };
            (service.to_string(), weight)
        })
        .collect()
}

/// The weights of every destination of a VirtualService's routes (by host, and subset; a route with a match,
/// such as a header or mirror route, names itself first, and a mirror shows its percentage) or an
/// HTTPRoute's rules (by backend name), in the object's order.
fn destination_weights(object: &Value) -> Vec<(String, i64)> {
    if object.get("kind").and_then(Value::as_str) == Some("TraefikService") {
        return entry_weights(object, "/spec/weighted/services", "name");
    }
    let routes = |lists: &[&str]| -> Vec<Value> {
        lists
            .iter()
            .filter_map(|list| object.pointer(&format!("/spec/{list}")))
            .filter_map(Value::as_array)
            .flatten()
            .cloned()
            .collect()
    };
    if object.get("kind").and_then(Value::as_str) == Some("HTTPRoute") {
        // A rule with a match and a name (a header rule among them) names itself first; a backendRef
        // without a weight has the Gateway API's default, 1.
        return routes(&["rules"])
            .iter()
            .flat_map(|rule| {
                let name = rule
                    .get("name")
                    .and_then(Value::as_str)
                    .filter(|_| rule.get("matches").is_some());
                weights(rule, "backendRefs", 1, |b| {
                    let backend = b.get("name")?.as_str()?;
                    Some(name.map_or(backend.to_string(), |n| format!("{n}: {backend}")))
                })
            })
            .collect();
    }
    let host = |dest: &Value| {
        let host = dest.get("host")?.as_str()?;
        Some(match dest.get("subset").and_then(Value::as_str) {
            Some(subset) => format!("{host}/{subset}"),
            None => host.to_string(),
        })
    };
    let mut out = Vec::new();
    for route in routes(&["http", "tls", "tcp"]) {
        // The routes a match selects (header and mirror routes among them) by their name.
        let matched = route.get("match").is_some();
        let name = route.get("name").and_then(Value::as_str).unwrap_or("");
        let named = |dest: String| {
            if matched {
                format!("{name}: {dest}")
            } else {
                dest
            }
        };
        out.extend(weights(&route, "route", 0, |d| {
            host(d.get("destination")?).map(named)
        }));
        if let Some(mirror) = route.get("mirror").and_then(host) {
            let percent = route
                .pointer("/mirrorPercentage/value")
                .and_then(Value::as_f64)
                .map_or(100, |p| p.round() as i64);
            out.push((named(format!("mirror to {mirror}")), percent));
        }
    }
    out
}

/// The weight of every destination in `route`'s `dests` list (`unset` when it has none), named by `name`.
fn weights(
    route: &Value,
    dests: &str,
    unset: i64,
    name: impl Fn(&Value) -> Option<String>,
) -> Vec<(String, i64)> {
    let list = route.get(dests).and_then(Value::as_array);
    list.into_iter()
        .flatten()
        .filter_map(|dest| {
            let weight = dest.get("weight").and_then(Value::as_i64).unwrap_or(unset);
            Some((name(dest)?, weight))
        })
        .collect()
}
