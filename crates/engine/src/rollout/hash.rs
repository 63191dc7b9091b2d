//! Pod-template and step hashes, and deciding which existing ReplicaSet runs the Rollout's template.
//! canaryd's hash is FNV-32a over the template's canonical JSON (keys sorted), encoded with Kubernetes'
//! safe alphabet as Argo's is; it does not reproduce Argo's bytes (those depend on Go struct order), so a
//! ReplicaSet created by Argo Rollouts is recognised by comparing templates instead, as Argo does: the hash
//! label ignored and the Rollout's template defaulted as the API server defaults the ReplicaSet's. Owns
//! identity only: it never decides what to do with a match.

use serde_json::Value;

use crate::api::rollout::CanaryStep;
use crate::pod_defaults;

/// The label that carries a ReplicaSet's pod-template hash, on the ReplicaSet, its selector and its pods.
pub const HASH_LABEL: &str = "rollouts-pod-template-hash";

/// FNV-32a, the hash Kubernetes and Argo use for pod templates.
fn fnv32a(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Kubernetes' `rand.SafeEncodeString`: each character mapped into an alphabet without vowels, so no
/// hash spells a word.
fn safe_encode(text: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    text.bytes()
        .map(|b| char::from(ALPHABET[usize::from(b) % ALPHABET.len()]))
        .collect()
}

/// JSON with object keys sorted, whatever order they were written or stored in.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn hash_of(value: &Value, extra: Option<i32>) -> String {
    let mut text = String::new();
    canonical(value, &mut text);
    let mut bytes = text.into_bytes();
    if let Some(n) = extra {
        bytes.extend_from_slice(&i64::from(n).to_le_bytes());
    }
    safe_encode(&fnv32a(&bytes).to_string())
}

/// The pod-template hash of a Rollout's template; `collision_count` changes it after a name collision.
pub fn pod_template_hash(template: &Value, collision_count: Option<i32>) -> String {
    hash_of(template, collision_count)
}

/// `status.currentStepHash`: changes whenever the steps do, which restarts them. Hashed over the steps'
/// JSON in Argo's field order, so it equals the hash Argo wrote for the usual steps (setWeight, pause,
/// analysis) and taking over a Rollout from Argo does not restart its steps.
pub fn step_hash(steps: Option<&Vec<CanaryStep>>) -> String {
    let bytes = serde_json::to_vec(&steps).unwrap_or_default();
    safe_encode(&fnv32a(&bytes).to_string())
}

/// Argo's `PodTemplateEqualIgnoreHash`: a ReplicaSet's pod template (as the API server returns it, defaults
/// filled in) is the Rollout's when they are equal once the hash label is dropped from both, the Rollout's
/// template is defaulted as the API server would default it, and the deprecated `serviceAccount` is ignored.
pub fn same_template(rollout_template: &Value, rs_template: &Value) -> bool {
    let comparable = |template: &Value| {
        let mut template = template.clone();
        if let Some(labels) = template
            .pointer_mut("/metadata/labels")
            .and_then(Value::as_object_mut)
        {
            labels.remove(HASH_LABEL);
        }
        pod_defaults::default_template(&mut template);
        if let Some(spec) = template.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("serviceAccount");
        }
        normalise(&template)
    };
    comparable(rollout_template) == comparable(rs_template)
}

/// Drops nulls, empty objects and empty lists, which Kubernetes' semantic equality takes as absent.
fn normalise(value: &Value) -> Value {
    let empty = |v: &Value| match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        other => other.is_null(),
    };
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), normalise(v)))
                .filter(|(_, v)| !empty(v))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(normalise).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hashes_use_only_the_safe_alphabet_and_ignore_key_order() {
        let a = json!({"metadata": {"labels": {"app": "web", "tier": "x"}}, "spec": {"containers": []}});
        let b = json!({"spec": {"containers": []}, "metadata": {"labels": {"tier": "x", "app": "web"}}});
        let h = pod_template_hash(&a, None);
        assert_eq!(h, pod_template_hash(&b, None));
        assert!(h.chars().all(|c| "456789bcdf".contains(c)), "{h}");
        assert_ne!(
            h,
            pod_template_hash(&a, Some(1)),
            "a collision count changes the hash"
        );
    }

    #[test]
    fn the_step_hash_is_the_one_argo_wrote_for_the_same_steps() {
        // Argo's kubectl plugin test data (info/testdata/canary/canary-rollout.yaml) has a status Argo wrote
        // when the pauses read `duration: 10` (argo-rollouts#472 later rewrote them as "10s").
        let steps: Vec<CanaryStep> = serde_json::from_value(json!([
            {"setWeight": 20}, {"pause": {}}, {"setWeight": 40}, {"pause": {"duration": 10}},
            {"setWeight": 60}, {"pause": {"duration": 10}}, {"setWeight": 80}, {"pause": {"duration": 10}}
        ]))
        .unwrap();
        assert_eq!(step_hash(Some(&steps)), "f64cdc9d");
    }

    #[test]
    fn a_replica_set_made_by_argo_matches_its_template_despite_hash_label_and_defaults() {
        let rollout = json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "web:1", "ports": [{"containerPort": 8080}]}]}
        });
        let argo_rs = json!({
            "metadata": {"creationTimestamp": null, "labels": {"app": "web", "rollouts-pod-template-hash": "674d8cf959"}},
            "spec": {
                "containers": [{"name": "web", "image": "web:1", "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "resources": {}, "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
                "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                "securityContext": {}, "schedulerName": "default-scheduler"
            }
        });
        assert!(same_template(&rollout, &argo_rs));
        let mut other_image = argo_rs.clone();
        other_image["spec"]["containers"][0]["image"] = json!("web:2");
        assert!(!same_template(&rollout, &other_image));
        let mut different_policy = argo_rs;
        different_policy["spec"]["containers"][0]["imagePullPolicy"] = json!("Always");
        let mut wants_policy = rollout;
        wants_policy["spec"]["containers"][0]["imagePullPolicy"] = json!("IfNotPresent");
        assert!(
            !same_template(&wants_policy, &different_policy),
            "a default the Rollout writes itself is compared"
        );
    }
}
