//! The traffic routers' edge against the fake API server (which admits Istio and Gateway API objects by
//! their published CRDs): weights written once and not again when unchanged, built from the plan's read and a
//! 409 re-read and retried,
//! the NGINX canary Ingress created owned by the Rollout then merge-patched with foreign annotations kept,
//! one controlled by another object refused, a missing VirtualService and a refused write reported naming
//! the object.

#![allow(clippy::disallowed_methods)] // Not the Clock: the fake API server keeps real time.

use canaryd::api::Rollout;
use canaryd::routers::objects::{DestinationRule, HttpRoute, VirtualService};
use canaryd::routers::{Action, ApiRouter, Route, RouterError};
use canaryd_testkit::fake_apiserver::{FakeApiServer, RequestPattern};
use canaryd_testkit::router_objects::{http_route, stable_ingress, virtual_service};
use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{Value, json};

fn rollout(routing: Value) -> Rollout {
    serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": "web", "namespace": "prod", "uid": "rollout-uid"},
        "spec": {"strategy": {"canary": {
            "canaryService": "web-canary", "stableService": "web-stable",
            "trafficRouting": routing
        }}}
    }))
    .unwrap()
}

fn route(weight: i32) -> Route {
    Route {
        weight,
        canary_hash: "new".into(),
        stable_hash: "old".into(),
        managed: Default::default(),
    }
}

fn weights_of(vs: &Value) -> Vec<i64> {
    vs["spec"]["http"][0]["route"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["weight"].as_i64().unwrap_or(0))
        .collect()
}

fn istio() -> Value {
    json!({"istio": {"virtualService": {"name": "web-vsvc"}}})
}

#[tokio::test]
async fn an_istio_weight_is_written_once_and_not_again_when_unchanged() {
    let server = FakeApiServer::start().await;
    server.put(&virtual_service("prod", "web-vsvc", "web"));
    let router = ApiRouter::new(server.client().await);
    let r = rollout(istio());
    let changes = router.apply(&r, &route(10), &[], &[]).await.unwrap();
    assert_eq!(changes.len(), 1);
    assert_eq!(
        changes[0].to_string(),
        "VirtualService prod/web-vsvc updated"
    );
    let stored = server
        .get_json::<VirtualService>("prod", "web-vsvc")
        .unwrap();
    assert_eq!(weights_of(&stored), [90, 10]);
    assert_eq!(
        stored["spec"]["hosts"],
        json!(["web"]),
        "fields the builder does not touch are kept"
    );

    let puts = RequestPattern::new("PUT", "/virtualservices/");
    assert_eq!(server.request_count(&puts), 1);
    assert!(
        router
            .apply(&r, &route(10), &[], &[])
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        server.request_count(&puts),
        1,
        "nothing written when nothing changes"
    );
}

#[tokio::test]
async fn a_conflicting_write_is_read_again_and_retried() {
    let server = FakeApiServer::start().await;
    server.put(&virtual_service("prod", "web-vsvc", "web"));
    server.conflict_next_write::<VirtualService>("prod", "web-vsvc");
    let router = ApiRouter::new(server.client().await);
    router
        .apply(&rollout(istio()), &route(25), &[], &[])
        .await
        .unwrap();
    let stored = server
        .get_json::<VirtualService>("prod", "web-vsvc")
        .unwrap();
    assert_eq!(weights_of(&stored), [75, 25]);
    assert_eq!(
        server.request_count(&RequestPattern::new("GET", "/virtualservices/web-vsvc")),
        2
    );
}

/// The copies `ApiRouter::read` returned for a plan are what `apply` builds from: read again only when the
/// write meets a change made since (409).
#[tokio::test]
async fn the_plans_read_is_written_over_and_read_again_only_when_it_is_stale() {
    let server = FakeApiServer::start().await;
    server.put(&virtual_service("prod", "web-vsvc", "web"));
    let router = ApiRouter::new(server.client().await);
    let r = rollout(istio());
    let gets = RequestPattern::new("GET", "/virtualservices/web-vsvc");
    let read = router.read(&r, |_, _, _| None).await.unwrap();
    let written = router.apply(&r, &route(10), &[], &read).await.unwrap();
    assert_eq!(server.request_count(&gets), 1, "the plan's read alone");
    let stored = server
        .get_json::<VirtualService>("prod", "web-vsvc")
        .unwrap();
    assert_eq!(
        written[0].version.as_deref(),
        stored
            .pointer("/metadata/resourceVersion")
            .and_then(|v| v.as_str()),
        "the version the update was answered with"
    );
    // A copy a watch holds is read instead of the object.
    let cached = router
        .read(&r, |kind, namespace, name| {
            ((kind, namespace, name) == ("VirtualService", "prod", "web-vsvc"))
                .then(|| std::sync::Arc::new(stored.clone()))
        })
        .await
        .unwrap();
    assert_eq!(server.request_count(&gets), 1, "the cached copy");
    assert_eq!(cached[0].object.as_deref(), Some(&stored));
    // That copy is stale now: its write is refused and the object read again.
    router.apply(&r, &route(30), &[], &read).await.unwrap();
    assert_eq!(server.request_count(&gets), 2);
    let stored = server
        .get_json::<VirtualService>("prod", "web-vsvc")
        .unwrap();
    assert_eq!(weights_of(&stored), [70, 30]);
}

#[tokio::test]
async fn a_missing_virtual_service_and_a_refused_write_or_read_name_the_object() {
    let server = FakeApiServer::start().await;
    let router = ApiRouter::new(server.client().await);
    let err = router
        .apply(&rollout(istio()), &route(10), &[], &[])
        .await
        .unwrap_err();
    assert!(matches!(err, RouterError::Missing { .. }), "{err:?}");
    assert_eq!(err.to_string(), "VirtualService prod/web-vsvc not found");

    server.put(&virtual_service("prod", "web-vsvc", "web"));
    for (method, what) in [("PUT", "write"), ("GET", "read")] {
        server.fail_next(RequestPattern::new(method, "/virtualservices/"), 1, 403);
        let err = router
            .apply(&rollout(istio()), &route(10), &[], &[])
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "the API server refused the {what} of VirtualService prod/web-vsvc: injected by the test: Forbidden"
            )
        );
    }
}

#[tokio::test]
async fn subsets_get_the_pod_hashes_and_the_virtual_service_the_weights() {
    let server = FakeApiServer::start().await;
    let vs: VirtualService = serde_json::from_value(json!({
        "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": "web-vsvc", "namespace": "prod"},
        "spec": {"hosts": ["web"], "http": [{"route": [
            {"destination": {"host": "web", "subset": "stable"}, "weight": 100},
            {"destination": {"host": "web", "subset": "canary"}, "weight": 0}
        ]}]}
    }))
    .unwrap();
    server.put(&vs);
    let dr: DestinationRule = serde_json::from_value(json!({
        "apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
        "metadata": {"name": "web-destrule", "namespace": "prod"},
        "spec": {"host": "web", "subsets": [{"name": "canary", "labels": {"app": "web"}},
                                            {"name": "stable", "labels": {"app": "web"}}]}
    }))
    .unwrap();
    server.put(&dr);
    let r = rollout(json!({"istio": {
        "virtualService": {"name": "web-vsvc"},
        "destinationRule": {"name": "web-destrule", "canarySubsetName": "canary", "stableSubsetName": "stable"}
    }}));
    let changes = router_for(&server)
        .await
        .apply(&r, &route(10), &[], &[])
        .await
        .unwrap();
    assert_eq!(changes.len(), 2);
    let dr = server
        .get_json::<DestinationRule>("prod", "web-destrule")
        .unwrap();
    assert_eq!(
        dr["spec"]["subsets"][0]["labels"]["rollouts-pod-template-hash"],
        "new"
    );
    assert_eq!(
        dr["spec"]["subsets"][1]["labels"]["rollouts-pod-template-hash"],
        "old"
    );
    assert_eq!(
        dr["metadata"]["annotations"]["argo-rollouts.argoproj.io/managed-by-rollouts"],
        "web"
    );
    let vs = server
        .get_json::<VirtualService>("prod", "web-vsvc")
        .unwrap();
    assert_eq!(weights_of(&vs), [90, 10]);
}

async fn router_for(server: &FakeApiServer) -> ApiRouter {
    ApiRouter::new(server.client().await)
}

#[tokio::test]
async fn the_nginx_canary_ingress_is_created_owned_by_the_rollout_then_patched_keeping_foreign_annotations()
 {
    let server = FakeApiServer::start().await;
    server.put(&stable_ingress("prod"));
    let router = router_for(&server).await;
    let r = rollout(json!({"nginx": {"stableIngress": "web"}}));
    let changes = router.apply(&r, &route(10), &[], &[]).await.unwrap();
    assert_eq!(changes[0].action, Action::Created);
    let canary = server
        .get_json::<Ingress>("prod", "web-web-canary")
        .unwrap();
    assert_eq!(
        canary["metadata"]["annotations"]["nginx.ingress.kubernetes.io/canary-weight"],
        "10"
    );
    assert_eq!(
        canary["metadata"]["ownerReferences"][0]["uid"],
        "rollout-uid"
    );
    assert_eq!(canary["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(
        canary["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"],
        "web-canary"
    );

    let mut foreign: Ingress = serde_json::from_value(canary).unwrap();
    foreign
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert("example.com/added-by-someone".into(), "yes".into());
    server.put(&foreign);
    let changes = router.apply(&r, &route(20), &[], &[]).await.unwrap();
    assert_eq!(changes[0].action, Action::Updated);
    let canary = server
        .get_json::<Ingress>("prod", "web-web-canary")
        .unwrap();
    assert_eq!(
        canary["metadata"]["annotations"]["nginx.ingress.kubernetes.io/canary-weight"],
        "20"
    );
    assert_eq!(
        canary["metadata"]["annotations"]["example.com/added-by-someone"],
        "yes"
    );
    assert_eq!(
        server.get_json::<Ingress>("prod", "web").unwrap()["metadata"].get("annotations"),
        None,
        "the stable Ingress is never changed"
    );
    assert!(
        router
            .apply(&r, &route(20), &[], &[])
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_canary_ingress_controlled_by_another_object_is_refused() {
    let server = FakeApiServer::start().await;
    server.put(&stable_ingress("prod"));
    let mut taken = stable_ingress("prod");
    taken.metadata.name = Some("web-web-canary".into());
    taken.metadata.owner_references = Some(vec![
        serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "other",
            "uid": "other-uid", "controller": true
        }))
        .unwrap(),
    ]);
    server.put(&taken);
    let r = rollout(json!({"nginx": {"stableIngress": "web"}}));
    let err = router_for(&server)
        .await
        .apply(&r, &route(10), &[], &[])
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Ingress prod/web-web-canary: canary ingress `web-web-canary` controlled by different object"
    );
}

#[tokio::test]
async fn an_http_route_gets_the_weights_and_an_extra_backend_is_left_alone() {
    let server = FakeApiServer::start().await;
    let route_object = http_route("prod");
    server.put(&route_object);
    let r = rollout(json!({"plugins": {"argoproj-labs/gatewayAPI": {"httpRoute": "web"}}}));
    router_for(&server)
        .await
        .apply(&r, &route(30), &[], &[])
        .await
        .unwrap();
    let stored = server.get_json::<HttpRoute>("prod", "web").unwrap();
    let refs = &stored["spec"]["rules"][0]["backendRefs"];
    assert_eq!(refs[0]["weight"], 70);
    assert_eq!(refs[1]["weight"], 30);
    assert_eq!(refs[2].get("weight"), None);
}
