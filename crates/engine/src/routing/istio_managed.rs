//! Istio's managed routes, as Argo Rollouts writes them into a VirtualService's `http` list (its istio.go
//! SetHeaderRoute, SetMirrorRoute, RemoveManagedRoutes, orderRoutes): header routes sending matching requests
//! to the canary, mirror routes copying matching requests to it, both placed ahead of the other routes in
//! `managedRoutes` order; which HTTP routes the weight then applies to (getHttpRouteIndexesToPatch: the
//! configured ones and the managed mirror routes). Routes not named by the Rollout are never touched.

use serde_json::{Map, Value, json};

use super::managed_routes::{ManagedRouteChange, StepRoute};
use super::{Desired, Moved, Reader, RoutingError};
use crate::api::managed_routes::{SetHeaderRoute, SetMirrorRoute, StringMatch};
use crate::api::traffic_routing::{IstioDestinationRule, IstioVirtualService};

/// The `name` of the HTTP route at `i`; empty when it has none.
fn name_at<'v>(r: &Reader, routes: &'v [Value], i: usize) -> Result<&'v str, RoutingError> {
    let field = format!("spec.http[{i}]");
    r.string(r.object(&routes[i], &field)?, "name", &field)
}

fn names<'v>(r: &Reader, routes: &'v [Value]) -> Result<Vec<&'v str>, RoutingError> {
    (0..routes.len()).map(|i| name_at(r, routes, i)).collect()
}

/// Argo's getHttpRouteIndexesToPatch: the routes named in `wanted`, or with none named the only route, else
/// the first unnamed one.
fn indexes(all: &[&str], wanted: &[&str]) -> Result<Vec<usize>, RoutingError> {
    if wanted.is_empty() {
        if all.len() == 1 {
            return Ok(vec![0]);
        }
        return Ok(all.iter().position(|n| n.is_empty()).into_iter().collect());
    }
    wanted
        .iter()
        .map(|w| {
            all.iter().position(|n| n == w).ok_or_else(|| {
                RoutingError::Mismatch(format!(
                    "HTTP Route '{w}' is not found in the defined Virtual Service."
                ))
            })
        })
        .collect()
}

/// The HTTP routes the weight applies to: Argo's ValidateHTTPRoutes (with no route configured, exactly one
/// route outside `managed`), then those configured and the mirror routes in `managed` (which carry the
/// weighted route's destinations).
pub(super) fn weighted(
    r: &Reader,
    routes: &[Value],
    vs: &IstioVirtualService,
    managed: &[String],
) -> Result<Vec<usize>, RoutingError> {
    let all = names(r, routes)?;
    let mut wanted: Vec<&str> = vs.routes.iter().flatten().map(String::as_str).collect();
    if wanted.is_empty()
        && all
            .iter()
            .filter(|n| !managed.iter().any(|m| m == *n))
            .count()
            > 1
    {
        return Err(RoutingError::Mismatch(
            "spec.http[] should be set in VirtualService and it must have exactly one route when omitting spec.strategy.canary.trafficRouting.istio.virtualService.routes"
                .to_string(),
        ));
    }
    for (route, name) in routes.iter().zip(&all) {
        if route.get("mirror").is_some_and(|m| !m.is_null()) && managed.iter().any(|m| m == name) {
            wanted.push(name);
        }
    }
    indexes(&all, &wanted)
}

/// Argo's getVirtualServiceSetWeightRoute: the destinations of the first configured route (the only or the
/// first unnamed one when none is configured).
fn weight_route<'v>(
    r: &Reader,
    routes: &'v [Value],
    vs: &IstioVirtualService,
) -> Result<&'v [Value], RoutingError> {
    let wanted: Vec<&str> = vs.routes.iter().flatten().map(String::as_str).collect();
    let first = indexes(&names(r, routes)?, &wanted)?.into_iter().next();
    Ok(first
        .and_then(|i| routes[i].get("route"))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice))
}

/// Where the managed routes send the canary's requests: its host (the canary Service, or in subset mode the
/// host of the weighted route's canary subset), subset and the weighted route's port.
fn canary_destination(dests: &[Value], dr: Option<&IstioDestinationRule>, d: &Desired) -> Value {
    let mut out = Map::new();
    let subset = dr.map_or("", |dr| dr.canary_subset_name.as_str());
    let host = match dr {
        // Argo reads the DestinationRule's `spec.host`; the routes name the same host for its subsets.
        Some(_) => dests
            .iter()
            .find(|x| x.pointer("/destination/subset").and_then(Value::as_str) == Some(subset))
            .and_then(|x| x.pointer("/destination/host"))
            .and_then(Value::as_str)
            .unwrap_or(d.canary_service),
        None => d.canary_service,
    };
    out.insert("host".into(), Value::from(host));
    if let Some(port) = dests
        .first()
        .and_then(|x| x.pointer("/destination/port/number"))
        .and_then(Value::as_u64)
        .filter(|p| *p > 0)
    {
        out.insert("port".into(), json!({"number": port}));
    }
    if !subset.is_empty() {
        out.insert("subset".into(), Value::from(subset));
    }
    Value::Object(out)
}

fn string_match(m: &StringMatch) -> Value {
    serde_json::to_value(m).unwrap_or(Value::Null)
}

/// Argo's createHeaderRoute: every header must match; all of it to the canary.
fn header_route(h: &SetHeaderRoute, canary: Value) -> Value {
    let matches: Vec<Value> = h
        .matches
        .iter()
        .flatten()
        .map(|m| {
            let value = m.header_value.as_ref().map_or(json!({}), string_match);
            json!({"headers": {m.header_name.clone(): value}})
        })
        .collect();
    json!({
        "name": h.name,
        "match": matches,
        "route": [{"destination": canary, "weight": 100}],
    })
}

/// Argo's createMirrorRoute: served by the weighted route's destinations (as Argo's types read them),
/// `percentage` (100 when unset) copied to the canary.
fn mirror_route(m: &SetMirrorRoute, weighted: &[Value], canary: Value) -> Value {
    let matches: Vec<Value> = m
        .matches
        .iter()
        .flatten()
        .map(|rm| {
            let mut out = Map::new();
            if let Some(method) = &rm.method {
                out.insert("method".into(), string_match(method));
            }
            if let Some(path) = &rm.path {
                out.insert("uri".into(), string_match(path));
            }
            if let Some(headers) = rm.headers.as_ref().filter(|h| !h.is_empty()) {
                let headers = headers.iter().map(|(k, v)| (k.clone(), string_match(v)));
                out.insert("headers".into(), Value::Object(headers.collect()));
            }
            Value::Object(out)
        })
        .collect();
    let route: Vec<Value> = weighted
        .iter()
        .map(|x| {
            let mut dest = Map::new();
            for key in ["host", "subset", "port"] {
                if let Some(v) = x
                    .pointer(&format!("/destination/{key}"))
                    .filter(|v| !v.is_null() && v.as_str() != Some(""))
                {
                    dest.insert(key.into(), v.clone());
                }
            }
            let mut out = Map::new();
            out.insert("destination".into(), Value::Object(dest));
            if let Some(w) = x.get("weight").and_then(Value::as_i64).filter(|w| *w != 0) {
                out.insert("weight".into(), Value::from(w));
            }
            Value::Object(out)
        })
        .collect();
    json!({
        "name": m.name,
        "match": matches,
        "route": route,
        "mirror": canary,
        "mirrorPercentage": {"value": m.percentage.unwrap_or(100)},
    })
}

fn remove(r: &Reader, http: &mut Vec<Value>, name: &str) -> Result<(), RoutingError> {
    let all: Vec<String> = names(r, http)?.into_iter().map(str::to_string).collect();
    let mut i = 0;
    http.retain(|_| {
        i += 1;
        all[i - 1] != name
    });
    Ok(())
}

/// Argo's orderRoutes: the routes in `managed`, in its order, ahead of the others, kept in theirs.
fn order(r: &Reader, http: &mut Vec<Value>, managed: &[String]) -> Result<(), RoutingError> {
    let all: Vec<String> = names(r, http)?.into_iter().map(str::to_string).collect();
    let mut routes: Vec<(String, Value)> = all.into_iter().zip(http.drain(..)).collect();
    for m in managed {
        while let Some(i) = routes.iter().position(|(n, _)| n == m) {
            http.push(routes.remove(i).1);
        }
    }
    http.extend(routes.into_iter().map(|(_, v)| v));
    Ok(())
}

/// The VirtualService's `http` list with `change` made (the routes it removes, then the current step's
/// route set or removed, ordered by `managed`), before the weights; what of it moved (nothing when the list
/// ends as it began).
pub(super) fn apply(
    r: &Reader,
    http: &mut Vec<Value>,
    change: &ManagedRouteChange,
    vs: &IstioVirtualService,
    dr: Option<&IstioDestinationRule>,
    d: &Desired,
    managed: &[String],
) -> Result<Moved, RoutingError> {
    let before = http.clone();
    for name in &change.remove {
        remove(r, http, name)?;
    }
    let removed = *http != before;
    let unset = http.clone();
    if let Some(set) = &change.set {
        remove(r, http, set.name())?;
        let weighted = weight_route(r, http, vs)?;
        let canary = canary_destination(weighted, dr, d);
        match set {
            StepRoute::Header(h) if h.matches.as_ref().is_some_and(|m| !m.is_empty()) => {
                http.push(header_route(h, canary));
            }
            StepRoute::Mirror(m) if m.matches.as_ref().is_some_and(|m| !m.is_empty()) => {
                let route = mirror_route(m, weighted, canary);
                http.insert(0, route);
            }
            // No match: the route is removed, nothing routes everything to the canary.
            StepRoute::Header(_) | StepRoute::Mirror(_) => {}
        }
        order(r, http, managed)?;
    }
    if *http == before {
        return Ok(Moved::default());
    }
    Ok(Moved {
        routes_removed: removed,
        route_set: *http != unset,
        weights: false,
    })
}
