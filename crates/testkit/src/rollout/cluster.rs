//! The Rollout the daemon tests progress on the fake API server, and how they look at it: `web` in `default`
//! with canary and stable Services and a step analysis on a scripted Prometheus, the simulated ReplicaSet
//! controller, and readers of the Rollout's status, ReplicaSets, Services and Events as stored by the fake API
//! server. TEST FIXTURE ONLY: no assertions about canaryd's behaviour.

use std::time::Duration;

use canaryd::api::rollout::RolloutStatus;
use canaryd::api::{AnalysisTemplate, Rollout};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::fake_apiserver::{self, CrdSet, FakeApiServer, RequestPattern};
use crate::harness::{self, Answer, FakePrometheus};

pub const WAIT: Duration = Duration::from_secs(40);

/// How long the simulated ReplicaSet controller takes to make new pods available.
pub const POD_START: Duration = Duration::from_millis(200);

pub fn config() -> canaryd::controller::Config {
    canaryd::controller::Config {
        rollouts: true,
        ..harness::config()
    }
}

/// `web`: 5 replicas, canary and stable Services, `setWeight: 20, pause: {duration: PAUSE}, analysis
/// (success-rate), setWeight: 60`.
pub fn rollout(image: &str, pause: &str) -> Rollout {
    with_steps(
        image,
        json!([
            {"setWeight": 20},
            {"pause": {"duration": pause}},
            {"analysis": {"templates": [{"templateName": "success-rate"}]}},
            {"setWeight": 60},
        ]),
    )
}

/// `web` with other `steps`.
pub fn with_steps(image: &str, steps: serde_json::Value) -> Rollout {
    named("web", 5, image, steps)
}

/// The Rollout `name` of `replicas` pods labelled `app: NAME`, with the Services `NAME-canary` and
/// `NAME-stable`.
pub fn named(name: &str, replicas: i32, image: &str, steps: serde_json::Value) -> Rollout {
    super::object(
        "default",
        name,
        replicas,
        image,
        json!({
            "canaryService": format!("{name}-canary"),
            "stableService": format!("{name}-stable"),
            "steps": steps,
        }),
    )
}

/// `rollout` with `spec.strategy.canary.trafficRouting` set to `traffic_routing`.
pub fn routed_through(rollout: Rollout, traffic_routing: serde_json::Value) -> Rollout {
    let mut value = serde_json::to_value(&rollout).expect("a Rollout serialises");
    value["spec"]["strategy"]["canary"]["trafficRouting"] = traffic_routing;
    serde_json::from_value(value).expect("a routed Rollout")
}

pub fn template(prometheus: &str) -> AnalysisTemplate {
    serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisTemplate",
        "metadata": {"name": "success-rate", "namespace": "default"},
        "spec": {"metrics": [{
            "name": "success-rate", "interval": "1s", "count": 2,
            "successCondition": "result >= 0.95",
            "provider": {"prometheus": {"address": prometheus, "query": "sum(rate(x[1m]))"}},
        }]},
    }))
    .expect("an AnalysisTemplate")
}

pub async fn create_service(client: &kube::Client, name: &str) {
    create_service_of(client, name, "web").await;
}

/// The Service `name` selecting the pods labelled `app: APP`.
pub async fn create_service_of(client: &kube::Client, name: &str, app: &str) {
    let api: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": name}, "spec": {"selector": {"app": app}},
    }))
    .expect("a Service");
    api.create(&PostParams::default(), &svc)
        .await
        .expect("the Service is created");
}

pub async fn create_template(client: &kube::Client, prom: &FakePrometheus) {
    let api: Api<AnalysisTemplate> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &template(&prom.uri()))
        .await
        .expect("the template is created");
}

pub async fn create_rollout(client: &kube::Client, rollout: &Rollout) {
    let api: Api<Rollout> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), rollout)
        .await
        .expect("the Rollout is created");
}

/// A cluster with the Services, the template and `rollout("web:1", pause)`, and a ReplicaSet controller.
pub async fn deployed(crds: CrdSet, answer: Answer, pause: &str) -> Deployed {
    deployed_with(crds, answer, &rollout("web:1", pause)).await
}

pub type Deployed = (
    FakeApiServer,
    kube::Client,
    FakePrometheus,
    fake_apiserver::ReplicaSetController,
);

/// A cluster with the Services, the template and `rollout`, and a ReplicaSet controller.
pub async fn deployed_with(crds: CrdSet, answer: Answer, rollout: &Rollout) -> Deployed {
    let (server, client, prom) = harness::cluster(crds, answer).await;
    let controller = server.replica_set_controller(POD_START);
    create_service(&client, "web-canary").await;
    create_service(&client, "web-stable").await;
    create_template(&client, &prom).await;
    create_rollout(&client, rollout).await;
    (server, client, prom, controller)
}

pub fn status(server: &FakeApiServer) -> RolloutStatus {
    server
        .get::<Rollout>("default", "web")
        .and_then(|r| r.status)
        .unwrap_or_default()
}

/// Waits until the Rollout's status satisfies `check`; returns it.
pub async fn until(
    server: &FakeApiServer,
    what: &str,
    check: impl Fn(&RolloutStatus) -> bool,
) -> RolloutStatus {
    let seen = || format!("; the Rollout's status instead: {:?}", status(server));
    harness::eventually_explained(
        WAIT,
        what,
        || async {
            let s = status(server);
            check(&s).then_some(s)
        },
        seen,
    )
    .await
}

/// [`until`] for a daemon on the manual `clock`, which is moved from one of the daemon's wake-ups to the next
/// meanwhile ([`harness::run_clock_until`]).
pub async fn until_on(
    server: &FakeApiServer,
    clock: &canaryd::time::Clock,
    what: &str,
    check: impl Fn(&RolloutStatus) -> bool,
) -> RolloutStatus {
    harness::run_clock_until(server, clock, what, || {
        let s = status(server);
        check(&s).then_some(s)
    })
    .await
}

pub fn healthy_at(s: &RolloutStatus, hash: Option<&str>) -> bool {
    s.phase == "Healthy" && !s.stable_rs.is_empty() && hash.is_none_or(|h| s.stable_rs == h)
}

pub fn replica_sets(server: &FakeApiServer) -> Vec<ReplicaSet> {
    server.list::<ReplicaSet>("default")
}

/// spec.replicas of the ReplicaSet running `hash`.
pub fn replicas_of(server: &FakeApiServer, hash: &str) -> Option<i32> {
    server
        .get::<ReplicaSet>("default", &format!("web-{hash}"))
        .and_then(|rs| rs.spec)
        .and_then(|s| s.replicas)
}

pub fn condition(s: &RolloutStatus, type_: &str) -> (String, String, String) {
    s.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
        .unwrap_or_default()
}

/// The pod-template hash the Service `name` selects; empty when it selects none.
pub fn service_hash(server: &FakeApiServer, name: &str) -> String {
    server
        .get::<Service>("default", name)
        .map(|s| super::selector_hash(&s))
        .unwrap_or_default()
}

/// The Events of one `reason`, as their notes each with how often it was recorded (a repeat within the
/// series window counts on the first, as client-go's recorder does), in the order they were made.
pub async fn events_of_reason(client: &kube::Client, reason: &str) -> Vec<(String, i32)> {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    let mut told = api
        .list(&ListParams::default())
        .await
        .expect("events")
        .items;
    told.retain(|e| e.reason.as_deref() == Some(reason));
    // Named `<rollout>.<hex nanoseconds>`, so names sort in the order the Events were made.
    told.sort_by_key(|e| e.metadata.name.clone());
    told.into_iter()
        .map(|e| (e.note.unwrap_or_default(), e.series.map_or(1, |s| s.count)))
        .collect()
}

/// Waits until the Events of `reason` are `wanted` (they are published after the write a test saw), for at
/// most `within`; on a timeout compares them.
#[allow(clippy::disallowed_methods)] // Not the Clock: the test waits for the daemon on real time.
pub async fn until_events_of_reason(
    client: &kube::Client,
    reason: &str,
    wanted: Vec<(String, i32)>,
    within: std::time::Duration,
) {
    let deadline = std::time::Instant::now() + within;
    while events_of_reason(client, reason).await != wanted && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(events_of_reason(client, reason).await, wanted);
}

/// The Rollout's Events as (reason, note), in the order they were made.
pub async fn events(client: &kube::Client) -> Vec<(String, String)> {
    timed_events(client)
        .await
        .into_iter()
        .map(|(reason, note, _)| (reason, note))
        .collect()
}

/// The Rollout's Events as (reason, note, eventTime), in the order they were made.
pub async fn timed_events(client: &kube::Client) -> Vec<(String, String, Option<jiff::Timestamp>)> {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    let mut events = api
        .list(&ListParams::default())
        .await
        .expect("events list")
        .items;
    events.retain(|e| e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Rollout"));
    // Named `<rollout>.<hex nanoseconds>`, so names sort in the order the Events were made.
    events.sort_by_key(|e| e.metadata.name.clone());
    events
        .into_iter()
        .map(|e| {
            (
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
                e.event_time.map(|t| t.0),
            )
        })
        .collect()
}

pub async fn set_image(client: &kube::Client, image: &str) {
    set_image_of(client, "web", image, &PatchParams::default()).await;
}

/// Changes the image of the Rollout `name`, as its owner would, with `params` (a field manager names who).
pub async fn set_image_of(client: &kube::Client, name: &str, image: &str, params: &PatchParams) {
    let api: Api<Rollout> = Api::namespaced(client.clone(), "default");
    let patch =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": image}]}}}});
    api.patch(name, params, &Patch::Merge(&patch))
        .await
        .expect("the template is changed");
}

/// POSTs that created a ReplicaSet or an AnalysisRun (a repeated create would be refused as existing, but
/// would still have been sent).
pub fn creates(server: &FakeApiServer) -> (usize, usize) {
    (
        server.request_count(&RequestPattern::new("POST", "/replicasets")),
        server.request_count(&RequestPattern::new("POST", "/analysisruns")),
    )
}

/// A merge patch of the Rollout's status, as kubectl-argo-rollouts sends for abort, retry and promote.
pub async fn patch_status(client: &kube::Client, patch: serde_json::Value) {
    let api: Api<Rollout> = Api::namespaced(client.clone(), "default");
    api.patch_status("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the Rollout's status is patched");
}

/// The Events Argo Rollouts writes for the example Rollout (5 replicas; steps setWeight 20, pause, analysis,
/// setWeight 60) from the success of its step analysis `run` on: the scaling to 60 %, the promotion, the
/// stable Service switched from `old` to `new`. Each as (reason, message).
pub fn events_after_step_analysis(old: &str, new: &str, run: &str) -> Vec<(String, String)> {
    let scaled = |direction: &str, hash: &str, revision: u8, from: u8, to: u8| {
        (
            "ScalingReplicaSet",
            format!(
                "Scaled {direction} ReplicaSet web-{hash} (revision {revision}) from {from} to {to}"
            ),
        )
    };
    [
        (
            "AnalysisRunSuccessful",
            format!("Step Analysis Run '{run}' Status New: 'Successful' Previous: 'Running'"),
        ),
        (
            "RolloutStepCompleted",
            "Rollout step 3/4 completed (analysis)".to_string(),
        ),
        scaled("down", old, 1, 4, 3),
        scaled("up", new, 2, 1, 3),
        scaled("down", old, 1, 3, 2),
        (
            "RolloutStepCompleted",
            "Rollout step 4/4 completed (setWeight: 60)".to_string(),
        ),
        scaled("down", old, 1, 2, 1),
        scaled("up", new, 2, 3, 5),
        scaled("down", old, 1, 1, 0),
        (
            "RolloutCompleted",
            format!("Rollout completed update to revision 2 ({new}): Completed all 4 canary steps"),
        ),
        (
            "SwitchService",
            format!("Switched selector for service 'web-stable' from '{old}' to '{new}'"),
        ),
    ]
    .into_iter()
    .map(|(r, m)| (r.to_string(), m))
    .collect()
}
