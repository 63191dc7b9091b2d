//! JSON merge patches (RFC 7386): [`diff`] computes the patch a write sends, [`apply`] applies one as the API
//! server does. One home, used by the Rollout's writes and status, the in-memory cluster and the NGINX canary
//! Ingress.

use serde_json::{Map, Value};

/// The merge patch that turns `from` into `to`: changed and added fields with their new value, removed ones
/// as `null`, objects recursively, arrays whole (as Kubernetes' strategic merge patch treats lists without a
/// merge key, so the patch equals the one Argo computes for an Ingress).
pub fn diff(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => {
            let mut patch = Map::new();
            for (key, old) in a {
                match b.get(key) {
                    None => {
                        patch.insert(key.clone(), Value::Null);
                    }
                    Some(new) if new != old => {
                        patch.insert(key.clone(), diff(old, new));
                    }
                    Some(_) => {}
                }
            }
            for (key, new) in b {
                if !a.contains_key(key) {
                    patch.insert(key.clone(), new.clone());
                }
            }
            Value::Object(patch)
        }
        _ => to.clone(),
    }
}

/// `patch` applied to `target` as the API server applies a merge patch (RFC 7386): `null` removes a field,
/// an object merges field by field, anything else replaces.
pub fn apply(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(fields) = target {
        for (key, value) in patch {
            if value.is_null() {
                fields.remove(key);
            } else {
                apply(fields.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_patch_names_changed_added_and_removed_fields_and_replaces_lists() {
        let from = json!({"a": {"x": "1", "y": "2"}, "l": [1, 2], "k": true});
        let to = json!({"a": {"x": "1", "y": "3", "z": "4"}, "l": [1], "k": true});
        assert_eq!(
            diff(&from, &to),
            json!({"a": {"y": "3", "z": "4"}, "l": [1]})
        );
        assert_eq!(diff(&json!({"a": 1}), &json!({})), json!({"a": null}));
    }

    #[test]
    fn applying_the_diff_gives_the_new_object() {
        let old = json!({"phase": "Paused", "pauseConditions": [{"reason": "CanaryPauseStep"}],
                         "canary": {"currentStepAnalysisRunStatus": {"name": "r"}}, "stableRS": "a"});
        let new = json!({"phase": "Progressing", "canary": {}, "stableRS": "a"});
        let patch = diff(&old, &new);
        assert_eq!(
            patch,
            json!({"phase": "Progressing", "pauseConditions": null,
                   "canary": {"currentStepAnalysisRunStatus": null}})
        );
        let mut applied = old.clone();
        apply(&mut applied, &patch);
        assert_eq!(applied, new);
    }
}
