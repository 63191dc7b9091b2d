//! `canaryd run --rollouts` with an ALB header route, against the fake API server under both CRD sets: the
//! Ingress of Argo's docs/features/traffic-management/alb.md, and its header-routing example
//! (traffic-management/index.md) with the exact match ALB takes. The Ingress is compared whole at each pause:
//! the step adds the route's conditions and actions annotations (recorded in the bookkeeping annotation) and
//! its `/*` path at the head of the rule, the weights move around them, and promotion or an abort removes all
//! of it while the user's own annotation and path are never touched. Each write is told in the Event Argo's
//! ALB router records of it (`PatchingALBIngress`), in order.

#![allow(clippy::disallowed_methods)] // Not the Clock: the daemon runs against real sockets and is timed on real time.

use canaryd::api::Rollout;
use canaryd_testkit::fake_apiserver::{self, CrdSet, FakeApiServer};
use canaryd_testkit::harness::{self, Answer};
use canaryd_testkit::rollout::cluster::*;
use canaryd_testkit::router_objects;
use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{Value, json};

const ACTION: &str = "alb.ingress.kubernetes.io/actions.web-stable";
const ROUTE_ACTION: &str = "alb.ingress.kubernetes.io/actions.set-header-1";
const ROUTE_CONDITIONS: &str = "alb.ingress.kubernetes.io/conditions.set-header-1";
const MANAGED: &str = "rollouts.argoproj.io/managed-alb-annotations";

fn rollout() -> Rollout {
    let header = json!({"setHeaderRoute": {"name": "set-header-1", "match": [
        {"headerName": "Custom-Header1", "headerValue": {"exact": "Mozilla"}}
    ]}});
    routed_through(
        with_steps(
            "web:1",
            json!([{"setWeight": 20}, header, {"pause": {}}, {"setWeight": 50}, {"pause": {}}]),
        ),
        json!({"managedRoutes": [{"name": "set-header-1"}],
               "alb": {"ingress": "web", "servicePort": 80}}),
    )
}

/// The user's own path, after the one to the stable Service: never touched.
fn docs_path() -> Value {
    json!({"path": "/docs", "pathType": "Prefix",
           "backend": {"service": {"name": "docs", "port": {"number": 80}}}})
}

/// The Ingress of Argo's docs (`router_objects::alb_ingress`) with the user's own path besides.
fn install(server: &FakeApiServer) {
    let mut ingress =
        serde_json::to_value(router_objects::alb_ingress("default", "web")).expect("an Ingress");
    ingress["spec"]["rules"][0]["http"]["paths"]
        .as_array_mut()
        .expect("paths")
        .push(docs_path());
    server.put(&serde_json::from_value::<Ingress>(ingress).expect("an Ingress"));
}

/// What the Ingress holds: with the header route or not, the canary at `canary`.
fn expected(header_route: bool, canary: i64) -> Value {
    let action = format!(
        r#"{{"Type":"forward","ForwardConfig":{{"TargetGroups":[{{"ServiceName":"web-canary","ServicePort":"80","Weight":{canary}}},{{"ServiceName":"web-stable","ServicePort":"80","Weight":{}}}]}}}}"#,
        100 - canary
    );
    let stable_path = json!({"path": "/", "pathType": "Prefix",
        "backend": {"service": {"name": "web-stable", "port": {"name": "use-annotation"}}}});
    let mut annotations = json!({
        "alb.ingress.kubernetes.io/scheme": "internet-facing",
        ACTION: action,
        MANAGED: format!(r#"{{"web":["{ACTION}"]}}"#),
    });
    let mut paths = vec![stable_path, docs_path()];
    if header_route {
        annotations[ROUTE_ACTION] = json!(
            r#"{"Type":"forward","ForwardConfig":{"TargetGroups":[{"ServiceName":"web-canary","ServicePort":"80","Weight":100}]}}"#
        );
        annotations[ROUTE_CONDITIONS] = json!(
            r#"[{"field":"http-header","httpHeaderConfig":{"httpHeaderName":"Custom-Header1","values":["Mozilla"]}}]"#
        );
        annotations[MANAGED] = json!(format!(
            r#"{{"web":["{ACTION}","{ROUTE_ACTION}","{ROUTE_CONDITIONS}"]}}"#
        ));
        let route_path = json!({"path": "/*", "pathType": "ImplementationSpecific",
            "backend": {"service": {"name": "set-header-1", "port": {"name": "use-annotation"}}}});
        paths.insert(0, route_path);
    }
    json!({"annotations": annotations,
           "spec": {"ingressClassName": "alb", "rules": [{"http": {"paths": paths}}]}})
}

/// The Ingress's annotations and spec, as `expected` writes them.
fn written(server: &FakeApiServer) -> Value {
    let ingress = server
        .get_json::<Ingress>("default", "web")
        .unwrap_or_default();
    json!({"annotations": ingress["metadata"]["annotations"], "spec": ingress["spec"]})
}

/// Waits until the Ingress is `expected(header_route, canary)`; on a timeout says what it was.
async fn until_ingress(server: &FakeApiServer, what: &str, header_route: bool, canary: i64) {
    let wanted = expected(header_route, canary);
    let deadline = std::time::Instant::now() + WAIT;
    while written(server) != wanted {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}: the Ingress is {:#}, expected {wanted:#}",
            written(server)
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// `rollout()` updated to `web:2`, paused after the header step at weight 20.
struct Paused {
    server: FakeApiServer,
    client: kube::Client,
    daemon: harness::Running,
    /// The canary's pod hash.
    canary: String,
    _prometheus: harness::FakePrometheus,
    _replica_sets: fake_apiserver::ReplicaSetController,
}

async fn paused_with_the_header_route(crds: CrdSet) -> Paused {
    let (server, client, _prometheus, _replica_sets) =
        deployed_with(crds, Answer::Scalar(1.0), &rollout()).await;
    install(&server);
    let daemon = harness::spawn(client.clone(), config()).await;
    until(&server, "the first deploy to be Healthy", |s| {
        healthy_at(s, None) && s.available_replicas == 5
    })
    .await;
    until_ingress(&server, "no header route on the first deploy", false, 0).await;

    set_image(&client, "web:2").await;
    let s = until(&server, "the pause after the header step", |s| {
        s.current_step_index == Some(2) && !s.pause_conditions.is_empty()
    })
    .await;
    let added = "the header route's annotations and path, the canary at 20";
    until_ingress(&server, added, true, 20).await;
    Paused {
        server,
        client,
        daemon,
        canary: s.current_pod_hash,
        _prometheus,
        _replica_sets,
    }
}

/// Waits until the ALB router's Events are `wanted` (each `Updating Ingress `web` <what>` with how often it
/// was recorded: a repeat within the series window counts on the first, as client-go's recorder does); on a
/// timeout compares them.
async fn until_told(client: &kube::Client, wanted: &[(&str, i32)]) {
    let wanted: Vec<(String, i32)> = wanted
        .iter()
        .map(|(what, count)| (format!("Updating Ingress `web` {what}"), *count))
        .collect();
    until_events_of_reason(client, "PatchingALBIngress", wanted, WAIT).await;
}

/// Argo's ALB router records each write in its own Event: on the first deploy the managed routes removed
/// (which writes the bookkeeping annotation on an Ingress without one) and the weight; then the update's
/// weight and header route, and at the end the managed routes removed and the weight back to the stable
/// again (both counted on the first deploy's Events).
fn told(between: &[(&'static str, i32)]) -> Vec<(&'static str, i32)> {
    [
        [
            ("removing managed routes", 2),
            ("to desiredWeight '0'", 2),
            ("to desiredWeight '20'", 1),
            ("to headerRoute 'set-header-1'", 1),
        ]
        .as_slice(),
        between,
    ]
    .concat()
}

async fn the_header_route_follows_the_steps_and_goes_on_promotion(crds: CrdSet) {
    let p = paused_with_the_header_route(crds).await;
    let (server, client) = (&p.server, &p.client);
    patch_status(client, json!({"status": {"pauseConditions": null}})).await;
    until(server, "the pause after setWeight 50", |s| {
        s.current_step_index == Some(4) && !s.pause_conditions.is_empty()
    })
    .await;
    until_ingress(server, "the header route kept at 50", true, 50).await;

    patch_status(client, json!({"status": {"pauseConditions": null}})).await;
    until(server, "the promotion", |s| healthy_at(s, Some(&p.canary))).await;
    let promoted = "the header route removed once promoted, all traffic to the new stable";
    until_ingress(server, promoted, false, 0).await;
    let between = [("to desiredWeight '50'", 1), ("to desiredWeight '100'", 1)];
    until_told(client, &told(&between)).await;
    p.daemon.stop().await;
}

async fn an_abort_removes_the_header_route(crds: CrdSet) {
    let p = paused_with_the_header_route(crds).await;
    let (server, client) = (&p.server, &p.client);
    patch_status(client, json!({"status": {"abort": true}})).await;
    until(server, "the abort", |s| s.phase == "Degraded").await;
    let aborted = "the header route removed on the abort, all traffic to the stable";
    until_ingress(server, aborted, false, 0).await;
    // The route and the weight leave in one write, told as Argo's RemoveManagedRoutes, then SetWeight.
    until_told(client, &told(&[])).await;
    p.daemon.stop().await;
}

canaryd_testkit::with_each_crd_set!(
    the_header_route_follows_the_steps_and_goes_on_promotion,
    an_abort_removes_the_header_route
);
