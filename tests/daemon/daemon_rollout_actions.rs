//! canaryd's own Rollout actions (`canaryd set image|pause|resume|promote|abort|retry|undo`, the binary run
//! with `KUBECONFIG`) steering `canaryd run --rollouts` against the fake API server: each request the plugin
//! would make is honoured by the daemon as Argo honours it, under both CRD sets.

#![allow(clippy::disallowed_methods)] // Not the Clock: the daemon runs against real sockets and is timed on real time.

use canaryd_testkit::cli::Canaryd;
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer};
use canaryd_testkit::harness::{self, Answer};
use canaryd_testkit::rollout::cluster::*;
use canaryd_testkit::with_each_crd_set;
use serde_json::json;

const CANARYD: Canaryd = canaryd_testkit::canaryd!();

/// `canaryd ARGS` against `server`'s cluster, which must succeed.
async fn act(server: &FakeApiServer, args: &[&str]) {
    let ran = CANARYD.on_cluster(server.kubeconfig_path(), args).await;
    assert_eq!(ran.code, Some(0), "canaryd {args:?}: {}", ran.stderr);
}

async fn canaryds_actions_steer_the_daemon_as_the_plugins_do(crds: CrdSet) {
    let steps = json!([{"setWeight": 20}, {"pause": {}}, {"setWeight": 60}, {"pause": {}}]);
    let (server, client, _prom, _rsc) =
        deployed_with(crds, Answer::Scalar(1.0), &with_steps("web:1", steps)).await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let first = until(&server, "the first deploy", |s| healthy_at(s, None)).await;
    let stable = first.stable_rs.clone();

    act(&server, &["set", "image", "web", "web=web:2"]).await;
    let paused = until(&server, "the indefinite pause", |s| {
        s.phase == "Paused" && s.current_step_index == Some(1)
    })
    .await;
    let canary = paused.current_pod_hash.clone();
    assert_ne!(canary, stable);

    act(&server, &["pause", "web"]).await;
    until(&server, "manually paused", |s| {
        s.message == "manually paused"
    })
    .await;
    act(&server, &["resume", "web"]).await;
    until(&server, "the step's pause again", |s| {
        s.message == "CanaryPauseStep"
    })
    .await;

    act(&server, &["promote", "web"]).await;
    until(&server, "the second pause", |s| {
        s.phase == "Paused" && s.current_step_index == Some(3)
    })
    .await;
    assert_eq!(replicas_of(&server, &canary), Some(3), "setWeight 60 of 5");

    act(&server, &["abort", "web"]).await;
    let s = until(&server, "the abort", |s| s.phase == "Degraded").await;
    assert_eq!(
        s.message,
        "RolloutAborted: Rollout aborted update to revision 2"
    );
    until(&server, "the canary scaled back", |_| {
        replicas_of(&server, &canary) == Some(0) && replicas_of(&server, &stable) == Some(5)
    })
    .await;

    act(&server, &["retry", "web"]).await;
    until(&server, "the retried pause", |s| {
        s.phase == "Paused" && s.current_step_index == Some(1) && !s.abort
    })
    .await;

    act(&server, &["promote", "web", "--full"]).await;
    until(&server, "the full promotion", |s| {
        healthy_at(s, Some(&canary)) && s.available_replicas == 5
    })
    .await;
    let ran = CANARYD
        .on_cluster(server.kubeconfig_path(), &["promote", "web"])
        .await;
    assert_eq!(ran.code, Some(1), "already fully promoted: {}", ran.stderr);

    // undo: revision 1's template again, so its ReplicaSet is the canary once more.
    act(&server, &["undo", "web"]).await;
    until(&server, "revision 1's ReplicaSet as the new one", |s| {
        s.current_pod_hash == stable
    })
    .await;
    daemon.stop().await;
    // Only what the plugin's undo sends too and Argo's CRD does not keep: the template's null creationTimestamp.
    let pruned = server.pruned();
    assert!(
        pruned
            .iter()
            .all(|p| p.ends_with("spec.template.metadata.creationTimestamp")),
        "{pruned:?}"
    );
}

with_each_crd_set!(canaryds_actions_steer_the_daemon_as_the_plugins_do);
