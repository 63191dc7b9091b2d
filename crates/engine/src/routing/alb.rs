//! AWS ALB (`trafficRouting.alb`), as Argo Rollouts drives it (its `rollout/trafficrouting/alb`): each Ingress
//! (`ingress`, or every one of `ingresses`) gets the AWS Load Balancer Controller's action annotation
//! `<annotationPrefix>/actions.<rootService or stableService>`, a forward action over two weighted target
//! groups (the canary Service at the weight, the stable Service at 100 minus it, both on `servicePort`), and
//! the annotation `rollouts.argoproj.io/managed-alb-annotations` naming it as the Rollout's. Header routes
//! (`setHeaderRoute` with `managedRoutes`) are `alb_managed`'s; this module brings one Ingress through the
//! whole reconcile in Argo's order (RemoveManagedRoutes, SetHeaderRoute, SetWeight) and owns what they share:
//! the annotation keys, the forward action, the bookkeeping annotation and Go's JSON. Nothing else of the
//! Ingress changes. Argo's check of the weights against the load balancer's target groups in AWS
//! (`--alb-verify-weight`, off by default) is not done.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use super::managed_routes::StepRoute;
use super::{Built, Desired, Moved, RoutingError, alb_managed};
use crate::api::traffic_routing::AlbTrafficRouting;

/// The annotation Argo keeps the annotations each Rollout manages in, by Rollout name.
pub const MANAGED: &str = "rollouts.argoproj.io/managed-alb-annotations";
/// The AWS Load Balancer Controller's annotation prefix, when `annotationPrefix` is unset.
const PREFIX: &str = "alb.ingress.kubernetes.io";
/// The longest stickiness AWS accepts, in seconds (7 days).
const MAX_STICKINESS: i64 = 604_800;

/// The Ingresses the Rollout names: `ingresses`, or `ingress`.
pub fn ingresses(config: &AlbTrafficRouting) -> Vec<&str> {
    if config.ingresses.is_empty() {
        vec![config.ingress.as_str()]
    } else {
        config.ingresses.iter().map(String::as_str).collect()
    }
}

/// Argo's ValidateRolloutAlbIngressesConfig: exactly one of `ingress` and `ingresses`.
pub fn check(config: &AlbTrafficRouting) -> Result<(), String> {
    match (!config.ingress.is_empty(), !config.ingresses.is_empty()) {
        (true, true) => {
            Err("Either Ingress or Ingresses must be configured. Both are configured.".into())
        }
        (false, false) => {
            Err("Either Ingress or Ingresses must be configured. Neither are configured.".into())
        }
        _ => Ok(()),
    }
}

/// The Service whose rule the action annotation is named for: `rootService`, else the stable Service.
pub fn action_service<'a>(config: &'a AlbTrafficRouting, d: &Desired<'a>) -> &'a str {
    if config.root_service.is_empty() {
        d.stable_service
    } else {
        &config.root_service
    }
}

/// The backend Service a path of an Ingress rule names; empty for a resource backend.
pub(super) fn backend_service(path: &Value) -> &str {
    path.pointer("/backend/service/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Whether some path of the Ingress `ingress` has `service` as its backend (Argo's HasRuleWithService).
pub fn has_rule_with_service(ingress: &Value, service: &str) -> bool {
    let rules = ingress.pointer("/spec/rules").and_then(Value::as_array);
    rules.into_iter().flatten().any(|rule| {
        let paths = rule.pointer("/http/paths").and_then(Value::as_array);
        paths
            .into_iter()
            .flatten()
            .any(|path| backend_service(path) == service)
    })
}

/// Which of the AWS Load Balancer Controller's per-rule annotations a key names.
#[derive(Clone, Copy)]
pub(super) enum Annotation {
    Actions,
    Conditions,
}

/// The key `<annotationPrefix>/actions.<name>` or `<annotationPrefix>/conditions.<name>` (Argo's
/// albIngressKubernetesIoKey).
pub(super) fn key(config: &AlbTrafficRouting, annotation: Annotation, name: &str) -> String {
    let prefix = if config.annotation_prefix.is_empty() {
        PREFIX
    } else {
        &config.annotation_prefix
    };
    let kind = match annotation {
        Annotation::Actions => "actions",
        Annotation::Conditions => "conditions",
    };
    format!("{prefix}/{kind}.{name}")
}

/// `value` as Go's encoding/json marshals it: compact, and `<`, `>`, `&`, U+2028 and U+2029 escaped (they can
/// only occur inside strings, so replacing them in the text is exact).
pub(super) fn go_json(value: &impl Serialize) -> Result<String, RoutingError> {
    let text = serde_json::to_string(value)
        .map_err(|e| RoutingError::Mismatch(format!("cannot be encoded: {e}")))?;
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// Argo's ALBAction, in its Go field order.
#[derive(Serialize)]
pub(super) struct Action<'a> {
    #[serde(rename = "Type")]
    pub(super) kind: &'static str,
    #[serde(rename = "ForwardConfig")]
    pub(super) forward: Forward<'a>,
}

#[derive(Serialize)]
pub(super) struct Forward<'a> {
    #[serde(rename = "TargetGroups")]
    pub(super) target_groups: Vec<TargetGroup<'a>>,
    #[serde(
        rename = "TargetGroupStickinessConfig",
        skip_serializing_if = "Option::is_none"
    )]
    pub(super) stickiness: Option<Stickiness>,
}

#[derive(Serialize)]
pub(super) struct TargetGroup<'a> {
    #[serde(rename = "ServiceName", skip_serializing_if = "omitted")]
    pub(super) service: &'a str,
    #[serde(rename = "ServicePort")]
    pub(super) port: String,
    #[serde(rename = "Weight")]
    pub(super) weight: i64,
}

/// Go's `omitempty` on a string.
fn omitted(s: &&str) -> bool {
    s.is_empty()
}

#[derive(Serialize)]
pub(super) struct Stickiness {
    #[serde(rename = "Enabled")]
    pub(super) enabled: bool,
    #[serde(rename = "DurationSeconds")]
    pub(super) duration_seconds: i64,
}

/// A forward action over `groups` (Service, weight) on `servicePort`, with `stickinessConfig` when enabled, as
/// Argo's getForwardActionString and getTrafficForwardActionString marshal it.
pub(super) fn forward_action(
    config: &AlbTrafficRouting,
    groups: &[(&str, i64)],
) -> Result<String, RoutingError> {
    let stickiness = match config.stickiness_config.as_ref().filter(|s| s.enabled) {
        None => None,
        Some(s) if (1..=MAX_STICKINESS).contains(&s.duration_seconds) => Some(Stickiness {
            enabled: true,
            duration_seconds: s.duration_seconds,
        }),
        Some(_) => {
            return Err(RoutingError::Mismatch(
                "TargetGroupStickinessConfig's duration must be between 1 and 604800 seconds (7 days)!"
                    .to_string(),
            ));
        }
    };
    let target_groups = groups
        .iter()
        .map(|(service, weight)| TargetGroup {
            service,
            port: config.service_port.to_string(),
            weight: *weight,
        })
        .collect();
    go_json(&Action {
        kind: "forward",
        forward: Forward {
            target_groups,
            stickiness,
        },
    })
}

/// The Ingress's annotations, made a map when it has none.
pub(super) fn annotations(ingress: &mut Value) -> Result<&mut Map<String, Value>, RoutingError> {
    let Some(metadata) = ingress.get_mut("metadata").and_then(Value::as_object_mut) else {
        return Err(RoutingError::Mismatch(
            "the Ingress has no metadata".to_string(),
        ));
    };
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if annotations.is_null() {
        *annotations = Value::Object(Map::new());
    }
    annotations
        .as_object_mut()
        .ok_or_else(|| RoutingError::Mismatch("metadata.annotations is not a map".to_string()))
}

/// Argo's modifyManagedAnnotation: `keys` added to (`add`) or removed from the Rollout `rollout`'s entry of
/// the annotation [`MANAGED`], written back as Go marshals the map (keys sorted; another Rollout's `null`
/// entry kept as `null`).
pub(super) fn modify_managed(
    annotations: &mut Map<String, Value>,
    rollout: &str,
    add: bool,
    keys: &[String],
) -> Result<(), RoutingError> {
    let mut by_rollout: BTreeMap<String, Option<Vec<String>>> =
        match annotations.get(MANAGED).and_then(Value::as_str) {
            None | Some("") => BTreeMap::new(),
            Some(text) => serde_json::from_str(text).map_err(|e| {
                RoutingError::Mismatch(format!("annotation {MANAGED} does not read: {e}"))
            })?,
        };
    let managed = by_rollout
        .entry(rollout.to_string())
        .or_default()
        .get_or_insert_with(Vec::new);
    for key in keys {
        if !add {
            managed.retain(|k| k != key);
        } else if !managed.contains(key) {
            managed.push(key.clone());
        }
    }
    annotations.insert(MANAGED.to_string(), Value::from(go_json(&by_rollout)?));
    Ok(())
}

/// Argo's SetWeight on the Ingress `out`: its action annotation at the desired weight (the stable target
/// group at `100 - weight`: Argo's validation refuses `maxTrafficWeight` with ALB). An Ingress without a path
/// to the action's Service is Argo's error.
fn set_weight(
    out: &mut Value,
    config: &AlbTrafficRouting,
    d: &Desired,
) -> Result<(), RoutingError> {
    let service = action_service(config, d);
    if !has_rule_with_service(out, service) {
        return Err(RoutingError::Mismatch(format!(
            "ingress does not have service `{service}` in rules"
        )));
    }
    let key = key(config, Annotation::Actions, service);
    let canary = i64::from(d.canary_weight);
    let groups = [(d.canary_service, canary), (d.stable_service, 100 - canary)];
    let action = forward_action(config, &groups)?;
    let annotations = annotations(out)?;
    annotations.insert(key.clone(), Value::from(action));
    modify_managed(annotations, d.rollout_name(), true, &[key])
}

/// The Ingress `current` (as read) as Argo's ALB router leaves it after one reconcile, each part only when
/// `d` asks for it: the managed routes removed (RemoveManagedRoutes), the current step's header route set or
/// removed (SetHeaderRoute; its SetMirrorRoute does nothing), then the weights (SetWeight); with what of it
/// moved, each part judged as Argo judges whether its own patch changes anything. `Ok(None)` when nothing
/// does.
pub fn ingress(
    current: &Value,
    config: &AlbTrafficRouting,
    d: &Desired,
) -> Result<Option<Built>, RoutingError> {
    let mut out = current.clone();
    let mut step = |part: &dyn Fn(&mut Value) -> Result<(), RoutingError>| {
        let before = out.clone();
        part(&mut out).map(|()| out != before)
    };
    let routes_removed = !d.managed.remove.is_empty()
        && step(&|o| alb_managed::remove(o, config, d, &d.managed.remove))?;
    let route_set = match &d.managed.set {
        Some(StepRoute::Header(h)) => step(&|o| alb_managed::set_header_route(o, config, d, h))?,
        Some(StepRoute::Mirror(_)) | None => false,
    };
    let weights = step(&|o| set_weight(o, config, d))?;
    let moved = Moved {
        routes_removed,
        route_set,
        weights,
    };
    Ok((moved != Moved::default()).then_some(Built { object: out, moved }))
}

/// Argo's validateAlbIngress: the Ingress `object` must route some path to the action's Service.
pub fn validate(object: &Value, config: &AlbTrafficRouting, d: &Desired) -> Result<(), String> {
    let service = action_service(config, d);
    if has_rule_with_service(object, service) {
        return Ok(());
    }
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    Err(format!(
        "ingress `{name}` has no rules using service {service} backend"
    ))
}

/// The target groups the Rollout's actions on the Ingress `object` forward to, for a rehearsal to show: each
/// header route's (as `<route>: <Service>`, in `managedRoutes` order, ahead of the rest as the ALB evaluates
/// them), then the weighted action's; an action that does not read shows nothing.
pub fn forwards(object: &Value, config: &AlbTrafficRouting, d: &Desired) -> Vec<(String, i64)> {
    let routes = alb_managed::route_names(d);
    let actions = routes
        .iter()
        .map(|r| (key(config, Annotation::Actions, r), Some(r.as_str())))
        .chain([(
            key(config, Annotation::Actions, action_service(config, d)),
            None,
        )]);
    let mut out = Vec::new();
    for (key, route) in actions {
        let Some(action) = object
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(&key))
            .and_then(Value::as_str)
            .and_then(|a| serde_json::from_str::<Value>(a).ok())
        else {
            continue;
        };
        let groups = action.pointer("/ForwardConfig/TargetGroups");
        for group in groups.and_then(Value::as_array).into_iter().flatten() {
            let service = group
                .get("ServiceName")
                .and_then(Value::as_str)
                .unwrap_or("");
            let weight = group.get("Weight").and_then(Value::as_i64).unwrap_or(0);
            let shown = route.map_or(service.to_string(), |r| format!("{r}: {service}"));
            out.push((shown, weight));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::api::Rollout;
    use crate::routing::{RoutingError, routing};

    /// Argo's ValidateRolloutAlbIngressesConfig: exactly one of `ingress` and `ingresses`.
    #[test]
    fn ingress_and_ingresses_are_one_or_the_other() {
        let with = |alb: serde_json::Value| {
            let rollout: Rollout = serde_json::from_value(json!({
                "metadata": {"name": "web", "namespace": "prod"},
                "spec": {"strategy": {"canary": {"trafficRouting": {"alb": alb}}}}
            }))
            .unwrap();
            match routing(&rollout) {
                Err(RoutingError::Config { message, .. }) => message,
                other => format!("{other:?}"),
            }
        };
        assert_eq!(
            with(json!({"ingress": "a", "ingresses": ["b"], "servicePort": 80})),
            "Either Ingress or Ingresses must be configured. Both are configured."
        );
        assert_eq!(
            with(json!({"servicePort": 80})),
            "Either Ingress or Ingresses must be configured. Neither are configured."
        );
        assert!(with(json!({"ingresses": ["b"], "servicePort": 80})).starts_with("Ok(Some("));
    }

    /// Argo's ALB router writes header routes, so `managedRoutes` with ALB is a configuration like any other.
    #[test]
    fn managed_routes_with_alb_are_accepted() {
        let rollout: Rollout = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "prod"},
            "spec": {"strategy": {"canary": {"trafficRouting": {
                "alb": {"ingress": "web", "servicePort": 80},
                "managedRoutes": [{"name": "header"}]
            }}}}
        }))
        .unwrap();
        let routing = routing(&rollout).unwrap().unwrap();
        assert_eq!(routing.alb.map(|a| a.ingress), Some("web".to_string()));
    }

    /// Go's encoding/json escapes the characters HTML treats specially, so a header value holding them is
    /// written as Argo writes it.
    #[test]
    fn json_is_escaped_as_go_escapes_it() {
        assert_eq!(
            super::go_json(&json!({"values": ["a<b>&c\u{2028}"]})).unwrap(),
            r#"{"values":["a\u003cb\u003e\u0026c\u2028"]}"#
        );
    }
}
