//! The view's rules on fixed objects: a pod's state as kubectl says it, a ReplicaSet's health, the actual
//! weight without a router, images merged across revisions, ages, sparklines.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::text::{human_duration, number, sparkline};
use super::{Owned, pod_state, replica_set_health, rollout_view};
use crate::api::Rollout;
use crate::engine::rollout::Rs;

fn pod(status: Value, extra: Value) -> Pod {
    let mut pod = json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
        "status": status,
    });
    if let (Some(p), Some(e)) = (pod["metadata"].as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    serde_json::from_value(pod).unwrap()
}

fn container(name: &str, ready: bool, restarts: i32, state: Value) -> Value {
    json!({"name": name, "image": "i", "imageID": "", "ready": ready, "restartCount": restarts, "state": state})
}

/// Argo's `newPodInfo` (kubectl's `printPod`).
#[test]
fn a_pods_state_is_the_one_kubectl_shows() {
    let running = json!({"running": {}});
    let both = pod(
        json!({"phase": "Running", "containerStatuses": [
            container("a", true, 0, running.clone()), container("b", true, 1, running.clone())]}),
        json!({}),
    );
    assert_eq!(pod_state(&both), ("Running".into(), "2/2".into(), 1));
    let crashing = pod(
        json!({"phase": "Running", "containerStatuses": [
            container("a", true, 0, running.clone()),
            container("b", false, 4, json!({"waiting": {"reason": "CrashLoopBackOff"}}))]}),
        json!({}),
    );
    assert_eq!(
        pod_state(&crashing),
        ("CrashLoopBackOff".into(), "1/2".into(), 4)
    );
    let killed = pod(
        json!({"phase": "Running", "containerStatuses": [
            container("a", false, 0, json!({"terminated": {"exitCode": 137, "signal": 9}}))]}),
        json!({}),
    );
    assert_eq!(pod_state(&killed).0, "Signal:9");
    let mut initializing = pod(
        json!({"phase": "Pending", "initContainerStatuses": [
            container("init", false, 0, json!({"waiting": {"reason": "PodInitializing"}}))]}),
        json!({}),
    );
    let init = json!([{"name": "init"}]);
    initializing.spec.as_mut().unwrap().init_containers =
        Some(serde_json::from_value(init).unwrap());
    assert_eq!(pod_state(&initializing).0, "Init:0/1");
    let leaving = pod(
        json!({"phase": "Running", "containerStatuses": [container("a", true, 0, running)]}),
        json!({"deletionTimestamp": "2026-12-05T00:00:00Z"}),
    );
    assert_eq!(pod_state(&leaving).0, "Terminating");
}

fn replica_set(spec: i32, available: i32, generation: i64, observed: i64) -> ReplicaSet {
    serde_json::from_value(json!({
        "metadata": {"name": "rs", "generation": generation},
        "spec": {"replicas": spec, "selector": {}},
        "status": {"replicas": spec, "availableReplicas": available, "observedGeneration": observed},
    }))
    .unwrap()
}

/// Argo's `getReplicaSetHealth`.
#[test]
fn a_replica_sets_health_waits_for_its_controller_and_its_pods() {
    let health = |rs: &ReplicaSet| replica_set_health(rs, &Rs::read(rs));
    assert_eq!(health(&replica_set(2, 2, 1, 1)), "Healthy");
    assert_eq!(health(&replica_set(2, 1, 1, 1)), "Progressing");
    assert_eq!(health(&replica_set(2, 2, 2, 1)), "Progressing");
    assert_eq!(health(&replica_set(0, 0, 1, 1)), "ScaledDown");
}

/// A ReplicaSet of Rollout `web` (uid `r`) with pod-template hash `hash`, running image `web:1`.
fn owned_replica_set(hash: &str, available: i32) -> ReplicaSet {
    serde_json::from_value(json!({
        "metadata": {"name": format!("web-{hash}"), "uid": hash,
            "labels": {"rollouts-pod-template-hash": hash},
            "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "web",
                "uid": "r", "controller": true}]},
        "spec": {"replicas": available, "selector": {},
            "template": {"spec": {"containers": [{"name": "web", "image": "web:1"}]}}},
        "status": {"replicas": available, "availableReplicas": available},
    }))
    .unwrap()
}

/// Argo's `NewReplicaSetInfo` for a blue-green Rollout: the ReplicaSet the active Service selects is `active`
/// (and `stable` once promoted), the one only the preview Service selects is `preview`, and none is `canary`
/// though the preview runs the current pod template; no step or weights are shown.
#[test]
fn a_blue_green_rollouts_replica_sets_are_tagged_active_and_preview() {
    let rollout: Rollout = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "r"},
        "spec": {"replicas": 2, "strategy": {"blueGreen": {"activeService": "web", "previewService": "web-preview"}}},
        "status": {"stableRS": "s", "currentPodHash": "p",
            "blueGreen": {"activeSelector": "s", "previewSelector": "p"}},
    }))
    .unwrap();
    let replica_sets = [owned_replica_set("s", 2), owned_replica_set("p", 2)];
    let owned = Owned {
        replica_sets: &replica_sets,
        pods: &[],
        analysis_runs: &[],
    };
    let view = rollout_view(&rollout, &owned);
    assert_eq!(view.strategy, "BlueGreen");
    assert!(view.canary.is_none());
    let tags: Vec<(String, Vec<&str>)> = view
        .revisions
        .iter()
        .flat_map(|r| &r.replica_sets)
        .map(|rs| (rs.name.clone(), rs.tags()))
        .collect();
    assert!(
        tags.contains(&("web-s".to_string(), vec!["stable", "active"])),
        "{tags:?}"
    );
    assert!(
        tags.contains(&("web-p".to_string(), vec!["preview"])),
        "{tags:?}"
    );
    assert_eq!(view.images[0].tags, ["active", "preview", "stable"]);
    let text = super::text::rollout(&view, "2026-01-01T00:00:00Z".parse().unwrap());
    assert!(!text.contains("Step:"), "{text}");
}

/// Argo's `NewRolloutInfo`: without a router the canary's weight is its share of the available pods, and
/// an image run by two ReplicaSets is listed once with both tags.
#[test]
fn without_a_router_the_actual_weight_is_the_canarys_share_of_available_pods() {
    let rollout: Rollout = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "r"},
        "spec": {"replicas": 4, "strategy": {"canary": {"steps": [{"setWeight": 50}, {"pause": {}}]}}},
        "status": {"currentStepIndex": 1, "stableRS": "s", "currentPodHash": "c", "availableReplicas": 4},
    }))
    .unwrap();
    let replica_sets = [owned_replica_set("s", 3), owned_replica_set("c", 1)];
    let owned = Owned {
        replica_sets: &replica_sets,
        pods: &[],
        analysis_runs: &[],
    };
    let view = rollout_view(&rollout, &owned);
    let canary = view.canary.unwrap();
    assert_eq!((canary.set_weight, canary.actual_weight), (50, 25));
    assert_eq!(canary.step.unwrap().text.as_deref(), Some("pause"));
    assert_eq!(view.images.len(), 1);
    assert_eq!(view.images[0].tags, ["canary", "stable"]);
}

/// apimachinery's `HumanDuration`, as kubectl's AGE column shows it.
#[test]
fn ages_read_as_kubectls() {
    let cases = [
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (150, "2m30s"),
        (900, "15m"),
        (4 * 3600 + 60, "4h1m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 3600, "3d1h"),
        (400 * 86400, "400d"),
        (-5, "<invalid>"),
    ];
    for (seconds, shown) in cases {
        assert_eq!(human_duration(seconds), shown, "{seconds}");
    }
}

#[test]
fn a_sparkline_spans_the_lowest_to_the_highest_value() {
    assert_eq!(sparkline(&[1.0, 8.0, 4.5]), "▁█▅");
    assert_eq!(sparkline(&[0.5, 0.5]), "▄▄");
    assert_eq!(sparkline(&[]), "");
    assert_eq!(number("[0.231]"), Some(0.231));
    assert_eq!(number("[0.2, 0.4]"), Some(0.2));
    assert_eq!(number("NaN"), None);
    assert_eq!(number("up"), None);
}
