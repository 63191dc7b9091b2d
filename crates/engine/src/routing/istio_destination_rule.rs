//! Istio's DestinationRule in subset mode, as Argo Rollouts drives it: the canary and stable subsets pointed at
//! the pod hashes, and the hold-back until the ReplicaSets that are to receive traffic are available. Returns
//! whole objects for an Update; must not read or write anything itself.

use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::{Map, Value};

use super::{Desired, Reader, RoutingError, object_name};
use crate::api::rollout::MANAGED_BY_ANNOTATION;
use crate::api::traffic_routing::IstioDestinationRule;
use crate::rollout::hash::HASH_LABEL;

/// The DestinationRule `current` (as read) with the canary and stable subsets selecting the desired pod hashes
/// (the label removed for an empty hash) and `argo-rollouts.argoproj.io/managed-by-rollouts` naming the
/// Rollout, for an Update; `Ok(None)` when it already says so. Other subsets are left as they are (Argo drops
/// subsets that are neither canary, stable nor an experiment's; canaryd runs no experiments and keeps them).
pub fn destination_rule(
    current: &Value,
    dr: &IstioDestinationRule,
    d: &Desired,
) -> Result<Option<Value>, RoutingError> {
    let r = Reader {
        kind: "DestinationRule",
        name: object_name(current),
    };
    let mut out = current.clone();
    let root = out
        .as_object_mut()
        .ok_or_else(|| r.malformed("", "expected an object"))?;
    let metadata = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let metadata = metadata
        .as_object_mut()
        .ok_or_else(|| r.malformed("metadata", "expected an object"))?;
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if annotations.is_null() {
        *annotations = Value::Object(Map::new());
    }
    let annotations = annotations
        .as_object_mut()
        .ok_or_else(|| r.malformed("metadata.annotations", "expected an object"))?;
    let mut changed = annotations
        .get(MANAGED_BY_ANNOTATION)
        .and_then(Value::as_str)
        != Some(d.rollout_name());
    annotations.insert(
        MANAGED_BY_ANNOTATION.to_string(),
        Value::from(d.rollout_name()),
    );
    let subsets = out
        .pointer_mut("/spec/subsets")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| r.malformed("spec.subsets", "expected a list of subsets"))?;
    for (subset, hash) in [
        (&dr.canary_subset_name, d.canary_hash),
        (&dr.stable_subset_name, d.stable_hash),
    ] {
        let found = subsets
            .iter_mut()
            .find(|s| s.get("name").and_then(Value::as_str) == Some(subset.as_str()))
            .ok_or_else(|| {
                RoutingError::Mismatch(format!(
                    "DestinationRule `{}` has no subset '{subset}'",
                    r.name
                ))
            })?;
        let found = found
            .as_object_mut()
            .ok_or_else(|| r.malformed("spec.subsets[]", "expected an object"))?;
        let labels = found
            .entry("labels")
            .or_insert_with(|| Value::Object(Map::new()));
        if labels.is_null() {
            *labels = Value::Object(Map::new());
        }
        let labels = labels.as_object_mut().ok_or_else(|| {
            r.malformed(
                format!("spec.subsets[{subset}].labels"),
                "expected an object",
            )
        })?;
        let current = labels.get(HASH_LABEL).and_then(Value::as_str).unwrap_or("");
        if current != hash {
            changed = true;
            if hash.is_empty() {
                labels.remove(HASH_LABEL);
            } else {
                labels.insert(HASH_LABEL.to_string(), Value::from(hash));
            }
        }
        if labels.is_empty() {
            found.remove("labels");
        }
    }
    Ok(changed.then_some(out))
}

/// Argo's shouldDelayDestinationRuleUpdate (#2507): in subset-only mode (no canary or stable Service) the
/// subsets move only once every ReplicaSet that is to receive traffic is fully available; the canary is not
/// waited for while rolling back to stable (`rolling_back`: aborted, or dynamically scaling back).
pub fn destination_rule_delay(
    d: &Desired,
    replica_sets: &[ReplicaSet],
    rolling_back: bool,
) -> Result<(), RoutingError> {
    if !d.canary_service.is_empty() || !d.stable_service.is_empty() {
        return Ok(());
    }
    for rs in replica_sets {
        let replicas = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let hash = rs
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(HASH_LABEL))
            .map_or("", String::as_str);
        if replicas == 0 || hash.is_empty() || (hash != d.stable_hash && hash != d.canary_hash) {
            continue;
        }
        if rolling_back && hash == d.canary_hash {
            continue;
        }
        let available = rs
            .status
            .as_ref()
            .and_then(|s| s.available_replicas)
            .unwrap_or(0);
        if available == 0 || available < replicas {
            return Err(RoutingError::Held(format!(
                "delaying destination rule switch: ReplicaSet {} not fully available",
                rs.metadata.name.as_deref().unwrap_or("")
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Rollout;
    use serde_json::json;

    fn rs(name: &str, hash: &str, replicas: i32, available: i32) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {HASH_LABEL: hash}},
            "spec": {"replicas": replicas, "selector": {}},
            "status": {"replicas": replicas, "availableReplicas": available}
        }))
        .unwrap()
    }

    #[test]
    fn subsets_move_only_once_the_replica_sets_receiving_traffic_are_fully_available() {
        let rollout: Rollout =
            serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {}})).unwrap();
        let d = Desired {
            rollout: &rollout,
            canary_service: "",
            stable_service: "",
            canary_weight: 10,
            max_traffic_weight: None,
            canary_hash: "new",
            stable_hash: "old",
            managed: &crate::routing::managed_routes::NO_CHANGE,
        };
        let sets = [
            rs("web-old", "old", 3, 3),
            rs("web-new", "new", 1, 0),
            rs("web-older", "older", 2, 0),
        ];
        assert_eq!(
            destination_rule_delay(&d, &sets, false)
                .unwrap_err()
                .to_string(),
            "delaying destination rule switch: ReplicaSet web-new not fully available"
        );
        assert_eq!(destination_rule_delay(&d, &sets, true), Ok(()));
        let with_services = Desired {
            canary_service: "c",
            ..d
        };
        assert_eq!(destination_rule_delay(&with_services, &sets, false), Ok(()));
    }
}
