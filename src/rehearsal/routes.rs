//! The traffic router's side of a rehearsal: at each step, what the configured router would be told, shown as
//! the weights of its destinations. With the router object among the files (an Istio VirtualService, a
//! Gateway API HTTPRoute), the object is brought to the weight by `engine/routing`'s builders, so the weights
//! shown are those the daemon would write; without it, the canary and stable shares the builders are given.
//! Owns the reading of the written objects' weights, never how weights are computed.

use serde::Serialize;
use serde_json::Value;

use crate::api::Rollout;
use crate::engine::routing::{self, Desired, Routing, RoutingError, Target};

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

/// The Rollout's routers and the objects of theirs found among the files, kept as last written.
#[derive(Debug, Clone, Default)]
pub struct Routers {
    routing: Option<Routing>,
    /// Router objects (VirtualService, HTTPRoute) from the files.
    objects: Vec<Value>,
}

fn named<'a>(objects: &'a mut [Value], kind: &str, name: &str) -> Option<&'a mut Value> {
    objects.iter_mut().find(|o| {
        o.get("kind").and_then(Value::as_str) == Some(kind)
            && o.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
    })
}

impl Routers {
    /// `objects`: documents of the files that a router may re-weight (others are ignored).
    pub fn new(rollout: &Rollout, objects: Vec<Value>) -> Result<Routers, RoutingError> {
        Ok(Routers {
            routing: routing::routing(rollout)?,
            objects: objects
                .into_iter()
                .filter(|o| {
                    matches!(
                        o.get("kind").and_then(Value::as_str),
                        Some("VirtualService" | "HTTPRoute")
                    )
                })
                .collect(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.routing.is_none()
    }

    /// What each router shows once told `weight` for the canary (`canary_hash` and `stable_hash` are the
    /// ReplicaSets' pod hashes). An object that does not fit the configuration is an error in Argo's words.
    pub fn write(
        &mut self,
        rollout: &Rollout,
        weight: i32,
        canary_hash: &str,
        stable_hash: &str,
    ) -> Result<Vec<RouterWeights>, RoutingError> {
        let Some(routing) = &self.routing else {
            return Ok(Vec::new());
        };
        let d = Desired::new(rollout, routing, weight, canary_hash, stable_hash);
        let shares = || {
            vec![
                (d.canary_service.to_string(), i64::from(d.canary_weight)),
                (d.stable_service.to_string(), d.stable_weight(0)),
            ]
        };
        let mut out = Vec::new();
        for target in routing::targets(routing, &d) {
            let name = target.name(&d);
            let weights = match target {
                // Subsets select pod hashes; the weights are the VirtualService's.
                Target::DestinationRule { .. } => continue,
                Target::CanaryIngress { .. } => {
                    vec![("canary-weight".to_string(), i64::from(d.canary_weight))]
                }
                Target::VirtualService { .. } | Target::HttpRoute { .. } => {
                    match named(&mut self.objects, target.kind(), &name) {
                        Some(current) => {
                            if let Some(new) = target.build(current, &d)? {
                                *current = new;
                            }
                            destination_weights(current)
                        }
                        None => shares(),
                    }
                }
            };
            out.push(RouterWeights {
                object: format!("{}/{name}", target.kind()),
                weights,
            });
        }
        Ok(out)
    }
}

/// The weights of every destination of a VirtualService's routes (by host, and subset) or an HTTPRoute's
/// rules (by backend name), in the object's order.
fn destination_weights(object: &Value) -> Vec<(String, i64)> {
    if object.get("kind").and_then(Value::as_str) == Some("HTTPRoute") {
        return route_weights(object, &["rules"], "backendRefs", |b| {
            b.get("name")?.as_str().map(str::to_string)
        });
    }
    route_weights(object, &["http", "tls", "tcp"], "route", |dest| {
        let host = dest.pointer("/destination/host")?.as_str()?;
        Some(
            match dest.pointer("/destination/subset").and_then(Value::as_str) {
                Some(subset) => format!("{host}/{subset}"),
                None => host.to_string(),
            },
        )
    })
}

/// The weights of every destination of every route of `object` (`spec.<list>[].<dests>[]`), named by `name`.
fn route_weights(
    object: &Value,
    lists: &[&str],
    dests: &str,
    name: impl Fn(&Value) -> Option<String>,
) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for list in lists {
        let routes = object
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array);
        for route in routes.into_iter().flatten() {
            for dest in route
                .get(dests)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(n) = name(dest) {
                    let weight = dest.get("weight").and_then(Value::as_i64).unwrap_or(0);
                    out.push((n, weight));
                }
            }
        }
    }
    out
}
