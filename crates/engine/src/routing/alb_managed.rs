//! Header routes on an ALB Ingress, as Argo Rollouts' ALB router writes them (its alb.go SetHeaderRoute and
//! RemoveManagedRoutes, with its Ingress wrapper's CreateAnnotationBasedPath, RemovePathByServiceName and
//! SortHttpPaths): a `setHeaderRoute` step with `match` adds the AWS Load Balancer Controller's annotations
//! `<annotationPrefix>/conditions.<route>` (one `http-header` condition per header name, exact values only:
//! Argo's validation refuses `prefix` and `regex` with ALB) and `<annotationPrefix>/actions.<route>` (all of
//! it forwarded to the canary), records both in the bookkeeping annotation, and puts a path `/*` to the
//! backend `<route>` on port `use-annotation` at the head of every rule, the managed routes' paths in
//! `managedRoutes` order ahead of the others. Without `match`, on promotion, on abort and while the canary has
//! no available pod, all of it is removed. Annotations canaryd did not add are never touched; the only paths
//! moved are those whose backend is named after a managed route (Argo's ordering).

use serde::Serialize;
use serde_json::{Value, json};

use super::alb::{
    Annotation, annotations, backend_service, forward_action, go_json, has_rule_with_service, key,
    modify_managed,
};
use super::{Desired, RoutingError, managed_routes};
use crate::api::managed_routes::SetHeaderRoute;
use crate::api::traffic_routing::AlbTrafficRouting;

/// The names in the Rollout's `managedRoutes`, in order.
pub(super) fn route_names(d: &Desired) -> Vec<String> {
    let canary = d.rollout.spec.canary();
    managed_routes::names(canary.and_then(|c| c.traffic_routing.as_ref()))
}

/// Argo's ALBCondition, in its Go field order.
#[derive(Serialize)]
struct Condition<'a> {
    field: &'static str,
    #[serde(rename = "httpHeaderConfig")]
    header: HeaderConfig<'a>,
}

#[derive(Serialize)]
struct HeaderConfig<'a> {
    #[serde(rename = "httpHeaderName")]
    name: &'a str,
    values: Vec<&'a str>,
}

/// Argo's getTrafficForwardConditionString with its upsertCondition: one `http-header` condition per header
/// name, in the order first named, holding every exact value given for it (any of them matches).
fn conditions(h: &SetHeaderRoute) -> Result<String, RoutingError> {
    let mut out: Vec<Condition> = Vec::new();
    for m in h.matches.iter().flatten() {
        let value = m.header_value.as_ref().map_or("", |v| v.exact.as_str());
        match out.iter_mut().find(|c| c.header.name == m.header_name) {
            Some(c) => c.header.values.push(value),
            None => out.push(Condition {
                field: "http-header",
                header: HeaderConfig {
                    name: &m.header_name,
                    values: vec![value],
                },
            }),
        }
    }
    go_json(&out)
}

/// Every rule's `http.paths`; a rule without them is passed over (Argo's wrapper fails on one).
fn rule_paths(ingress: &mut Value) -> impl Iterator<Item = &mut Vec<Value>> {
    let rules = ingress
        .pointer_mut("/spec/rules")
        .and_then(Value::as_array_mut);
    rules.into_iter().flatten().filter_map(|rule| {
        rule.pointer_mut("/http/paths")
            .and_then(Value::as_array_mut)
    })
}

/// Argo's CreateAnnotationBasedPath: unless some rule already routes to `route`, a path to it at the head of
/// every rule, with the AWS Load Balancer Controller's `use-annotation` port.
fn create_path(ingress: &mut Value, route: &str) {
    if has_rule_with_service(ingress, route) {
        return;
    }
    let path = json!({
        "path": "/*",
        "pathType": "ImplementationSpecific",
        "backend": {"service": {"name": route, "port": {"name": "use-annotation"}}},
    });
    for paths in rule_paths(ingress) {
        paths.insert(0, path.clone());
    }
}

/// Argo's RemovePathByServiceName: in every rule, the first path to `route`.
fn remove_path(ingress: &mut Value, route: &str) {
    for paths in rule_paths(ingress) {
        if let Some(i) = paths.iter().position(|p| backend_service(p) == route) {
            paths.remove(i);
        }
    }
}

/// Argo's SortHttpPaths: in every rule, the paths to a managed route first, in `managedRoutes` order (a name
/// listed twice counts where it is listed last, as Argo's map keeps it), the others after them in their order.
fn sort_paths(ingress: &mut Value, routes: &[String]) {
    let rank = |path: &Value| {
        let service = backend_service(path);
        routes
            .iter()
            .rposition(|r| r == service)
            .unwrap_or(routes.len())
    };
    for paths in rule_paths(ingress) {
        paths.sort_by_key(|p| rank(p));
    }
}

/// Argo's SetHeaderRoute on the Ingress `out`: the step `h`'s route added (with `match`) or removed (without;
/// an empty `match` counts as none, as on Istio), then the managed routes' paths ordered.
pub(super) fn set_header_route(
    out: &mut Value,
    config: &AlbTrafficRouting,
    d: &Desired,
    h: &SetHeaderRoute,
) -> Result<(), RoutingError> {
    let action_key = key(config, Annotation::Actions, &h.name);
    let condition_key = key(config, Annotation::Conditions, &h.name);
    let add = h.matches.as_ref().is_some_and(|m| !m.is_empty());
    let had_path = has_rule_with_service(out, &h.name);
    let annotations = annotations(out)?;
    if add {
        let action = forward_action(config, &[(d.canary_service, 100)])?;
        annotations.insert(action_key.clone(), Value::from(action));
        annotations.insert(condition_key.clone(), Value::from(conditions(h)?));
    } else {
        annotations.remove(&action_key);
        annotations.remove(&condition_key);
    }
    modify_managed(
        annotations,
        d.rollout_name(),
        add,
        &[action_key, condition_key],
    )?;
    match (add, had_path) {
        (true, false) => create_path(out, &h.name),
        (false, true) => remove_path(out, &h.name),
        _ => {}
    }
    sort_paths(out, &route_names(d));
    Ok(())
}

/// Argo's RemoveManagedRoutes on the Ingress `out`: the annotations and paths of every route in `routes`.
pub(super) fn remove(
    out: &mut Value,
    config: &AlbTrafficRouting,
    d: &Desired,
    routes: &[String],
) -> Result<(), RoutingError> {
    let annotations = annotations(out)?;
    let mut keys = Vec::new();
    for route in routes {
        for kind in [Annotation::Actions, Annotation::Conditions] {
            let key = key(config, kind, route);
            annotations.remove(&key);
            keys.push(key);
        }
    }
    modify_managed(annotations, d.rollout_name(), false, &keys)?;
    for route in routes {
        remove_path(out, route);
    }
    Ok(())
}
