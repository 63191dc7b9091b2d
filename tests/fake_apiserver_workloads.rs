//! Faithfulness tests for the workload kinds the fake API server serves for Rollouts, through the real kube
//! client: ReplicaSets with the status subresource and `metadata.generation`, Services, and the simulated
//! ReplicaSet controller (status follows spec after a delay; pods held unready by name or pod-template hash).

#![allow(clippy::disallowed_methods)] // Not the Clock: the fake API server keeps real time.

#[path = "support/fake_apiserver.rs"]
mod fake_apiserver;

use std::time::{Duration, Instant};

use fake_apiserver::FakeApiServer;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

fn replica_set(name: &str, hash: &str, replicas: i32) -> ReplicaSet {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": "default", "labels": {"rollouts-pod-template-hash": hash}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web", "rollouts-pod-template-hash": hash}},
            "template": {"metadata": {"labels": {"app": "web", "rollouts-pod-template-hash": hash}},
                         "spec": {"containers": [{"name": "web", "image": "web:1"}]}},
        },
        "status": {"replicas": 99},
    }))
    .expect("a ReplicaSet")
}

/// (replicas, readyReplicas, availableReplicas, observedGeneration) as stored.
fn counts(server: &FakeApiServer, name: &str) -> (i32, i32, i32, i64) {
    let rs = server
        .get::<ReplicaSet>("default", name)
        .expect("the ReplicaSet is stored");
    let status = rs.status.unwrap_or_default();
    (
        status.replicas,
        status.ready_replicas.unwrap_or(0),
        status.available_replicas.unwrap_or(0),
        status.observed_generation.unwrap_or(0),
    )
}

async fn wait_for(server: &FakeApiServer, name: &str, want: (i32, i32, i32, i64)) -> Duration {
    let start = Instant::now();
    while counts(server, name) != want {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{name} never reached {want:?}: {:?}",
            counts(server, name)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    start.elapsed()
}

#[tokio::test]
async fn a_replica_set_keeps_its_generation_and_its_status_only_changes_through_the_subresource() {
    let server = FakeApiServer::start().await;
    let api: Api<ReplicaSet> = Api::namespaced(server.client().await, "default");
    let created = api
        .create(&PostParams::default(), &replica_set("web-a", "a", 1))
        .await
        .expect("created");
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.status, None, "status is dropped on create");
    let scaled = api
        .patch(
            "web-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}, "status": {"replicas": 3}})),
        )
        .await
        .expect("scaled");
    assert_eq!(scaled.metadata.generation, Some(2));
    assert_eq!(scaled.status, None, "a write to the object ignores status");
    let labelled = api
        .patch(
            "web-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"a": "b"}}})),
        )
        .await
        .expect("annotated");
    assert_eq!(
        labelled.metadata.generation,
        Some(2),
        "metadata is not spec"
    );
    let status = api
        .patch_status(
            "web-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 3}})),
        )
        .await
        .expect("status written");
    assert_eq!(status.status.map(|s| s.replicas), Some(3));
}

#[tokio::test]
async fn services_are_served_with_their_selector() {
    let server = FakeApiServer::start().await;
    let api: Api<Service> = Api::namespaced(server.client().await, "default");
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "web-canary"}, "spec": {"selector": {"app": "web"}}
    }))
    .expect("a Service");
    api.create(&PostParams::default(), &service)
        .await
        .expect("created");
    let patched = api
        .patch(
            "web-canary",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"selector": {"rollouts-pod-template-hash": "a"}}})),
        )
        .await
        .expect("patched");
    let selector = patched.spec.and_then(|s| s.selector).unwrap_or_default();
    assert_eq!(
        selector
            .get("rollouts-pod-template-hash")
            .map(String::as_str),
        Some("a")
    );
    assert_eq!(selector.get("app").map(String::as_str), Some("web"));
}

#[tokio::test]
async fn the_simulated_controller_makes_new_pods_available_after_the_delay_and_removes_pods_at_once()
 {
    let server = FakeApiServer::start().await;
    let _controller = server.replica_set_controller(Duration::from_millis(400));
    let api: Api<ReplicaSet> = Api::namespaced(server.client().await, "default");
    api.create(&PostParams::default(), &replica_set("web-a", "a", 2))
        .await
        .expect("created");
    let took = wait_for(&server, "web-a", (2, 2, 2, 1)).await;
    assert!(took >= Duration::from_millis(300), "ready after {took:?}");
    api.patch(
        "web-a",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 0}})),
    )
    .await
    .expect("scaled down");
    let took = wait_for(&server, "web-a", (0, 0, 0, 2)).await;
    assert!(
        took < Duration::from_millis(300),
        "scaled down after {took:?}"
    );
}

#[tokio::test]
async fn pods_held_by_pod_template_hash_exist_but_never_become_ready_until_released() {
    let server = FakeApiServer::start().await;
    let controller = server.replica_set_controller(Duration::from_millis(50));
    controller.hold_unready("b");
    let api: Api<ReplicaSet> = Api::namespaced(server.client().await, "default");
    api.create(&PostParams::default(), &replica_set("web-b", "b", 2))
        .await
        .expect("created");
    wait_for(&server, "web-b", (2, 0, 0, 1)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(counts(&server, "web-b"), (2, 0, 0, 1), "held unready");
    controller.release("b");
    wait_for(&server, "web-b", (2, 2, 2, 1)).await;
}
