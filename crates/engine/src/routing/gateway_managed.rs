//! Header routes in a Gateway API HTTPRoute's `rules`, as the argoproj-labs Gateway API plugin writes them
//! (its httproute.go setHTTPHeaderRoute and removeHTTPManagedRoutes): for each rule that holds both the canary
//! and the stable backend, a rule named after the route (`<name>`, then `<name>-1`, …) sending the requests
//! that also carry the step's headers to the canary alone, appended after the others. Only the routes the
//! plugin adds header routes to (`httpRoute`, or `httpRoutes[]` with `useHeaderRoutes: true`) get them; the
//! plugin's SetMirrorRoute does nothing, and so does canaryd. Rules not made by it are never touched.

use serde_json::{Map, Value, json};

use super::managed_routes::{ManagedRouteChange, StepRoute};
use super::{Desired, Reader, RoutingError};
use crate::api::managed_routes::SetHeaderRoute;
use crate::api::traffic_routing::GatewayApiTrafficRouting;

/// Whether the plugin adds header routes to the HTTPRoute `name`: the one `httpRoute` names, or one of
/// `httpRoutes[]` with `useHeaderRoutes: true`.
pub(super) fn uses_header_routes(g: &GatewayApiTrafficRouting, name: &str) -> bool {
    g.http_route.as_deref() == Some(name)
        || g.http_routes
            .iter()
            .flatten()
            .any(|r| r.name == name && r.use_header_routes == Some(true))
}

fn backend_name(b: &Value) -> &str {
    b.get("name").and_then(Value::as_str).unwrap_or("")
}

fn backends(rule: &Value) -> &[Value] {
    rule.get("backendRefs")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The plugin's isManagedRuleName: one of `names`, or one of them followed by `-<number>`.
fn managed_name(rule: &Value, names: &[&str]) -> bool {
    let Some(name) = rule.get("name").and_then(Value::as_str) else {
        return false;
    };
    names.iter().any(|base| {
        name == *base
            || name
                .strip_prefix(base)
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|n| n.parse::<i64>().is_ok())
    })
}

/// The plugin's isHTTPManagedRule: the canary as the only backend and, given `headers`, a match naming every
/// one of them.
fn made_by_plugin(rule: &Value, canary: &str, headers: Option<&[Value]>) -> bool {
    let refs = backends(rule);
    if refs.len() != 1 || backend_name(&refs[0]) != canary {
        return false;
    }
    let Some(headers) = headers else {
        return true;
    };
    let matches = rule.get("matches").and_then(Value::as_array);
    matches.into_iter().flatten().any(|m| {
        let have = m.get("headers").and_then(Value::as_array);
        headers.iter().all(|h| {
            have.into_iter()
                .flatten()
                .any(|x| x.get("name") == h.get("name"))
        })
    })
}

/// The plugin's getHTTPHeaderRouteRuleList: `exact` stays exact, `prefix` becomes the regular expression
/// `<prefix>.*`, `regex` one as it is.
fn header_matches(h: &SetHeaderRoute) -> Result<Vec<Value>, RoutingError> {
    h.matches
        .iter()
        .flatten()
        .map(|m| {
            let v = m.header_value.clone().unwrap_or_default();
            let (kind, value) = if !v.exact.is_empty() {
                ("Exact", v.exact)
            } else if !v.prefix.is_empty() {
                ("RegularExpression", format!("{}.*", v.prefix))
            } else if !v.regex.is_empty() {
                ("RegularExpression", v.regex)
            } else {
                return Err(RoutingError::Mismatch(
                    "invalid header match type".to_string(),
                ));
            };
            Ok(json!({"type": kind, "name": m.header_name, "value": value}))
        })
        .collect()
}

/// The header rule the plugin makes from `source`: its filters and each of its matches with `headers` added
/// (one match of the headers alone when it has none), to the canary backend at `source`'s port.
fn header_rule(name: String, source: &Value, headers: &[Value], d: &Desired) -> Value {
    let mut backend = Map::new();
    backend.insert("group".into(), Value::from(""));
    backend.insert("kind".into(), Value::from("Service"));
    backend.insert("name".into(), Value::from(d.canary_service));
    if let Some(port) = backends(source)
        .iter()
        .find(|b| backend_name(b) == d.canary_service)
        .and_then(|b| b.get("port"))
        .filter(|p| !p.is_null())
    {
        backend.insert("port".into(), port.clone());
    }
    let with_headers = |m: &Value| {
        let mut out = Map::new();
        for key in ["path", "queryParams", "method"] {
            if let Some(v) = m.get(key).filter(|v| !v.is_null()) {
                out.insert(key.into(), v.clone());
            }
        }
        let mut all: Vec<Value> = m
            .get("headers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        all.extend(headers.iter().cloned());
        if !all.is_empty() {
            out.insert("headers".into(), Value::Array(all));
        }
        Value::Object(out)
    };
    let source_matches = source.get("matches").and_then(Value::as_array);
    let matches: Vec<Value> = match source_matches.filter(|m| !m.is_empty()) {
        None => vec![with_headers(&json!({}))],
        Some(matches) => matches.iter().map(with_headers).collect(),
    };
    let mut rule = Map::new();
    rule.insert("name".into(), Value::from(name));
    rule.insert("matches".into(), Value::Array(matches));
    if let Some(filters) = source
        .get("filters")
        .and_then(Value::as_array)
        .filter(|f| !f.is_empty())
    {
        rule.insert("filters".into(), Value::Array(filters.clone()));
    }
    rule.insert("backendRefs".into(), json!([Value::Object(backend)]));
    Value::Object(rule)
}

/// The rules the plugin's setHTTPRouteWeight leaves alone: those named after a route of `managed` and those
/// with the canary as their only backend.
pub(super) fn unweighted(rule: &Value, managed: &[String], canary: &str) -> bool {
    let names: Vec<&str> = managed.iter().map(String::as_str).collect();
    managed_name(rule, &names) || made_by_plugin(rule, canary, None)
}

/// The plugin's removeHTTPManagedRoutes: every rule named after a route of `names`, and every rule with the
/// canary as its only backend.
fn remove_all(rules: &mut Vec<Value>, managed: &[String], canary: &str) {
    rules.retain(|rule| !unweighted(rule, managed, canary));
}

/// The HTTPRoute's `rules` with `change` made, before the weights: the routes removed, then the current
/// step's header route set (a mirror route is left to other routers, as the plugin leaves it); `managed`:
/// the names in `managedRoutes`. Whether anything changed.
pub(super) fn apply(
    r: &Reader,
    rules: &mut Vec<Value>,
    change: &ManagedRouteChange,
    managed: &[String],
    d: &Desired,
) -> Result<bool, RoutingError> {
    let before = rules.clone();
    for (i, rule) in rules.iter().enumerate() {
        r.object(rule, &format!("spec.rules[{i}]"))?;
    }
    if !change.remove.is_empty() {
        remove_all(rules, managed, d.canary_service);
    }
    let Some(StepRoute::Header(h)) = &change.set else {
        return Ok(*rules != before);
    };
    if h.matches.is_none() {
        remove_all(rules, managed, d.canary_service);
        return Ok(*rules != before);
    }
    let headers = header_matches(h)?;
    let sources: Vec<&Value> = rules
        .iter()
        .filter(|rule| {
            let refs = backends(rule);
            [d.canary_service, d.stable_service]
                .iter()
                .all(|s| refs.iter().any(|b| backend_name(b) == *s))
        })
        .collect();
    if sources.is_empty() {
        return Err(RoutingError::Mismatch(
            "backendRef was not found in httpRoute".to_string(),
        ));
    }
    let made: Vec<Value> = sources
        .iter()
        .enumerate()
        .map(|(i, source)| {
            let name = match i {
                0 => h.name.clone(),
                i => format!("{}-{i}", h.name),
            };
            header_rule(name, source, &headers, d)
        })
        .collect();
    rules.retain(|rule| {
        !(managed_name(rule, &[h.name.as_str()])
            || made_by_plugin(rule, d.canary_service, Some(&headers)))
    });
    rules.extend(made);
    Ok(*rules != before)
}
