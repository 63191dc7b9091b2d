//! Faithfulness tests for the workload kinds the fake API server serves for Rollouts, through the real kube
//! client: ReplicaSets with the status subresource and `metadata.generation`, Services, Pods and their eviction
//! subresource, and the simulated ReplicaSet controller (pods follow spec, Ready after a delay, replaced when
//! evicted; pods held unready by name or pod-template hash; pods only counted, none stored).

#![allow(clippy::disallowed_methods)] // Not the Clock: the fake API server keeps real time.

use std::time::{Duration, Instant};

use canaryd_testkit::fake_apiserver::FakeApiServer;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
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

#[tokio::test]
async fn without_pods_the_simulated_controller_moves_the_status_alike_and_stores_no_pod() {
    let server = FakeApiServer::start().await;
    let controller = server.replica_set_controller_without_pods(Duration::from_secs(1));
    let client = server.client().await;
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &replica_set("web-a", "a", 3))
        .await
        .expect("created");
    wait_for(&server, "web-a", (3, 0, 0, 1)).await;
    assert_eq!(server.pods_starting(), 3);
    let took = wait_for(&server, "web-a", (3, 3, 3, 1)).await;
    assert!(took >= Duration::from_millis(800), "ready after {took:?}");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    assert!(
        pods.list(&ListParams::default())
            .await
            .expect("pods listed")
            .items
            .is_empty(),
        "no Pod is stored"
    );
    api.patch(
        "web-a",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await
    .expect("scaled up");
    // The new pods are counted at once and Ready after the delay; the old ones stay Ready.
    wait_for(&server, "web-a", (5, 3, 3, 2)).await;
    wait_for(&server, "web-a", (5, 5, 5, 2)).await;
    api.patch(
        "web-a",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .expect("scaled down");
    let took = wait_for(&server, "web-a", (1, 1, 1, 3)).await;
    assert!(
        took < Duration::from_millis(800),
        "scaled down after {took:?}"
    );

    controller.hold_unready("a");
    wait_for(&server, "web-a", (1, 0, 0, 3)).await;
    controller.release("a");
    let took = wait_for(&server, "web-a", (1, 1, 1, 3)).await;
    assert!(
        took >= Duration::from_millis(800),
        "ready again after {took:?}"
    );
}

fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn names(pods: &[Pod]) -> Vec<String> {
    pods.iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect()
}

#[tokio::test]
async fn the_simulated_controller_makes_labelled_owned_pods_and_replaces_evicted_and_deleted_ones()
{
    let server = FakeApiServer::start().await;
    let _controller = server.replica_set_controller(Duration::from_millis(300));
    let client = server.client().await;
    let rs_api: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let rs = rs_api
        .create(&PostParams::default(), &replica_set("web-a", "a", 2))
        .await
        .expect("created");
    wait_for(&server, "web-a", (2, 2, 2, 1)).await;
    let selected = ListParams::default().labels("app=web,rollouts-pod-template-hash=a");
    let first = pods.list(&selected).await.expect("pods listed").items;
    assert_eq!(first.len(), 2);
    for pod in &first {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        assert!(
            name.starts_with("web-a-") && name.len() == "web-a-".len() + 5,
            "{name}"
        );
        let owner = &pod.metadata.owner_references.as_ref().expect("an owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("ReplicaSet", "web-a", Some(true))
        );
        assert_eq!(owner.uid, rs.metadata.uid.clone().unwrap_or_default());
        assert!(pod.metadata.creation_timestamp.is_some());
        assert!(ready(pod), "{name} is Ready");
    }
    let other = ListParams::default().labels("rollouts-pod-template-hash=b");
    assert!(pods.list(&other).await.expect("listed").items.is_empty());

    let evicted = names(&first)[0].clone();
    pods.evict(&evicted, &EvictParams::default())
        .await
        .expect("the eviction is accepted");
    assert!(
        pods.get_opt(&evicted).await.expect("get").is_none(),
        "evicted pods are gone"
    );
    // Replaced at once, not Ready yet; the ReplicaSet's counts follow its pods.
    wait_for(&server, "web-a", (2, 1, 1, 1)).await;
    wait_for(&server, "web-a", (2, 2, 2, 1)).await;
    let second = names(&pods.list(&selected).await.expect("listed").items);
    assert_eq!(second.len(), 2);
    assert!(!second.contains(&evicted), "{second:?}");

    let missing = pods.evict(&evicted, &EvictParams::default()).await;
    assert!(
        matches!(missing, Err(kube::Error::Api(ref s)) if s.code == 404),
        "{missing:?}"
    );
    let deleted = pods
        .delete(&second[0], &DeleteParams::default())
        .await
        .expect("deleted");
    assert!(deleted.is_left(), "a pod DELETE answers with the pod");
    wait_for(&server, "web-a", (2, 2, 2, 1)).await;
    let third = names(&pods.list(&selected).await.expect("listed").items);
    assert!(third.len() == 2 && !third.contains(&second[0]), "{third:?}");

    rs_api
        .patch(
            "web-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .expect("scaled down");
    wait_for(&server, "web-a", (1, 1, 1, 2)).await;
    assert_eq!(pods.list(&selected).await.expect("listed").items.len(), 1);
    rs_api
        .delete("web-a", &DeleteParams::default())
        .await
        .expect("the ReplicaSet is deleted");
    let start = Instant::now();
    while !pods.list(&selected).await.expect("listed").items.is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "orphans are collected"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// kube-apiserver's defaults (`pkg/apis/core/v1/defaults.go`, apps/v1's and batch/v1's) are filled into the
/// built-in kinds' pod templates on write, and Pods get `SetDefaults_Pod`'s too; a custom resource's template
/// (a Rollout's) is stored as sent.
#[tokio::test]
async fn built_in_workloads_read_back_with_the_api_servers_defaults_and_a_rollout_as_sent() {
    let server = FakeApiServer::start().await;
    let client = server.client().await;
    let rs_api: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let mut rs = replica_set("web-a", "a", 1);
    rs.spec.as_mut().expect("a spec").replicas = None;
    rs_api
        .create(&PostParams::default(), &rs)
        .await
        .expect("created");
    let stored = server
        .get_json::<ReplicaSet>("default", "web-a")
        .expect("stored");
    assert_eq!(stored["spec"]["replicas"], json!(1));
    assert_eq!(
        stored["spec"]["template"]["metadata"]["creationTimestamp"],
        json!(null)
    );
    let spec = &stored["spec"]["template"]["spec"];
    assert_eq!(
        (
            &spec["restartPolicy"],
            &spec["dnsPolicy"],
            &spec["schedulerName"],
            &spec["terminationGracePeriodSeconds"],
            &spec["containers"][0]["imagePullPolicy"],
            &spec["containers"][0]["terminationMessagePath"],
        ),
        (
            &json!("Always"),
            &json!("ClusterFirst"),
            &json!("default-scheduler"),
            &json!(30),
            &json!("IfNotPresent"),
            &json!("/dev/termination-log"),
        )
    );
    assert_eq!(spec.get("enableServiceLinks"), None, "a Pod's default only");

    let pod_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "c"}]},
    }))
    .expect("a Pod");
    let pod = pod_api
        .create(&PostParams::default(), &pod)
        .await
        .expect("created");
    let spec = pod.spec.expect("a spec");
    assert_eq!(spec.enable_service_links, Some(true));
    assert_eq!(
        spec.containers[0].image_pull_policy.as_deref(),
        Some("Always")
    );

    let job_api: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client.clone(), "default");
    let job = serde_json::from_value(json!({
        "metadata": {"name": "j"},
        "spec": {"template": {"metadata": {"labels": {"job": "j"}},
                              "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "c:1"}]}}},
    }))
    .expect("a Job");
    let job = job_api
        .create(&PostParams::default(), &job)
        .await
        .expect("created");
    let spec = job.spec.expect("a spec");
    assert_eq!(
        (spec.backoff_limit, spec.completions, spec.parallelism),
        (Some(6), Some(1), Some(1))
    );
    let template = spec.template.spec.expect("a pod spec");
    assert_eq!(
        (
            template.restart_policy.as_deref(),
            template.dns_policy.as_deref()
        ),
        (Some("Never"), Some("ClusterFirst"))
    );

    let rollout_api: Api<canaryd::api::Rollout> = Api::namespaced(client, "default");
    let rollout: canaryd::api::Rollout = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "web:1"}]}},
                 "strategy": {"canary": {}}},
    }))
    .expect("a Rollout");
    rollout_api
        .create(&PostParams::default(), &rollout)
        .await
        .expect("created");
    let stored = server
        .get_json::<canaryd::api::Rollout>("default", "web")
        .expect("stored");
    assert_eq!(
        stored["spec"]["template"],
        json!({"metadata": {"labels": {"app": "web"}},
               "spec": {"containers": [{"name": "web", "image": "web:1"}]}})
    );
}
