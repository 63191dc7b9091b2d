//! AWS ALB (`trafficRouting.alb`), as Argo Rollouts drives it (its `rollout/trafficrouting/alb`): each Ingress
//! (`ingress`, or every one of `ingresses`) gets the AWS Load Balancer Controller's action annotation
//! `<annotationPrefix>/actions.<rootService or stableService>`, a forward action over two weighted target
//! groups (the canary Service at the weight, the stable Service at 100 minus it, both on `servicePort`), and
//! the annotation `rollouts.argoproj.io/managed-alb-annotations` naming it as the Rollout's. Nothing else of
//! the Ingress changes. Argo's check of the weights against the load balancer's target groups in AWS
//! (`--alb-verify-weight`, off by default) is not done.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{Desired, RoutingError};
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

/// Whether some path of the Ingress `ingress` has `service` as its backend (Argo's HasRuleWithService).
pub fn has_rule_with_service(ingress: &Value, service: &str) -> bool {
    let rules = ingress.pointer("/spec/rules").and_then(Value::as_array);
    rules.into_iter().flatten().any(|rule| {
        let paths = rule.pointer("/http/paths").and_then(Value::as_array);
        paths.into_iter().flatten().any(|path| {
            path.pointer("/backend/service/name")
                .and_then(Value::as_str)
                == Some(service)
        })
    })
}

/// The action annotation's key.
fn action_key(config: &AlbTrafficRouting, d: &Desired) -> String {
    let prefix = if config.annotation_prefix.is_empty() {
        PREFIX
    } else {
        &config.annotation_prefix
    };
    format!("{prefix}/actions.{}", action_service(config, d))
}

/// The forward action as Argo's getForwardActionString marshals it (Go's field order, compact).
fn forward_action(config: &AlbTrafficRouting, d: &Desired) -> Result<String, RoutingError> {
    let port = config.service_port;
    let group = |service: &str, weight: i64| {
        let service = Value::from(service);
        format!(r#"{{"ServiceName":{service},"ServicePort":"{port}","Weight":{weight}}}"#)
    };
    let canary = i64::from(d.canary_weight);
    let groups = [
        group(d.canary_service, canary),
        group(d.stable_service, 100 - canary),
    ];
    let mut forward = format!(r#"{{"TargetGroups":[{}]"#, groups.join(","));
    if let Some(sticky) = config.stickiness_config.as_ref().filter(|s| s.enabled) {
        if !(1..=MAX_STICKINESS).contains(&sticky.duration_seconds) {
            return Err(RoutingError::Mismatch(
                "TargetGroupStickinessConfig's duration must be between 1 and 604800 seconds (7 days)!"
                    .to_string(),
            ));
        }
        forward.push_str(&format!(
            r#","TargetGroupStickinessConfig":{{"Enabled":true,"DurationSeconds":{}}}"#,
            sticky.duration_seconds
        ));
    }
    Ok(format!(
        r#"{{"Type":"forward","ForwardConfig":{forward}}}}}"#
    ))
}

/// `managed` (the annotation [`MANAGED`] as read) with `key` among the Rollout `rollout`'s, as Argo's
/// modifyManagedAnnotation writes it (Go marshals a map with its keys sorted).
fn managed(managed: Option<&str>, rollout: &str, key: &str) -> Result<String, RoutingError> {
    let mut by_rollout: BTreeMap<String, Vec<String>> = match managed {
        None | Some("") => BTreeMap::new(),
        Some(text) => serde_json::from_str(text).map_err(|e| {
            RoutingError::Mismatch(format!("annotation {MANAGED} does not read: {e}"))
        })?,
    };
    let keys = by_rollout.entry(rollout.to_string()).or_default();
    if !keys.iter().any(|k| k == key) {
        keys.push(key.to_string());
    }
    serde_json::to_string(&by_rollout)
        .map_err(|e| RoutingError::Mismatch(format!("annotation {MANAGED}: {e}")))
}

/// The Ingress `current` (as read) with its action annotation at the desired weight, as Argo's SetWeight
/// patches it (the stable target group at `100 - weight`: Argo's validation refuses `maxTrafficWeight` with
/// ALB); `Ok(None)` when it already says so. An Ingress without a path to the action's Service is Argo's error.
pub fn ingress(
    current: &Value,
    config: &AlbTrafficRouting,
    d: &Desired,
) -> Result<Option<Value>, RoutingError> {
    let service = action_service(config, d);
    if !has_rule_with_service(current, service) {
        return Err(RoutingError::Mismatch(format!(
            "ingress does not have service `{service}` in rules"
        )));
    }
    let key = action_key(config, d);
    let action = forward_action(config, d)?;
    let mut out = current.clone();
    let Some(metadata) = out.get_mut("metadata").and_then(Value::as_object_mut) else {
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
    let Some(annotations) = annotations.as_object_mut() else {
        return Err(RoutingError::Mismatch(
            "metadata.annotations is not a map".to_string(),
        ));
    };
    let managed = managed(
        annotations.get(MANAGED).and_then(Value::as_str),
        d.rollout_name(),
        &key,
    )?;
    let mut changed = false;
    for (k, v) in [(key, action), (MANAGED.to_string(), managed)] {
        if annotations.get(&k).and_then(Value::as_str) != Some(v.as_str()) {
            annotations.insert(k, Value::from(v));
            changed = true;
        }
    }
    Ok(changed.then_some(out))
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

    /// Argo writes header routes on ALB Ingresses; canaryd does not, so `managedRoutes` with ALB is refused
    /// rather than its steps being passed over.
    #[test]
    fn managed_routes_with_alb_are_refused() {
        let rollout: Rollout = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "prod"},
            "spec": {"strategy": {"canary": {"trafficRouting": {
                "alb": {"ingress": "web", "servicePort": 80},
                "managedRoutes": [{"name": "header"}]
            }}}}
        }))
        .unwrap();
        match routing(&rollout) {
            Err(RoutingError::Config { field, message }) => {
                assert_eq!(field, "spec.strategy.canary.trafficRouting.managedRoutes");
                assert!(
                    message.starts_with("not supported by canaryd with ALB"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
