//! `canaryd run --rollouts` with an Istio traffic router, against the fake API server: each `setWeight` reaches
//! the VirtualService before the step counts as done, and a VirtualService that is missing holds the Rollout
//! where it is with a `TrafficRoutingError` Event instead of a status claiming a weight nobody applied.

#![allow(clippy::disallowed_methods)] // Not the Clock: the daemon runs against real sockets and is timed on real time.

#[path = "support/fake_apiserver.rs"]
mod fake_apiserver;
#[path = "support/daemon.rs"]
mod harness;
#[path = "support/rollout_cluster.rs"]
mod rollout_cluster;

use canaryd::api::Rollout;
use canaryd::routers::objects::VirtualService;
use fake_apiserver::CrdSet;
use harness::{Answer, eventually};
use rollout_cluster::*;
use serde_json::{Value, json};

/// `web` behind the VirtualService `web-vsvc`: `setWeight: 20`, then an indefinite pause.
fn routed() -> Rollout {
    let mut rollout = with_steps("web:1", json!([{"setWeight": 20}, {"pause": {}}]));
    let mut value = serde_json::to_value(&rollout).expect("a Rollout serialises");
    value["spec"]["strategy"]["canary"]["trafficRouting"] =
        json!({"istio": {"virtualService": {"name": "web-vsvc"}}});
    rollout = serde_json::from_value(value).expect("a routed Rollout");
    rollout
}

fn virtual_service() -> VirtualService {
    serde_json::from_value(json!({
        "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": "web-vsvc", "namespace": "default"},
        "spec": {"hosts": ["web"], "http": [{"name": "primary", "route": [
            {"destination": {"host": "web-stable"}, "weight": 100},
            {"destination": {"host": "web-canary"}, "weight": 0}
        ]}]}
    }))
    .expect("a VirtualService")
}

/// (stable, canary) weights of the VirtualService's one route, as stored.
fn weights(server: &fake_apiserver::FakeApiServer) -> Option<(i64, i64)> {
    let vs: Value = server.get_json::<VirtualService>("default", "web-vsvc")?;
    let route = vs["spec"]["http"][0]["route"].as_array()?.clone();
    let of = |host: &str| {
        route
            .iter()
            .find(|d| d["destination"]["host"] == host)
            .and_then(|d| d["weight"].as_i64())
            .unwrap_or(0)
    };
    Some((of("web-stable"), of("web-canary")))
}

#[tokio::test]
async fn each_set_weight_reaches_the_virtual_service_before_the_step_completes() {
    let (server, client, _prom, _rsc) =
        deployed_with(CrdSet::Argo, Answer::Scalar(1.0), &routed()).await;
    server.put(&virtual_service());
    let daemon = harness::spawn(client.clone(), config()).await;
    until(&server, "the first deploy to be Healthy", |s| {
        healthy_at(s, None) && s.available_replicas == 5
    })
    .await;
    assert_eq!(
        weights(&server),
        Some((100, 0)),
        "a first deploy moves no traffic"
    );
    set_image(&client, "web:2").await;
    let s = until(&server, "the pause after setWeight: 20", |s| {
        s.current_step_index == Some(1) && !s.pause_conditions.is_empty()
    })
    .await;
    assert_eq!(weights(&server), Some((80, 20)), "{s:?}");
    let applied = s.canary.weights.as_ref().map(|w| w.canary.weight);
    assert_eq!(
        applied,
        Some(20),
        "status.canary.weights says what was applied"
    );
    assert_eq!(
        replicas_of(&server, &s.current_pod_hash),
        Some(1),
        "the canary gets ceil(20% of 5) pods"
    );
    daemon.stop().await;
}

#[tokio::test]
async fn a_missing_virtual_service_holds_the_rollout_with_a_traffic_routing_error() {
    let (server, client, _prom, _rsc) =
        deployed_with(CrdSet::Argo, Answer::Scalar(1.0), &routed()).await;
    let daemon = harness::spawn(client.clone(), config()).await;
    eventually(
        WAIT,
        "a TrafficRoutingError Event naming the VirtualService",
        || {
            let client = client.clone();
            async move {
                let found = events(&client).await.iter().any(|(reason, note)| {
                    reason == "TrafficRoutingError"
                        && note == "VirtualService default/web-vsvc not found"
                });
                found.then_some(())
            }
        },
    )
    .await;
    daemon.stop().await;
    let s = status(&server);
    assert!(
        s.canary
            .weights
            .as_ref()
            .is_none_or(|w| w.canary.weight == 0),
        "no weight is claimed while the router is missing: {s:?}"
    );
}
