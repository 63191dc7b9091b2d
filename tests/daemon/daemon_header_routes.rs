//! `canaryd run --rollouts` with header and mirror routes on Istio, against the fake API server under both
//! CRD sets: the examples of Argo's docs/features/traffic-management/index.md in one Rollout (its e2e
//! header_route_test and mirror_route_test, `routes: [primary]`). The VirtualService's `http` list is
//! compared whole at each pause: the routes the steps add sit ahead of `primary` in `managedRoutes` order,
//! a step with only the name removes its route, and promotion or an abort removes every route the Rollout
//! added while `primary` (the user's) is only ever re-weighted and the user's other route is never touched.

#![allow(clippy::disallowed_methods)] // Not the Clock: the daemon runs against real sockets and is timed on real time.

use canaryd::api::Rollout;
use canaryd::routers::objects::VirtualService;
use canaryd_testkit::fake_apiserver::{self, CrdSet, FakeApiServer};
use canaryd_testkit::harness::{self, Answer};
use canaryd_testkit::rollout::cluster::*;
use canaryd_testkit::router_objects;
use serde_json::{Value, json};

fn header_route() -> Value {
    json!({"name": "set-header-1",
           "match": [{"headers": {"Custom-Header1": {"exact": "Mozilla"}}},
                     {"headers": {"Custom-Header2": {"prefix": "Mozilla"}}},
                     {"headers": {"Custom-Header3": {"regex": "Mozilla(.*)"}}}],
           "route": [{"destination": {"host": "web-canary"}, "weight": 100}]})
}

/// The stable and canary destinations at `canary`% to the canary.
fn split(canary: i64) -> Value {
    json!([{"destination": {"host": "web-stable"}, "weight": 100 - canary},
           {"destination": {"host": "web-canary"}, "weight": canary}])
}

fn mirror_route(canary: i64) -> Value {
    json!({"name": "mirror-route",
           "match": [{"method": {"exact": "GET"}, "uri": {"prefix": "/"}}],
           "route": split(canary),
           "mirror": {"host": "web-canary"},
           "mirrorPercentage": {"value": 35}})
}

fn primary(canary: i64) -> Value {
    json!({"name": "primary", "route": split(canary)})
}

/// A route of the user's own, not named in the Rollout: Argo's routers leave it as it is, after the others.
fn users_route() -> Value {
    json!({"name": "debug", "match": [{"headers": {"x-debug": {"exact": "1"}}}],
           "route": [{"destination": {"host": "web-stable"}}]})
}

/// The VirtualService's `http` list: `routes`, then the user's own route.
fn http(routes: &[Value]) -> Value {
    routes.iter().cloned().chain([users_route()]).collect()
}

fn rollout() -> Rollout {
    let header = json!({"setHeaderRoute": {"name": "set-header-1", "match": [
        {"headerName": "Custom-Header1", "headerValue": {"exact": "Mozilla"}},
        {"headerName": "Custom-Header2", "headerValue": {"prefix": "Mozilla"}},
        {"headerName": "Custom-Header3", "headerValue": {"regex": "Mozilla(.*)"}}
    ]}});
    let mirror = json!({"setMirrorRoute": {"name": "mirror-route", "percentage": 35,
        "match": [{"method": {"exact": "GET"}, "path": {"prefix": "/"}}]}});
    routed_through(
        with_steps(
            "web:1",
            json!([{"setWeight": 20}, header, mirror, {"pause": {}},
                   {"setHeaderRoute": {"name": "set-header-1"}}, {"pause": {}}]),
        ),
        json!({
            "managedRoutes": [{"name": "set-header-1"}, {"name": "mirror-route"}],
            "istio": {"virtualService": {"name": "web-vsvc", "routes": ["primary"]}}
        }),
    )
}

fn http_routes(server: &FakeApiServer) -> Value {
    server
        .get_json::<VirtualService>("default", "web-vsvc")
        .map(|vs| vs["spec"]["http"].clone())
        .unwrap_or_default()
}

/// Waits until the VirtualService's `http` list is `wanted`; on a timeout says what it was.
async fn until_routes(server: &FakeApiServer, what: &str, wanted: Value) {
    let deadline = std::time::Instant::now() + WAIT;
    while http_routes(server) != wanted {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}: the VirtualService's http is {:#}",
            http_routes(server)
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// `rollout()` updated to `web:2` behind the docs' VirtualService, paused after the header and mirror steps.
struct Paused {
    server: FakeApiServer,
    client: kube::Client,
    daemon: harness::Running,
    /// The canary's pod hash.
    canary: String,
    _prometheus: harness::FakePrometheus,
    _replica_sets: fake_apiserver::ReplicaSetController,
}

async fn paused_with_both_routes(crds: CrdSet) -> Paused {
    let (server, client, _prometheus, _replica_sets) =
        deployed_with(crds, Answer::Scalar(1.0), &rollout()).await;
    let mut vs = serde_json::to_value(router_objects::virtual_service(
        "default", "web-vsvc", "web",
    ))
    .expect("a VirtualService");
    vs["spec"]["http"] = http(&[primary(0)]);
    server.put(&serde_json::from_value::<VirtualService>(vs).expect("a VirtualService"));
    let daemon = harness::spawn(client.clone(), config()).await;
    until(&server, "the first deploy to be Healthy", |s| {
        healthy_at(s, None) && s.available_replicas == 5
    })
    .await;
    until_routes(
        &server,
        "no route added on the first deploy",
        http(&[primary(0)]),
    )
    .await;

    set_image(&client, "web:2").await;
    let s = until(&server, "the pause after the route steps", |s| {
        s.current_step_index == Some(3) && !s.pause_conditions.is_empty()
    })
    .await;
    until_routes(
        &server,
        "the header and mirror routes ahead of primary, in managedRoutes order",
        http(&[header_route(), mirror_route(20), primary(20)]),
    )
    .await;
    Paused {
        server,
        client,
        daemon,
        canary: s.current_pod_hash,
        _prometheus,
        _replica_sets,
    }
}

async fn routes_come_and_go_with_the_steps_and_go_on_promotion(crds: CrdSet) {
    let p = paused_with_both_routes(crds).await;
    let (server, client, canary) = (&p.server, &p.client, &p.canary);
    patch_status(client, json!({"status": {"pauseConditions": null}})).await;
    until(server, "the pause after the header route's removal", |s| {
        s.current_step_index == Some(5) && !s.pause_conditions.is_empty()
    })
    .await;
    until_routes(
        server,
        "the header route removed, the mirror route kept",
        http(&[mirror_route(20), primary(20)]),
    )
    .await;

    patch_status(client, json!({"status": {"pauseConditions": null}})).await;
    until(server, "the promotion", |s| healthy_at(s, Some(canary))).await;
    until_routes(
        server,
        "every managed route removed once promoted",
        http(&[primary(0)]),
    )
    .await;
    p.daemon.stop().await;
}

async fn an_abort_removes_the_routes(crds: CrdSet) {
    let p = paused_with_both_routes(crds).await;
    let (server, client) = (&p.server, &p.client);
    patch_status(client, json!({"status": {"abort": true}})).await;
    until(server, "the abort", |s| s.phase == "Degraded").await;
    until_routes(
        server,
        "every managed route removed on the abort, all traffic to the stable",
        http(&[primary(0)]),
    )
    .await;
    p.daemon.stop().await;
}

#[tokio::test]
async fn header_and_mirror_routes_follow_the_steps_under_argos_crds() {
    routes_come_and_go_with_the_steps_and_go_on_promotion(CrdSet::Argo).await;
}

#[tokio::test]
async fn header_and_mirror_routes_follow_the_steps_under_canaryds_crds() {
    routes_come_and_go_with_the_steps_and_go_on_promotion(CrdSet::Canaryd).await;
}

#[tokio::test]
async fn an_abort_removes_the_header_and_mirror_routes_under_argos_crds() {
    an_abort_removes_the_routes(CrdSet::Argo).await;
}

#[tokio::test]
async fn an_abort_removes_the_header_and_mirror_routes_under_canaryds_crds() {
    an_abort_removes_the_routes(CrdSet::Canaryd).await;
}
