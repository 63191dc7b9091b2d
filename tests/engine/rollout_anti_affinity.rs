//! `antiAffinity` of both strategies on the in-memory cluster (Argo's GenerateReplicaSetAffinity and
//! syncReplicaSetRevision): the new ReplicaSet's pod template carries a term against the stable pods, the
//! pod-template hash stays the Rollout template's, and a re-used ReplicaSet's term follows the stable hash.

use canaryd::engine::rollout::hash::pod_template_hash;
use canaryd::engine::rollout::memory::MemoryCluster;
use canaryd_testkit::rollout::memory::*;
use serde_json::{Value, json};

const HASH_LABEL: &str = "rollouts-pod-template-hash";

/// `spec.template.spec.affinity` of the ReplicaSet running `hash`, as JSON (null when it has none).
fn affinity(c: &MemoryCluster, hash: &str) -> Value {
    let rs = c
        .replica_set(&format!("web-{hash}"))
        .unwrap_or_else(|| panic!("no ReplicaSet web-{hash}"));
    let affinity = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref()?.spec.as_ref()?.affinity.as_ref());
    serde_json::to_value(affinity).unwrap_or(Value::Null)
}

/// Argo's injected term against the pods of `stable` in `prod`.
fn term(stable: &str) -> Value {
    json!({
        "labelSelector": {"matchExpressions": [{"key": HASH_LABEL, "operator": "In", "values": [stable]}]},
        "namespaces": ["prod"],
        "topologyKey": "kubernetes.io/hostname",
    })
}

fn preferred(weight: i32, stable: &str) -> Value {
    json!({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": weight, "podAffinityTerm": term(stable)}]}})
}

fn required(stable: &str) -> Value {
    json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(stable)]}})
}

/// The hash of the Rollout's template as it is: what the new ReplicaSet is named by.
fn template_hash(c: &MemoryCluster) -> String {
    let template = c.rollout.spec.template.clone().unwrap_or(Value::Null);
    pod_template_hash(&template, None)
}

fn paused_canary() -> MemoryCluster {
    MemoryCluster::new(rollout(
        2,
        json!({"steps": [{"setWeight": 50}, {"pause": {}}],
               "antiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": {"weight": 40}}}),
    ))
}

/// The first ReplicaSet has no stable one to keep away from; the canary's carries the preferred term with
/// the strategy's weight against the stable hash, and is named by the hash of the template without it.
#[test]
fn a_canary_replica_set_prefers_nodes_without_stable_pods_and_keeps_the_templates_hash() {
    let mut c = paused_canary();
    run(&mut c, at(0));
    let stable = c.status().stable_rs;
    assert_eq!(affinity(&c, &stable), Value::Null);
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    let s = c.status();
    assert_eq!(phase(&c), ("Paused".into(), "CanaryPauseStep".into()));
    assert_eq!(s.current_pod_hash, template_hash(&c));
    assert_eq!(affinity(&c, &s.current_pod_hash), preferred(40, &stable));
    assert_eq!(
        c.replica_sets.len(),
        2,
        "the ReplicaSet with the term is found as the template's on every reconcile"
    );
}

/// Argo leaves the term on the ReplicaSet once it is stable (it names a ReplicaSet scaled away); the next
/// update's ReplicaSet keeps away from it in turn.
#[test]
fn the_term_stays_on_a_promoted_replica_set_and_the_next_one_avoids_it() {
    let mut c = blue_green_rollout(
        2,
        json!({"activeService": "web-active", "previewService": "web-preview", "autoPromotionEnabled": false,
               "antiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}),
    );
    run(&mut c, at(0));
    let first = c.status().stable_rs;
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    let second = c.status().current_pod_hash;
    assert_eq!(phase(&c), ("Paused".into(), "BlueGreenPause".into()));
    assert_eq!(
        affinity(&c, &second),
        required(&first),
        "the preview's pods"
    );
    c.patch_status(|s| s.pause_conditions.clear());
    run(&mut c, at(20));
    assert_eq!(c.status().stable_rs, second);
    assert_eq!(affinity(&c, &second), required(&first));
    set_image(&mut c, "web:3");
    run(&mut c, at(30));
    let third = c.status().current_pod_hash;
    assert_eq!(affinity(&c, &third), required(&second));
}

/// Rolling back to a ReplicaSet whose term names a stable hash that has since been replaced (Argo's
/// IfInjectedAntiAffinityRuleNeedsUpdate) rewrites the term against the stable hash of now.
#[test]
fn a_reused_replica_set_has_its_term_moved_to_the_current_stable() {
    let mut c = MemoryCluster::new(rollout(
        2,
        json!({"antiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}),
    ));
    run(&mut c, at(0));
    let first = c.status().stable_rs;
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    let second = c.status().stable_rs;
    set_image(&mut c, "web:3");
    run(&mut c, at(20));
    let third = c.status().stable_rs;
    assert_eq!(affinity(&c, &second), required(&first));
    set_image(&mut c, "web:2");
    let plan = c.reconcile(at(30));
    let revise = plan
        .writes
        .iter()
        .find_map(|w| match w.change() {
            canaryd::engine::rollout::change::Change::Patch { name, patch, .. }
                if name == format!("web-{second}") && patch.pointer("/spec/template").is_some() =>
            {
                Some(patch)
            }
            _ => None,
        })
        .expect("the re-used ReplicaSet is revised");
    assert_eq!(
        revise["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"],
        required(&third)["podAntiAffinity"],
        "a merge patch replaces the list whole"
    );
    run(&mut c, at(31));
    assert_eq!(affinity(&c, &second), required(&third));
    assert_eq!(
        c.replica_sets.len(),
        3,
        "no ReplicaSet is made for web:2 again"
    );
}

/// A ReplicaSet Argo made under another hash (Argo's FindNewReplicaSet compares templates once the injected
/// term is taken out) is the Rollout's new one, not a reason to make another.
#[test]
fn a_replica_set_under_another_hash_with_the_injected_term_is_still_the_new_one() {
    let mut c = paused_canary();
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    let new = c.status().current_pod_hash;
    let argo_hash = "5d8f7c9b6a";
    let rs = c
        .replica_sets
        .iter_mut()
        .find(|r| r.metadata.name.as_deref() == Some(&format!("web-{new}")))
        .expect("the canary ReplicaSet");
    let mut relabelled = serde_json::to_string(rs).expect("JSON");
    relabelled = relabelled.replace(&new, argo_hash);
    *rs = serde_json::from_str(&relabelled).expect("a ReplicaSet");
    let mark = c.events.len();
    run(&mut c, at(20));
    assert_eq!(c.replica_sets.len(), 2);
    assert!(
        !reasons_since(&c, mark).contains(&"NewReplicaSetCreated".to_string()),
        "{:?}",
        reasons_since(&c, mark)
    );
}

/// A stale term alone is a reason to revise the ReplicaSet (Argo's syncReplicaSetRevision), here with the
/// stable hash changed under a paused canary, as another controller's status would leave it.
#[test]
fn a_stale_term_alone_revises_the_new_replica_set() {
    let mut c = paused_canary();
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    let new = c.status().current_pod_hash;
    c.patch_status(|s| s.stable_rs = "6b5f8d7c9a".into());
    let plan = c.reconcile(at(20));
    let patch = plan.writes.iter().find_map(|w| match w.change() {
        canaryd::engine::rollout::change::Change::Patch { name, patch, .. }
            if name == format!("web-{new}") =>
        {
            patch.pointer("/spec/template/spec/affinity").cloned()
        }
        _ => None,
    });
    assert_eq!(patch, Some(preferred(40, "6b5f8d7c9a")));
}
