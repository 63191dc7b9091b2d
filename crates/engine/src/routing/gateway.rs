//! Gateway API HTTPRoutes, configured as the argoproj-labs Gateway API plugin is
//! (`plugins."argoproj-labs/gatewayAPI"`): the weights of the backendRefs naming the canary and stable
//! Services are set, every other backend is left as it is, and the plugin's in-progress label marks a route
//! while the canary has traffic; header routes as the plugin writes them (`gateway_managed`). No ConfigMap
//! state. Returns whole objects for an Update.

use serde_json::{Map, Value};

use super::{Desired, Reader, RoutingError, config, gateway_managed, managed_routes, object_name};
use crate::api::traffic_routing::GatewayApiTrafficRouting;

const IN_PROGRESS_LABEL: &str = "rollouts.argoproj.io/gatewayapi-canary";
const IN_PROGRESS_VALUE: &str = "in-progress";

/// The plugin's own requirement (at least one route) and the route kinds canaryd does not drive.
pub(super) fn check(g: &GatewayApiTrafficRouting, field: &str) -> Result<(), RoutingError> {
    let unsupported = [
        ("grpcRoute", g.grpc_route.is_some()),
        ("grpcRoutes", g.grpc_routes.is_some()),
        ("tcpRoute", g.tcp_route.is_some()),
        ("tcpRoutes", g.tcp_routes.is_some()),
        ("tlsRoute", g.tls_route.is_some()),
        ("tlsRoutes", g.tls_routes.is_some()),
        ("httpRouteSelector", g.http_route_selector.is_some()),
        ("grpcRouteSelector", g.grpc_route_selector.is_some()),
        ("tcpRouteSelector", g.tcp_route_selector.is_some()),
        ("tlsRouteSelector", g.tls_route_selector.is_some()),
    ];
    for (name, set) in unsupported {
        if set {
            return Err(config(
                format!("{field}.{name}"),
                "not supported by canaryd: it drives HTTPRoutes named in httpRoute or httpRoutes",
            ));
        }
    }
    if http_routes(g).is_empty() {
        return Err(config(
            field,
            "No routes configured. At least one of 'httpRoutes', 'grpcRoutes', 'tcpRoutes', 'tlsRoutes', 'httpRoute', 'grpcRoute', 'tcpRoute' or 'tlsRoute' must be set",
        ));
    }
    Ok(())
}

/// The HTTPRoutes to re-weight: `httpRoutes[]`, then `httpRoute`, as the plugin orders them.
pub fn http_routes(g: &GatewayApiTrafficRouting) -> Vec<&str> {
    let mut names: Vec<&str> = g
        .http_routes
        .iter()
        .flatten()
        .map(|r| r.name.as_str())
        .collect();
    names.extend(g.http_route.as_deref().filter(|n| !n.is_empty()));
    names
}

/// The routes' namespace: the configured one, else the Rollout's.
pub fn namespace<'a>(g: &'a GatewayApiTrafficRouting, d: &Desired<'a>) -> &'a str {
    g.namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(d.rollout_namespace())
}

/// The HTTPRoute `current` (as read) with its canary backendRefs at the desired weight and its stable ones at
/// the rest; the plugin's header rules (named after a managed route, or holding only the canary backend) are
/// skipped. `Ok(None)` when it already says so.
pub fn http_route(
    current: &Value,
    g: &GatewayApiTrafficRouting,
    d: &Desired,
) -> Result<Option<Value>, RoutingError> {
    let r = Reader {
        kind: "HTTPRoute",
        name: object_name(current),
    };
    let mut out = current.clone();
    let canary = i64::from(d.canary_weight);
    let stable = d.stable_weight(0);
    let (mut canary_found, mut stable_found, mut changed) = (false, false, false);
    let routing = d
        .rollout
        .spec
        .canary()
        .and_then(|c| c.traffic_routing.as_ref());
    let managed = managed_routes::names(routing);
    // The plugin's SetHeaderRoute and RemoveManagedRoutes, on the routes it adds header routes to.
    if gateway_managed::uses_header_routes(g, r.name)
        && let Some(Value::Array(rules)) = out.pointer_mut("/spec/rules")
    {
        changed = gateway_managed::apply(&r, rules, d.managed, &managed, d)?;
    }
    let rules = match out.pointer_mut("/spec/rules") {
        None | Some(Value::Null) => None,
        Some(Value::Array(rules)) => Some(rules),
        Some(other) => {
            return Err(r.malformed("spec.rules", format!("expected a list, got {other}")));
        }
    };
    for (i, rule) in rules.into_iter().flatten().enumerate() {
        let field = format!("spec.rules[{i}]");
        // The header rules the plugin added keep their backend as it is.
        if gateway_managed::unweighted(rule, &managed, d.canary_service) {
            continue;
        }
        let rule = rule
            .as_object_mut()
            .ok_or_else(|| r.malformed(&field, "expected an object"))?;
        let Some(refs) = rule.get_mut("backendRefs") else {
            continue;
        };
        let Some(refs) = refs.as_array_mut() else {
            if refs.is_null() {
                continue;
            }
            return Err(r.malformed(format!("{field}.backendRefs"), "expected a list"));
        };
        let name = |b: &Value| {
            b.get("name")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_default()
        };
        for (j, backend) in refs.iter_mut().enumerate() {
            let at = format!("{field}.backendRefs[{j}]");
            let want = match name(backend) {
                n if n == d.canary_service => {
                    canary_found = true;
                    canary
                }
                n if n == d.stable_service => {
                    stable_found = true;
                    stable
                }
                _ => continue,
            };
            let backend = backend
                .as_object_mut()
                .ok_or_else(|| r.malformed(&at, "expected an object"))?;
            if backend.get("weight").and_then(Value::as_i64) != Some(want) {
                backend.insert("weight".to_string(), Value::from(want));
                changed = true;
            }
        }
    }
    if !canary_found || !stable_found {
        return Err(RoutingError::Mismatch(
            "backendRef was not found in httpRoute".to_string(),
        ));
    }
    changed |= in_progress_label(&mut out, g, d.canary_weight, &r)?;
    Ok(changed.then_some(out))
}

/// The plugin's ensureInProgressLabel: set while the canary has traffic, removed at weight 0.
fn in_progress_label(
    object: &mut Value,
    g: &GatewayApiTrafficRouting,
    weight: i32,
    r: &Reader,
) -> Result<bool, RoutingError> {
    if g.disable_in_progress_label == Some(true) {
        return Ok(false);
    }
    let key = g
        .in_progress_label_key
        .as_deref()
        .filter(|k| !k.is_empty())
        .unwrap_or(IN_PROGRESS_LABEL);
    let value = g
        .in_progress_label_value
        .as_deref()
        .filter(|v| !v.is_empty())
        .unwrap_or(IN_PROGRESS_VALUE);
    let root = object
        .as_object_mut()
        .ok_or_else(|| r.malformed("", "expected an object"))?;
    let metadata = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let metadata = metadata
        .as_object_mut()
        .ok_or_else(|| r.malformed("metadata", "expected an object"))?;
    if weight == 0 {
        let Some(labels) = metadata.get_mut("labels").and_then(Value::as_object_mut) else {
            return Ok(false);
        };
        return Ok(labels.remove(key).is_some());
    }
    let labels = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if labels.is_null() {
        *labels = Value::Object(Map::new());
    }
    let labels = labels
        .as_object_mut()
        .ok_or_else(|| r.malformed("metadata.labels", "expected an object"))?;
    if labels.get(key).and_then(Value::as_str) == Some(value) {
        return Ok(false);
    }
    labels.insert(key.to_string(), Value::from(value));
    Ok(true)
}
