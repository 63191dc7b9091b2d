//! The parity corpus' writes made by `canaryd run --rollouts` against the fake API server (with its simulated
//! ReplicaSet controller): a missing `spec.replicas` written into the Rollout (Argo's syncHandler), running pods
//! relabelled with canaryMetadata/stableMetadata as their ReplicaSet changes role (Argo's
//! syncEphemeralMetadata), and a routed Rollout's old stable losing its `scale-down-deadline` with its pods
//! (Argo's scaleReplicaSet). The planner's side is tests/engine/rollout_parity.rs'.

#![allow(clippy::disallowed_methods)] // Not the Clock: the daemon runs against real sockets and is timed on real time.

use canaryd::api::Rollout;
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer};
use canaryd_testkit::harness::{self, Answer, eventually};
use canaryd_testkit::rollout::cluster::*;
use canaryd_testkit::{router_objects, with_each_crd_set};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

async fn a_missing_spec_replicas_is_written_as_one_and_the_rollout_deploys(crds: CrdSet) {
    let mut rollout = with_steps("web:1", json!([{"setWeight": 50}, {"pause": {}}]));
    rollout.spec.replicas = None;
    let (server, client, _prom, _rsc) = deployed_with(crds, Answer::Scalar(1.0), &rollout).await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let s = until(&server, "the first deploy", |s| {
        healthy_at(s, None) && s.available_replicas == 1
    })
    .await;
    daemon.stop().await;
    let stored = server
        .get::<Rollout>("default", "web")
        .expect("the Rollout");
    assert_eq!(stored.spec.replicas, Some(1), "written for the HPA");
    assert_eq!(replicas_of(&server, &s.stable_rs), Some(1));
}

with_each_crd_set!(a_missing_spec_replicas_is_written_as_one_and_the_rollout_deploys);

/// The `role` label of each pod of the ReplicaSet running `hash`.
fn roles(server: &FakeApiServer, hash: &str) -> Vec<String> {
    server
        .list::<Pod>("default")
        .into_iter()
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("rollouts-pod-template-hash"))
                == Some(&hash.to_string())
        })
        .map(|p| {
            p.metadata
                .labels
                .and_then(|l| l.get("role").cloned())
                .unwrap_or_default()
        })
        .collect()
}

async fn running_pods_change_role_with_their_replica_set(crds: CrdSet) {
    let mut rollout = with_steps("web:1", json!([{"setWeight": 20}, {"pause": {}}]));
    let canary = rollout
        .spec
        .strategy
        .as_mut()
        .and_then(|s| s.canary.as_mut())
        .expect("a canary strategy");
    canary.canary_metadata = serde_json::from_value(json!({"labels": {"role": "canary"}})).ok();
    canary.stable_metadata = serde_json::from_value(json!({"labels": {"role": "stable"}})).ok();
    let (server, client, _prom, _rsc) = deployed_with(crds, Answer::Scalar(1.0), &rollout).await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let first = until(&server, "the first deploy", |s| {
        healthy_at(s, None) && s.available_replicas == 5
    })
    .await;
    set_image(&client, "web:2").await;
    let paused = until(&server, "the pause step", |s| {
        s.phase == "Paused" && s.current_step_index == Some(1)
    })
    .await;
    let hash = paused.current_pod_hash.clone();
    assert_eq!(roles(&server, &hash), ["canary"]);
    assert_eq!(
        roles(&server, &first.stable_rs),
        ["stable"; 4],
        "setWeight 20 of 5"
    );

    // kubectl argo rollouts promote web: the canary's running pod becomes a stable one.
    patch_status(&client, json!({"status": {"pauseConditions": null}})).await;
    until(&server, "the promotion", |s| {
        healthy_at(s, Some(&hash)) && s.available_replicas == 5
    })
    .await;
    let relabelled = eventually(WAIT, "every pod of revision 2 labelled stable", || async {
        let now = roles(&server, &hash);
        (now == ["stable"; 5]).then_some(now)
    })
    .await;
    daemon.stop().await;
    assert_eq!(relabelled.len(), 5);
}

with_each_crd_set!(running_pods_change_role_with_their_replica_set);

async fn the_old_stable_scaled_to_zero_after_its_delay_loses_its_deadline(crds: CrdSet) {
    let mut rollout = routed_through(
        with_steps("web:1", json!([{"setWeight": 20}, {"pause": {}}])),
        json!({"istio": {"virtualService": {"name": "web-vsvc"}}}),
    );
    if let Some(canary) = rollout
        .spec
        .strategy
        .as_mut()
        .and_then(|s| s.canary.as_mut())
    {
        canary.scale_down_delay_seconds = Some(2);
    }
    let (server, client, _prom, _rsc) = deployed_with(crds, Answer::Scalar(1.0), &rollout).await;
    server.put(&router_objects::virtual_service(
        "default", "web-vsvc", "web",
    ));
    let daemon = harness::spawn(client.clone(), config()).await;
    let first = until(&server, "the first deploy", |s| {
        healthy_at(s, None) && s.available_replicas == 5
    })
    .await;
    set_image(&client, "web:2").await;
    let paused = until(&server, "the pause step", |s| {
        s.phase == "Paused" && s.current_step_index == Some(1)
    })
    .await;
    let from_rv = server.resource_version();
    patch_status(&client, json!({"status": {"pauseConditions": null}})).await;
    until(&server, "the promotion", |s| {
        healthy_at(s, Some(&paused.current_pod_hash))
    })
    .await;
    let old = format!("web-{}", first.stable_rs);
    eventually(
        WAIT,
        "the old stable scaled to 0 after its delay",
        || async { (replicas_of(&server, &first.stable_rs) == Some(0)).then_some(()) },
    )
    .await;
    daemon.stop().await;
    // It waited with a deadline (2 s: read from the versions committed, which a look could miss), then lost it
    // with its pods.
    let deadline = |rs: &Value| {
        rs.pointer("/metadata/annotations/scale-down-deadline")
            .is_some()
    };
    let mut waited = false;
    server.versions_after::<ReplicaSet>(from_rv, |_, rs| {
        waited |= rs["metadata"]["name"] == old.as_str() && deadline(rs);
    });
    assert!(waited, "the old stable waited with a deadline");
    let now = server
        .get_json::<ReplicaSet>("default", &old)
        .expect("the old stable");
    assert!(!deadline(&now), "gone with its pods");
}

with_each_crd_set!(the_old_stable_scaled_to_zero_after_its_delay_loses_its_deadline);
