//! `canaryd run --rollouts` with header and mirror routes, against the fake API server under both CRD sets:
//! the examples of Argo's docs/features/traffic-management/index.md in one Rollout (its e2e header_route_test
//! and mirror_route_test, `routes: [primary]`). On Istio the VirtualService's `http` list is compared whole at
//! each pause: the routes the steps add sit ahead of `primary` in `managedRoutes` order, a step with only the
//! name removes its route, and promotion or an abort removes every route the Rollout added while `primary`
//! (the user's) is only ever re-weighted and the user's other route is never touched. On the Gateway API
//! plugin the HTTPRoute's `rules` likewise: the header rule appended, the mirror step doing nothing, the
//! step with only the name removing the rule, and promotion or an abort leaving the user's rules.
//! On Istio each route write is told in the Event Argo's router records of it (set headerRoute, set
//! mirrorRoute, removed all managed routes, set to desiredWeight), in order.

#![allow(clippy::disallowed_methods)] // Not the Clock: the daemon runs against real sockets and is timed on real time.

use canaryd::api::Rollout;
use canaryd::routers::objects::{HttpRoute, VirtualService};
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

fn rollout(router: Router) -> Rollout {
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
        router.config(),
    )
}

/// The HTTPRoute's rule splitting traffic between the stable and the canary.
fn weighted_rule(canary: i64) -> Value {
    json!({"backendRefs": [{"name": "web-stable", "port": 80, "weight": 100 - canary},
                           {"name": "web-canary", "port": 80, "weight": canary}]})
}

/// The plugin's rule for `header_route()`'s headers: the weighted rule's (no) matches with them added.
fn header_rule() -> Value {
    json!({"name": "set-header-1",
           "matches": [{"headers": [
               {"type": "Exact", "name": "Custom-Header1", "value": "Mozilla"},
               {"type": "RegularExpression", "name": "Custom-Header2", "value": "Mozilla.*"},
               {"type": "RegularExpression", "name": "Custom-Header3", "value": "Mozilla(.*)"}]}],
           "backendRefs": [{"group": "", "kind": "Service", "name": "web-canary", "port": 80}]})
}

/// A rule of the user's own, to another Service: the plugin leaves it as it is.
fn users_rule() -> Value {
    json!({"name": "docs", "matches": [{"path": {"type": "PathPrefix", "value": "/docs"}}],
           "backendRefs": [{"name": "docs", "port": 80}]})
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Router {
    Istio,
    GatewayApi,
}

/// What the router object holds at each point of the update.
enum Stage {
    /// Before the update or after it, all traffic to the stable.
    Idle,
    /// Paused after the header and mirror steps at weight 20.
    BothRoutes,
    /// Paused after the header route's removal at weight 20.
    HeaderRemoved,
}

impl Router {
    fn config(self) -> Value {
        let managed = json!([{"name": "set-header-1"}, {"name": "mirror-route"}]);
        match self {
            Router::Istio => json!({"managedRoutes": managed,
                "istio": {"virtualService": {"name": "web-vsvc", "routes": ["primary"]}}}),
            Router::GatewayApi => json!({"managedRoutes": managed,
                "plugins": {"argoproj-labs/gatewayAPI": {"httpRoute": "web"}}}),
        }
    }

    /// The router object with the user's own route besides the weighted one.
    fn install(self, server: &FakeApiServer) {
        match self {
            Router::Istio => {
                let mut vs = serde_json::to_value(router_objects::virtual_service(
                    "default", "web-vsvc", "web",
                ))
                .expect("a VirtualService");
                vs["spec"]["http"] = http(&[primary(0)]);
                server
                    .put(&serde_json::from_value::<VirtualService>(vs).expect("a VirtualService"));
            }
            Router::GatewayApi => {
                let mut route = serde_json::to_value(router_objects::http_route("default"))
                    .expect("an HTTPRoute");
                route["spec"]["rules"] = json!([weighted_rule(0), users_rule()]);
                server.put(&serde_json::from_value::<HttpRoute>(route).expect("an HTTPRoute"));
            }
        }
    }

    /// The routes the object holds: the VirtualService's `http`, the HTTPRoute's `rules`.
    fn routes(self, server: &FakeApiServer) -> Value {
        let routes = match self {
            Router::Istio => server
                .get_json::<VirtualService>("default", "web-vsvc")
                .map(|vs| vs["spec"]["http"].clone()),
            Router::GatewayApi => server
                .get_json::<HttpRoute>("default", "web")
                .map(|r| r["spec"]["rules"].clone()),
        };
        routes.unwrap_or_default()
    }

    fn expected(self, stage: Stage) -> Value {
        match (self, stage) {
            (Router::Istio, Stage::Idle) => http(&[primary(0)]),
            (Router::Istio, Stage::BothRoutes) => {
                http(&[header_route(), mirror_route(20), primary(20)])
            }
            (Router::Istio, Stage::HeaderRemoved) => http(&[mirror_route(20), primary(20)]),
            (Router::GatewayApi, Stage::Idle) => json!([weighted_rule(0), users_rule()]),
            // The plugin's SetMirrorRoute does nothing.
            (Router::GatewayApi, Stage::BothRoutes) => {
                json!([weighted_rule(20), users_rule(), header_rule()])
            }
            (Router::GatewayApi, Stage::HeaderRemoved) => json!([weighted_rule(20), users_rule()]),
        }
    }
}

/// Waits until the router object's routes are `router`'s at `stage`; on a timeout says what they were.
async fn until_routes(server: &FakeApiServer, router: Router, what: &str, stage: Stage) {
    let wanted = router.expected(stage);
    let deadline = std::time::Instant::now() + WAIT;
    while router.routes(server) != wanted {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}: the routes are {:#}, expected {wanted:#}",
            router.routes(server)
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// `rollout()` updated to `web:2` behind `router`, paused after the header and mirror steps.
struct Paused {
    server: FakeApiServer,
    client: kube::Client,
    daemon: harness::Running,
    router: Router,
    /// The canary's pod hash.
    canary: String,
    _prometheus: harness::FakePrometheus,
    _replica_sets: fake_apiserver::ReplicaSetController,
}

async fn paused_with_both_routes(router: Router, crds: CrdSet) -> Paused {
    let (server, client, _prometheus, _replica_sets) =
        deployed_with(crds, Answer::Scalar(1.0), &rollout(router)).await;
    router.install(&server);
    let daemon = harness::spawn(client.clone(), config()).await;
    until(&server, "the first deploy to be Healthy", |s| {
        healthy_at(s, None) && s.available_replicas == 5
    })
    .await;
    let first = "no route added on the first deploy";
    until_routes(&server, router, first, Stage::Idle).await;

    set_image(&client, "web:2").await;
    let s = until(&server, "the pause after the route steps", |s| {
        s.current_step_index == Some(3) && !s.pause_conditions.is_empty()
    })
    .await;
    let added = "the routes the steps add, in managedRoutes order ahead of primary on Istio";
    until_routes(&server, router, added, Stage::BothRoutes).await;
    Paused {
        server,
        client,
        daemon,
        router,
        canary: s.current_pod_hash,
        _prometheus,
        _replica_sets,
    }
}

async fn routes_come_and_go_with_the_steps_and_go_on_promotion(router: Router, crds: CrdSet) {
    let p = paused_with_both_routes(router, crds).await;
    let (server, client, canary) = (&p.server, &p.client, &p.canary);
    patch_status(client, json!({"status": {"pauseConditions": null}})).await;
    until(server, "the pause after the header route's removal", |s| {
        s.current_step_index == Some(5) && !s.pause_conditions.is_empty()
    })
    .await;
    let removed = "the header route removed (on Istio the mirror route kept)";
    until_routes(server, p.router, removed, Stage::HeaderRemoved).await;

    patch_status(client, json!({"status": {"pauseConditions": null}})).await;
    until(server, "the promotion", |s| healthy_at(s, Some(canary))).await;
    let promoted = "every managed route removed once promoted";
    until_routes(server, p.router, promoted, Stage::Idle).await;
    if p.router == Router::Istio {
        until_told(client, told_on_promotion()).await;
    }
    p.daemon.stop().await;
}

/// Waits until the Istio router's Events are `wanted` (they are published after the write the test saw); on a
/// timeout compares them.
async fn until_told(client: &kube::Client, wanted: Vec<(String, i32)>) {
    until_events_of_reason(client, "Updated VirtualService", wanted, WAIT).await;
}

/// Argo's Istio router records each route write of the update in its own Event (its istio.go SetWeight,
/// SetHeaderRoute, SetMirrorRoute, RemoveManagedRoutes), once per write: the weight, the header and mirror
/// routes added, the header route removed (a repeat of the first header Event), the weight at the end of the
/// steps, every managed route removed on promotion and the weight back to the stable.
fn told_on_promotion() -> Vec<(String, i32)> {
    [
        ("set to desiredWeight '20'", 1),
        ("set headerRoute 'set-header-1'", 2),
        ("set mirrorRoute 'mirror-route'", 1),
        ("set to desiredWeight '100'", 1),
        ("removed all managed routes.", 1),
        ("set to desiredWeight '0'", 1),
    ]
    .iter()
    .map(|(what, count)| (format!("VirtualService `web-vsvc` {what}"), *count))
    .collect()
}

async fn an_abort_removes_the_routes(router: Router, crds: CrdSet) {
    let p = paused_with_both_routes(router, crds).await;
    let (server, client) = (&p.server, &p.client);
    patch_status(client, json!({"status": {"abort": true}})).await;
    until(server, "the abort", |s| s.phase == "Degraded").await;
    let aborted = "every managed route removed on the abort, all traffic to the stable";
    until_routes(server, p.router, aborted, Stage::Idle).await;
    if p.router == Router::Istio {
        // The routes and the weight leave in one write, told as Argo's RemoveManagedRoutes, then SetWeight.
        let told: Vec<(String, i32)> = [
            "set to desiredWeight '20'",
            "set headerRoute 'set-header-1'",
            "set mirrorRoute 'mirror-route'",
            "removed all managed routes.",
            "set to desiredWeight '0'",
        ]
        .iter()
        .map(|what| (format!("VirtualService `web-vsvc` {what}"), 1))
        .collect();
        until_told(client, told).await;
    }
    p.daemon.stop().await;
}

#[tokio::test]
async fn header_and_mirror_routes_follow_the_steps_under_argos_crds() {
    routes_come_and_go_with_the_steps_and_go_on_promotion(Router::Istio, CrdSet::Argo).await;
}

#[tokio::test]
async fn header_and_mirror_routes_follow_the_steps_under_canaryds_crds() {
    routes_come_and_go_with_the_steps_and_go_on_promotion(Router::Istio, CrdSet::Canaryd).await;
}

#[tokio::test]
async fn an_abort_removes_the_header_and_mirror_routes_under_argos_crds() {
    an_abort_removes_the_routes(Router::Istio, CrdSet::Argo).await;
}

#[tokio::test]
async fn an_abort_removes_the_header_and_mirror_routes_under_canaryds_crds() {
    an_abort_removes_the_routes(Router::Istio, CrdSet::Canaryd).await;
}

#[tokio::test]
async fn gateway_api_header_rules_follow_the_steps_and_go_on_promotion() {
    routes_come_and_go_with_the_steps_and_go_on_promotion(Router::GatewayApi, CrdSet::Argo).await;
}

#[tokio::test]
async fn an_abort_removes_the_gateway_api_header_rules() {
    an_abort_removes_the_routes(Router::GatewayApi, CrdSet::Argo).await;
}
