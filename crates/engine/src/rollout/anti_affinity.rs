//! Argo's anti-affinity injection (`antiAffinity` of either strategy): while a Rollout has a stable
//! ReplicaSet other than the one its template makes, the new ReplicaSet's pod template carries one more
//! pod anti-affinity term, against the pods of the stable hash on the same node (`kubernetes.io/hostname`),
//! preferred with the strategy's weight or required. The term is written when the ReplicaSet is created and
//! rewritten when the ReplicaSet is revised (Argo's syncReplicaSetRevision regenerates it); it stays on a
//! ReplicaSet once that is stable, as in Argo. The pod-template hash is the Rollout template's, without the
//! term, and a ReplicaSet's template is compared with the Rollout's without it. Owns the term; the writes
//! carrying it are `workloads`'.

use serde_json::{Map, Value, json};

use super::hash::HASH_LABEL;
use crate::api::Rollout;

/// The node-level topology Argo's injected term spreads over.
const TOPOLOGY_KEY: &str = "kubernetes.io/hostname";

/// The rule the strategy asks for (Argo's GetRolloutAffinity: the canary's, else the blue-green one's; none
/// when it names neither rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    Preferred { weight: i32 },
    Required,
}

impl Rule {
    fn of(rollout: &Rollout) -> Option<Rule> {
        let spec = &rollout.spec;
        let canary = spec.canary().and_then(|c| c.anti_affinity.as_ref());
        let blue_green = spec.blue_green().and_then(|b| b.anti_affinity.as_ref());
        let anti_affinity = canary.or(blue_green)?;
        let preferred = &anti_affinity.preferred_during_scheduling_ignored_during_execution;
        match preferred {
            Some(p) => Some(Rule::Preferred { weight: p.weight }),
            None => anti_affinity
                .required_during_scheduling_ignored_during_execution
                .as_ref()
                .map(|_| Rule::Required),
        }
    }

    /// The `podAntiAffinity` list the term goes in.
    fn list(self) -> &'static str {
        match self {
            Rule::Preferred { .. } => "preferredDuringSchedulingIgnoredDuringExecution",
            Rule::Required => "requiredDuringSchedulingIgnoredDuringExecution",
        }
    }

    /// The pod affinity term of one entry of [`Rule::list`].
    fn term(self, entry: &Value) -> Option<&Value> {
        match self {
            Rule::Preferred { .. } => entry.get("podAffinityTerm"),
            Rule::Required => Some(entry),
        }
    }
}

/// Whether the Rollout asks for anti-affinity at all.
pub(super) fn configured(rollout: &Rollout) -> bool {
    Rule::of(rollout).is_some()
}

/// Argo's GenerateReplicaSetAffinity, in place on a copy of the Rollout's pod template: the term against
/// `stable_rs` is added when there is a stable hash and it is not `pod_hash`, the template's own rules kept.
pub(super) fn inject(template: &mut Value, rollout: &Rollout, stable_rs: &str, pod_hash: &str) {
    let Some(rule) = Rule::of(rollout) else {
        return;
    };
    if stable_rs.is_empty() || stable_rs == pod_hash {
        return;
    }
    let term = json!({
        "labelSelector": {"matchExpressions": [{"key": HASH_LABEL, "operator": "In", "values": [stable_rs]}]},
        "namespaces": [rollout.metadata.namespace.as_deref().unwrap_or_default()],
        "topologyKey": TOPOLOGY_KEY,
    });
    let entry = match rule {
        Rule::Preferred { weight } => json!({"weight": weight, "podAffinityTerm": term}),
        Rule::Required => term,
    };
    let list = template
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .and_then(|spec| object_at(spec, "affinity"))
        .and_then(|affinity| object_at(affinity, "podAntiAffinity"))
        .and_then(|anti| {
            anti.entry(rule.list())
                .or_insert_with(|| Value::Array(Vec::new()))
                .as_array_mut()
        });
    if let Some(list) = list {
        list.push(entry);
    }
}

/// The object under `key`, made when missing; `None` when something else is there.
fn object_at<'v>(map: &'v mut Map<String, Value>, key: &str) -> Option<&'v mut Map<String, Value>> {
    let value = map.entry(key).or_insert_with(|| Value::Object(Map::new()));
    if value.is_null() {
        *value = Value::Object(Map::new());
    }
    value.as_object_mut()
}

/// Argo's HasInjectedAntiAffinityRule: the first entry of the rule's list whose term selects on the pod
/// template hash, with its index.
fn injected(affinity: &Value, rule: Rule) -> Option<(usize, &Value)> {
    let list = affinity
        .pointer(&format!("/podAntiAffinity/{}", rule.list()))
        .and_then(Value::as_array)?;
    list.iter().enumerate().find_map(|(i, entry)| {
        let term = rule.term(entry)?;
        hash_expressions(term).next().map(|_| (i, term))
    })
}

/// The match expressions of `term` on the pod template hash.
fn hash_expressions(term: &Value) -> impl Iterator<Item = &Value> {
    term.pointer("/labelSelector/matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|e| e.get("key").and_then(Value::as_str) == Some(HASH_LABEL))
}

/// Argo's RemoveInjectedAntiAffinityRule on a ReplicaSet's pod template, so it compares with the Rollout's.
/// Emptied lists and objects are left for the comparison, which takes them as absent.
pub(super) fn remove_injected(template: &mut Value, rollout: &Rollout) {
    let Some(rule) = Rule::of(rollout) else {
        return;
    };
    let Some(affinity) = template.pointer_mut("/spec/affinity") else {
        return;
    };
    let Some((i, _)) = injected(affinity, rule) else {
        return;
    };
    let list = affinity
        .pointer_mut(&format!("/podAntiAffinity/{}", rule.list()))
        .and_then(Value::as_array_mut);
    if let Some(list) = list {
        list.remove(i);
    }
}

/// Argo's IfInjectedAntiAffinityRuleNeedsUpdate: a ReplicaSet's injected term names a stable hash that is no
/// longer `stable_rs`, while the Rollout is not fully promoted.
pub(super) fn needs_update(
    affinity: &Value,
    rollout: &Rollout,
    stable_rs: &str,
    pod_hash: &str,
) -> bool {
    let Some(rule) = Rule::of(rollout) else {
        return false;
    };
    let Some((_, term)) = injected(affinity, rule) else {
        return false;
    };
    stable_rs != pod_hash
        && hash_expressions(term).any(|e| {
            e.pointer("/values/0")
                .and_then(Value::as_str)
                .is_some_and(|v| v != stable_rs)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rollout(strategy: Value) -> Rollout {
        serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Rollout",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"strategy": strategy},
        }))
        .unwrap_or_else(|e| panic!("rollout: {e}"))
    }

    fn template(affinity: Value) -> Value {
        json!({"metadata": {"labels": {"app": "web"}}, "spec": {"affinity": affinity, "containers": []}})
    }

    fn node_affinity() -> Value {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}})
    }

    #[test]
    fn the_preferred_term_is_added_beside_the_templates_own_rules() {
        let ro = rollout(json!({"canary": {"antiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": {"weight": 40}}}}));
        let mut t = template(node_affinity());
        inject(&mut t, &ro, "aaa", "bbb");
        assert_eq!(
            t["spec"]["affinity"]["nodeAffinity"],
            node_affinity()["nodeAffinity"]
        );
        assert_eq!(
            t["spec"]["affinity"]["podAntiAffinity"],
            json!({"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 40, "podAffinityTerm": {
                "labelSelector": {"matchExpressions": [
                    {"key": HASH_LABEL, "operator": "In", "values": ["aaa"]}]},
                "namespaces": ["shop"],
                "topologyKey": TOPOLOGY_KEY,
            }}]})
        );
    }

    #[test]
    fn the_required_term_is_appended_to_a_required_list_already_there() {
        let ro = rollout(json!({"blueGreen": {"activeService": "a", "antiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {}}}}));
        let own = json!({"labelSelector": {"matchLabels": {"tier": "db"}}, "topologyKey": "zone"});
        let mut t = template(
            json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [own]}}),
        );
        inject(&mut t, &ro, "aaa", "bbb");
        let list = &t["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
        assert_eq!(list[0], own);
        assert_eq!(
            list[1]["labelSelector"]["matchExpressions"][0]["values"],
            json!(["aaa"])
        );
        assert_eq!(list.as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn nothing_is_added_without_a_stable_hash_apart_from_the_template() {
        let ro = rollout(json!({"canary": {"antiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {}}}}));
        for (stable, hash) in [("", "bbb"), ("bbb", "bbb")] {
            let mut t = template(Value::Null);
            inject(&mut t, &ro, stable, hash);
            assert_eq!(t, template(Value::Null), "stable {stable:?}");
        }
        let mut t = template(Value::Null);
        inject(&mut t, &rollout(json!({"canary": {}})), "aaa", "bbb");
        assert_eq!(t, template(Value::Null));
    }

    #[test]
    fn the_injected_term_comes_out_and_the_templates_own_stay() {
        let ro = rollout(json!({"canary": {"antiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": {"weight": 1}}}}));
        let own = json!({"weight": 5, "podAffinityTerm": {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "zone"}});
        let mut t = template(
            json!({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [own]}}),
        );
        inject(&mut t, &ro, "aaa", "bbb");
        remove_injected(&mut t, &ro);
        let list = &t["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"];
        assert_eq!(list, &json!([own]));
    }

    #[test]
    fn a_term_naming_another_stable_hash_needs_rewriting_until_fully_promoted() {
        let ro = rollout(json!({"canary": {"antiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {}}}}));
        let mut t = template(Value::Null);
        inject(&mut t, &ro, "aaa", "ccc");
        let affinity = &t["spec"]["affinity"];
        assert!(!needs_update(affinity, &ro, "aaa", "ccc"));
        assert!(needs_update(affinity, &ro, "bbb", "ccc"));
        assert!(!needs_update(affinity, &ro, "ccc", "ccc"));
        assert!(!needs_update(&node_affinity(), &ro, "bbb", "ccc"));
    }
}
